/* Batch normalization's kernels (bn.h).  Each takes a copy of its
 * arguments, a, as the codelets unpack them. */
#include "bn.h"

#include <math.h>
#include <stddef.h>

/* Sum of p[0..n) in double, four partial sums (and of squares when sq). */
static void sum2(const float *restrict p, size_t n, double *s, double *sq)
{
    double a0 = 0, a1 = 0, a2 = 0, a3 = 0, b0 = 0, b1 = 0, b2 = 0, b3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        double v0 = p[i], v1 = p[i + 1], v2 = p[i + 2], v3 = p[i + 3];
        a0 += v0, a1 += v1, a2 += v2, a3 += v3;
        b0 += v0 * v0, b1 += v1 * v1, b2 += v2 * v2, b3 += v3 * v3;
    }
    for (; i < n; i++) {
        double v = p[i];
        a0 += v;
        b0 += v * v;
    }
    *s += (a0 + a1) + (a2 + a3);
    if (sq)
        *sq += (b0 + b1) + (b2 + b3);
}

/* ---- channel-blocked tiles (a.blk > 0) ----
 * Sample i's channel block cb is hw rows of blk channels each; the sums
 * run per channel lane over the rows, in double, and the element-wise
 * passes compute what the NCHW ones compute for each element. */

enum { BLK_MAX = 16 };

static size_t blk_off(const struct sc_bn_args *a, int i, int cb)
{
    return ((size_t)i * (a->c / a->blk) + cb) * a->hw * a->blk;
}

static void blk_stats(const struct sc_bn_args *a, const float *x, double *st)
{
    const int b = a->blk;
    for (int cb = 0; cb < a->c / b; cb++) {
        double s[BLK_MAX] = {0}, q[BLK_MAX] = {0};
        for (int i = 0; i < a->n; i++) {
            const float *restrict p = x + blk_off(a, i, cb);
            for (int r = 0; r < a->hw; r++, p += b)
#pragma omp simd
                for (int k = 0; k < b; k++) {
                    double v = p[k];
                    s[k] += v;
                    q[k] += v * v;
                }
        }
        for (int k = 0; k < b; k++) {
            st[cb * b + k] = s[k];
            st[a->c + cb * b + k] = q[k];
        }
    }
}

/* y = (x - mean)*s + beta per channel lane (then ReLU), over every row. */
static void blk_apply(const struct sc_bn_args *a, const float *x, float *y, const float *mean, const float *s,
                      const float *beta)
{
    const int b = a->blk;
    for (int i = 0; i < a->n; i++)
        for (int cb = 0; cb < a->c / b; cb++) {
            size_t off = blk_off(a, i, cb);
            const float *restrict xp = x + off, *m = mean + cb * b, *sc = s + cb * b, *bt = beta + cb * b;
            float *restrict yp = y + off;
            for (int r = 0; r < a->hw; r++, xp += b, yp += b)
                if (a->relu) {
#pragma omp simd
                    for (int k = 0; k < b; k++) {
                        float v = (xp[k] - m[k]) * sc[k] + bt[k];
                        yp[k] = v > 0.0f ? v : 0.0f;
                    }
                } else {
#pragma omp simd
                    for (int k = 0; k < b; k++)
                        yp[k] = (xp[k] - m[k]) * sc[k] + bt[k];
                }
        }
}

static void blk_bwd_stats(const struct sc_bn_args *a, const float *x, const float *dy, const float *saved, double *ds)
{
    const int b = a->blk;
    for (int cb = 0; cb < a->c / b; cb++) {
        double sd[BLK_MAX] = {0}, sdx[BLK_MAX] = {0}, mean[BLK_MAX];
        for (int k = 0; k < b; k++)
            mean[k] = saved[cb * b + k];
        for (int i = 0; i < a->n; i++) {
            size_t off = blk_off(a, i, cb);
            const float *restrict xp = x + off, *restrict dp = dy + off;
            for (int r = 0; r < a->hw; r++, xp += b, dp += b)
#pragma omp simd
                for (int k = 0; k < b; k++) {
                    double g = dp[k];
                    sd[k] += g;
                    sdx[k] += g * (xp[k] - mean[k]);
                }
        }
        for (int k = 0; k < b; k++) {
            ds[cb * b + k] = sd[k];
            ds[a->c + cb * b + k] = sdx[k] * saved[a->c + cb * b + k];
        }
    }
}

/* dx = ky*dy + kx*(x - mean) + k0 per channel lane. */
static void blk_bwd_data(const struct sc_bn_args *a, const float *x, const float *dy, const float *mean,
                         const float *ky, const float *kx, const float *k0, float *dx)
{
    const int b = a->blk;
    for (int i = 0; i < a->n; i++)
        for (int cb = 0; cb < a->c / b; cb++) {
            size_t off = blk_off(a, i, cb);
            const float *restrict xp = x + off, *restrict dp = dy + off;
            const float *m = mean + cb * b, *y = ky + cb * b, *xk = kx + cb * b, *z = k0 + cb * b;
            float *restrict o = dx + off;
            for (int r = 0; r < a->hw; r++, xp += b, dp += b, o += b)
#pragma omp simd
                for (int k = 0; k < b; k++)
                    o[k] = y[k] * dp[k] + xk[k] * (xp[k] - m[k]) + z[k];
        }
}

/* ---- statistics: stats = [sum x | sum x^2] ---- */

void sc_bn_stats(const struct sc_bn_args *args, const float *x, double *st)
{
    const struct sc_bn_args a = *args;
    if (a.blk) {
        blk_stats(&a, x, st);
        return;
    }
    for (int ch = 0; ch < 2 * a.c; ch++)
        st[ch] = 0.0;
    for (int i = 0; i < a.n; i++)
        for (int ch = 0; ch < a.c; ch++)
            sum2(x + ((size_t)i * a.c + ch) * a.hw, (size_t)a.hw, &st[ch], &st[a.c + ch]);
}

/* ---- y = scale*x + shift per channel, then ReLU ---- */

/* y = (x - mean)*s + beta over one channel of one sample. */
static void bn_apply(const float *restrict x, float *restrict y, size_t hw, float mean, float s, float beta, int relu)
{
    /* SIMD lanes: a branch per element would mispredict on random signs */
    if (relu) {
#pragma omp simd
        for (size_t p = 0; p < hw; p++) {
            float v = (x[p] - mean) * s + beta;
            y[p] = v > 0.0f ? v : 0.0f;
        }
    } else {
#pragma omp simd
        for (size_t p = 0; p < hw; p++)
            y[p] = (x[p] - mean) * s + beta;
    }
}

/* ---- training forward ---- */

void sc_bn_fwd(const struct sc_bn_args *args, double count, const float *x, const double *st, const float *prm,
               float *y, float *saved)
{
    const struct sc_bn_args a = *args;
    for (int ch = 0; ch < a.c; ch++) {
        double mean = st[ch] / count;
        double var = st[a.c + ch] / count - mean * mean;
        if (var < 0.0) /* rounding */
            var = 0.0;
        saved[ch] = (float)mean;
        saved[a.c + ch] = (float)(1.0 / sqrt(var + a.eps));
    }
    if (a.blk) {
        float s[a.c];
        for (int ch = 0; ch < a.c; ch++)
            s[ch] = prm[ch] * saved[a.c + ch];
        blk_apply(&a, x, y, saved, s, prm + a.c);
        return;
    }
    for (int i = 0; i < a.n; i++)
        for (int ch = 0; ch < a.c; ch++) {
            size_t off = ((size_t)i * a.c + ch) * a.hw;
            bn_apply(x + off, y + off, (size_t)a.hw, saved[ch], prm[ch] * saved[a.c + ch], prm[a.c + ch], a.relu);
        }
}

/* ---- evaluation forward, with the running statistics ---- */

void sc_bn_fwd_eval(const struct sc_bn_args *args, const float *x, const float *run, const float *prm, float *y)
{
    const struct sc_bn_args a = *args;
    if (a.blk) {
        float s[a.c];
        for (int ch = 0; ch < a.c; ch++)
            s[ch] = (float)(prm[ch] / sqrt((double)run[a.c + ch] + a.eps));
        blk_apply(&a, x, y, run, s, prm + a.c);
        return;
    }
    for (int ch = 0; ch < a.c; ch++) {
        float s = (float)(prm[ch] / sqrt((double)run[a.c + ch] + a.eps));
        for (int i = 0; i < a.n; i++) {
            size_t off = ((size_t)i * a.c + ch) * a.hw;
            bn_apply(x + off, y + off, (size_t)a.hw, run[ch], s, prm[a.c + ch], a.relu);
        }
    }
}

/* ---- running statistics, as PyTorch ----
 * except that a channel whose batch statistics are not finite (a NaN in
 * a sample, under --nonfinite skip) keeps its running statistics, so that
 * evaluation survives a skipped batch. */

void sc_bn_running_update(const struct sc_bn_args *args, double count, const double *st, float *run, const float *gate)
{
    const struct sc_bn_args a = *args;
    if (gate && *gate != 0)
        return;
    double m = a.momentum;
    for (int ch = 0; ch < a.c; ch++) {
        double mean = st[ch] / count;
        double var = st[a.c + ch] / count - mean * mean;
        if (var < 0.0)
            var = 0.0;
        if (count > 1.0)
            var *= count / (count - 1.0);
        if (!isfinite(mean) || !isfinite(var))
            continue;
        run[ch] = (float)((1.0 - m) * run[ch] + m * mean);
        run[a.c + ch] = (float)((1.0 - m) * run[a.c + ch] + m * var);
    }
}

/* ---- backward, phase 1: dstats = [sum dy | sum dy*xhat] ---- */

void sc_bn_bwd_stats(const struct sc_bn_args *args, const float *x, const float *dy, const float *saved, double *ds)
{
    const struct sc_bn_args a = *args;
    if (a.blk) {
        blk_bwd_stats(&a, x, dy, saved, ds);
        return;
    }
    for (int ch = 0; ch < a.c; ch++) {
        double mean = saved[ch], invstd = saved[a.c + ch];
        double sd = 0.0, sdx = 0.0;
        for (int i = 0; i < a.n; i++) {
            size_t off = ((size_t)i * a.c + ch) * a.hw;
            const float *xp = x + off, *dp = dy + off;
            double s0 = 0, s1 = 0, t0 = 0, t1 = 0;
            int p = 0;
            for (; p + 2 <= a.hw; p += 2) {
                double g0 = dp[p], g1 = dp[p + 1];
                s0 += g0, s1 += g1;
                t0 += g0 * (xp[p] - mean), t1 += g1 * (xp[p + 1] - mean);
            }
            for (; p < a.hw; p++) {
                s0 += dp[p];
                t0 += dp[p] * (xp[p] - mean);
            }
            sd += s0 + s1;
            sdx += t0 + t1;
        }
        ds[ch] = sd;
        ds[a.c + ch] = sdx * invstd;
    }
}

/* ---- parameter gradients from the summed dstats ---- */

void sc_bn_param_grad(int c, const double *ds, float *dp)
{
    for (int ch = 0; ch < c; ch++) {
        dp[ch] = (float)ds[c + ch];
        dp[c + ch] = (float)ds[ch];
    }
}

/* ---- backward, phase 2: dx ---- */

void sc_bn_bwd_data(const struct sc_bn_args *args, double count, const float *x, const float *dy, const float *prm,
                    const float *saved, const double *ds, float *dx)
{
    const struct sc_bn_args a = *args;
    /* blocked tiles keep each channel's constants, for the lanes */
    float bky[a.blk ? a.c : 1], bkx[a.blk ? a.c : 1], bk0[a.blk ? a.c : 1];
    for (int ch = 0; ch < a.c; ch++) {
        /* dx = k*(dy - mdy - (x - mean)*invstd*mdx), k = gamma*invstd */
        double invstd = saved[a.c + ch];
        double k = prm[ch] * invstd;
        double mdy = ds[ch] / count, mdx = ds[a.c + ch] / count;
        float mean = saved[ch], ky = (float)k, kx = (float)(-k * mdx * invstd), k0 = (float)(-k * mdy);
        if (a.blk) {
            bky[ch] = ky, bkx[ch] = kx, bk0[ch] = k0;
            continue;
        }
        for (int i = 0; i < a.n; i++) {
            size_t off = ((size_t)i * a.c + ch) * a.hw;
            const float *restrict xp = x + off, *restrict dp = dy + off;
            float *restrict o = dx + off;
#pragma omp simd
            for (int p = 0; p < a.hw; p++)
                o[p] = ky * dp[p] + kx * (xp[p] - mean) + k0;
        }
    }
    if (a.blk)
        blk_bwd_data(&a, x, dy, saved, bky, bkx, bk0, dx);
}
