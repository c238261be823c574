/* Element-wise and vector kernels (vector.h). */
#include "vector.h"

#include <stdint.h>
#include <string.h>

/* ---- element-wise ---- */

/* In SIMD lanes, as sc_relu_inplace: the signs are random, so a branch
 * per element would mispredict half the time. */
void sc_relu_bwd(float *restrict dy, const float *restrict y, int n)
{
#pragma omp simd
    for (int i = 0; i < n; i++)
        dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

void sc_add(float *restrict y, const float *restrict x0, const float *restrict x1, int n, int relu)
{
    /* SIMD lanes: a branch per element would mispredict on random signs */
    if (relu) {
#pragma omp simd
        for (int i = 0; i < n; i++) {
            float v = x0[i] + x1[i];
            y[i] = v > 0.0f ? v : 0.0f;
        }
    } else {
#pragma omp simd
        for (int i = 0; i < n; i++)
            y[i] = x0[i] + x1[i];
    }
}

void sc_copy(float *dst, const float *src, int n)
{
    memmove(dst, src, (size_t)n * sizeof(float));
}

void sc_zero(void *p, size_t bytes)
{
    memset(p, 0, bytes);
}

/* ---- sums ---- */

/* Blocks of restrict pointers vectorize at -O2. */
#define BLOCK 16

void sc_accumulate(float *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        float *d = dst + i;
        const float *s = src + i;
        for (int j = 0; j < BLOCK; j++)
            d[j] += s[j];
    }
    for (; i < n; i++)
        dst[i] += src[i];
}

void sc_accumulate_relu_bwd(float *restrict dy, const float *restrict part, const float *restrict y, int n, size_t nx)
{
#pragma omp simd
    for (int i = 0; i < n; i++) {
        float v = dy[i] + part[i];
        dy[i] = y[i] > 0.0f ? v : 0.0f;
    }
    sc_accumulate(dy + n, part + n, nx - (size_t)n);
}

void sc_accumulate_f64(double *restrict dst, const double *restrict src, size_t n)
{
    for (size_t i = 0; i < n; i++)
        dst[i] += src[i];
}

/* Element blocks are summed in a local array and then stored, so dst may
 * alias a source. */

#define SUM_BLOCK 256

#define SUM_ORDERED(T, count, src, dst, n)                                                                             \
    do {                                                                                                               \
        T *dst_ = (T *)(dst);                                                                                          \
        for (size_t b0 = 0; b0 < (n); b0 += SUM_BLOCK) {                                                               \
            size_t nb = (n)-b0 < SUM_BLOCK ? (n)-b0 : SUM_BLOCK;                                                       \
            T acc[SUM_BLOCK];                                                                                          \
            const T *s0 = (const T *)(src)[0] + b0;                                                                    \
            for (size_t j = 0; j < nb; j++)                                                                            \
                acc[j] = s0[j];                                                                                        \
            for (int k = 1; k < (count); k++) {                                                                        \
                const T *sk = (const T *)(src)[k] + b0;                                                                \
                for (size_t j = 0; j < nb; j++)                                                                        \
                    acc[j] += sk[j];                                                                                   \
            }                                                                                                          \
            memcpy(dst_ + b0, acc, nb * sizeof(T));                                                                    \
        }                                                                                                              \
    } while (0)

void sc_sum_ordered(int count, const void *const *src, void *dst, size_t n, int f64)
{
    if (f64)
        SUM_ORDERED(double, count, src, dst, n);
    else
        SUM_ORDERED(float, count, src, dst, n);
}

/* ---- SGD and the finiteness checks ---- */

static inline void sgd1(float lr, float momentum, float weight_decay, float *w, float *v, float g)
{
    *v = momentum * *v + (g + weight_decay * *w);
    *w -= lr * *v;
}

/* Blocks of restrict pointers vectorize at -O2: the optimizer update of a
 * large layer is otherwise a visible part of an iteration. */
void sc_sgd_update(float *restrict w, float *restrict v, const float *restrict g, size_t n, float lr, float momentum,
                   float weight_decay)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        float *wb = w + i, *vb = v + i;
        const float *gb = g + i;
        for (int j = 0; j < BLOCK; j++)
            sgd1(lr, momentum, weight_decay, &wb[j], &vb[j], gb[j]);
    }
    for (; i < n; i++)
        sgd1(lr, momentum, weight_decay, &w[i], &v[i], g[i]);
}

int sc_all_finite(const float *g, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

void sc_count_nonfinite(float *count, const float *g, size_t n)
{
    if (!sc_all_finite(g, n))
        *count += 1;
}

/* ---- global average pooling ---- */

enum { GAP_BLK_MAX = 16 };

static void gap_fwd_blocked(float *y, const float *x, size_t rows, int hw, int blk, float scale)
{
    for (size_t g = 0; g < rows / blk; g++) {
        const float *restrict p = x + g * hw * blk;
        double s[GAP_BLK_MAX] = {0};
        for (int i = 0; i < hw; i++, p += blk)
#pragma omp simd
            for (int k = 0; k < blk; k++)
                s[k] += p[k];
        for (int k = 0; k < blk; k++)
            y[g * blk + k] = (float)(scale * s[k]);
    }
}

void sc_gap_fwd(float *y, const float *x, size_t rows, int hw, int blk, float scale)
{
    if (blk > 0 && blk <= GAP_BLK_MAX) {
        gap_fwd_blocked(y, x, rows, hw, blk, scale);
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        const float *p = x + r * hw;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int i = 0;
        for (; i + 4 <= hw; i += 4)
            s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
        for (; i < hw; i++)
            s0 += p[i];
        y[r] = (float)(scale * ((s0 + s1) + (s2 + s3)));
    }
}

void sc_gap_bwd(float *dx, const float *dy, size_t rows, int hw, int blk, float scale)
{
    if (blk > 0 && blk <= GAP_BLK_MAX) {
        for (size_t g = 0; g < rows / blk; g++) {
            float v[GAP_BLK_MAX];
            for (int k = 0; k < blk; k++)
                v[k] = scale * dy[g * blk + k];
            float *restrict p = dx + g * hw * blk;
            for (int i = 0; i < hw; i++, p += blk)
                for (int k = 0; k < blk; k++)
                    p[k] = v[k];
        }
        return;
    }
    for (size_t r = 0; r < rows; r++) {
        float v = scale * dy[r];
        float *p = dx + r * hw;
        for (int i = 0; i < hw; i++)
            p[i] = v;
    }
}
