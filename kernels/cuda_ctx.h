/* The C side of the CUDA kernels, built with SC_USE_CUDA only: a CUDA
 * worker's own state (a cuDNN and a cuBLAS handle bound to its stream,
 * device buffers grown on demand, pinned memory for the values the host
 * reads), the context a kernel gets from its codelet, the checks of the
 * libraries' results, and the kernels made of cuDNN or cuBLAS calls or of
 * several launches: convolution (conv_cudnn.c), fully connected
 * (fc_cublas.c), pooling (pool_cuda.c), the cross-entropy (loss_cuda.c)
 * and the region kernels (region.c).  No StarPU here: the codelets keep
 * one state per CUDA worker, on the worker's StarPU stream
 * (codelets/cuda_worker.c), and pass it. */
#ifndef SC_KERNELS_CUDA_CTX_H
#define SC_KERNELS_CUDA_CTX_H

#include <cublas_v2.h>
#include <cudnn.h>
#include <stddef.h>
#include <stdint.h>

#include "kernels.h"
#include "cuda/sc_cuda.h"

/* A failed CUDA/cuDNN/cuBLAS call in a kernel (a task cannot return an
 * error), recorded with the library's message (sc_fail_record, fail.h);
 * 0 when ok, -1 otherwise.  Every call records, whether its caller looks
 * at the result or goes on (an asynchronous launch's outputs are then not
 * valid either). */
int sc_cuda_check(cudaError_t e, const char *op);
int sc_cudnn_check(cudnnStatus_t e, const char *op);
int sc_cublas_check(cublasStatus_t e, const char *op);

/* Device-written values that host functions on a worker's stream read, in
 * pinned memory so that the copies are asynchronous.  One per worker is
 * enough: all of a worker's work is on its one stream, where a host
 * function ends before the next copy starts. */
struct sc_cuda_verdict {
    int flag;
    float gate;
    int bad_labels;
};

/* The device buffers of a worker (sc_cuda_buf). */
enum {
    SC_CUDA_BUF_REGION0,
    SC_CUDA_BUF_REGION1,
    SC_CUDA_BUF_REGION2,
    SC_CUDA_BUF_CONV_PAD,
    SC_CUDA_BUF_CONV_PAD2,
    SC_CUDA_BUF_SMALL,
    SC_CUDA_NBUFS
};

/* A CUDA worker's own state, used by its thread only.  ready: made whole
 * by sc_cuda_worker_init. */
struct sc_cuda_worker {
    int ready;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *buf[SC_CUDA_NBUFS];
    size_t len[SC_CUDA_NBUFS];
    struct sc_cuda_verdict *pinned;
};
/* w (overwritten) on stream, which stays the caller's: its handles bound
 * to the stream and its pinned verdict.  0 (w->ready), or -1 with the
 * library's error recorded (sc_fail_record) and w holding what was made,
 * for sc_cuda_worker_release. */
int sc_cuda_worker_init(struct sc_cuda_worker *w, cudaStream_t stream);
/* Wait for w's stream, free what w holds but the stream, zero w. */
void sc_cuda_worker_release(struct sc_cuda_worker *w);
/* Device buffer i of w, at least bytes long; grown in stream order
 * (cudaFreeAsync/cudaMallocAsync on w's stream), so work already queued
 * keeps the old one.  NULL without w or on failure. */
void *sc_cuda_buf(struct sc_cuda_worker *w, int i, size_t bytes);

/* The cuDNN workspace limit, in bytes: SC_CUDNN_WORKSPACE_MB, default 64.
 * 0, or SC_ERR_ARG for a bad value. */
int sc_cuda_workspace_limit(size_t *bytes);

/* What a CUDA kernel gets from its caller: the stream, the handles bound
 * to it, the kernel state (kernels.h: the cuDNN algorithms chosen per
 * shape) and the CUDA state (device buffers, verdict).  All NULL outside
 * a CUDA worker. */
struct sc_cuda_ctx {
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    struct sc_kernel_worker *kw;
    struct sc_cuda_worker *cw;
};
/* A context of the calling thread's own, outside StarPU's workers, on the
 * current device (starconv-plan calibrate --device cuda times the kernels
 * with it): a stream, handles bound to it, a kernel state and buffers (no
 * verdict).  0, or SC_ERR_RUNTIME (the CUDA library's error on stderr);
 * close releases what open made, also after a failed open. */
int sc_cuda_ctx_open(struct sc_cuda_ctx *c);
void sc_cuda_ctx_close(struct sc_cuda_ctx *c);

/* ---- the kernels, on device pointers, asynchronous on c->stream ---- */

/* As sc_conv_compute, through cuDNN; ws: cuDNN's workspace (the task's
 * replicate of the codelets' scratch handle). */
void sc_conv_compute_cuda(const struct sc_cuda_ctx *c, enum sc_conv_dir dir, const struct sc_conv_args *a,
                          const float *in0, const float *in1, float *out, float *bias, const struct sc_workspace *ws);
/* As sc_pool_compute, with oneDNN's workspace layout (cuda/sc_cuda.h). */
void sc_pool_compute_cuda(const struct sc_cuda_ctx *c, enum sc_pool_dir dir, const struct sc_pool_args *a,
                          const float *in, float *out, void *ws);
/* As sc_fc_compute, through cuBLAS. */
void sc_fc_compute_cuda(const struct sc_cuda_ctx *c, enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0,
                        const float *in1, float *out);
/* sc_cuda_xent (cuda/sc_cuda.h) with c's buffers; out-of-range labels
 * (but -1, a padding sample's) are recorded as a failure of op, as the CPU
 * kernels do, by a host function on the stream, for the worker and task
 * that launched it.  Needs a CUDA worker's context (its verdict). */
void sc_xent_compute_cuda(const struct sc_cuda_ctx *c, const char *op, int n, int classes, int hw, float scale,
                          int pad_label, const float *logits, const int32_t *labels, float *dlogits, float *stats);
/* As sc_region_compute (region.h), on c's stream and device buffers. */
struct sc_region_args;
void sc_region_compute_cuda(const struct sc_cuda_ctx *c, const struct sc_region_args *a, float *const *buf,
                            const struct sc_workspace *ws);

#endif
