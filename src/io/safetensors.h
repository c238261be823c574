/* safetensors files: the format of checkpoints, read and written.
 * Part of the public API (src/starconv.h). */
#ifndef SC_IO_SAFETENSORS_H
#define SC_IO_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- safetensors files ----------------------------------------------------- */

#define SC_ST_MAXDIM 4

struct sc_st_tensor {
    char *name;
    char dtype[8]; /* "F32", "I64", ... */
    int ndim;
    int64_t shape[SC_ST_MAXDIM];
    size_t offset; /* into the data section, bytes */
    size_t nbytes;
};

struct sc_st_file {
    struct sc_st_tensor *tensors;
    int ntensors;
    uint8_t *data; /* the whole data section */
    size_t data_bytes;
};

/* Read and validate a file: header length within the file, JSON header well
 * formed, every tensor's offsets inside the data section and consistent with
 * dtype and shape.  Errors name the path. */
int sc_st_read(const char *path, struct sc_st_file **out);
const struct sc_st_tensor *sc_st_find(const struct sc_st_file *f, const char *name);
void sc_st_free(struct sc_st_file *f);

struct sc_st_out {
    const char *name;
    const char *dtype; /* "F32" or "I64" */
    int ndim;
    int64_t shape[SC_ST_MAXDIM];
    const void *data; /* little-endian bytes */
};

/* Write atomically: a temporary file beside path, fsync, rename.  On any
 * failure nothing is left at path (a previous file there stays intact). */
int sc_st_write(const char *path, const struct sc_st_out *tensors, int n);

#ifdef __cplusplus
}
#endif
#endif
