/* fp32 <-> bf16 (bf16.h), on the integer bits so that the result does
 * not depend on the FP environment and the loops vectorize. */
#include <string.h>

#include "kernels/bf16.h"

static inline uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

static inline float bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

/* Round to nearest even by adding half an ulp of bf16 less one, plus the
 * lowest kept bit: a tie then carries only when that bit is odd.  The
 * carry may run into the exponent, which is right (the next binade, or
 * Inf from the largest finite values).  A NaN would carry into Inf or
 * lose its payload, so it is truncated and made quiet instead. */
static inline uint16_t bf16_round(uint32_t b)
{
    uint32_t rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    uint32_t nan = (b >> 16) | 0x40u;
    return (uint16_t)((b & 0x7fffffffu) > 0x7f800000u ? nan : rounded);
}

void sc_bf16_from_f32(uint16_t *restrict dst, const float *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] = bf16_round(f32_bits(src[i]));
}

void sc_bf16_to_f32(float *restrict dst, const uint16_t *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] = bits_f32((uint32_t)src[i] << 16);
}

void sc_accumulate_bf16(float *restrict dst, const uint16_t *restrict src, size_t n)
{
#pragma omp simd
    for (size_t i = 0; i < n; i++)
        dst[i] += bits_f32((uint32_t)src[i] << 16);
}
