/* The input kernels (load.h). */
#include "load.h"

#include <stddef.h>
#include <string.h>

void sc_load_batch(const uint8_t *images, const uint8_t *src_labels, int pixels, int n, const int32_t *idx, float *x,
                   int32_t *labels)
{
    for (int i = 0; i < n; i++) {
        float *dst = x + (size_t)i * pixels;
        if (idx[i] < 0) { /* padding */
            memset(dst, 0, (size_t)pixels * sizeof(float));
            labels[i] = -1;
            continue;
        }
        const uint8_t *src = images + (size_t)idx[i] * pixels;
        for (int p = 0; p < pixels; p++)
            dst[p] = src[p] / 255.0f;
        labels[i] = src_labels[idx[i]];
    }
}

void sc_load_images(const uint8_t *images, const struct sc_load_block *b, int n, const int32_t *idx, float *x)
{
    int rows = b->r1 - b->r0, cols = b->c1 - b->c0;
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < b->c; ch++)
            for (int r = 0; r < rows; r++) {
                float *dst = x + (((size_t)i * b->c + ch) * rows + r) * cols;
                if (idx[i] < 0) {
                    memset(dst, 0, (size_t)cols * sizeof(float));
                    continue;
                }
                const uint8_t *src = images + (((size_t)idx[i] * b->c + ch) * b->h + b->r0 + r) * b->w + b->c0;
                for (int c = 0; c < cols; c++)
                    dst[c] = src[c] / 255.0f;
            }
}

void sc_load_labels(const uint8_t *src_labels, int n, const int32_t *idx, int32_t *labels)
{
    for (int i = 0; i < n; i++)
        labels[i] = idx[i] < 0 ? -1 : src_labels[idx[i]];
}
