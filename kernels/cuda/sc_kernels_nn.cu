/* Softmax cross-entropy, batch normalization and pooling kernels (see
 * sc_cuda.h); each mirrors its CPU kernel (kernels/loss.c, bn.c, pool.c). */
#include "sc_cuda.h"

#include <limits.h>

#include "sc_launch.cuh"

namespace
{

/* Sum of v over the block (blockDim.x a multiple of 32, at most 1024);
 * the result in thread 0. */
template <typename T> __device__ T block_sum(T v)
{
    __shared__ T part[32];
    for (int o = 16; o; o /= 2)
        v += __shfl_down_sync(0xffffffffu, v, o);
    int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
    __syncthreads(); /* part[] may still be read by a previous call */
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    T r = 0;
    if (warp == 0) {
        r = lane < (int)(blockDim.x / 32) ? part[lane] : (T)0;
        for (int o = 16; o; o /= 2)
            r += __shfl_down_sync(0xffffffffu, r, o);
    }
    return r;
}

/* ---- softmax cross-entropy ---- */

struct xent_acc {
    double loss;
    unsigned long long correct, bad;
};

__global__ void k_xent(int n, int classes, int hw, float scale, int pad_label, const float *__restrict__ logits,
                       const int32_t *__restrict__ labels, float *__restrict__ dlogits, xent_acc *acc)
{
    size_t npix = (size_t)n * hw;
    double loss = 0.0;
    unsigned long long correct = 0, bad = 0;
    GRID_STRIDE(t, npix)
    {
        size_t i = t / hw, p = t % hw;
        const float *l = logits + i * classes * hw + p;
        float *d = dlogits ? dlogits + i * classes * hw + p : NULL;
        int y = labels[t];
        if (pad_label && y == -1) {
            for (int k = 0; d && k < classes; k++)
                d[(size_t)k * hw] = 0.0f;
            continue;
        }
        int arg = 0;
        float mx = l[0];
        for (int k = 1; k < classes; k++)
            if (l[(size_t)k * hw] > mx) { /* first maximum wins ties */
                mx = l[(size_t)k * hw];
                arg = k;
            }
        double sum = 0.0;
        for (int k = 0; k < classes; k++)
            sum += exp((double)l[(size_t)k * hw] - mx);
        if (y < 0 || y >= classes) {
            bad += y != -1; /* -1: a padding sample's, ignored */
            y = -1;
        } else {
            loss += log(sum) - ((double)l[(size_t)y * hw] - mx);
            correct += arg == y;
        }
        if (d)
            for (int k = 0; k < classes; k++)
                d[(size_t)k * hw] = scale * (float)(exp((double)l[(size_t)k * hw] - mx) / sum - (k == y));
    }
    loss = block_sum(loss);
    correct = block_sum(correct);
    bad = block_sum(bad);
    if (threadIdx.x == 0) {
        if (loss != 0.0)
            atomicAdd(&acc->loss, loss);
        if (correct)
            atomicAdd(&acc->correct, correct);
        if (bad)
            atomicAdd(&acc->bad, bad);
    }
}

__global__ void k_xent_done(const xent_acc *acc, float *stats, int *bad)
{
    stats[0] = (float)acc->loss;
    stats[1] = (float)acc->correct;
    *bad = acc->bad > (unsigned long long)INT_MAX ? INT_MAX : (int)acc->bad;
}

/* ---- batch normalization: one block per channel for the sums, one block
 * per (sample, channel) row for the element-wise passes ---- */

__global__ void k_bn_stats(const float *__restrict__ x, double *stats, int n, int c, int hw)
{
    int ch = blockIdx.x;
    double s = 0.0, sq = 0.0;
    size_t m = (size_t)n * hw;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t i = t / hw, p = t % hw;
        double v = x[(i * c + ch) * hw + p];
        s += v;
        sq += v * v;
    }
    s = block_sum(s);
    sq = block_sum(sq);
    if (threadIdx.x == 0) {
        stats[ch] = s;
        stats[c + ch] = sq;
    }
}

__global__ void k_bn_saved(const double *stats, float *saved, int c, double count, float eps)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    double mean = stats[ch] / count;
    double var = stats[c + ch] / count - mean * mean;
    if (var < 0.0)
        var = 0.0;
    saved[ch] = (float)mean;
    saved[c + ch] = (float)(1.0 / sqrt(var + eps));
}

/* y = (x - mean)*s + beta in float, then ReLU, as bn.c's bn_apply. */
__device__ void bn_apply_row(const float *__restrict__ x, float *__restrict__ y, int hw, float mean, float s,
                             float beta, int relu)
{
    for (int p = threadIdx.x; p < hw; p += blockDim.x) {
        float v = __fadd_rn(__fmul_rn(__fsub_rn(x[p], mean), s), beta);
        y[p] = relu && !(v > 0.0f) ? 0.0f : v;
    }
}

__global__ void k_bn_apply(const float *x, const float *params, const float *saved, float *y, int c, int hw, int relu)
{
    size_t row = blockIdx.x;
    int ch = (int)(row % c);
    bn_apply_row(x + row * hw, y + row * hw, hw, saved[ch], __fmul_rn(params[ch], saved[c + ch]), params[c + ch], relu);
}

__global__ void k_bn_apply_eval(const float *x, const float *run, const float *params, float *y, int c, int hw,
                                float eps, int relu)
{
    size_t row = blockIdx.x;
    int ch = (int)(row % c);
    float s = (float)(params[ch] / sqrt((double)run[c + ch] + eps));
    bn_apply_row(x + row * hw, y + row * hw, hw, run[ch], s, params[c + ch], relu);
}

/* gate: NULL, or the batch's verdict (not 0: skipped, nothing changes). */
__global__ void k_bn_running(const double *stats, float *run, int c, double count, float momentum, const float *gate)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c || (gate && *gate != 0.0f))
        return;
    double m = momentum;
    double mean = stats[ch] / count;
    double var = stats[c + ch] / count - mean * mean;
    if (var < 0.0)
        var = 0.0;
    if (count > 1.0)
        var *= count / (count - 1.0);
    if (!isfinite(mean) || !isfinite(var)) /* as the CPU version */
        return;
    run[ch] = (float)((1.0 - m) * run[ch] + m * mean);
    run[c + ch] = (float)((1.0 - m) * run[c + ch] + m * var);
}

__global__ void k_bn_bwd_stats(const float *__restrict__ x, const float *__restrict__ dy, const float *saved,
                               double *ds, int n, int c, int hw)
{
    int ch = blockIdx.x;
    double mean = saved[ch], invstd = saved[c + ch];
    double sd = 0.0, sdx = 0.0;
    size_t m = (size_t)n * hw;
    for (size_t t = threadIdx.x; t < m; t += blockDim.x) {
        size_t i = t / hw, p = t % hw, off = (i * c + ch) * hw + p;
        double g = dy[off];
        sd += g;
        sdx += g * (x[off] - mean);
    }
    sd = block_sum(sd);
    sdx = block_sum(sdx);
    if (threadIdx.x == 0) {
        ds[ch] = sd;
        ds[c + ch] = sdx * invstd;
    }
}

__global__ void k_bn_param_grad(const double *ds, float *dp, int c)
{
    int ch = blockIdx.x * blockDim.x + threadIdx.x;
    if (ch >= c)
        return;
    dp[ch] = (float)ds[c + ch];
    dp[c + ch] = (float)ds[ch];
}

__global__ void k_bn_bwd_data(const float *x, const float *dy, const float *prm, const float *saved, const double *ds,
                              float *dx, int c, int hw, double count)
{
    size_t row = blockIdx.x;
    int ch = (int)(row % c);
    double invstd = saved[c + ch];
    double k = prm[ch] * invstd;
    double mdy = ds[ch] / count, mdx = ds[c + ch] / count;
    float mean = saved[ch], ky = (float)k, kx = (float)(-k * mdx * invstd), k0 = (float)(-k * mdy);
    const float *xp = x + row * hw, *dp = dy + row * hw;
    float *o = dx + row * hw;
    for (int p = threadIdx.x; p < hw; p += blockDim.x)
        o[p] = __fadd_rn(__fadd_rn(__fmul_rn(ky, dp[p]), __fmul_rn(kx, __fsub_rn(xp[p], mean))), k0);
}

/* ---- pooling ---- */

__device__ int ws_get(const void *ws, int wide, size_t i)
{
    return wide ? ((const int32_t *)ws)[i] : ((const uint8_t *)ws)[i];
}

__global__ void k_pool_fwd(sc_cuda_pool p, const float *__restrict__ x, float *__restrict__ y, void *ws, int wide)
{
    size_t ny = (size_t)p.n * p.c * p.oh * p.ow;
    GRID_STRIDE(t, ny)
    {
        int ow = (int)(t % p.ow), oh = (int)((t / p.ow) % p.oh);
        size_t nc = t / ((size_t)p.ow * p.oh);
        const float *xp = x + nc * p.h * p.w;
        int ih0 = oh * p.sh - p.ph, iw0 = ow * p.sw - p.pw;
        if (p.max) {
            float d = -3.402823466e+38f;
            int idx = 0;
            for (int kh = 0; kh < p.kh; kh++) {
                int ih = ih0 + kh;
                if (ih < 0 || ih >= p.h)
                    continue;
                for (int kw = 0; kw < p.kw; kw++) {
                    int iw = iw0 + kw;
                    if (iw < 0 || iw >= p.w)
                        continue;
                    float s = xp[(size_t)ih * p.w + iw];
                    if (s > d) {
                        d = s;
                        idx = kh * p.kw + kw;
                    }
                }
            }
            y[t] = d;
            if (ws) {
                if (wide)
                    ((int32_t *)ws)[t] = idx;
                else
                    ((uint8_t *)ws)[t] = (uint8_t)idx;
            }
        } else {
            int h0 = max(ih0, 0), h1 = min(ih0 + p.kh, p.h), w0 = max(iw0, 0), w1 = min(iw0 + p.kw, p.w);
            float d = 0.0f;
            for (int ih = h0; ih < h1; ih++)
                for (int iw = w0; iw < w1; iw++)
                    d += xp[(size_t)ih * p.w + iw];
            int num = p.include_pad ? p.kh * p.kw : (h1 - h0) * (w1 - w0);
            y[t] = d / (float)num;
        }
    }
}

/* Gather: each input sums the gradients of the outputs whose windows hold
 * it (deterministic, no atomics). */
__global__ void k_pool_bwd(sc_cuda_pool p, const float *__restrict__ dy, const void *ws, int wide,
                           float *__restrict__ dx)
{
    size_t nx = (size_t)p.n * p.c * p.h * p.w;
    GRID_STRIDE(t, nx)
    {
        int iw = (int)(t % p.w), ih = (int)((t / p.w) % p.h);
        size_t nc = t / ((size_t)p.w * p.h);
        size_t ybase = nc * p.oh * p.ow;
        /* outputs oh with oh*sh - ph <= ih < oh*sh - ph + kh */
        int oh0 = ih + p.ph - p.kh + 1, ow0 = iw + p.pw - p.kw + 1;
        oh0 = oh0 <= 0 ? 0 : (oh0 + p.sh - 1) / p.sh;
        ow0 = ow0 <= 0 ? 0 : (ow0 + p.sw - 1) / p.sw;
        int oh1 = min((ih + p.ph) / p.sh + 1, p.oh), ow1 = min((iw + p.pw) / p.sw + 1, p.ow);
        float g = 0.0f;
        for (int oh = oh0; oh < oh1; oh++)
            for (int ow = ow0; ow < ow1; ow++) {
                size_t o = ybase + (size_t)oh * p.ow + ow;
                int kh = ih - (oh * p.sh - p.ph), kw = iw - (ow * p.sw - p.pw);
                if (p.max) {
                    if (ws_get(ws, wide, o) == kh * p.kw + kw)
                        g += dy[o];
                } else {
                    int h0 = max(oh * p.sh - p.ph, 0), h1 = min(oh * p.sh - p.ph + p.kh, p.h);
                    int w0 = max(ow * p.sw - p.pw, 0), w1 = min(ow * p.sw - p.pw + p.kw, p.w);
                    int num = p.include_pad ? p.kh * p.kw : (h1 - h0) * (w1 - w0);
                    g += dy[o] / (float)num;
                }
            }
        dx[t] = g;
    }
}

int ws_wide(const sc_cuda_pool *p)
{
    return p->kh * p->kw >= 256; /* oneDNN: uint8 indices below 256 */
}

} // namespace

extern "C" {

cudaError_t sc_cuda_xent(int n, int classes, int hw, float scale, int pad_label, int *bad, const float *logits,
                         const int32_t *labels, float *dlogits, float *stats, void *scratch, cudaStream_t s)
{
    static_assert(sizeof(xent_acc) <= SC_CUDA_XENT_SCRATCH, "xent scratch");
    xent_acc *acc = (xent_acc *)scratch;
    cudaError_t e = cudaMemsetAsync(acc, 0, sizeof *acc, s);
    if (e != cudaSuccess)
        return e;
    size_t npix = (size_t)n * hw;
    if (npix)
        k_xent<<<blocks_for(npix), THREADS, 0, s>>>(n, classes, hw, scale, pad_label, logits, labels, dlogits, acc);
    k_xent_done<<<1, 1, 0, s>>>(acc, stats, bad);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_stats(const float *x, double *stats, int n, int c, int hw, cudaStream_t s)
{
    k_bn_stats<<<c, THREADS, 0, s>>>(x, stats, n, c, hw);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_fwd(const float *x, const double *stats, const float *params, float *y, float *saved, int n,
                           int c, int hw, double count, float eps, int relu, cudaStream_t s)
{
    k_bn_saved<<<(c + THREADS - 1) / THREADS, THREADS, 0, s>>>(stats, saved, c, count, eps);
    k_bn_apply<<<(unsigned)((size_t)n * c), THREADS, 0, s>>>(x, params, saved, y, c, hw, relu);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_fwd_eval(const float *x, const float *running, const float *params, float *y, int n, int c,
                                int hw, float eps, int relu, cudaStream_t s)
{
    k_bn_apply_eval<<<(unsigned)((size_t)n * c), THREADS, 0, s>>>(x, running, params, y, c, hw, eps, relu);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_running(const double *stats, float *running, int c, double count, float momentum,
                               const float *gate, cudaStream_t s)
{
    k_bn_running<<<(c + THREADS - 1) / THREADS, THREADS, 0, s>>>(stats, running, c, count, momentum, gate);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_bwd_stats(const float *x, const float *dy, const float *saved, double *dstats, int n, int c,
                                 int hw, cudaStream_t s)
{
    k_bn_bwd_stats<<<c, THREADS, 0, s>>>(x, dy, saved, dstats, n, c, hw);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_param_grad(const double *dstats, float *dparams, int c, cudaStream_t s)
{
    k_bn_param_grad<<<(c + THREADS - 1) / THREADS, THREADS, 0, s>>>(dstats, dparams, c);
    return cudaGetLastError();
}

cudaError_t sc_cuda_bn_bwd_data(const float *x, const float *dy, const float *params, const float *saved,
                                const double *dstats, float *dx, int n, int c, int hw, double count, cudaStream_t s)
{
    k_bn_bwd_data<<<(unsigned)((size_t)n * c), THREADS, 0, s>>>(x, dy, params, saved, dstats, dx, c, hw, count);
    return cudaGetLastError();
}

cudaError_t sc_cuda_pool_fwd(const struct sc_cuda_pool *p, const float *x, float *y, void *ws, cudaStream_t s)
{
    size_t ny = (size_t)p->n * p->c * p->oh * p->ow;
    if (ny)
        k_pool_fwd<<<blocks_for(ny), THREADS, 0, s>>>(*p, x, y, p->max ? ws : NULL, ws_wide(p));
    return cudaGetLastError();
}

cudaError_t sc_cuda_pool_bwd(const struct sc_cuda_pool *p, const float *dy, const void *ws, float *dx, cudaStream_t s)
{
    size_t nx = (size_t)p->n * p->c * p->h * p->w;
    if (nx)
        k_pool_bwd<<<blocks_for(nx), THREADS, 0, s>>>(*p, dy, ws, ws_wide(p), dx);
    return cudaGetLastError();
}

} // extern "C"
