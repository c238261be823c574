/* HDF5 data sets read by tile (hdf5.h, sc_dataset_hdf5 in dataset.h):
 * the module starconv-hdf5.so, the only code linked to HDF5, which
 * libstarconv opens on first use (hdf5_module.h, hdf5_load.c).
 *
 * Opening reads the shapes and the labels (a class a sample: kept in
 * memory; per pixel: scanned for their range a block of samples at a
 * time, then read by tile like the images).  The images are read by the
 * load tasks only, each its hyperslab, straight into the tile (HDF5
 * converts uint8 and float16 to float as it reads).  Each process reads
 * on its own (independent reads through HDF5's POSIX driver): on one node,
 * collective MPI-IO reads of the same tiles were slower
 * (bench/hdf5-read), and a collective read inside a task would tie the
 * ranks' workers to each other's schedules.
 *
 * This HDF5 is not thread safe, and load tasks of several tiles run on
 * several workers at once: every HDF5 call holds one lock. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
/* The module: its definitions take module-local names (hdf5_module.h). */
#define SC_HDF5_IN_MODULE 1
#include "src/data/hdf5_module.h"

#include "src/data/hdf5.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "base/error.h"
#include "kernels/fail.h"

#define NAME_MAX_LEN 256
#define PATH_MAX_LEN 4096

/* What the spec asks for: "hdf5:FILE[:KEY=VALUE,...]". */
struct spec {
    char path[PATH_MAX_LEN], test_path[PATH_MAX_LEN];
    char images[NAME_MAX_LEN], labels[NAME_MAX_LEN], test_images[NAME_MAX_LEN], test_labels[NAME_MAX_LEN];
    int test_names; /* test-images or test-labels given */
    long split;     /* the last split samples are the test set; 0: no split */
    int classes;    /* 0: from the file */
};

static int copy_value(char *dst, size_t size, const char *v, size_t n, const char *spec, const char *key)
{
    if (n == 0 || n >= size)
        return sc_error(SC_ERR_ARG, "--data %s: %s= needs a value of 1 to %zu characters", spec, key, size - 1);
    memcpy(dst, v, n);
    dst[n] = '\0';
    return 0;
}

static int parse_long(const char *v, size_t n, long lo, long hi, long *out)
{
    char buf[32], *end;
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, v, n);
    buf[n] = '\0';
    errno = 0;
    long x = strtol(buf, &end, 10);
    if (*end || errno || x < lo || x > hi)
        return -1;
    *out = x;
    return 0;
}

static int parse_spec(const char *spec, struct spec *s)
{
    memset(s, 0, sizeof *s);
    snprintf(s->images, sizeof s->images, "images");
    snprintf(s->labels, sizeof s->labels, "labels");
    snprintf(s->test_images, sizeof s->test_images, "test_images");
    snprintf(s->test_labels, sizeof s->test_labels, "test_labels");
    /* The options start at the first colon followed by "KEY=" (a file
     * name may hold colons). */
    const char *p = spec + 5, *opts = NULL;
    for (const char *c = strchr(p, ':'); c && !opts; c = strchr(c + 1, ':')) {
        size_t k = strspn(c + 1, "abcdefghijklmnopqrstuvwxyz-");
        if (k && c[1 + k] == '=')
            opts = c;
    }
    size_t plen = opts ? (size_t)(opts - p) : strlen(p);
    if (plen == 0)
        return sc_error(SC_ERR_ARG, "--data %s: expected hdf5:FILE[:images=NAME,labels=NAME,...]", spec);
    if (plen >= sizeof s->path)
        return sc_error(SC_ERR_ARG, "--data %s: file name too long", spec);
    memcpy(s->path, p, plen);
    for (const char *k = opts ? opts + 1 : NULL; k && *k;) {
        const char *comma = strchr(k, ','), *end = comma ? comma : k + strlen(k), *eq = memchr(k, '=', end - k);
        if (!eq)
            return sc_error(SC_ERR_ARG, "--data %s: '%.*s' is not KEY=VALUE", spec, (int)(end - k), k);
        size_t klen = eq - k, vlen = end - eq - 1;
        const char *v = eq + 1;
        int err = 0;
        long x = 0;
#define KEY(name) (klen == strlen(name) && !strncmp(k, name, klen))
        if (KEY("images"))
            err = copy_value(s->images, sizeof s->images, v, vlen, spec, "images");
        else if (KEY("labels"))
            err = copy_value(s->labels, sizeof s->labels, v, vlen, spec, "labels");
        else if (KEY("test-images"))
            err = copy_value(s->test_images, sizeof s->test_images, v, vlen, spec, "test-images"), s->test_names = 1;
        else if (KEY("test-labels"))
            err = copy_value(s->test_labels, sizeof s->test_labels, v, vlen, spec, "test-labels"), s->test_names = 1;
        else if (KEY("test"))
            err = copy_value(s->test_path, sizeof s->test_path, v, vlen, spec, "test");
        else if (KEY("split")) {
            if (parse_long(v, vlen, 1, INT_MAX, &x))
                return sc_error(SC_ERR_ARG, "--data %s: split=%.*s: expected a number of samples >= 1", spec, (int)vlen,
                                v);
            s->split = x;
        } else if (KEY("classes")) {
            if (parse_long(v, vlen, 2, 1 << 24, &x))
                return sc_error(SC_ERR_ARG, "--data %s: classes=%.*s: expected a number in [2, %d]", spec, (int)vlen, v,
                                1 << 24);
            s->classes = (int)x;
        } else
            return sc_error(SC_ERR_ARG,
                            "--data %s: unknown key '%.*s' (images, labels, classes, split, test, test-images, "
                            "test-labels)",
                            spec, (int)klen, k);
#undef KEY
        if (err)
            return err;
        k = comma ? comma + 1 : end;
    }
    if (s->split && (s->test_path[0] || s->test_names))
        return sc_error(SC_ERR_ARG, "--data %s: split= and test=/test-images= name two test sets; give one", spec);
    return 0;
}

#include <hdf5.h>

enum stored { STORED_U8, STORED_F16, STORED_F32 };

struct sc_data_file {
    char path[PATH_MAX_LEN], images_name[NAME_MAX_LEN], labels_name[NAME_MAX_LEN], name[PATH_MAX_LEN + 16];
    hid_t file, images, labels;
    enum stored type;
    size_t type_size, label_size; /* as stored */
    int n_file;                   /* samples in the file */
    int base, n;                  /* this set's samples: base .. base + n - 1 of the file */
    int c, h, w;
    int lh, lw;                               /* per-pixel labels' resolution; 0: one label a sample */
    int32_t *sample_labels;                   /* n, when one a sample */
    uint64_t bytes, image_bytes, image_reads; /* atomics */
    uint64_t ns;                              /* atomic: nanoseconds in reads */
};

static pthread_mutex_t h5_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t h5_once = PTHREAD_ONCE_INIT;

/* HDF5 prints its error stack on stderr unless told not to: the message
 * goes into one line of ours instead (h5_reason). */
static void h5_init(void)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

static herr_t innermost(unsigned n, const H5E_error2_t *e, void *data)
{
    if (n == 0 && e->desc)
        snprintf(data, 256, "%s", e->desc);
    return 0;
}

/* The most specific entry of HDF5's error stack ("file signature not
 * found", "truncated file: eof = ..."). */
static const char *h5_reason(char buf[256])
{
    snprintf(buf, 256, "HDF5 error");
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, innermost, buf);
    H5Eclear2(H5E_DEFAULT);
    return buf;
}

static void describe_type(hid_t t, char *buf, size_t size)
{
    H5T_class_t cls = H5Tget_class(t);
    size_t bits = 8 * H5Tget_size(t);
    if (cls == H5T_INTEGER)
        snprintf(buf, size, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", bits);
    else if (cls == H5T_FLOAT)
        snprintf(buf, size, "float%zu", bits);
    else
        snprintf(buf, size, "%s",
                 cls == H5T_STRING     ? "string"
                 : cls == H5T_COMPOUND ? "compound"
                 : cls == H5T_ENUM     ? "enum"
                 : cls == H5T_ARRAY    ? "array"
                 : cls == H5T_OPAQUE   ? "opaque"
                                       : "non-numeric");
}

/* Opens data set name of f's file: 0, or SC_ERR_DATA saying why not. */
static int open_dataset(struct sc_data_file *f, const char *name, hid_t *out)
{
    char why[256];
    htri_t e = H5Lexists(f->file, name, H5P_DEFAULT);
    if (e <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return sc_error(SC_ERR_DATA, "%s: no data set '%s'", f->path, name);
    }
    *out = H5Dopen2(f->file, name, H5P_DEFAULT);
    if (*out < 0) {
        h5_reason(why);
        return sc_error(SC_ERR_DATA, "%s: '%s' is not a data set (a group, or a damaged one)", f->path, name);
    }
    return 0;
}

/* The data set's dimensions: 0, or SC_ERR_DATA when it has not one of
 * the ranks r1, r2 or when one is zero or too large. */
static int dataset_dims(const struct sc_data_file *f, hid_t d, const char *name, int r1, int r2, const char *shape,
                        int *rank, hsize_t dims[4])
{
    hid_t sp = H5Dget_space(d);
    int r = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    if (r >= 0 && r <= 4)
        H5Sget_simple_extent_dims(sp, dims, NULL);
    if (sp >= 0)
        H5Sclose(sp);
    if (r != r1 && r != r2)
        return sc_error(SC_ERR_DATA, "%s: data set '%s' has %d dimensions, expected %s", f->path, name, r, shape);
    for (int i = 0; i < r; i++)
        if (dims[i] == 0 || dims[i] > INT_MAX)
            return sc_error(SC_ERR_DATA, "%s: data set '%s': dimension %d is %llu (want 1 to %d)", f->path, name, i,
                            (unsigned long long)dims[i], INT_MAX);
    *rank = r;
    return 0;
}

/* Opens path and checks the shapes and types of its images and labels. */
static int open_file(const char *path, const char *iname, const char *lname, struct sc_data_file **out)
{
    char why[256], tname[32];
    struct stat st;
    *out = NULL;
    if (stat(path, &st) != 0)
        return sc_error(errno == ENOENT ? SC_ERR_DATA : SC_ERR_IO, "%s: %s", path, strerror(errno));
    if (!S_ISREG(st.st_mode))
        return sc_error(SC_ERR_DATA, "%s: not a regular file", path);
    struct sc_data_file *f = calloc(1, sizeof *f);
    if (!f)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
    snprintf(f->path, sizeof f->path, "%s", path);
    snprintf(f->images_name, sizeof f->images_name, "%s", iname);
    snprintf(f->labels_name, sizeof f->labels_name, "%s", lname);
    snprintf(f->name, sizeof f->name, "%s:%s", path, iname);
    f->file = f->images = f->labels = H5I_INVALID_HID;
    *out = f;
    f->file = H5Fopen(path, H5F_ACC_RDONLY, H5P_DEFAULT);
    if (f->file < 0)
        return sc_error(SC_ERR_DATA, "%s: not an HDF5 file, or a damaged one (%s)", path, h5_reason(why));
    int err, rank;
    hsize_t dims[4];
    if ((err = open_dataset(f, iname, &f->images)) ||
        (err = dataset_dims(f, f->images, iname, 4, 4, "4 (N x C x H x W)", &rank, dims)))
        return err;
    if ((uint64_t)dims[1] * dims[2] * dims[3] > INT_MAX)
        return sc_error(SC_ERR_DATA, "%s: data set '%s': samples of %llux%llux%llu values are too large", path, iname,
                        (unsigned long long)dims[1], (unsigned long long)dims[2], (unsigned long long)dims[3]);
    f->n_file = (int)dims[0], f->c = (int)dims[1], f->h = (int)dims[2], f->w = (int)dims[3];
    hid_t t = H5Dget_type(f->images);
    H5T_class_t cls = H5Tget_class(t);
    size_t size = H5Tget_size(t);
    describe_type(t, tname, sizeof tname);
    int sign = cls == H5T_INTEGER ? H5Tget_sign(t) : 0;
    H5Tclose(t);
    if (cls == H5T_INTEGER && size == 1 && sign == H5T_SGN_NONE)
        f->type = STORED_U8;
    else if (cls == H5T_FLOAT && size == 2)
        f->type = STORED_F16;
    else if (cls == H5T_FLOAT && size == 4)
        f->type = STORED_F32;
    else
        return sc_error(SC_ERR_DATA, "%s: data set '%s' holds %s values (want uint8, float16 or float32)", path, iname,
                        tname);
    f->type_size = size;
    if ((err = open_dataset(f, lname, &f->labels)) ||
        (err = dataset_dims(f, f->labels, lname, 1, 3, "1 (N) or 3 (N x H x W)", &rank, dims)))
        return err;
    t = H5Dget_type(f->labels);
    cls = H5Tget_class(t);
    f->label_size = H5Tget_size(t);
    describe_type(t, tname, sizeof tname);
    H5Tclose(t);
    if (cls != H5T_INTEGER)
        return sc_error(SC_ERR_DATA, "%s: data set '%s' holds %s values (want an integer type)", path, lname, tname);
    if ((int)dims[0] != f->n_file)
        return sc_error(SC_ERR_DATA, "%s: data set '%s' has %d samples but '%s' has %llu labels", path, iname,
                        f->n_file, lname, (unsigned long long)dims[0]);
    if (rank == 3)
        f->lh = (int)dims[1], f->lw = (int)dims[2];
    return 0;
}

/* A library first used after MPI_Init closes itself at MPI_Finalize
 * (HDF5 hooks MPI_COMM_SELF), and a data set may be freed after that:
 * its identifiers are then no longer valid, and nothing is left to close. */
static void close_file(struct sc_data_file *f)
{
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL); /* again, if the library was closed */
    if (f->labels >= 0 && H5Iis_valid(f->labels) > 0)
        H5Dclose(f->labels);
    if (f->images >= 0 && H5Iis_valid(f->images) > 0)
        H5Dclose(f->images);
    if (f->file >= 0 && H5Iis_valid(f->file) > 0)
        H5Fclose(f->file);
    f->file = f->images = f->labels = H5I_INVALID_HID;
}

/* Selects samples s0 .. s0+ns-1 of the labels, rows r0..r1 x columns
 * c0..c1 when per pixel, in space sp; the memory space of the same shape. */
static hid_t select_labels(const struct sc_data_file *f, hid_t sp, int s0, int ns, int r0, int r1, int c0, int c1)
{
    hsize_t start[3] = {(hsize_t)s0, (hsize_t)r0, (hsize_t)c0};
    hsize_t count[3] = {(hsize_t)ns, (hsize_t)(r1 - r0), (hsize_t)(c1 - c0)};
    int rank = f->lh ? 3 : 1;
    if (H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) < 0)
        return H5I_INVALID_HID;
    return H5Screate_simple(rank, count, NULL);
}

/* Reads the labels of samples base .. base+n-1: kept when one a sample,
 * else scanned a block of samples at a time.  Each must lie in [0,
 * classes) when classes > 0; *max gets the largest. */
static int read_labels(struct sc_data_file *f, int classes, int keep, int *max)
{
    int per = f->lh ? f->lh * f->lw : 1;
    /* per-pixel labels: a bounded buffer, however many samples */
    int block = f->lh ? (per >= (1 << 22) ? 1 : (1 << 22) / per) : f->n;
    if (block > f->n)
        block = f->n;
    int32_t *buf = malloc((size_t)block * per * sizeof *buf);
    if (!buf)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory for the labels of %d samples", f->path, block);
    hid_t sp = H5Dget_space(f->labels);
    int err = 0;
    char why[256];
    *max = -1;
    for (int s = 0; s < f->n && !err; s += block) {
        int ns = f->n - s < block ? f->n - s : block;
        hid_t ms = select_labels(f, sp, f->base + s, ns, 0, f->lh, 0, f->lw);
        if (ms < 0 || H5Dread(f->labels, H5T_NATIVE_INT32, ms, sp, H5P_DEFAULT, buf) < 0)
            err = sc_error(SC_ERR_DATA, "%s: data set '%s': cannot read labels %d..%d (%s)", f->path, f->labels_name,
                           f->base + s, f->base + s + ns - 1, h5_reason(why));
        if (ms >= 0)
            H5Sclose(ms);
        for (size_t i = 0; !err && i < (size_t)ns * per; i++) {
            int32_t v = buf[i];
            if (v < 0 || (classes > 0 && v >= classes))
                err =
                    sc_error(SC_ERR_DATA, "%s: data set '%s': label %d of sample %d is %s %d", f->path, f->labels_name,
                             (int)v, f->base + s + (int)(i / per), v < 0 ? "below" : "not below", v < 0 ? 0 : classes);
            else if (v > *max)
                *max = v;
        }
    }
    H5Sclose(sp);
    if (!err && keep && !f->lh) {
        f->sample_labels = buf;
        return 0;
    }
    free(buf);
    return err;
}

/* The labels' "classes" attribute (0: none). */
static int classes_attribute(const struct sc_data_file *f, int *classes)
{
    char why[256];
    *classes = 0;
    if (H5Aexists(f->labels, "classes") <= 0) {
        H5Eclear2(H5E_DEFAULT);
        return 0;
    }
    hid_t a = H5Aopen(f->labels, "classes", H5P_DEFAULT);
    int v = 0, ok = a >= 0 && H5Aread(a, H5T_NATIVE_INT, &v) >= 0;
    if (a >= 0)
        H5Aclose(a);
    if (!ok)
        return sc_error(SC_ERR_DATA, "%s: data set '%s': attribute 'classes' is not a number (%s)", f->path,
                        f->labels_name, h5_reason(why));
    if (v < 2)
        return sc_error(SC_ERR_DATA, "%s: data set '%s': attribute 'classes' is %d (want >= 2)", f->path,
                        f->labels_name, v);
    *classes = v;
    return 0;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static void fill_dataset(struct sc_data_file *f, int classes, struct sc_dataset *out)
{
    memset(out, 0, sizeof *out);
    out->n = f->n, out->c = f->c, out->h = f->h, out->w = f->w, out->classes = classes, out->file = f;
    int32_t shape[8] = {f->n, f->base, f->c, f->h, f->w, f->lh, f->lw, (int32_t)f->type};
    uint64_t h = fnv(14695981039346656037ULL, shape, sizeof shape);
    if (f->sample_labels)
        h = fnv(h, f->sample_labels, (size_t)f->n * sizeof *f->sample_labels);
    out->seed = h;
}

/* Opens a part of a file: samples first .. first+count-1 (count < 0: to
 * the end), with its labels checked against classes (0: none yet; *found
 * gets the largest label + 1). */
static int open_part(const char *path, const char *iname, const char *lname, int first, long count, int classes,
                     int keep, struct sc_data_file **out, int *found)
{
    int err = open_file(path, iname, lname, out), max;
    if (err)
        return err;
    struct sc_data_file *f = *out;
    if (count < 0)
        count = f->n_file - first;
    f->base = first, f->n = (int)count;
    if ((err = read_labels(f, classes, keep, &max)))
        return err;
    *found = max + 1;
    return 0;
}

static void free_file(struct sc_data_file *f)
{
    if (!f)
        return;
    close_file(f);
    free(f->sample_labels);
    free(f);
}

int sc_dataset_hdf5(const char *spec, int test, struct sc_dataset *out)
{
    if (!spec || strncmp(spec, "hdf5:", 5))
        return 1;
    memset(out, 0, sizeof *out);
    struct spec s;
    int err = parse_spec(spec, &s);
    if (err)
        return err;
    pthread_once(&h5_once, h5_init);
    pthread_mutex_lock(&h5_lock);
    /* The training part first: it says the classes when neither the spec
     * nor the file does, and the sizes of a split. */
    struct sc_data_file *train = NULL, *part = NULL;
    int classes = s.classes, found = 0;
    err = open_file(s.path, s.images, s.labels, &train);
    if (!err && s.split >= train->n_file)
        err = sc_error(SC_ERR_ARG, "--data %s: split=%ld leaves no training samples (the file has %d)", spec, s.split,
                       train->n_file);
    if (!err && !classes)
        err = classes_attribute(train, &classes);
    if (!err) {
        train->base = 0, train->n = train->n_file - (int)s.split;
        int max;
        err = read_labels(train, classes, !test, &max);
        if (!err && !classes)
            classes = max + 1 > 2 ? max + 1 : 2;
    }
    if (!err && !test) {
        fill_dataset(train, classes, out);
        pthread_mutex_unlock(&h5_lock);
        return 0;
    }
    if (!err && s.split) {
        err = open_part(s.path, s.images, s.labels, train->n_file - (int)s.split, s.split, classes, 1, &part, &found);
    } else if (!err && s.test_path[0]) {
        err = open_part(s.test_path, s.test_names ? s.test_images : s.images, s.test_names ? s.test_labels : s.labels,
                        0, -1, classes, 1, &part, &found);
    } else if (!err) {
        htri_t has = H5Lexists(train->file, s.test_images, H5P_DEFAULT);
        H5Eclear2(H5E_DEFAULT);
        if (has > 0 || s.test_names)
            err = open_part(s.path, s.test_images, s.test_labels, 0, -1, classes, 1, &part, &found);
    }
    if (!err && part && (part->c != train->c || part->h != train->h || part->w != train->w))
        err = sc_error(SC_ERR_DATA, "%s: held-out samples are %dx%dx%d, training samples %dx%dx%d", part->name, part->c,
                       part->h, part->w, train->c, train->h, train->w);
    if (!err && part && (part->lh != train->lh || part->lw != train->lw))
        err = sc_error(SC_ERR_DATA, "%s: held-out labels are %dx%d a sample, training labels %dx%d", part->path,
                       part->lh, part->lw, train->lh, train->lw);
    free_file(train);
    if (!err && part)
        fill_dataset(part, classes, out);
    else if (!err)
        out->classes = classes; /* no held-out set: n = 0 */
    else
        free_file(part);
    pthread_mutex_unlock(&h5_lock);
    return err;
}

const char *sc_data_file_h5_error(char buf[256])
{
    pthread_once(&h5_once, h5_init);
    return h5_reason(buf);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Reads block req of the images of sample s into x (floats). */
static int read_image(struct sc_data_file *f, hid_t sp, hid_t ms, const struct sc_load_read *req, int s, float *x)
{
    hsize_t start[4] = {(hsize_t)(f->base + s), (hsize_t)req->ch0, (hsize_t)req->r0, (hsize_t)req->c0};
    hsize_t count[4] = {1, (hsize_t)req->nch, (hsize_t)(req->r1 - req->r0), (hsize_t)(req->c1 - req->c0)};
    if (H5Sselect_hyperslab(sp, H5S_SELECT_SET, start, NULL, count, NULL) < 0 ||
        H5Dread(f->images, H5T_NATIVE_FLOAT, ms, sp, H5P_DEFAULT, x) < 0)
        return -1;
    size_t per = count[1] * count[2] * count[3];
    if (f->type == STORED_U8) /* as kernels/load.c scales IDX pixels */
        for (size_t p = 0; p < per; p++)
            x[p] = x[p] / 255.0f;
    __atomic_add_fetch(&f->bytes, per * f->type_size, __ATOMIC_RELAXED);
    __atomic_add_fetch(&f->image_bytes, per * f->type_size, __ATOMIC_RELAXED);
    __atomic_add_fetch(&f->image_reads, 1, __ATOMIC_RELAXED);
    return 0;
}

static int read_pixel_labels(struct sc_data_file *f, hid_t sp, const struct sc_load_read *req, int s, int32_t *out)
{
    hid_t ms = select_labels(f, sp, f->base + s, 1, req->lr0, req->lr1, req->lc0, req->lc1);
    int err = ms < 0 || H5Dread(f->labels, H5T_NATIVE_INT32, ms, sp, H5P_DEFAULT, out) < 0;
    if (ms >= 0)
        H5Sclose(ms);
    if (!err)
        __atomic_add_fetch(&f->bytes, (uint64_t)req->label_pixels * f->label_size, __ATOMIC_RELAXED);
    return err ? -1 : 0;
}

static int check_request(const struct sc_data_file *f, const struct sc_load_read *req, const int32_t *idx, int has_x,
                         int has_labels)
{
    if (has_x && (req->ch0 < 0 || req->nch < 1 || req->ch0 + req->nch > f->c || req->r0 < 0 || req->r1 > f->h ||
                  req->r0 >= req->r1 || req->c0 < 0 || req->c1 > f->w || req->c0 >= req->c1))
        return -1;
    if (has_labels && f->lh &&
        (req->lr0 < 0 || req->lr1 > f->lh || req->lr0 >= req->lr1 || req->lc0 < 0 || req->lc1 > f->lw ||
         req->lc0 >= req->lc1 || req->label_pixels != (req->lr1 - req->lr0) * (req->lc1 - req->lc0)))
        return -1;
    if (has_labels && !f->lh && req->label_pixels != 1)
        return -1;
    for (int i = 0; i < req->n; i++)
        if (idx[i] < -1 || idx[i] >= f->n)
            return -1;
    return 0;
}

void sc_data_file_read(void *source, const struct sc_load_read *req, const int32_t *idx, float *x, int32_t *labels)
{
    struct sc_data_file *f = source;
    size_t per = x ? (size_t)req->nch * (req->r1 - req->r0) * (req->c1 - req->c0) : 0;
    if (check_request(f, req, idx, x != NULL, labels != NULL)) {
        sc_fail_record("load_read", "%s: a block or sample outside the data set (%d samples of %dx%dx%d)", f->name,
                       f->n, f->c, f->h, f->w);
        goto failed;
    }
    pthread_mutex_lock(&h5_lock);
    double t0 = now();
    int bad = -1;
    hid_t sp = x ? H5Dget_space(f->images) : H5Dget_space(f->labels);
    hsize_t mdims[4] = {1, (hsize_t)req->nch, (hsize_t)(req->r1 - req->r0), (hsize_t)(req->c1 - req->c0)};
    hid_t ms = x ? H5Screate_simple(4, mdims, NULL) : H5I_INVALID_HID;
    for (int i = 0; x && i < req->n && bad < 0; i++) {
        if (idx[i] < 0)
            memset(x + i * per, 0, per * sizeof *x);
        else if (read_image(f, sp, ms, req, idx[i], x + i * per))
            bad = idx[i];
    }
    if (ms >= 0)
        H5Sclose(ms);
    if (x && labels && f->lh) {
        H5Sclose(sp);
        sp = H5Dget_space(f->labels);
    }
    for (int i = 0; labels && i < req->n && bad < 0; i++) {
        int32_t *dst = labels + (size_t)i * req->label_pixels;
        if (idx[i] < 0)
            for (int p = 0; p < req->label_pixels; p++)
                dst[p] = -1;
        else if (!f->lh)
            *dst = f->sample_labels[idx[i]];
        else if (read_pixel_labels(f, sp, req, idx[i], dst))
            bad = idx[i];
    }
    H5Sclose(sp);
    char why[256];
    if (bad >= 0)
        sc_fail_record("load_read", "%s: cannot read sample %d (%s)", f->name, f->base + bad, h5_reason(why));
    __atomic_add_fetch(&f->ns, (uint64_t)((now() - t0) * 1e9), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&h5_lock);
    if (bad < 0)
        return;
failed:
    for (size_t i = 0; x && i < (size_t)req->n * per; i++)
        x[i] = NAN;
    for (size_t i = 0; labels && i < (size_t)req->n * req->label_pixels; i++)
        labels[i] = -1;
}

void sc_data_file_label_shape(const struct sc_dataset *ds, int *lh, int *lw)
{
    *lh = ds && ds->file ? ds->file->lh : 0;
    *lw = ds && ds->file ? ds->file->lw : 0;
}

void sc_data_file_stats(const struct sc_dataset *ds, struct sc_data_file_stats *out)
{
    memset(out, 0, sizeof *out);
    if (!ds || !ds->file)
        return;
    const struct sc_data_file *f = ds->file;
    out->bytes = __atomic_load_n(&f->bytes, __ATOMIC_RELAXED);
    out->image_bytes = __atomic_load_n(&f->image_bytes, __ATOMIC_RELAXED);
    out->image_reads = __atomic_load_n(&f->image_reads, __ATOMIC_RELAXED);
    out->seconds = __atomic_load_n(&f->ns, __ATOMIC_RELAXED) * 1e-9;
    out->sample_bytes = (double)f->c * f->h * f->w * f->type_size;
}

const char *sc_data_file_name(const struct sc_dataset *ds)
{
    return ds && ds->file ? ds->file->name : "";
}

void sc_data_file_close(struct sc_data_file *f)
{
    if (!f)
        return;
    pthread_mutex_lock(&h5_lock);
    free_file(f);
    pthread_mutex_unlock(&h5_lock);
}

/* ---- the module's side of hdf5_module.h ---- */

static const struct sc_hdf5_host *host;

int sc_error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    err = host->verror(err, fmt, ap);
    va_end(ap);
    return err;
}

void sc_fail_record(const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    host->vfail_record(op, fmt, ap);
    va_end(ap);
}

__attribute__((visibility("default"))) int sc_hdf5_module_init(const struct sc_hdf5_host *h, struct sc_hdf5_api *api);
__attribute__((visibility("default"))) int sc_hdf5_module_init(const struct sc_hdf5_host *h, struct sc_hdf5_api *api)
{
    if (!h || h->version != SC_HDF5_MODULE_VERSION)
        return -1;
    host = h;
    *api = (struct sc_hdf5_api){
        .open = sc_dataset_hdf5,
        .read = sc_data_file_read,
        .label_shape = sc_data_file_label_shape,
        .stats = sc_hdf5_stats,
        .name = sc_data_file_name,
        .h5_error = sc_data_file_h5_error,
        .close = sc_data_file_close,
    };
    return 0;
}
