/* A CUDA worker's own state, the kernels' CUDA context, and the checks of
 * the CUDA libraries' results (cuda_ctx.h).  Built only with
 * SC_USE_CUDA. */
#include "cuda_ctx.h"
#include "base/error.h"

#include <stdlib.h>
#include <string.h>

int sc_cuda_check(cudaError_t e, const char *op)
{
    if (e == cudaSuccess)
        return 0;
    sc_fail_record(op, "CUDA: %s", cudaGetErrorString(e));
    return -1;
}

int sc_cudnn_check(cudnnStatus_t e, const char *op)
{
    if (e == CUDNN_STATUS_SUCCESS)
        return 0;
    sc_fail_record(op, "cuDNN: %s", cudnnGetErrorString(e));
    return -1;
}

int sc_cublas_check(cublasStatus_t e, const char *op)
{
    if (e == CUBLAS_STATUS_SUCCESS)
        return 0;
    sc_fail_record(op, "cuBLAS: error %d", (int)e);
    return -1;
}

/* w's cuDNN and cuBLAS handles, bound to w->stream: 0, or -1 with the
 * library's error recorded (sc_fail_record: on stderr outside a worker). */
static int bind_handles(struct sc_cuda_worker *w)
{
    if (sc_cudnn_check(cudnnCreate(&w->cudnn), "cuDNN start-up") ||
        sc_cudnn_check(cudnnSetStream(w->cudnn, w->stream), "cuDNN start-up") ||
        sc_cublas_check(cublasCreate(&w->cublas), "cuBLAS start-up") ||
        sc_cublas_check(cublasSetStream(w->cublas, w->stream), "cuBLAS start-up"))
        return -1;
    return 0;
}

int sc_cuda_worker_init(struct sc_cuda_worker *w, cudaStream_t stream)
{
    memset(w, 0, sizeof *w);
    w->stream = stream;
    if (bind_handles(w) || sc_cuda_check(cudaMallocHost((void **)&w->pinned, sizeof *w->pinned), "CUDA start-up"))
        return -1; /* not ready: its kernels report the failure */
    w->ready = 1;
    return 0;
}

void sc_cuda_worker_release(struct sc_cuda_worker *w)
{
    if (w->stream)
        cudaStreamSynchronize(w->stream);
    for (int i = 0; i < SC_CUDA_NBUFS; i++)
        if (w->buf[i])
            cudaFree(w->buf[i]);
    if (w->pinned)
        cudaFreeHost(w->pinned);
    if (w->cublas)
        cublasDestroy(w->cublas);
    if (w->cudnn)
        cudnnDestroy(w->cudnn);
    memset(w, 0, sizeof *w);
}

/* cuDNN's fastest algorithms may want large workspaces; the limit bounds
 * each CUDA worker's replicate of the scratch handle (and, as StarPU gives
 * every worker that runs a convolution one, each CPU worker's too, in host
 * memory).  Algorithms needing more are passed over. */
#define SC_CUDNN_WORKSPACE_MB_DEFAULT 64
#define SC_CUDNN_WORKSPACE_MB_MAX     4095

int sc_cuda_workspace_limit(size_t *bytes)
{
    long mb = SC_CUDNN_WORKSPACE_MB_DEFAULT;
    const char *env = getenv("SC_CUDNN_WORKSPACE_MB");
    if (env) {
        char *end;
        mb = strtol(env, &end, 10);
        if (end == env || *end || mb < 0 || mb > SC_CUDNN_WORKSPACE_MB_MAX)
            return sc_error(SC_ERR_ARG, "SC_CUDNN_WORKSPACE_MB: '%.32s' is not a size in MiB from 0 to %d", env,
                            SC_CUDNN_WORKSPACE_MB_MAX);
    }
    *bytes = (size_t)mb << 20;
    return 0;
}

void *sc_cuda_buf(struct sc_cuda_worker *w, int i, size_t bytes)
{
    if (!w || i < 0 || i >= SC_CUDA_NBUFS)
        return NULL;
    if (bytes == 0)
        bytes = 1;
    if (w->len[i] >= bytes)
        return w->buf[i];
    size_t len = w->len[i] * 2 > bytes ? w->len[i] * 2 : bytes;
    len = (len + 255) & ~(size_t)255;
    if (w->buf[i] && sc_cuda_check(cudaFreeAsync(w->buf[i], w->stream), "device buffer"))
        return NULL;
    w->buf[i] = NULL;
    w->len[i] = 0;
    void *p;
    if (sc_cuda_check(cudaMallocAsync(&p, len, w->stream), "device buffer"))
        return NULL;
    w->buf[i] = p;
    w->len[i] = len;
    return p;
}

int sc_cuda_ctx_open(struct sc_cuda_ctx *c)
{
    memset(c, 0, sizeof *c);
    struct sc_cuda_worker *w = calloc(1, sizeof *w);
    if (!w)
        return sc_error(SC_ERR_NOMEM, "out of memory for a CUDA context");
    c->cw = w;
    if (sc_cuda_check(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), "CUDA start-up") ||
        bind_handles(w) || !(c->kw = sc_kernel_worker_create()))
        return sc_error(SC_ERR_RUNTIME, "no CUDA context on this device (see the error above)");
    c->stream = w->stream;
    c->cudnn = w->cudnn;
    c->cublas = w->cublas;
    return 0;
}

void sc_cuda_ctx_close(struct sc_cuda_ctx *c)
{
    struct sc_cuda_worker *w = c->cw;
    if (c->kw)
        sc_kernel_worker_destroy(c->kw);
    if (w) {
        cudaStream_t s = w->stream;
        sc_cuda_worker_release(w); /* synchronizes the stream first */
        if (s)
            cudaStreamDestroy(s);
        free(w);
    }
    memset(c, 0, sizeof *c);
}
