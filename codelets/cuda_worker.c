/* The CUDA workers' own state: a cuDNN and a cuBLAS handle bound to the
 * worker's StarPU stream, device buffers grown on demand and pinned memory
 * for the verdicts the host needs (the convolution algorithms chosen per
 * shape live in cl_common.c's per-worker cache), the cuDNN workspace's
 * size, and the cross-entropy runner the two softmax losses share.  No
 * codelets here: each op's CUDA function is in its own cl_<op>.c.  Built
 * only with SC_USE_CUDA. */
#include "cl_common.h"
#include "kernels/cuda/sc_cuda.h"

#include <starpu_cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sc_cuda_worker {
    int ready;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *buf[SC_CUDA_NBUFS];
    size_t len[SC_CUDA_NBUFS];
    struct sc_cuda_verdict *pinned;
};

static struct sc_cuda_worker workers[STARPU_NMAXWORKERS];

static struct sc_cuda_worker *me(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS || starpu_worker_get_type(id) != STARPU_CUDA_WORKER || !workers[id].ready)
        return NULL;
    return &workers[id];
}

int sc_cuda_check(cudaError_t e, const char *op)
{
    if (e == cudaSuccess)
        return 0;
    fprintf(stderr, "starconv: %s: CUDA error: %s\n", op, cudaGetErrorString(e));
    return -1;
}

int sc_cudnn_check(cudnnStatus_t e, const char *op)
{
    if (e == CUDNN_STATUS_SUCCESS)
        return 0;
    fprintf(stderr, "starconv: %s: cuDNN error: %s\n", op, cudnnGetErrorString(e));
    return -1;
}

int sc_cublas_check(cublasStatus_t e, const char *op)
{
    if (e == CUBLAS_STATUS_SUCCESS)
        return 0;
    fprintf(stderr, "starconv: %s: cuBLAS error %d\n", op, (int)e);
    return -1;
}

/* w's cuDNN and cuBLAS handles, bound to w->stream: 0, or -1 with the
 * library's error on stderr. */
static int bind_handles(struct sc_cuda_worker *w)
{
    if (sc_cudnn_check(cudnnCreate(&w->cudnn), "cuDNN start-up") ||
        sc_cudnn_check(cudnnSetStream(w->cudnn, w->stream), "cuDNN start-up") ||
        sc_cublas_check(cublasCreate(&w->cublas), "cuBLAS start-up") ||
        sc_cublas_check(cublasSetStream(w->cublas, w->stream), "cuBLAS start-up"))
        return -1;
    return 0;
}

static void init_worker(void *arg)
{
    (void)arg;
    int id = starpu_worker_get_id();
    struct sc_cuda_worker *w = &workers[id];
    memset(w, 0, sizeof *w);
    w->stream = starpu_cuda_get_local_stream();
    if (bind_handles(w) || sc_cuda_check(cudaMallocHost((void **)&w->pinned, sizeof *w->pinned), "CUDA start-up"))
        return; /* not ready: its kernels report the failure */
    w->ready = 1;
}

static void release_worker(struct sc_cuda_worker *w)
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

static void shutdown_worker(void *arg)
{
    (void)arg;
    release_worker(&workers[starpu_worker_get_id()]);
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

int sc_cuda_workspace_bytes(size_t *bytes)
{
    /* Checked even without a CUDA worker: a bad value is refused alike
     * everywhere. */
    int err = sc_cuda_workspace_limit(bytes);
    if (err || !*bytes || starpu_cuda_worker_get_count() <= 0)
        *bytes = 4;
    return err;
}

int sc_cuda_init(void)
{
    int ids[STARPU_NMAXWORKERS];
    int n = starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, ids, STARPU_NMAXWORKERS);
    if (n <= 0)
        return 0;
    starpu_execute_on_each_worker(init_worker, NULL, STARPU_CUDA);
    /* A worker left without handles would take tasks and leave their
     * outputs unwritten: stop here instead. */
    for (int i = 0; i < n; i++)
        if (!workers[ids[i]].ready) {
            char name[64];
            starpu_worker_get_name(ids[i], name, sizeof name);
            return sc_error(SC_ERR_RUNTIME,
                            "CUDA worker %s: its cuDNN/cuBLAS handles could not be made (see the "
                            "error above); run without it (STARPU_NCUDA=0) or check the GPU",
                            name);
        }
    return 0;
}

void sc_cuda_shutdown(void)
{
    if (starpu_is_initialized() && starpu_cuda_worker_get_count() > 0)
        starpu_execute_on_each_worker(shutdown_worker, NULL, STARPU_CUDA);
}

struct sc_cuda_ctx sc_cuda_ctx_self(void)
{
    struct sc_cuda_worker *w = me();
    struct sc_cuda_ctx c = {w ? w->stream : NULL, w ? w->cudnn : NULL, w ? w->cublas : NULL, sc_kernel_worker_self(),
                            w};
    return c;
}

void *sc_cuda_worker_buf(int i, size_t bytes)
{
    return sc_cuda_buf(me(), i, bytes);
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
        release_worker(w); /* synchronizes the stream first */
        if (s)
            cudaStreamDestroy(s);
        free(w);
    }
    memset(c, 0, sizeof *c);
}

/* The device int beside the cross-entropy's accumulators. */
int *sc_cuda_small_int(void)
{
    char *p = sc_cuda_worker_buf(SC_CUDA_BUF_SMALL, SC_CUDA_XENT_SCRATCH + sizeof(int));
    return p ? (int *)(p + SC_CUDA_XENT_SCRATCH) : NULL;
}

struct sc_cuda_verdict *sc_cuda_worker_verdict(void)
{
    struct sc_cuda_worker *w = me();
    return w ? w->pinned : NULL;
}

struct labels_report {
    const char *op;
    int classes;
    const struct sc_cuda_verdict *v;
};

static void CUDART_CB labels_report_cb(void *arg)
{
    struct labels_report *r = arg;
    if (r->v->bad_labels)
        fprintf(stderr, "starconv: %s: %d labels outside [0, %d)\n", r->op, r->v->bad_labels, r->classes);
    free(r);
}

void sc_cuda_run_xent(const char *op, int n, int classes, int hw, float scale, int pad_label, const float *logits,
                      const int32_t *labels, float *dlogits, float *stats)
{
    cudaStream_t s = starpu_cuda_get_local_stream();
    struct sc_cuda_worker *w = me();
    char *scratch = sc_cuda_worker_buf(SC_CUDA_BUF_SMALL, SC_CUDA_XENT_SCRATCH + sizeof(int));
    struct labels_report *r = malloc(sizeof *r);
    if (!w || !scratch || !r) {
        free(r);
        sc_kernel_failed(op);
        return;
    }
    int *bad = (int *)(scratch + SC_CUDA_XENT_SCRATCH);
    *r = (struct labels_report){op, classes, w->pinned};
    if (sc_cuda_check(sc_cuda_xent(n, classes, hw, scale, pad_label, bad, logits, labels, dlogits, stats, scratch, s),
                      op) ||
        sc_cuda_check(cudaMemcpyAsync(&w->pinned->bad_labels, bad, sizeof(int), cudaMemcpyDeviceToHost, s), op) ||
        sc_cuda_check(cudaLaunchHostFunc(s, labels_report_cb, r), op))
        free(r);
}
