/* CUDA side of the codelets: host-callable launchers of the kernels in
 * the .cu files beside it, and (for the C files built with SC_USE_CUDA) the
 * per-worker cuDNN/cuBLAS handles and device buffers of cuda_worker.c.
 *
 * The launchers only enqueue work on the given stream (the calling CUDA
 * worker's own, the codelets being asynchronous) and
 * return cudaGetLastError().  Each does what the CPU kernel of the same
 * name in codelets/cl_*.c does, on the same buffer layouts.  The .cu files
 * need nothing but this header and the CUDA runtime (no StarPU, no cuDNN),
 * so that they compile with nvcc alone (make cuda-compile-check). */
#ifndef SC_CUDA_H
#define SC_CUDA_H

#include <cuda_runtime_api.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- vectors (cl_accumulate.c, cl_sgd.c, cl_count_nonfinite.c) ---- */
/* dst[i] += src[i] */
cudaError_t sc_cuda_accumulate(float *dst, const float *src, size_t n, cudaStream_t s);
cudaError_t sc_cuda_accumulate_f64(double *dst, const double *src, size_t n, cudaStream_t s);
/* torch.optim.SGD as cl_sgd.c's sgd1: v = momentum*v + (g + wd*w);
 * w -= lr*v.  skip (device, may be NULL): when *skip != 0, nothing changes.
 * gate (device, may be NULL): when *gate != 0, nothing changes. */
cudaError_t sc_cuda_sgd(float *w, float *v, const float *g, size_t n, float lr, float momentum,
                        float weight_decay, const int *skip, const float *gate, cudaStream_t s);
/* *flag = 1 when some g[i] is NaN or Inf (flag untouched otherwise: set it
 * to 0 first); flag may be device or mapped host memory. */
cudaError_t sc_cuda_find_nonfinite(int *flag, const float *g, size_t n, cudaStream_t s);
/* count[0] += 1 when some g[i] is NaN or Inf (one float), as
 * cl_count_nonfinite.c.  scratch: one device int. */
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
cudaError_t sc_cuda_sum_ordered(int count, const void *const *src, void *dst, size_t n, int f64,
                                cudaStream_t s);

/* A 4-D box copy: for s < ns, ch < nc, r < nr: the nx floats at
 * src + s*ss + ch*sc + r*sr go to dst + s*ds + ch*dc + r*dr (strides in
 * floats).  src NULL writes zeros.  The region kernels' gather/scatter. */
cudaError_t sc_cuda_copy_box(float *dst, size_t ds, size_t dc, size_t dr, const float *src, size_t ss,
                             size_t sc, size_t sr, int ns, int nc, int nr, int nx, cudaStream_t s);

/* ---- global average pooling (cl_gap.c) ---- */
/* y[r] = scale * sum of x[r*hw .. r*hw + hw) (in double), r < rows */
cudaError_t sc_cuda_gap_fwd(float *y, const float *x, size_t rows, int hw, float scale, cudaStream_t s);
/* dx[r*hw + p] = scale*dy[r] */
cudaError_t sc_cuda_gap_bwd(float *dx, const float *dy, size_t rows, int hw, float scale, cudaStream_t s);

/* ---- softmax cross-entropy (cl_xent.c with hw 1 and pad_label 1,
 * cl_pixel_xent.c's pixel_xent with pad_label 0) ----
 * logits[(i*classes + k)*hw + p], labels[i*hw + p]; dlogits (may be NULL)
 * as logits; stats[0] = sum of -log p(label) (in double), stats[1] = pixels
 * whose first argmax is the label.  A label outside [0, classes) counts
 * neither and its gradient is scale*softmax, except, with pad_label, a
 * label of -1 (a padding sample), whose gradient is 0 and which is not
 * reported.  The number of other out-of-range labels goes to the device
 * int *bad (at most INT_MAX), for the host to report (sc_cuda_run_xent).
 * scratch: SC_CUDA_XENT_SCRATCH bytes of device memory. */
#define SC_CUDA_XENT_SCRATCH 32
cudaError_t sc_cuda_xent(int n, int classes, int hw, float scale, int pad_label, int *bad, const float *logits,
                         const int32_t *labels, float *dlogits, float *stats, void *scratch, cudaStream_t s);

/* ---- batch normalization (cl_bn.c; stats/dstats are double, 2c) ---- */
cudaError_t sc_cuda_bn_stats(const float *x, double *stats, int n, int c, int hw, cudaStream_t s);
/* saved = [mean | invstd] from stats/count, then y */
cudaError_t sc_cuda_bn_fwd(const float *x, const double *stats, const float *params, float *y, float *saved,
                           int n, int c, int hw, double count, float eps, int relu, cudaStream_t s);
cudaError_t sc_cuda_bn_fwd_eval(const float *x, const float *running, const float *params, float *y, int n,
                                int c, int hw, float eps, int relu, cudaStream_t s);
cudaError_t sc_cuda_bn_running(const double *stats, float *running, int c, double count, float momentum,
                               const float *gate, cudaStream_t s);
cudaError_t sc_cuda_bn_bwd_stats(const float *x, const float *dy, const float *saved, double *dstats, int n,
                                 int c, int hw, cudaStream_t s);
cudaError_t sc_cuda_bn_param_grad(const double *dstats, float *dparams, int c, cudaStream_t s);
cudaError_t sc_cuda_bn_bwd_data(const float *x, const float *dy, const float *params, const float *saved,
                                const double *dstats, float *dx, int n, int c, int hw, double count,
                                cudaStream_t s);

/* ---- pooling (cl_pool.c), with oneDNN's max-pooling workspace ----
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
cudaError_t sc_cuda_pool_bwd(const struct sc_cuda_pool *p, const float *dy, const void *ws, float *dx,
                             cudaStream_t s);

#ifdef __cplusplus
}
#endif

/* ---- for the C codelets built with SC_USE_CUDA (cuda_worker.c) ---- */
#if defined(SC_USE_CUDA) && !defined(__CUDACC__)
#include <cublas_v2.h>
#include <cudnn.h>

/* Start-up and shut-down of the per-worker handles (from
 * sc_codelets_init / sc_codelets_shutdown); no-ops without CUDA workers.
 * sc_cuda_init: 0, or SC_ERR_RUNTIME naming a CUDA worker whose cuDNN or
 * cuBLAS handle could not be made (its library's error is on stderr). */
int sc_cuda_init(void);
void sc_cuda_shutdown(void);
/* The size of the scratch handle (sc_workspace_handle): the cuDNN
 * workspace limit where this rank has CUDA workers (SC_CUDNN_WORKSPACE_MB,
 * default 64), else 4 bytes.  0, or SC_ERR_ARG for a bad value. */
int sc_cuda_workspace_bytes(size_t *bytes);
/* The limit alone (SC_CUDNN_WORKSPACE_MB, default 64), in bytes, whether
 * or not this rank has CUDA workers. */
int sc_cuda_workspace_limit(size_t *bytes);
/* Device buffer i of the calling CUDA worker, at least bytes long; grown
 * in stream order (cudaFreeAsync/cudaMallocAsync on the worker's stream),
 * so work already queued keeps the old one.  NULL on failure. */
enum { SC_CUDA_BUF_REGION0, SC_CUDA_BUF_REGION1, SC_CUDA_BUF_REGION2,
       SC_CUDA_BUF_CONV_PAD, SC_CUDA_BUF_CONV_PAD2, SC_CUDA_BUF_SMALL, SC_CUDA_NBUFS };
void *sc_cuda_worker_buf(int i, size_t bytes);

/* A CUDA worker's context for the kernels (kernel_conv_cudnn.c), which the
 * codelet finds (sc_cuda_ctx_self) and passes: its stream, its handles
 * bound to it, its kernel state (the cuDNN algorithms chosen per shape)
 * and its device buffers (sc_cuda_buf, as sc_cuda_worker_buf).  All NULL
 * outside a CUDA worker. */
struct sc_cuda_worker;
struct sc_kernel_worker;
struct sc_cuda_ctx {
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    struct sc_kernel_worker *kw;
    struct sc_cuda_worker *cw;
};
struct sc_cuda_ctx sc_cuda_ctx_self(void);
void *sc_cuda_buf(struct sc_cuda_worker *w, int i, size_t bytes);
/* A context of the calling thread's own, outside StarPU's workers, on the
 * current device (starconv-plan calibrate --device cuda times the kernels
 * with it): a stream, handles bound to it, a kernel state and buffers.  0,
 * or SC_ERR_RUNTIME (the CUDA library's error on stderr); close releases
 * what open made, also after a failed open. */
int sc_cuda_ctx_open(struct sc_cuda_ctx *c);
void sc_cuda_ctx_close(struct sc_cuda_ctx *c);
/* One line on stderr for a failed CUDA/cuDNN/cuBLAS call in a kernel
 * (a task cannot return an error); 0 when ok, -1 otherwise. */
int sc_cuda_check(cudaError_t e, const char *op);
int sc_cudnn_check(cudnnStatus_t e, const char *op);
int sc_cublas_check(cublasStatus_t e, const char *op);

/* Device-written values that host functions on the calling worker's
 * stream read, in pinned memory so that the copies are asynchronous.  One
 * per worker is enough: all of a worker's work is on its one stream, where
 * a host function ends before the next copy starts.  NULL outside a CUDA
 * worker. */
struct sc_cuda_verdict {
    int flag;
    float gate;
    int bad_labels;
};
struct sc_cuda_verdict *sc_cuda_worker_verdict(void);
/* A device int of the calling worker (beside the cross-entropy's
 * accumulators in its SC_CUDA_BUF_SMALL buffer); NULL on failure. */
int *sc_cuda_small_int(void);

/* sc_cuda_xent on the calling worker's stream and buffers; out-of-range
 * labels are reported on stderr as the CPU kernels do, prefixed with op,
 * by a host function on the stream. */
void sc_cuda_run_xent(const char *op, int n, int classes, int hw, float scale, int pad_label, const float *logits,
                      const int32_t *labels, float *dlogits, float *stats);

/* The cuDNN convolution (kernel_conv_cudnn.c) and the pooling (cl_pool.c)
 * on device pointers, as sc_conv_compute/sc_pool_compute (kernels.h). */
struct sc_conv_args;
struct sc_pool_args;
struct sc_workspace;
/* ws: the task's replicate of the scratch handle, cuDNN's workspace. */
void sc_conv_compute_cuda(const struct sc_cuda_ctx *c, int which, const struct sc_conv_args *a, const float *in0,
                          const float *in1, float *out, float *bias, const struct sc_workspace *ws);
void sc_pool_compute_cuda(const struct sc_cuda_ctx *c, int bwd, const struct sc_pool_args *a, const float *in,
                          float *out, void *ws);
/* The fully connected layer through cuBLAS (kernel_fc_cublas.c), as
 * sc_fc_compute. */
struct sc_fc_args;
void sc_fc_compute_cuda(const struct sc_cuda_ctx *c, int which, const struct sc_fc_args *a, const float *in0,
                        const float *in1, float *out);
#endif

#endif
