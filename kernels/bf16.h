/* bfloat16 on the wire: the gradient allreduce of --grad-dtype bf16 sends
 * each partial sum as bf16 and adds what it receives in fp32.  A bf16 is
 * the upper 16 bits of an IEEE fp32 (sign, 8 exponent bits, 7 mantissa
 * bits), held here as uint16_t.  Plain loops on integers, which the
 * compiler vectorizes, with the same bits whatever the FP flags
 * (denormals flushed or not, rounding mode). */
#ifndef SC_KERNELS_BF16_H
#define SC_KERNELS_BF16_H

#include <stddef.h>
#include <stdint.h>

/* dst[i] = src[i] rounded to the nearest bf16, ties to even; overflow
 * goes to Inf as IEEE rounding does; a NaN stays a NaN (quiet, its sign
 * and upper payload bits kept) and Inf stays Inf; subnormals round as
 * any other value (bf16 has fp32's exponent range). */
void sc_bf16_from_f32(uint16_t *restrict dst, const float *restrict src, size_t n);
/* dst[i] = the fp32 value of src[i] (exact). */
void sc_bf16_to_f32(float *restrict dst, const uint16_t *restrict src, size_t n);
/* dst[i] += the fp32 value of src[i], in fp32: the receiving end of a
 * bf16 transfer of a partial sum. */
void sc_accumulate_bf16(float *restrict dst, const uint16_t *restrict src, size_t n);

#endif
