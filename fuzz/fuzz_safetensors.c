/* libFuzzer harness for the safetensors reader (src/io/safetensors.c).  The
 * input is a file's bytes.  A file the reader refuses must give one error
 * line; a file it accepts must describe tensors inside its data section,
 * and survive a round trip through the writer unchanged. */
#include "fuzz_common.h"

static void check_file(const struct sc_st_file *f)
{
    if (f->ntensors < 0 || (f->ntensors && !f->tensors) || (f->data_bytes && !f->data))
        fuzz_fail("safetensors", "inconsistent file struct");
    for (int i = 0; i < f->ntensors; i++) {
        const struct sc_st_tensor *t = &f->tensors[i];
        if (t->ndim < 0 || t->ndim > SC_ST_MAXDIM || t->offset > f->data_bytes || t->nbytes > f->data_bytes - t->offset)
            fuzz_fail("safetensors", "tensor outside the data section");
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] < 0)
                fuzz_fail("safetensors", "negative dimension");
        if (memchr(t->dtype, 0, sizeof t->dtype) == NULL)
            fuzz_fail("safetensors", "dtype not terminated");
        if (i < 1000 && sc_st_find(f, t->name) == NULL) /* a scan: keep it linear */
            fuzz_fail("safetensors", "sc_st_find misses a tensor");
    }
}

/* Writes f back with sc_st_write and reads the copy: same tensors, same
 * bytes.  The reader keeps the tensors in offset order, which is the order
 * the writer lays them out in, so offsets must match too (compared by name:
 * empty tensors share an offset, and qsort may swap them). */
static void round_trip(const struct sc_st_file *f)
{
    /* The writer refuses an empty name, which the format allows. */
    for (int i = 0; i < f->ntensors; i++)
        if (!f->tensors[i].name[0])
            return;
    struct sc_st_out *out = calloc((size_t)f->ntensors + 1, sizeof *out);
    if (!out)
        return;
    for (int i = 0; i < f->ntensors; i++) {
        const struct sc_st_tensor *t = &f->tensors[i];
        out[i].name = t->name;
        out[i].dtype = t->dtype;
        out[i].ndim = t->ndim;
        memcpy(out[i].shape, t->shape, sizeof t->shape);
        out[i].data = f->data + t->offset;
    }
    const char *copy = fuzz_path(1, "copy.safetensors");
    fuzz_reset_error();
    int rc = sc_st_write(copy, out, f->ntensors);
    free(out);
    if (rc != SC_OK)
        fuzz_fail("safetensors: writing back an accepted file", sc_last_error());
    struct sc_st_file *g = NULL;
    fuzz_reset_error();
    if ((rc = sc_st_read(copy, &g)) != SC_OK)
        fuzz_fail("safetensors: reading the copy", sc_last_error());
    if (g->ntensors != f->ntensors || g->data_bytes != f->data_bytes ||
        (f->data_bytes && memcmp(g->data, f->data, f->data_bytes)))
        fuzz_fail("safetensors", "round trip changed the data");
    for (int i = 0; i < f->ntensors; i++) {
        const struct sc_st_tensor *a = &f->tensors[i], *b = sc_st_find(g, a->name);
        if (!b || strcmp(a->dtype, b->dtype) || a->ndim != b->ndim ||
            memcmp(a->shape, b->shape, (size_t)a->ndim * sizeof a->shape[0]) || a->offset != b->offset ||
            a->nbytes != b->nbytes)
            fuzz_fail("safetensors", "round trip changed a tensor");
    }
    sc_st_free(g);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *path = fuzz_path(0, "fuzz.safetensors");
    fuzz_write(path, data, size);
    struct sc_st_file *f = NULL;
    fuzz_reset_error();
    int rc = sc_st_read(path, &f);
    if (rc != SC_OK) {
        fuzz_check_error(rc, "sc_st_read");
        if (f)
            fuzz_fail("safetensors", "output set on error");
        return 0;
    }
    check_file(f);
    if (f->ntensors <= 1000) /* it looks each tensor up by name */
        round_trip(f);
    sc_st_free(f);
    return 0;
}
