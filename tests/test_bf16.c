/* The fp32 <-> bf16 conversions of --grad-dtype bf16 (kernels/bf16.h)
 * against a reference that rounds by comparing distances in double: every
 * upper half (all exponents, signs and bf16 mantissas, subnormals, Inf,
 * NaN) with the lower halves at and around the tie, and the named cases
 * (ties to even, overflow to Inf, NaN kept, subnormals). */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#ifdef __SSE__
#include <xmmintrin.h>
#endif

#include "kernels/bf16.h"
#include "tests/check.h"

static float f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

static uint32_t bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    return b;
}

/* Nearest bf16 of a finite or infinite x, ties to the even one: of the
 * value truncated toward zero and the next one away from it (which may be
 * Inf), the nearer in exact arithmetic.  Not for NaN. */
static uint16_t reference(uint32_t b)
{
    uint32_t lo = b & 0xffff0000u;
    if ((b & 0x7fffffffu) >= 0x7f800000u || lo == b)
        return (uint16_t)(lo >> 16);
    uint32_t hi = lo + 0x10000u; /* away from zero, in the sign's direction */
    double x = fabs((double)f32(b)), dl = x - fabs((double)f32(lo));
    double dh = (hi & 0x7fffffffu) == 0x7f800000u ? ldexp(1.0, 128) - x : fabs((double)f32(hi)) - x;
    /* the Inf side: IEEE rounds to Inf from the midpoint 2^128 - 2^119 up,
     * i.e. as if the next value were 2^128 */
    if (dl < dh || (dl == dh && !((lo >> 16) & 1)))
        return (uint16_t)(lo >> 16);
    return (uint16_t)(hi >> 16);
}

static int is_nan_bf16(uint16_t h)
{
    return (h & 0x7f80) == 0x7f80 && (h & 0x7f);
}

static uint16_t one(uint32_t b)
{
    float x = f32(b);
    uint16_t h;
    sc_bf16_from_f32(&h, &x, 1);
    return h;
}

int main(void)
{
    /* every upper half with lower halves at and near the tie and the ends */
    static const uint32_t lows[] = {0x0000, 0x0001, 0x3fff, 0x7ffe, 0x7fff, 0x8000, 0x8001, 0xc000, 0xfffe, 0xffff};
    enum { NL = sizeof lows / sizeof lows[0] };
    size_t n = (size_t)65536 * NL;
    float *x = malloc(n * sizeof *x), *back = malloc(n * sizeof *back);
    uint16_t *h = malloc(n * sizeof *h);
    if (!x || !h || !back) {
        printf("FAIL out of memory\n");
        return 1;
    }
    for (uint32_t hi = 0; hi < 65536; hi++)
        for (int k = 0; k < NL; k++)
            x[hi * NL + k] = f32(hi << 16 | lows[k]);
    sc_bf16_from_f32(h, x, n);
    size_t wrong = 0, nan_wrong = 0, first = n;
    for (size_t i = 0; i < n; i++) {
        uint32_t b = bits(x[i]);
        if (isnan(x[i])) {
            /* a NaN, its sign and upper payload kept, made quiet */
            if (!is_nan_bf16(h[i]) || h[i] != (uint16_t)((b >> 16) | 0x40))
                nan_wrong++;
        } else if (h[i] != reference(b)) {
            wrong += 1;
            first = first < n ? first : i;
        }
    }
    check(!wrong, "%zu values (every upper half x %d lower halves) round to nearest even as the reference does%s", n,
          NL, wrong ? "" : "");
    if (wrong)
        printf("  %zu wrong, first 0x%08x -> 0x%04x, reference 0x%04x\n", wrong, bits(x[first]), h[first],
               reference(bits(x[first])));
    check(!nan_wrong, "every NaN stays a quiet NaN with its sign and upper payload (%zu wrong)", nan_wrong);

    /* named cases */
    check(one(0x3f800000) == 0x3f80, "1.0 is exact");
    check(one(0x3f808000) == 0x3f80, "1 + 2^-8, a tie, goes to the even 1.0");
    check(one(0x3f818000) == 0x3f82, "1 + 3*2^-8, a tie, goes to the even 1 + 2^-6");
    check(one(0x3f808001) == 0x3f81, "just above the tie goes up");
    check(one(0x3f807fff) == 0x3f80, "just below the tie goes down");
    check(one(0xbf808000) == 0xbf80 && one(0xbf818000) == 0xbf82, "ties to even for negative values");
    check(one(0x80000000) == 0x8000 && one(0x00000000) == 0x0000, "-0 and +0 keep their signs");
    check(one(0x7f800000) == 0x7f80 && one(0xff800000) == 0xff80, "+Inf and -Inf stay Inf");
    check(one(0x7f7fffff) == 0x7f80 && one(0xff7fffff) == 0xff80, "FLT_MAX rounds to Inf (overflow, as IEEE)");
    check(one(0x7f7f7fff) == 0x7f7f, "the largest value below the last midpoint stays finite (0x7f7f)");
    check(one(0x7f7f8000) == 0x7f80, "the midpoint above the largest finite bf16 (odd) goes to Inf");
    check(one(0x7fc00000) == 0x7fc0 && one(0xffc00000) == 0xffc0, "quiet NaNs of both signs stay NaN");
    check(is_nan_bf16(one(0x7f800001)) && is_nan_bf16(one(0x7fffffff)),
          "a NaN whose payload is in the dropped bits only does not become Inf (0x7f800001 -> 0x%04x)",
          one(0x7f800001));
    check(one(0x00000001) == 0x0000, "the smallest subnormal rounds to 0");
    check(one(0x00008000) == 0x0000 && one(0x00018000) == 0x0002, "subnormal ties go to even");
    check(one(0x00008001) == 0x0001, "a subnormal above the tie rounds up to the smallest bf16 subnormal");
    check(one(0x007fffff) == 0x0080, "the largest fp32 subnormal rounds up to the smallest normal");
    check(one(0x80008001) == 0x8001, "negative subnormals round by magnitude");

    /* back to fp32: exact, and every bf16 but NaN survives the round trip */
    uint16_t all[65536];
    for (uint32_t i = 0; i < 65536; i++)
        all[i] = (uint16_t)i;
    sc_bf16_to_f32(back, all, 65536);
    size_t exact = 0, trip = 0;
    uint16_t again[65536];
    sc_bf16_from_f32(again, back, 65536);
    for (uint32_t i = 0; i < 65536; i++) {
        exact += bits(back[i]) == i << 16;
        trip += is_nan_bf16(all[i]) ? is_nan_bf16(again[i]) : again[i] == all[i];
    }
    check(exact == 65536, "every bf16 converts to fp32 exactly (%zu of 65536)", exact);
    check(trip == 65536, "every bf16 survives fp32 and back (NaN as a NaN; %zu of 65536)", trip);

    /* the receiving end: dst += value, in fp32 */
    float dst[6] = {1.0f, -2.5f, 1e-3f, 3.0f, 0.0f, 1.0f};
    const float add[6] = {1.0f / 3, 0.75f, -1e-3f, INFINITY, NAN, 0x1p-8f};
    uint16_t wire[6];
    float want[6];
    sc_bf16_from_f32(wire, add, 6);
    for (int i = 0; i < 6; i++)
        want[i] = dst[i] + f32((uint32_t)wire[i] << 16);
    sc_accumulate_bf16(dst, wire, 6);
    int same = 1;
    for (int i = 0; i < 6; i++)
        same &= bits(dst[i]) == bits(want[i]) || (isnan(dst[i]) && isnan(want[i]));
    check(same && isinf(dst[3]) && isnan(dst[4]) && dst[5] == 1.0f + 0x1p-8f,
          "accumulate_bf16 adds the bf16 value in fp32 (Inf and NaN carried; 1 + bf16(2^-8) = 1 + 2^-8 = %a)", dst[5]);
#ifdef __SSE__
    /* integer arithmetic: the same bits with denormals flushed and read as
     * zero (--denormals flush) */
    _mm_setcsr(_mm_getcsr() | 0x8040); /* FTZ | DAZ */
    uint16_t *h2 = malloc(n * sizeof *h2);
    sc_bf16_from_f32(h2, x, n);
    check(h2 && !memcmp(h, h2, n * sizeof *h), "the same bits with FTZ and DAZ set (subnormals included)");
    free(h2);
#endif
    free(x);
    free(h);
    free(back);
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
