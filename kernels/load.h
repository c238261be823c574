/* The input kernels (load.c): samples of a uint8 data set gathered into
 * float tiles (x = pixel / 255), and their labels.  An index of -1 is a
 * padding sample (evaluation's last batch): zeros, and label -1, which the
 * losses ignore. */
#ifndef SC_KERNELS_LOAD_H
#define SC_KERNELS_LOAD_H

#include <stdint.h>

/* x[i*pixels + p] = images[idx[i]*pixels + p] / 255.0f,
 * labels[i] = src_labels[idx[i]], i < n. */
void sc_load_batch(const uint8_t *images, const uint8_t *src_labels, int pixels, int n, const int32_t *idx, float *x,
                   int32_t *labels);

/* A block of each sample, for spatially split inputs:
 * x[n*c*(r1-r0)*(c1-c0)], NCHW of the block. */
struct sc_load_block {
    int c, h, w;        /* the data set's sample shape */
    int r0, r1, c0, c1; /* the block */
};
void sc_load_images(const uint8_t *images, const struct sc_load_block *b, int n, const int32_t *idx, float *x);
/* The labels on their own (the loss layer's tiles may hold other samples
 * than the input's): labels[i] = src_labels[idx[i]], i < n. */
void sc_load_labels(const uint8_t *src_labels, int n, const int32_t *idx, int32_t *labels);

#endif
