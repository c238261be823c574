/* libFuzzer harness for the IDX data set reader (src/data/idx.c), which reads a
 * pair of files from a directory.  The input is split into them:
 *
 *   byte 0      flags: bit 0 gzip the images file here, bit 1 the labels
 *               file; bit 2 leave the images file out, bit 3 the labels
 *               file; bits 4-5 the gzip level (1, 6, 9, or 0: stored)
 *   bytes 1-2   n, little-endian: the images file is the next n bytes (fewer
 *               if the input ends), the labels file the rest
 *
 * Bytes written as they are may be gzip streams themselves (the corpus
 * keeps such seeds), so damaged compressed data is reached as well as
 * well-formed data compressed here.  A compressed file is named *.gz, as
 * the reader prefers those. */
#include <zlib.h>

#include "fuzz_common.h"

static const char *const names[4] = {
    "train-images-idx3-ubyte",
    "train-images-idx3-ubyte.gz",
    "train-labels-idx1-ubyte",
    "train-labels-idx1-ubyte.gz",
};

static void write_part(const char *name, int gz, int level, const uint8_t *p, size_t n)
{
    const char *path = fuzz_path(0, name);
    if (!gz) {
        fuzz_write(path, p, n);
        return;
    }
    char mode[8];
    snprintf(mode, sizeof mode, "wb%d", level);
    gzFile g = gzopen(path, mode);
    if (!g || (n && gzwrite(g, p, (unsigned)n) != (int)n) || gzclose(g) != Z_OK) {
        fprintf(stderr, "fuzz: cannot write %s\n", path);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 3)
        return 0;
    static const int levels[4] = {1, 6, 9, 0};
    unsigned flags = data[0];
    size_t ilen = (size_t)data[1] | (size_t)data[2] << 8;
    data += 3;
    size -= 3;
    if (ilen > size)
        ilen = size;
    int level = levels[flags >> 4 & 3];
    for (int i = 0; i < 4; i++)
        unlink(fuzz_path(0, names[i]));
    if (!(flags & 4))
        write_part(names[(flags & 1) ? 1 : 0], flags & 1, level, data, ilen);
    if (!(flags & 8))
        write_part(names[(flags & 2) ? 3 : 2], flags & 2, level, data + ilen, size - ilen);

    struct sc_dataset ds;
    fuzz_reset_error();
    int rc = sc_dataset_load_idx(fuzz_tmpdir(), "train", &ds);
    if (rc != SC_OK) {
        fuzz_check_error(rc, "sc_dataset_load_idx");
        if (ds.images || ds.labels || ds.n)
            fuzz_fail("idx", "output set on error");
        return 0;
    }
    if (ds.n < 1 || ds.c != 1 || ds.h < 1 || ds.w < 1 || ds.classes < 2 || !ds.images || !ds.labels)
        fuzz_fail("idx", "accepted a data set with a bad shape");
    size_t bytes = (size_t)ds.n * (size_t)ds.h * (size_t)ds.w;
    unsigned sum = 0;
    for (size_t i = 0; i < bytes; i++) /* ASan checks the whole buffer is there */
        sum += ds.images[i];
    for (int i = 0; i < ds.n; i++)
        if (ds.labels[i] >= ds.classes)
            fuzz_fail("idx", "label out of range");
    (void)sum;
    sc_dataset_free(&ds);
    return 0;
}
