/* Data sets: IDX files (MNIST, Fashion-MNIST) and generated ones.
 * Part of the public API (src/starconv.h). */
#ifndef SC_DATA_DATASET_H
#define SC_DATA_DATASET_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- IDX data sets (MNIST / Fashion-MNIST, optionally gzip-compressed) ---- */

struct sc_dataset {
    int n;           /* number of samples */
    int c, h, w;     /* sample shape */
    int classes;     /* 10 for Fashion-MNIST */
    uint8_t *images; /* n * c*h*w bytes, 0..255 */
    uint8_t *labels; /* n bytes, 0..classes-1 */
    int synthetic;   /* 0: the above; else 1 + enum sc_synth_kind: samples generated on
                      * the fly from (seed, index), images and labels NULL */
    uint64_t seed;
    int nan_sample; /* synthetic: 1 + the index of a training sample made corrupt (a NaN) */
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

#ifdef __cplusplus
}
#endif
#endif
