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

/* ---- statistics: stats = [sum x | sum x^2] ---- */

void sc_bn_stats(const struct sc_bn_args *args, const float *x, double *st)
{
    const struct sc_bn_args a = *args;
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
    for (int ch = 0; ch < a.c; ch++) {
        /* dx = k*(dy - mdy - (x - mean)*invstd*mdx), k = gamma*invstd */
        double invstd = saved[a.c + ch];
        double k = prm[ch] * invstd;
        double mdy = ds[ch] / count, mdx = ds[a.c + ch] / count;
        float mean = saved[ch], ky = (float)k, kx = (float)(-k * mdx * invstd), k0 = (float)(-k * mdy);
        for (int i = 0; i < a.n; i++) {
            size_t off = ((size_t)i * a.c + ch) * a.hw;
            const float *restrict xp = x + off, *restrict dp = dy + off;
            float *restrict o = dx + off;
#pragma omp simd
            for (int p = 0; p < a.hw; p++)
                o[p] = ky * dp[p] + kx * (xp[p] - mean) + k0;
        }
    }
}
