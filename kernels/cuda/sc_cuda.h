/* The CUDA kernels: host-callable launchers of the kernels in the .cu
 * files beside it (the C side, cuDNN and cuBLAS, is in ../cuda_ctx.h).
 *
 * The launchers only enqueue work on the given stream (the calling CUDA
 * worker's own, the codelets being asynchronous) and return
 * cudaGetLastError().  Each does what the CPU kernel of the same name in
 * kernels/ does, on the same buffer layouts.  The .cu files need nothing
 * but this header and the CUDA runtime (no StarPU, no cuDNN), so that they
 * compile with nvcc alone (make cuda-compile-check). */
#ifndef SC_CUDA_H
#define SC_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- vectors (vector.h: sc_accumulate, sc_sgd_update, sc_count_nonfinite) ---- */
/* dst[i] += src[i] */
cudaError_t sc_cuda_accumulate(float *dst, const float *src, size_t n, cudaStream_t s);
cudaError_t sc_cuda_accumulate_f64(double *dst, const double *src, size_t n, cudaStream_t s);
/* torch.optim.SGD as vector.c's sgd1: v = momentum*v + (g + wd*w);
 * w -= lr*v.  skip (device, may be NULL): when *skip != 0, nothing changes.
 * gate (device, may be NULL): when *gate != 0, nothing changes. */
cudaError_t sc_cuda_sgd(float *w, float *v, const float *g, size_t n, float lr, float momentum, float weight_decay,
                        const int *skip, const float *gate, cudaStream_t s);
/* *flag = 1 when some g[i] is NaN or Inf (flag untouched otherwise: set it
 * to 0 first); flag may be device or mapped host memory. */
cudaError_t sc_cuda_find_nonfinite(int *flag, const float *g, size_t n, cudaStream_t s);
/* count[0] += 1 when some g[i] is NaN or Inf (one float), as
 * sc_count_nonfinite.  scratch: one device int. */
cudaError_t sc_cuda_count_nonfinite(float *count, const float *g, size_t n, int *scratch, cudaStream_t s);

/* ---- element-wise ---- */
/* y[i] = max(0, y[i]) */
cudaError_t sc_cuda_relu(float *y, size_t n, cudaStream_t s);
/* dy[i] = y[i] > 0 ? dy[i] : 0 */
cudaError_t sc_cuda_relu_bwd(float *dy, const float *y, size_t n, cudaStream_t s);
/* y = a + b, then max(0, .) when relu */
cudaError_t sc_cuda_add(float *y, const float *a, const float *b, size_t n, int relu, cudaStream_t s);
/* y[i*cols + j] = b[j], i < rows */
cudaError_t sc_cuda_fill_rows(float *y, const float *b, int rows, int cols, cudaStream_t s);
/* db[j] = sum over i < rows of dy[i*cols + j], in float, i in order */
cudaError_t sc_cuda_col_sums(float *db, const float *dy, int rows, int cols, cudaStream_t s);

/* dst = ((src[0] + src[1]) + ...) + src[count-1] element by element in
 * the element type (float, or double when f64); count <= SC_CUDA_SUM_MAX;
 * dst may be one of the sources. */
#define SC_CUDA_SUM_MAX 64
cudaError_t sc_cuda_sum_ordered(int count, const void *const *src, void *dst, size_t n, int f64, cudaStream_t s);

/* A 4-D box copy: for s < ns, ch < nc, r < nr: the nx floats at
 * src + s*ss + ch*sc + r*sr go to dst + s*ds + ch*dc + r*dr (strides in
 * floats).  src NULL writes zeros.  The region kernels' gather/scatter. */
cudaError_t sc_cuda_copy_box(float *dst, size_t ds, size_t dc, size_t dr, const float *src, size_t ss, size_t sc,
                             size_t sr, int ns, int nc, int nr, int nx, cudaStream_t s);

/* ---- global average pooling (vector.h: sc_gap_fwd, sc_gap_bwd) ---- */
/* y[r] = scale * sum of x[r*hw .. r*hw + hw) (in double), r < rows */
cudaError_t sc_cuda_gap_fwd(float *y, const float *x, size_t rows, int hw, float scale, cudaStream_t s);
/* dx[r*hw + p] = scale*dy[r] */
cudaError_t sc_cuda_gap_bwd(float *dx, const float *dy, size_t rows, int hw, float scale, cudaStream_t s);

/* ---- softmax cross-entropy (loss.h: sc_xent with hw 1 and pad_label 1,
 * sc_pixel_xent with pad_label 0) ----
 * logits[(i*classes + k)*hw + p], labels[i*hw + p]; dlogits (may be NULL)
 * as logits; stats[0] = sum of -log p(label) (in double), stats[1] = pixels
 * whose first argmax is the label.  A label outside [0, classes) counts
 * neither and its gradient is scale*softmax, except, with pad_label, a
 * label of -1 (a padding sample), whose gradient is 0 and which is not
 * reported.  The number of other out-of-range labels goes to the device
 * int *bad (at most INT_MAX), for the host to report (sc_xent_compute_cuda).
 * scratch: SC_CUDA_XENT_SCRATCH bytes of device memory. */
#define SC_CUDA_XENT_SCRATCH 32
cudaError_t sc_cuda_xent(int n, int classes, int hw, float scale, int pad_label, int *bad, const float *logits,
                         const int32_t *labels, float *dlogits, float *stats, void *scratch, cudaStream_t s);

/* ---- batch normalization (bn.h; stats/dstats are double, 2c) ---- */
cudaError_t sc_cuda_bn_stats(const float *x, double *stats, int n, int c, int hw, cudaStream_t s);
/* saved = [mean | invstd] from stats/count, then y */
cudaError_t sc_cuda_bn_fwd(const float *x, const double *stats, const float *params, float *y, float *saved, int n,
                           int c, int hw, double count, float eps, int relu, cudaStream_t s);
cudaError_t sc_cuda_bn_fwd_eval(const float *x, const float *running, const float *params, float *y, int n, int c,
                                int hw, float eps, int relu, cudaStream_t s);
cudaError_t sc_cuda_bn_running(const double *stats, float *running, int c, double count, float momentum,
                               const float *gate, cudaStream_t s);
cudaError_t sc_cuda_bn_bwd_stats(const float *x, const float *dy, const float *saved, double *dstats, int n, int c,
                                 int hw, cudaStream_t s);
cudaError_t sc_cuda_bn_param_grad(const double *dstats, float *dparams, int c, cudaStream_t s);
cudaError_t sc_cuda_bn_bwd_data(const float *x, const float *dy, const float *params, const float *saved,
                                const double *dstats, float *dx, int n, int c, int hw, double count, cudaStream_t s);

/* ---- pooling (sc_pool_compute), with oneDNN's max-pooling workspace ----
 * The workspace holds, per output (NCHW, as y), the index kh*KW + kw of
 * the first maximum in its window, as oneDNN's forward writes it: one
 * uint8 when KH*KW < 256, else int32.  So a forward on a CPU worker and a
 * backward on a CUDA worker (or the reverse) agree.  Padding is pl (top,
 * left) and whatever makes oh, ow (bottom, right), as sc_pad_r. */
struct sc_cuda_pool {
    int n, c, h, w, kh, kw, sh, sw, ph, pw, oh, ow;
    int max, include_pad;
};
cudaError_t sc_cuda_pool_fwd(const struct sc_cuda_pool *p, const float *x, float *y, void *ws, cudaStream_t s);
/* dx from dy (and ws for max pooling); every dx element is written. */
cudaError_t sc_cuda_pool_bwd(const struct sc_cuda_pool *p, const float *dy, const void *ws, float *dx, cudaStream_t s);

#ifdef __cplusplus
}
#endif

#endif
