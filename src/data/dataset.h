/* Data sets: IDX files (MNIST, Fashion-MNIST), HDF5 files read by tile and
 * generated ones.
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
    int nan_sample;            /* synthetic: 1 + the index of a training sample made corrupt (a NaN) */
    struct sc_data_file *file; /* a file read by tile as training goes (HDF5), images and labels
                                * NULL; seed is then a fingerprint of its shapes and labels */
};

/* "synthetic:CxHxW:K" (images with K classes, e.g. synthetic:3x224x224:1000;
 * "synthetic:CxHxW:K:nan=I": training sample I has a NaN, to see --nonfinite at work)
 * or "synthetic-mesh:SIZE" (18 x SIZE x SIZE fields with a per-pixel label
 * in {0, 1}): a generated data set.  test: the held-out split (other
 * samples).  Returns SC_ERR_ARG naming what is wrong, or 1 when spec is not
 * a synthetic one (a directory). */
int sc_dataset_synthetic(const char *spec, int test, struct sc_dataset *out);

/* "hdf5:FILE[:KEY=VALUE,...]": an HDF5 file whose data set "images" is
 * N x C x H x W (uint8, scaled to [0, 1]; float16 or float32 as stored)
 * and "labels" N (a class a sample) or N x H' x W' (a class a pixel, at
 * the loss's resolution), of any integer type.  Keys: images=NAME,
 * labels=NAME; classes=K (default: the labels' attribute "classes", else
 * the largest label + 1); the held-out split (test): split=K (the last K
 * samples), test=FILE2 (its data sets of the same names), or the data sets
 * test-images=NAME and test-labels=NAME of FILE (default test_images and
 * test_labels when FILE has them; else there is none, n = 0).  Only the
 * shapes and the labels are read here; the load tasks read each tile's
 * block of the images (src/data/hdf5.h).  Returns 1 when spec does not
 * start with "hdf5:", SC_ERR_DATA naming the file, the data set and what
 * is wrong (missing, damaged, wrong rank, unsupported type, label count or
 * range), SC_ERR_ARG for a bad key or a build without HDF5 (naming the
 * package). */
int sc_dataset_hdf5(const char *spec, int test, struct sc_dataset *out);

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
