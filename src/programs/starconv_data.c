/* starconv-data: write a data set as the HDF5 file that starconv-train
 * --data hdf5:FILE reads by tile: Fashion-MNIST's IDX files as they are
 * stored (uint8), or a generated set (synthetic:..., synthetic-mesh:SIZE)
 * as float32, with its labels at the resolution of the model's loss, so
 * that training on the file equals training on the data it came from.
 *
 * Exit status: 0 written, 2 bad arguments or input (one line on stderr,
 * no file left behind), 1 a failure while writing. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/synth.h"
#include "src/data/hdf5.h"
#include "src/net/net.h"
#include "src/programs/cli.h"

static const char usage[] = "Usage: starconv-data --data D --out FILE.h5 [options]\n"
                            "Write a data set as an HDF5 file for starconv-train --data hdf5:FILE.h5: the data sets\n"
                            "images (N x C x H x W) and labels (N, or N x H x W a class a pixel), and the held-out\n"
                            "samples as test_images and test_labels; the labels' attribute classes says how many.\n"
                            "\n"
                            "  --data D             what starconv-train --data takes: a directory of IDX files\n"
                            "                       (train-*, t10k-*; images stored as uint8, as in the files), or a\n"
                            "                       generated set, synthetic:CxHxW:K or synthetic-mesh:SIZE (float32)\n"
                            "  --out FILE           the HDF5 file, written whole or not at all\n"
                            "  --samples N          the first N training samples; default all of them\n"
                            "  --test-samples N     the first N held-out samples; default all of them (0: none)\n"
                            "  --label-size HxW     synthetic-mesh: the per-pixel labels' resolution, that of the\n"
                            "                       model's loss; default SIZE/64 x SIZE/64 (models/mesh*.cfg)\n"
                            "  --model FILE         check the samples against this model's input, and take the\n"
                            "                       per-pixel labels' resolution from its loss\n"
                            "  --chunk SHAPE        the images' chunks: none (contiguous), auto (whole samples, or\n"
                            "                       2^k x 2^k tiles of one when a sample is over 1 MiB), or NxCxHxW;\n"
                            "                       default none, auto with --gzip\n"
                            "  --gzip LEVEL         compress the chunks with deflate at LEVEL 1..9; default none\n"
                            "  -h, --help           this text\n";

struct opts {
    const char *data, *out, *model;
    long samples, test_samples; /* < 0: all */
    int label_h, label_w;       /* 0: the default */
    int chunk_auto, gzip;
    long chunk[4]; /* [0] == 0: none */
};

static int parse_dims(const char *opt, const char *s, int n, long *out)
{
    char *end;
    const char *p = s;
    for (int i = 0; i < n; i++) {
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 1 || v > (1L << 30) || (i < n - 1 ? *end != 'x' : *end != '\0'))
            return sc_error(SC_ERR_ARG, "--%s: '%s' is not %s of positive numbers", opt, s, n == 2 ? "HxW" : "NxCxHxW");
        out[i] = v;
        p = end + 1;
    }
    return 0;
}

static int handle(int c, const char *name, const char *arg, void *ctx)
{
    struct opts *o = ctx;
    long d[4];
    int err = 0;
    switch (c) {
    case 'h':
        fputs(usage, stdout);
        return 1;
    case 'd':
        o->data = arg;
        break;
    case 'o':
        o->out = arg;
        break;
    case 'm':
        o->model = arg;
        break;
    case 's':
        err = sc_cli_long(name, arg, 1, 1L << 31, &o->samples);
        break;
    case 't':
        err = sc_cli_long(name, arg, 0, 1L << 31, &o->test_samples);
        break;
    case 'l':
        if (!(err = parse_dims(name, arg, 2, d)))
            o->label_h = (int)d[0], o->label_w = (int)d[1];
        break;
    case 'c':
        o->chunk_auto = !strcmp(arg, "auto");
        o->chunk[0] = 0;
        if (!o->chunk_auto && strcmp(arg, "none"))
            err = parse_dims(name, arg, 4, o->chunk);
        break;
    case 'z':
        err = sc_cli_int(name, arg, 1, 9, &o->gzip);
        break;
    }
    return err;
}

static int fail(int status, const char *msg)
{
    fprintf(stderr, "starconv-data: %s\n", msg);
    return status;
}

#ifndef SC_USE_HDF5

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"data", required_argument, 0, 'd'},
                                             {"out", required_argument, 0, 'o'},
                                             {"model", required_argument, 0, 'm'},
                                             {"samples", required_argument, 0, 's'},
                                             {"test-samples", required_argument, 0, 't'},
                                             {"label-size", required_argument, 0, 'l'},
                                             {"chunk", required_argument, 0, 'c'},
                                             {"gzip", required_argument, 0, 'z'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    struct opts o = {.samples = -1, .test_samples = -1};
    int err = sc_cli_parse(argc, argv, longopts, handle, &o);
    if (err > 0)
        return 0;
    if (err)
        return fail(SC_EXIT_BAD_INPUT, sc_last_error());
    return fail(SC_EXIT_BAD_INPUT, "built without HDF5: install the Debian package libhdf5-openmpi-dev, then "
                                   "./configure && make");
}

#else

#include <hdf5.h>

/* One part of the file: images and labels of n samples. */
struct part {
    const struct sc_dataset *ds;
    const char *images, *labels;
    int n, lh, lw; /* lh x lw: per-pixel labels; 0: one a sample */
};

static int h5_fail(const char *what)
{
    char why[256];
    return sc_error(SC_ERR_IO, "%s (%s)", what, sc_data_file_h5_error(why));
}

/* The chunks of the images: o's, or (auto) whole samples when one is at
 * most 1 MiB (as many as make 64 KiB), else a sample's 2^k x 2^k tiles. */
static void chunk_shape(const struct opts *o, const struct sc_dataset *ds, int n, size_t elem, hsize_t out[4])
{
    if (o->chunk[0]) {
        for (int i = 0; i < 4; i++)
            out[i] = (hsize_t)o->chunk[i];
    } else {
        size_t sample = (size_t)ds->c * ds->h * ds->w * elem;
        out[0] = sample >= (1u << 16) ? 1 : (1u << 16) / sample;
        out[1] = (hsize_t)ds->c, out[2] = (hsize_t)ds->h, out[3] = (hsize_t)ds->w;
        while (out[1] * out[2] * out[3] * elem > (1u << 20) && (out[2] > 1 || out[3] > 1)) {
            out[2] = (out[2] + 1) / 2;
            out[3] = (out[3] + 1) / 2;
        }
    }
    /* HDF5 refuses chunks larger than the data set's extent only when
     * the extent is fixed: clamp them */
    hsize_t dims[4] = {(hsize_t)n, (hsize_t)ds->c, (hsize_t)ds->h, (hsize_t)ds->w};
    for (int i = 0; i < 4; i++)
        if (out[i] > dims[i])
            out[i] = dims[i];
}

static int write_attribute(hid_t d, const char *name, int v)
{
    hid_t sp = H5Screate(H5S_SCALAR),
          a = sp < 0 ? -1 : H5Acreate2(d, name, H5T_STD_I32LE, sp, H5P_DEFAULT, H5P_DEFAULT);
    int ok = a >= 0 && H5Awrite(a, H5T_NATIVE_INT, &v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (sp >= 0)
        H5Sclose(sp);
    return ok ? 0 : h5_fail("cannot write an attribute");
}

/* Generated sample i of a part: x, the labels at the input's resolution
 * (scratch) and at the loss's. */
static void sample_of(const struct part *p, int i, float *x, int32_t *scratch, int32_t *labels)
{
    const struct sc_dataset *ds = p->ds;
    struct sc_synth_args a = sc_dataset_synth_args(ds, (struct sc_box){0, ds->h, 0, ds->w}, 1);
    sc_synth_sample(&a, i, x, scratch);
    int oh = p->lh ? p->lh : 1, ow = p->lh ? p->lw : 1;
    sc_synth_labels(&a, oh, ow, (struct sc_box){0, oh, 0, ow}, &i, labels);
}

static int write_part(hid_t file, const struct opts *o, const struct part *p)
{
    const struct sc_dataset *ds = p->ds;
    int idx = !ds->synthetic, err = 0;
    size_t per = (size_t)ds->c * ds->h * ds->w, elem = idx ? 1 : sizeof(float);
    hsize_t dims[4] = {(hsize_t)p->n, (hsize_t)ds->c, (hsize_t)ds->h, (hsize_t)ds->w}, chunk[4];
    hsize_t ldims[3] = {(hsize_t)p->n, (hsize_t)p->lh, (hsize_t)p->lw};
    int lrank = p->lh ? 3 : 1;
    size_t lper = p->lh ? (size_t)p->lh * p->lw : 1;
    hid_t sp = H5Screate_simple(4, dims, NULL), lsp = H5Screate_simple(lrank, ldims, NULL);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE), d = -1, ld = -1;
    if (o->chunk[0] || o->chunk_auto || o->gzip) {
        chunk_shape(o, ds, p->n, elem, chunk);
        if (H5Pset_chunk(dcpl, 4, chunk) < 0 || (o->gzip && H5Pset_deflate(dcpl, (unsigned)o->gzip) < 0))
            err = h5_fail("cannot set the chunks");
    }
    if (!err &&
        (d = H5Dcreate2(file, p->images, idx ? H5T_STD_U8LE : H5T_IEEE_F32LE, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT)) < 0)
        err = h5_fail("cannot create the images");
    if (!err && (ld = H5Dcreate2(file, p->labels, H5T_STD_U8LE, lsp, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT)) < 0)
        err = h5_fail("cannot create the labels");
    if (!err)
        err = write_attribute(ld, "classes", ds->classes);
    float *x = idx ? NULL : malloc(per * sizeof *x);
    int32_t *scratch = idx ? NULL : malloc((size_t)ds->h * ds->w * sizeof *scratch);
    int32_t *labels = malloc(lper * sizeof *labels);
    uint8_t *lbytes = malloc(lper);
    if (!err && ((!idx && (!x || !scratch)) || !labels || !lbytes))
        err = sc_error(SC_ERR_NOMEM, "out of memory for a sample");
    hsize_t one[4] = {1, dims[1], dims[2], dims[3]}, lone[3] = {1, ldims[1], ldims[2]};
    hid_t ms = H5Screate_simple(4, one, NULL), lms = H5Screate_simple(lrank, lone, NULL);
    for (int i = 0; i < p->n && !err; i++) {
        hsize_t start[4] = {(hsize_t)i, 0, 0, 0};
        const void *src = ds->images + (size_t)i * per;
        if (idx) {
            labels[0] = ds->labels[i];
        } else {
            sample_of(p, i, x, scratch, labels);
            src = x;
        }
        for (size_t k = 0; k < lper; k++)
            lbytes[k] = (uint8_t)labels[k];
        if (H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, one, NULL) < 0 ||
            H5Dwrite(d, idx ? H5T_NATIVE_UINT8 : H5T_NATIVE_FLOAT, ms, sp, H5P_DEFAULT, src) < 0 ||
            H5Sselect_hyperslab(lsp, H5S_SELECT_SET, start, NULL, lone, NULL) < 0 ||
            H5Dwrite(ld, H5T_NATIVE_UINT8, lms, lsp, H5P_DEFAULT, lbytes) < 0)
            err = h5_fail("cannot write a sample");
    }
    free(x), free(scratch), free(labels), free(lbytes);
    H5Sclose(ms), H5Sclose(lms), H5Pclose(dcpl), H5Sclose(sp), H5Sclose(lsp);
    if (d >= 0)
        H5Dclose(d);
    if (ld >= 0)
        H5Dclose(ld);
    return err;
}

/* Writes the parts into a temporary file beside o->out, then renames it
 * over o->out once it is complete and on disk. */
static int write_file(const struct opts *o, const struct part *parts, int nparts)
{
    size_t len = strlen(o->out) + 16;
    char *tmp = malloc(len);
    if (!tmp)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    snprintf(tmp, len, "%s.tmp-XXXXXX", o->out);
    int fd = mkstemp(tmp);
    if (fd < 0) {
        int e = errno;
        free(tmp);
        return sc_error(SC_ERR_ARG, "--out %s: cannot create a temporary file beside it: %s", o->out, strerror(e));
    }
    /* mkstemp's 0600: the file gets the mode a plain creation would */
    mode_t mask = umask(0);
    umask(mask);
    fchmod(fd, 0666 & ~mask);
    close(fd);
    int err = 0;
    hid_t file = H5Fcreate(tmp, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        err = h5_fail("cannot create the file");
    for (int i = 0; i < nparts && !err; i++)
        if (parts[i].n)
            err = write_part(file, o, &parts[i]);
    if (file >= 0 && H5Fclose(file) < 0 && !err)
        err = h5_fail("cannot close the file");
    if (!err && ((fd = open(tmp, O_RDONLY)) < 0 || fsync(fd) != 0))
        err = sc_error(SC_ERR_IO, "%s: cannot sync: %s", tmp, strerror(errno));
    if (fd >= 0)
        close(fd);
    if (!err && rename(tmp, o->out) != 0)
        err = sc_error(SC_ERR_IO, "%s: cannot rename %s over it: %s", o->out, tmp, strerror(errno));
    if (err) {
        unlink(tmp);
        err = sc_error(err, "%s: %s (file left unchanged)", o->out, sc_last_error());
    }
    free(tmp);
    return err;
}

/* The per-pixel labels' resolution: --label-size, the model's loss, or
 * the mesh models' (1/64 of the input). */
static int label_size(const struct opts *o, const struct sc_dataset *ds, int *lh, int *lw)
{
    *lh = *lw = 0;
    struct sc_net *net = NULL;
    int err = 0, oh = 0, ow = 0, per_pixel = ds->synthetic == 1 + SC_SYNTH_MESH;
    if (o->model) {
        if ((err = sc_net_parse(o->model, &net)))
            return err;
        if (ds->c != net->input.c || ds->h != net->input.h || ds->w != net->input.w)
            err = sc_error(SC_ERR_SHAPE, "--data %s: samples are %dx%dx%d but %s's input is %dx%dx%d", o->data, ds->c,
                           ds->h, ds->w, o->model, net->input.c, net->input.h, net->input.w);
        else if (net->layers[net->nlayers - 1].whole_sample == per_pixel)
            err = sc_error(SC_ERR_ARG, "--data %s: %s labels, but %s's loss takes %s", o->data,
                           per_pixel ? "per-pixel" : "one a sample", o->model,
                           per_pixel ? "one a sample" : "one a pixel");
        else
            sc_net_label_shape(net, &oh, &ow);
        sc_net_destroy(net);
        if (err)
            return err;
    }
    if (!per_pixel)
        return o->label_h ? sc_error(SC_ERR_ARG, "--label-size: --data %s has one label a sample", o->data) : 0;
    *lh = o->label_h ? o->label_h : oh ? oh : ds->h / 64 > 0 ? ds->h / 64 : 1;
    *lw = o->label_h ? o->label_w : ow ? ow : ds->w / 64 > 0 ? ds->w / 64 : 1;
    if (*lh > ds->h || *lw > ds->w)
        return sc_error(SC_ERR_ARG, "--label-size %dx%d: larger than the samples (%dx%d)", *lh, *lw, ds->h, ds->w);
    if (o->model && o->label_h && (*lh != oh || *lw != ow))
        return sc_error(SC_ERR_ARG, "--label-size %dx%d: %s's loss is %dx%d", *lh, *lw, o->model, oh, ow);
    return 0;
}

static int open_set(const struct opts *o, int test, struct sc_dataset *ds)
{
    int err = sc_dataset_synthetic(o->data, test, ds);
    if (err == 1)
        err = sc_dataset_load_idx(o->data, test ? "t10k" : "train", ds);
    if (!err && ds->classes > 255)
        err = sc_error(SC_ERR_ARG, "--data %s: %d classes do not fit the uint8 labels written", o->data, ds->classes);
    return err;
}

int main(int argc, char **argv)
{
    static const struct option longopts[] = {{"data", required_argument, 0, 'd'},
                                             {"out", required_argument, 0, 'o'},
                                             {"model", required_argument, 0, 'm'},
                                             {"samples", required_argument, 0, 's'},
                                             {"test-samples", required_argument, 0, 't'},
                                             {"label-size", required_argument, 0, 'l'},
                                             {"chunk", required_argument, 0, 'c'},
                                             {"gzip", required_argument, 0, 'z'},
                                             {"help", no_argument, 0, 'h'},
                                             {0, 0, 0, 0}};
    struct opts o = {.samples = -1, .test_samples = -1};
    int err = sc_cli_parse(argc, argv, longopts, handle, &o);
    if (err > 0)
        return 0;
    if (!err && (!o.data || !o.out))
        err = sc_error(SC_ERR_ARG, "give --data D and --out FILE.h5 (see --help)");
    if (err)
        return fail(SC_EXIT_BAD_INPUT, sc_last_error());
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    struct sc_dataset train = {0}, test = {0};
    struct part parts[2] = {{&train, "images", "labels", 0, 0, 0}, {&test, "test_images", "test_labels", 0, 0, 0}};
    if (!(err = open_set(&o, 0, &train)) && o.test_samples != 0)
        err = open_set(&o, 1, &test);
    if (!err)
        err = label_size(&o, &train, &parts[0].lh, &parts[0].lw);
    parts[1].lh = parts[0].lh, parts[1].lw = parts[0].lw;
    long want[2] = {o.samples, o.test_samples};
    for (int i = 0; i < 2 && !err; i++) {
        int have = parts[i].ds->n;
        if (want[i] > have)
            err = sc_error(SC_ERR_ARG, "--%s %ld: --data %s has %d", i ? "test-samples" : "samples", want[i], o.data,
                           have);
        parts[i].n = want[i] < 0 ? have : (int)want[i];
    }
    if (!err)
        err = write_file(&o, parts, 2);
    if (!err)
        printf("starconv-data: %s: %d training and %d held-out samples of %dx%dx%d from %s\n", o.out, parts[0].n,
               parts[1].n, train.c, train.h, train.w, o.data);
    sc_dataset_free(&train);
    sc_dataset_free(&test);
    if (err)
        return fail(err == SC_ERR_IO || err == SC_ERR_NOMEM ? 1 : SC_EXIT_BAD_INPUT, sc_last_error());
    return 0;
}

#endif
