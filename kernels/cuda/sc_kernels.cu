/* Element-wise, vector and copy kernels (see sc_cuda.h). */
#include "sc_cuda.h"

#include "sc_launch.cuh"

namespace
{

template <typename T> __global__ void k_accumulate(T *__restrict__ dst, const T *__restrict__ src, size_t n)
{
    GRID_STRIDE(i, n) dst[i] += src[i];
}

/* The same two roundings as vector.c's sgd1 (no FMA contraction). */
__global__ void k_sgd(float *__restrict__ w, float *__restrict__ v, const float *__restrict__ g, size_t n, float lr,
                      float momentum, float wd, const int *skip, const float *gate)
{
    if ((skip && *skip) || (gate && *gate != 0.0f))
        return;
    GRID_STRIDE(i, n)
    {
        float wi = w[i];
        float vi = __fadd_rn(__fmul_rn(momentum, v[i]), __fadd_rn(g[i], __fmul_rn(wd, wi)));
        v[i] = vi;
        w[i] = __fsub_rn(wi, __fmul_rn(lr, vi));
    }
}

/* Exponent bits all ones: NaN or Inf, as vector.c's sc_all_finite. */
__global__ void k_find_nonfinite(int *flag, const float *__restrict__ g, size_t n)
{
    int bad = 0;
    GRID_STRIDE(i, n) bad |= (__float_as_uint(g[i]) & 0x7f800000u) == 0x7f800000u;
    if (__syncthreads_or(bad) && threadIdx.x == 0)
        *(volatile int *)flag = 1;
}

__global__ void k_count_from_flag(float *count, const int *flag)
{
    if (*flag)
        *count += 1.0f;
}

__global__ void k_relu(float *y, size_t n)
{
    GRID_STRIDE(i, n) y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

__global__ void k_relu_bwd(float *__restrict__ dy, const float *__restrict__ y, size_t n)
{
    GRID_STRIDE(i, n) dy[i] = y[i] > 0.0f ? dy[i] : 0.0f;
}

__global__ void k_add(float *__restrict__ y, const float *__restrict__ a, const float *__restrict__ b, size_t n,
                      int relu)
{
    GRID_STRIDE(i, n)
    {
        float v = a[i] + b[i];
        y[i] = relu && !(v > 0.0f) ? 0.0f : v;
    }
}

__global__ void k_fill_rows(float *y, const float *b, size_t rows, int cols)
{
    GRID_STRIDE(i, rows * cols) y[i] = b[i % cols];
}

__global__ void k_col_sums(float *db, const float *dy, int rows, int cols)
{
    int j = blockIdx.x * blockDim.x + threadIdx.x;
    if (j >= cols)
        return;
    float s = 0.0f;
    for (int i = 0; i < rows; i++)
        s += dy[(size_t)i * cols + j];
    db[j] = s;
}

struct sum_srcs {
    const void *p[SC_CUDA_SUM_MAX];
};

template <typename T> __global__ void k_sum_ordered(sum_srcs src, int count, T *dst, size_t n)
{
    GRID_STRIDE(i, n)
    {
        T acc = ((const T *)src.p[0])[i];
        for (int k = 1; k < count; k++)
            acc += ((const T *)src.p[k])[i];
        dst[i] = acc;
    }
}

/* One block row per (sample, channel, row) line, threads along it. */
__global__ void k_copy_box(float *dst, size_t ds, size_t dc, size_t dr, const float *src, size_t ss, size_t sc,
                           size_t sr, int nc, int nr, int nx, size_t lines)
{
    for (size_t l = blockIdx.x; l < lines; l += gridDim.x) {
        int r = (int)(l % nr);
        int ch = (int)((l / nr) % nc);
        size_t s = l / ((size_t)nr * nc);
        float *d = dst + s * ds + ch * dc + r * dr;
        if (src) {
            const float *p = src + s * ss + ch * sc + r * sr;
            for (int x = threadIdx.x; x < nx; x += blockDim.x)
                d[x] = p[x];
        } else {
            for (int x = threadIdx.x; x < nx; x += blockDim.x)
                d[x] = 0.0f;
        }
    }
}

/* One warp per row, the sum in double. */
__global__ void k_gap_fwd(float *y, const float *x, size_t rows, int hw, float scale)
{
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    if (warp >= rows)
        return;
    const float *p = x + warp * hw;
    double s = 0.0;
    for (int i = lane; i < hw; i += 32)
        s += p[i];
    for (int o = 16; o; o /= 2)
        s += __shfl_down_sync(0xffffffffu, s, o);
    if (lane == 0)
        y[warp] = (float)(scale * s);
}

__global__ void k_gap_bwd(float *dx, const float *dy, size_t rows, int hw, float scale)
{
    GRID_STRIDE(i, rows * hw) dx[i] = scale * dy[i / hw];
}

} // namespace

extern "C" {

cudaError_t sc_cuda_accumulate(float *dst, const float *src, size_t n, cudaStream_t s)
{
    if (n)
        k_accumulate<float><<<blocks_for(n), THREADS, 0, s>>>(dst, src, n);
    return cudaGetLastError();
}

cudaError_t sc_cuda_accumulate_f64(double *dst, const double *src, size_t n, cudaStream_t s)
{
    if (n)
        k_accumulate<double><<<blocks_for(n), THREADS, 0, s>>>(dst, src, n);
    return cudaGetLastError();
}

cudaError_t sc_cuda_sgd(float *w, float *v, const float *g, size_t n, float lr, float momentum, float weight_decay,
                        const int *skip, const float *gate, cudaStream_t s)
{
    if (n)
        k_sgd<<<blocks_for(n), THREADS, 0, s>>>(w, v, g, n, lr, momentum, weight_decay, skip, gate);
    return cudaGetLastError();
}

cudaError_t sc_cuda_find_nonfinite(int *flag, const float *g, size_t n, cudaStream_t s)
{
    if (n)
        k_find_nonfinite<<<blocks_for(n), THREADS, 0, s>>>(flag, g, n);
    return cudaGetLastError();
}

cudaError_t sc_cuda_count_nonfinite(float *count, const float *g, size_t n, int *scratch, cudaStream_t s)
{
    cudaError_t e = cudaMemsetAsync(scratch, 0, sizeof(int), s);
    if (e != cudaSuccess)
        return e;
    if (n)
        k_find_nonfinite<<<blocks_for(n), THREADS, 0, s>>>(scratch, g, n);
    k_count_from_flag<<<1, 1, 0, s>>>(count, scratch);
    return cudaGetLastError();
}

cudaError_t sc_cuda_relu(float *y, size_t n, cudaStream_t s)
{
    if (n)
        k_relu<<<blocks_for(n), THREADS, 0, s>>>(y, n);
    return cudaGetLastError();
}

cudaError_t sc_cuda_relu_bwd(float *dy, const float *y, size_t n, cudaStream_t s)
{
    if (n)
        k_relu_bwd<<<blocks_for(n), THREADS, 0, s>>>(dy, y, n);
    return cudaGetLastError();
}

cudaError_t sc_cuda_add(float *y, const float *a, const float *b, size_t n, int relu, cudaStream_t s)
{
    if (n)
        k_add<<<blocks_for(n), THREADS, 0, s>>>(y, a, b, n, relu);
    return cudaGetLastError();
}

cudaError_t sc_cuda_fill_rows(float *y, const float *b, int rows, int cols, cudaStream_t s)
{
    size_t n = (size_t)rows * cols;
    if (n)
        k_fill_rows<<<blocks_for(n), THREADS, 0, s>>>(y, b, (size_t)rows, cols);
    return cudaGetLastError();
}

cudaError_t sc_cuda_col_sums(float *db, const float *dy, int rows, int cols, cudaStream_t s)
{
    if (cols > 0)
        k_col_sums<<<(cols + THREADS - 1) / THREADS, THREADS, 0, s>>>(db, dy, rows, cols);
    return cudaGetLastError();
}

cudaError_t sc_cuda_sum_ordered(int count, const void *const *src, void *dst, size_t n, int f64, cudaStream_t s)
{
    if (count < 1 || count > SC_CUDA_SUM_MAX)
        return cudaErrorInvalidValue;
    sum_srcs p = {};
    for (int k = 0; k < count; k++)
        p.p[k] = src[k];
    if (n) {
        if (f64)
            k_sum_ordered<double><<<blocks_for(n), THREADS, 0, s>>>(p, count, (double *)dst, n);
        else
            k_sum_ordered<float><<<blocks_for(n), THREADS, 0, s>>>(p, count, (float *)dst, n);
    }
    return cudaGetLastError();
}

cudaError_t sc_cuda_copy_box(float *dst, size_t ds, size_t dc, size_t dr, const float *src, size_t ss, size_t sc,
                             size_t sr, int ns, int nc, int nr, int nx, cudaStream_t s)
{
    size_t lines = (size_t)ns * nc * nr;
    if (lines && nx > 0) {
        unsigned threads = nx >= 256 ? 256 : nx >= 128 ? 128 : nx >= 64 ? 64 : 32;
        unsigned grid = lines > 65535u * 16 ? 65535u * 16 : (unsigned)lines;
        k_copy_box<<<grid, threads, 0, s>>>(dst, ds, dc, dr, src, ss, sc, sr, nc, nr, nx, lines);
    }
    return cudaGetLastError();
}

cudaError_t sc_cuda_gap_fwd(float *y, const float *x, size_t rows, int hw, float scale, cudaStream_t s)
{
    if (rows)
        k_gap_fwd<<<(unsigned)((rows * 32 + THREADS - 1) / THREADS), THREADS, 0, s>>>(y, x, rows, hw, scale);
    return cudaGetLastError();
}

cudaError_t sc_cuda_gap_bwd(float *dx, const float *dy, size_t rows, int hw, float scale, cudaStream_t s)
{
    size_t n = rows * hw;
    if (n)
        k_gap_bwd<<<blocks_for(n), THREADS, 0, s>>>(dx, dy, rows, hw, scale);
    return cudaGetLastError();
}

} // extern "C"
