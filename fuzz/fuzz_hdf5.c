/* libFuzzer harness for the header and layout checks of the HDF5 data set
 * reader (src/data/hdf5.c): the input describes a file, which the harness
 * writes with the HDF5 library (so that the checks, not HDF5's own parser,
 * are what is fuzzed), then cuts short when asked, and opens it:
 *
 *   byte 0      the images' type: u8, f16, f32, i16, f64, string, i8, u16
 *   byte 1      the images' rank (0 to 5; 0: a scalar)
 *   bytes 2-6   dimensions: 1 + b % 6 (b = 255: 0)
 *   byte 7      flags: bit 0 chunked, bit 1 gzip, bit 2 labels per pixel
 *               (N x 2 x 2), bit 3 float labels, bit 4 a "classes"
 *               attribute (byte 9), bit 5 no labels, bit 6 images a group,
 *               bit 7 test_images and test_labels too
 *   byte 8      labels count: N + (b % 3) - 1
 *   byte 9      classes (attribute or key): b % 12
 *   byte 10     the spec's keys: none, split=b/8, classes=, images=missing,
 *               test=missing file, a bad key, test-images=labels
 *   byte 11     truncation: the file cut to b/256 of its size (0: whole)
 *   the rest    label values (signed bytes), then pixel bytes, cycled
 *
 * Whatever the file, opening it returns 0 with a sane data set whose
 * first sample reads, or an error with one clean line and nothing set. */
#include <hdf5.h>
#include <math.h>

#include "fuzz_common.h"
#include "src/data/hdf5.h"

static hid_t image_type(unsigned t)
{
    static hid_t f16 = -1;
    switch (t % 8) {
    case 0:
        return H5T_NATIVE_UINT8;
    case 1:
        if (f16 < 0) { /* as h5py makes float16 */
            f16 = H5Tcopy(H5T_IEEE_F32LE);
            H5Tset_fields(f16, 15, 10, 5, 0, 10);
            H5Tset_size(f16, 2);
            H5Tset_ebias(f16, 15);
        }
        return f16;
    case 2:
        return H5T_NATIVE_FLOAT;
    case 3:
        return H5T_NATIVE_INT16;
    case 4:
        return H5T_NATIVE_DOUBLE;
    case 5: {
        static hid_t s = -1;
        if (s < 0) {
            s = H5Tcopy(H5T_C_S1);
            H5Tset_size(s, 4);
        }
        return s;
    }
    case 6:
        return H5T_NATIVE_INT8;
    default:
        return H5T_NATIVE_UINT16;
    }
}

/* A data set of type t and shape dims filled with bytes of src (cycled). */
static void write_set(hid_t file, const char *name, hid_t t, int rank, const hsize_t *dims, int chunked, int gzip,
                      const uint8_t *src, size_t nsrc)
{
    hid_t sp = rank ? H5Screate_simple(rank, dims, NULL) : H5Screate(H5S_SCALAR);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    int zero = 0;
    for (int i = 0; i < rank; i++)
        zero |= dims[i] == 0;
    if (chunked && rank && !zero) {
        hsize_t chunk[5];
        for (int i = 0; i < rank; i++)
            chunk[i] = dims[i] > 1 ? dims[i] / 2 : 1;
        H5Pset_chunk(dcpl, rank, chunk);
        if (gzip)
            H5Pset_deflate(dcpl, 1);
    }
    hid_t d = H5Dcreate2(file, name, t, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    size_t n = 1;
    for (int i = 0; i < rank; i++)
        n *= dims[i];
    size_t bytes = n * H5Tget_size(t);
    uint8_t *buf = calloc(bytes ? bytes : 1, 1);
    for (size_t i = 0; nsrc && i < bytes; i++)
        buf[i] = src[i % nsrc];
    if (d >= 0 && bytes)
        H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf);
    free(buf);
    if (d >= 0)
        H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(sp);
}

static void write_labels(hid_t file, const char *name, unsigned flags, hsize_t n, int classes, const uint8_t *src,
                         size_t nsrc)
{
    hsize_t dims[3] = {n, 2, 2};
    hid_t t = flags & 8 ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT8;
    write_set(file, name, t, flags & 4 ? 3 : 1, dims, 0, 0, src, nsrc);
    if (flags & 16) {
        hid_t d = H5Dopen2(file, name, H5P_DEFAULT), sp = H5Screate(H5S_SCALAR);
        hid_t a = d < 0 ? -1 : H5Acreate2(d, "classes", H5T_NATIVE_INT, sp, H5P_DEFAULT, H5P_DEFAULT);
        if (a >= 0) {
            H5Awrite(a, H5T_NATIVE_INT, &classes);
            H5Aclose(a);
        }
        H5Sclose(sp);
        if (d >= 0)
            H5Dclose(d);
    }
}

static void check_open(const char *spec, int test)
{
    struct sc_dataset ds;
    fuzz_reset_error();
    int rc = sc_dataset_hdf5(spec, test, &ds);
    if (rc != 0) {
#ifdef FUZZ_VERBOSE
        fprintf(stderr, "  %s\n", sc_last_error());
#endif
        fuzz_check_error(rc, "sc_dataset_hdf5");
        if (ds.file || ds.n || ds.images || ds.labels)
            fuzz_fail("hdf5", "output set on error");
        return;
    }
    if (test && !ds.n) /* no held-out set */
        return;
    if (ds.n < 1 || ds.c < 1 || ds.h < 1 || ds.w < 1 || ds.classes < 2 || !ds.file)
        fuzz_fail("hdf5", "accepted a data set with a bad shape");
    int lh, lw;
    sc_data_file_label_shape(&ds, &lh, &lw);
    size_t per = (size_t)ds.c * ds.h * ds.w, lp = lh ? (size_t)lh * lw : 1;
    float *x = malloc(per * sizeof *x);
    int32_t *labels = malloc(lp * sizeof *labels), idx = 0;
    struct sc_load_read req = {0, ds.c, 0, ds.h, 0, ds.w, 0, lh ? lh : 1, 0, lh ? lw : 1, (int)lp, 1};
    sc_data_file_read(ds.file, &req, &idx, x, labels);
    /* a failed read (recorded, on stderr here) leaves NaN and -1 */
    int failed = isnan(x[0]) && labels[0] == -1;
    for (size_t i = 0; i < lp; i++)
        if (failed ? labels[i] != -1 : labels[i] < 0 || labels[i] >= ds.classes)
            fuzz_fail("hdf5", failed ? "a failed read left a label" : "a label read out of range");
    free(x), free(labels);
    sc_dataset_free(&ds);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    (void)fuzz_write; /* of fuzz_common.h, for the other harnesses */
    if (size < 12)
        return 0;
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
    unsigned flags = data[7];
    int rank = data[1] % 6, classes = data[9] % 12;
    hsize_t dims[5];
    for (int i = 0; i < 5; i++)
        dims[i] = data[2 + i] == 255 ? 0 : 1 + data[2 + i] % 6;
    hsize_t n = rank ? dims[0] : 1, nl = n + data[8] % 3;
    nl = nl > 0 ? nl - 1 : 0;
    const uint8_t *rest = data + 12;
    size_t nrest = size - 12;
    const char *path = fuzz_path(0, "data.h5");
    unlink(path);
    hid_t file = H5Fcreate(path, H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    if (file < 0)
        fuzz_fail("hdf5", "cannot create the file");
    if (flags & 64)
        H5Gclose(H5Gcreate2(file, "images", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    else
        write_set(file, "images", image_type(data[0]), rank, dims, flags & 1, flags & 2, rest, nrest);
    if (!(flags & 32))
        write_labels(file, "labels", flags, nl, classes, rest, nrest);
    if (flags & 128) {
        write_set(file, "test_images", image_type(data[0]), rank, dims, 0, 0, rest, nrest);
        write_labels(file, "test_labels", flags, nl, classes, rest, nrest);
    }
    H5Fclose(file);
    if (data[11]) {
        FILE *f = fopen(path, "rb");
        long len = 0;
        if (f && !fseek(f, 0, SEEK_END))
            len = ftell(f);
        if (f)
            fclose(f);
        if (truncate(path, len * data[11] / 256) != 0)
            fuzz_fail("hdf5", "cannot truncate the file");
    }
    char spec[1024];
    const char *keys[] = {"",           ":split=%d",          ":classes=%d", ":images=missing", ":test=/nonexistent.h5",
                          ":colour=%d", ":test-images=labels"};
    char tail[64];
    snprintf(tail, sizeof tail, keys[data[10] % 7], data[10] % 7 == 1 ? data[10] / 8 : classes);
    snprintf(spec, sizeof spec, "hdf5:%s%s", path, tail);
    check_open(spec, 0);
    check_open(spec, 1);
    return 0;
}
