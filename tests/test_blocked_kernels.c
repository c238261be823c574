/* The channel-blocked kernels (nChw8c and nChw16c: blk 8 and 16) against
 * their NCHW twins on the same values: batch normalization's statistics
 * and backward statistics (sums in double, in another order: relative
 * 1e-12), its forward, evaluation forward and backward data (the same
 * bits, element for element), max pooling forward, its workspace and
 * backward (the same bits), global average pooling (relative 1e-6
 * forward, the same bits backward), average pooling and the convolution's
 * three directions through oneDNN on blocked buffers (1e-5 of the
 * tensor's largest magnitude).
 * Each blocked result is read back through the layout's index. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/bn.h"
#include "kernels/kernels.h"
#include "kernels/vector.h"

static unsigned rng = 7;

static float frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)((rng >> 8) / 8388608.0 - 1.0);
}

static void *xalloc(size_t bytes)
{
    void *p = calloc(bytes ? bytes : 1, 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* Element (i, ch, p) of an n x c x hw tensor in the layout blk (0: NCHW). */
static size_t at(int c, int hw, int blk, int i, int ch, int p)
{
    if (!blk)
        return ((size_t)i * c + ch) * hw + p;
    return (((size_t)i * (c / blk) + ch / blk) * hw + p) * blk + ch % blk;
}

/* dst (layout blk) = src (NCHW), element for element. */
static void to_blocked(float *dst, const float *src, int n, int c, int hw, int blk)
{
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++)
                dst[at(c, hw, blk, i, ch, p)] = src[at(c, hw, 0, i, ch, p)];
}

/* Blocked b equals NCHW a bit for bit (tol 0), or within tol relative to
 * the tensor's largest magnitude: both are sums (over channels and taps,
 * or over samples and pixels for a weight gradient) that the two layouts
 * add in different orders, and the error of a reordered fp32 sum is
 * bounded by the size of its terms, not of the result, which cancellation
 * can make far smaller (AVX-512's 16-wide blocks reorder more than
 * AVX2's 8-wide ones). */
static int same(const float *a, const float *b, int n, int c, int hw, int blk, double tol)
{
    double amax = 0;
    for (int i = 0; i < n * c * hw; i++)
        amax = fmax(amax, fabs(a[i]));
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < hw; p++) {
                float u = a[at(c, hw, 0, i, ch, p)], v = b[at(c, hw, blk, i, ch, p)];
                if (tol == 0 ? memcmp(&u, &v, sizeof u) != 0 : fabs(u - v) > tol * (fabs(u) + amax)) {
                    printf("  (%d, %d, %d): %.9g against %.9g (largest magnitude %.3g)\n", i, ch, p, (double)u,
                           (double)v, amax);
                    return 0;
                }
            }
    return 1;
}

static int close_d(const double *a, const double *b, int n, double tol)
{
    for (int i = 0; i < n; i++)
        if (fabs(a[i] - b[i]) > tol * (fabs(a[i]) + 1e-9))
            return 0;
    return 1;
}

static float *randoms(size_t n, float scale, float offset)
{
    float *p = xalloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++)
        p[i] = offset + scale * frand();
    return p;
}

static void test_bn(int n, int c, int hw, int blk, int relu)
{
    size_t ne = (size_t)n * c * hw;
    double count = (double)n * hw;
    struct sc_bn_args a = {n, c, hw, 1e-5f, 0.1f, relu, 0}, b = a;
    b.blk = blk;
    float *x = randoms(ne, 1.0f, 0.25f), *dy = randoms(ne, 1.0f, 0.0f), *prm = randoms(2 * (size_t)c, 0.5f, 1.0f);
    float *run = randoms(2 * (size_t)c, 0.25f, 1.0f);
    float *xb = xalloc(ne * 4), *dyb = xalloc(ne * 4), *y = xalloc(ne * 4), *yb = xalloc(ne * 4);
    float *dx = xalloc(ne * 4), *dxb = xalloc(ne * 4), *sv = xalloc(8 * (size_t)c), *svb = xalloc(8 * (size_t)c);
    double *st = xalloc(16 * (size_t)c), *stb = xalloc(16 * (size_t)c), *ds = xalloc(16 * (size_t)c),
           *dsb = xalloc(16 * (size_t)c);
    to_blocked(xb, x, n, c, hw, blk);
    to_blocked(dyb, dy, n, c, hw, blk);

    sc_bn_stats(&a, x, st);
    sc_bn_stats(&b, xb, stb);
    check(close_d(st, stb, 2 * c, 1e-12), "bn_stats blk %d n%d c%d hw%d: the sums of NCHW", blk, n, c, hw);
    /* the same sums from here on, so that the element-wise passes compare bits */
    sc_bn_fwd(&a, count, x, st, prm, y, sv);
    sc_bn_fwd(&b, count, xb, st, prm, yb, svb);
    check(same(y, yb, n, c, hw, blk, 0) && !memcmp(sv, svb, 8 * (size_t)c),
          "bn_fwd blk %d relu %d: NCHW's bits, the same saved statistics", blk, relu);
    sc_bn_fwd_eval(&a, x, run, prm, y);
    sc_bn_fwd_eval(&b, xb, run, prm, yb);
    check(same(y, yb, n, c, hw, blk, 0), "bn_fwd_eval blk %d relu %d: NCHW's bits", blk, relu);
    sc_bn_bwd_stats(&a, x, dy, sv, ds);
    sc_bn_bwd_stats(&b, xb, dyb, sv, dsb);
    check(close_d(ds, dsb, 2 * c, 1e-12), "bn_bwd_stats blk %d: the sums of NCHW", blk);
    sc_bn_bwd_data(&a, count, x, dy, prm, sv, ds, dx);
    sc_bn_bwd_data(&b, count, xb, dyb, prm, sv, ds, dxb);
    check(same(dx, dxb, n, c, hw, blk, 0), "bn_bwd_data blk %d: NCHW's bits", blk);
    void *all[] = {x, dy, prm, run, xb, dyb, y, yb, dx, dxb, sv, svb, st, stb, ds, dsb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

static void test_maxpool(int n, int c, int h, int w, int k, int s, int pad, int blk)
{
    int oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
    struct sc_pool_args a = {n, c, h, w, k, k, s, s, pad, pad, oh, ow, 1, 1, 0}, b = a;
    b.blk = blk;
    size_t ni = (size_t)n * c * h * w, no = (size_t)n * c * oh * ow, wsb = sc_pool_workspace_bytes(&a);
    float *x = randoms(ni, 1.0f, 0.0f), *dy = randoms(no, 1.0f, 0.0f);
    /* ties, whose first maximum both must pick */
    for (size_t i = 0; i < ni; i += 5)
        x[i] = 0.5f;
    float *xb = xalloc(ni * 4), *dyb = xalloc(no * 4), *y = xalloc(no * 4), *yb = xalloc(no * 4);
    float *dx = xalloc(ni * 4), *dxb = xalloc(ni * 4);
    uint8_t *ws = xalloc(wsb), *wsbk = xalloc(wsb);
    to_blocked(xb, x, n, c, h * w, blk);
    to_blocked(dyb, dy, n, c, oh * ow, blk);
    sc_pool_compute(NULL, SC_POOL_FWD, &a, x, y, ws);
    sc_pool_compute(NULL, SC_POOL_FWD, &b, xb, yb, wsbk);
    int ws_same = 1;
    for (int i = 0; i < n; i++)
        for (int ch = 0; ch < c; ch++)
            for (int p = 0; p < oh * ow; p++)
                ws_same &= ws[at(c, oh * ow, 0, i, ch, p)] == wsbk[at(c, oh * ow, blk, i, ch, p)];
    check(same(y, yb, n, c, oh * ow, blk, 0) && ws_same,
          "max pool %dx%d/%d pad %d blk %d: NCHW's maxima and window indices", k, k, s, pad, blk);
    sc_pool_compute(NULL, SC_POOL_BWD, &a, dy, dx, ws);
    sc_pool_compute(NULL, SC_POOL_BWD, &b, dyb, dxb, wsbk);
    check(same(dx, dxb, n, c, h * w, blk, 0), "max pool %dx%d/%d backward blk %d: NCHW's bits", k, k, s, blk);
    void *all[] = {x, dy, xb, dyb, y, yb, dx, dxb, ws, wsbk};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

static void test_avgpool(struct sc_kernel_worker *wk, int n, int c, int h, int w, int blk)
{
    int oh = (h + 2 - 3) / 2 + 1, ow = (w + 2 - 3) / 2 + 1;
    struct sc_pool_args a = {n, c, h, w, 3, 3, 2, 2, 1, 1, oh, ow, 0, 1, 0}, b = a;
    b.blk = blk;
    size_t ni = (size_t)n * c * h * w, no = (size_t)n * c * oh * ow;
    float *x = randoms(ni, 1.0f, 0.0f), *dy = randoms(no, 1.0f, 0.0f), *xb = xalloc(ni * 4), *dyb = xalloc(no * 4);
    float *y = xalloc(no * 4), *yb = xalloc(no * 4), *dx = xalloc(ni * 4), *dxb = xalloc(ni * 4);
    to_blocked(xb, x, n, c, h * w, blk);
    to_blocked(dyb, dy, n, c, oh * ow, blk);
    sc_pool_compute(wk, SC_POOL_FWD, &a, x, y, NULL);
    sc_pool_compute(wk, SC_POOL_FWD, &b, xb, yb, NULL);
    sc_pool_compute(wk, SC_POOL_BWD, &a, dy, dx, NULL);
    sc_pool_compute(wk, SC_POOL_BWD, &b, dyb, dxb, NULL);
    check(same(y, yb, n, c, oh * ow, blk, 1e-5) && same(dx, dxb, n, c, h * w, blk, 1e-5),
          "average pool blk %d: NCHW's forward and backward", blk);
    void *all[] = {x, dy, xb, dyb, y, yb, dx, dxb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

static void test_gap(int n, int c, int hw, int blk)
{
    size_t ne = (size_t)n * c * hw, rows = (size_t)n * c;
    float *x = randoms(ne, 1.0f, 0.5f), *xb = xalloc(ne * 4), *y = xalloc(rows * 4), *yb = xalloc(rows * 4);
    float *dy = randoms(rows, 1.0f, 0.0f), *dx = xalloc(ne * 4), *dxb = xalloc(ne * 4);
    to_blocked(xb, x, n, c, hw, blk);
    sc_gap_fwd(y, x, rows, hw, 0, 1.0f / hw);
    sc_gap_fwd(yb, xb, rows, hw, blk, 1.0f / hw);
    check(same(y, yb, n, c, 1, 0, 1e-6), "global average pool blk %d: NCHW's means", blk);
    sc_gap_bwd(dx, dy, rows, hw, 0, 1.0f / hw);
    sc_gap_bwd(dxb, dy, rows, hw, blk, 1.0f / hw);
    check(same(dx, dxb, n, c, hw, blk, 0), "global average pool backward blk %d: NCHW's bits", blk);
    void *all[] = {x, xb, y, yb, dy, dx, dxb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

/* x blocked or not (c a multiple of blk, or c = 3, the input), y blocked. */
static void test_conv(struct sc_kernel_worker *wk, int c, int f, int k, int s, int xblk, int yblk)
{
    int n = 2, h = 9, w = 9, pad = k / 2, oh = (h + 2 * pad - k) / s + 1, ow = (w + 2 * pad - k) / s + 1;
    struct sc_conv_args a = {n, c, h, w, f, k, k, s, s, pad, pad, oh, ow, 0, 0, 0, 0}, b = a;
    b.xblk = xblk, b.yblk = yblk;
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * f * oh * ow, nw = (size_t)f * c * k * k;
    float *x = randoms(nx, 1.0f, 0.0f), *wt = randoms(nw + f, 0.3f, 0.0f), *dy = randoms(ny, 1.0f, 0.0f);
    float *xb = xalloc(nx * 4), *dyb = xalloc(ny * 4), *y = xalloc(ny * 4), *yb = xalloc(ny * 4);
    float *dx = xalloc(nx * 4), *dxb = xalloc(nx * 4), *dw = xalloc((nw + f) * 4), *dwb = xalloc((nw + f) * 4);
    if (xblk)
        to_blocked(xb, x, n, c, h * w, xblk);
    else
        memcpy(xb, x, nx * 4);
    to_blocked(dyb, dy, n, f, oh * ow, yblk);
    sc_conv_compute(wk, SC_CONV_FWD, &a, x, wt, y, wt + nw);
    sc_conv_compute(wk, SC_CONV_FWD, &b, xb, wt, yb, wt + nw);
    sc_conv_compute(wk, SC_CONV_BWD_DATA, &a, dy, wt, dx, NULL);
    sc_conv_compute(wk, SC_CONV_BWD_DATA, &b, dyb, wt, dxb, NULL);
    sc_conv_compute(wk, SC_CONV_BWD_FILTER, &a, x, dy, dw, dw + nw);
    sc_conv_compute(wk, SC_CONV_BWD_FILTER, &b, xb, dyb, dwb, dwb + nw);
    check(same(y, yb, n, f, oh * ow, yblk, 1e-5) && same(dx, dxb, n, c, h * w, xblk, 1e-5) &&
              same(dw, dwb, 1, (int)(nw + f), 1, 0, 1e-5),
          "convolution %d->%d %dx%d/%d, x blk %d, y blk %d: NCHW's y, dx and dw", c, f, k, k, s, xblk, yblk);
    void *all[] = {x, wt, dy, xb, dyb, y, yb, dx, dxb, dw, dwb};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

int main(void)
{
    for (int blk = 8; blk <= 16; blk += 8) {
        test_bn(3, 2 * blk, 7 * 5, blk, 0);
        test_bn(2, blk, 1, blk, 1);
        test_bn(2, 4 * blk, 49, blk, 1);
        test_maxpool(2, 2 * blk, 9, 11, 3, 2, 1, blk); /* ResNet's stem */
        test_maxpool(2, blk, 8, 9, 2, 2, 0, blk);      /* NCHW's 2x2 path, an odd column */
        test_gap(3, 2 * blk, 49, blk);
    }
    struct sc_kernel_worker *wk = sc_kernel_worker_create();
    test_avgpool(wk, 2, 16, 9, 9, 8);
    test_conv(wk, 8, 16, 3, 1, 8, 8);
    test_conv(wk, 16, 8, 1, 2, 8, 8);
    test_conv(wk, 3, 8, 7, 2, 0, 8);
    test_conv(wk, 16, 16, 3, 2, 8, 0);
    sc_kernel_worker_destroy(wk);
    struct sc_fail f;
    check(!sc_fail_first(&f), "no kernel recorded a failure%s%s", sc_fail_first(&f) ? ": " : "",
          sc_fail_first(&f) ? f.cause : "");
    sc_kernels_shutdown();
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
