/* starconv public API: errors and logging (base/error.h), configuration
 * files, data sets, checkpoint files.  Every function returns 0 or a
 * negative SC_ERR_*; on error a one-line message saying what and where is
 * kept per thread and returned by sc_last_error().  The library never calls
 * exit(). */
#ifndef STARCONV_H
#define STARCONV_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- configuration files (Darknet-style INI) ---------------------------- */

struct sc_cfg_key {
    char *key;
    char *value;
    int line;
    int used; /* set by the getters, so that unknown keys can be reported */
};

struct sc_cfg_section {
    char *name; /* without brackets, e.g. "convolutional" */
    int line;
    struct sc_cfg_key *keys;
    int nkeys;
};

struct sc_cfg {
    char *path;
    struct sc_cfg_section *sections;
    int nsections;
};

/* Parse a file: '#' and ';' start comments, blank lines are skipped,
 * "[name]" opens a section, "key=value" (spaces around tolerated) adds a key
 * to the current one.  Errors name path:line. */
int sc_cfg_load(const char *path, struct sc_cfg **out);
int sc_cfg_parse_string(const char *text, const char *name, struct sc_cfg **out);
void sc_cfg_free(struct sc_cfg *cfg);

/* Getters: return 0 and set *out, or the default when the key is absent;
 * a value that is not a number (or out of [min, max]) is an SC_ERR_PARSE
 * naming path:line and key.  They mark the key used. */
int sc_cfg_get_int(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key,
                   int def, int min, int max, int *out);
int sc_cfg_get_float(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key,
                     double def, double *out);
/* *out points into the section (not copied); def may be NULL. */
int sc_cfg_get_str(const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key,
                   const char *def, const char **out);
/* SC_ERR_PARSE "path:line: unknown key 'k' in [section]" for the first key
 * that no getter has read. */
int sc_cfg_check_unused(const struct sc_cfg *cfg, const struct sc_cfg_section *s);

/* ---- IDX data sets (MNIST / Fashion-MNIST, optionally gzip-compressed) ---- */

struct sc_dataset {
    int n;              /* number of samples */
    int c, h, w;        /* sample shape */
    int classes;        /* 10 for Fashion-MNIST */
    uint8_t *images;    /* n * c*h*w bytes, 0..255 */
    uint8_t *labels;    /* n bytes, 0..classes-1 */
    int synthetic;      /* 0: the above; else 1 + enum sc_synth_kind: samples generated on
                         * the fly from (seed, index), images and labels NULL */
    uint64_t seed;
    int nan_sample;     /* synthetic: 1 + the index of a training sample made corrupt (a NaN) */
};

/* "synthetic:CxHxW:K" (images with K classes, e.g. synthetic:3x224x224:1000;
 * "synthetic:CxHxW:K:nan=I": training sample I has a NaN, to see --nonfinite at work)
 * or "synthetic-mesh:SIZE" (18 x SIZE x SIZE fields with a per-pixel label
 * in {0, 1}): a generated data set.  test: the held-out split (other
 * samples).  Returns SC_ERR_ARG naming what is wrong, or 1 when spec is not
 * a synthetic one (a directory). */
int sc_dataset_synthetic(const char *spec, int test, struct sc_dataset *out);

/* Load "<dir>/<prefix>-images-idx3-ubyte[.gz]" and
 * "<dir>/<prefix>-labels-idx1-ubyte[.gz]" (prefix "train" or "t10k").
 * A missing directory or file names the path and the Debian package
 * dataset-fashion-mnist; a truncated or corrupt file, a bad magic number,
 * image/label count mismatch or a label >= 10 names the file. */
int sc_dataset_load_idx(const char *dir, const char *prefix, struct sc_dataset *out);
void sc_dataset_free(struct sc_dataset *ds);

/* ---- safetensors files ----------------------------------------------------- */

#define SC_ST_MAXDIM 4

struct sc_st_tensor {
    char *name;
    char dtype[8];          /* "F32", "I64", ... */
    int ndim;
    int64_t shape[SC_ST_MAXDIM];
    size_t offset;          /* into the data section, bytes */
    size_t nbytes;
};

struct sc_st_file {
    struct sc_st_tensor *tensors;
    int ntensors;
    uint8_t *data;          /* the whole data section */
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
    const char *dtype;      /* "F32" or "I64" */
    int ndim;
    int64_t shape[SC_ST_MAXDIM];
    const void *data;       /* little-endian bytes */
};

/* Write atomically: a temporary file beside path, fsync, rename.  On any
 * failure nothing is left at path (a previous file there stays intact). */
int sc_st_write(const char *path, const struct sc_st_out *tensors, int n);

#ifdef __cplusplus
}
#endif
#endif
