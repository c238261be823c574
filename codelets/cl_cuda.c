/* The CUDA workers' own state: a cuDNN and a cuBLAS handle bound to the
 * worker's StarPU stream, device buffers grown on demand and pinned memory
 * for the verdicts the host needs (the convolution algorithms chosen per
 * shape live in cl_common.c's per-worker cache).  Also the CUDA functions
 * of the vector codelets of cl_vector.c and the cuDNN workspace's size.
 * Built only with SC_USE_CUDA. */
#include "cl_common.h"
#include "cuda/sc_cuda.h"

#include <starpu_cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Device-written values read by host callbacks; pinned so that the copies
 * are asynchronous.  One per worker is enough: all of a worker's work is on
 * its one stream, where a callback ends before the next copy starts. */
struct verdict {
    int flag;
    float gate;
    int bad_labels;
};

struct cuda_worker {
    int ready;
    cudaStream_t stream;
    cudnnHandle_t cudnn;
    cublasHandle_t cublas;
    void *buf[SC_CUDA_NBUFS];
    size_t len[SC_CUDA_NBUFS];
    struct verdict *pinned;
};

static struct cuda_worker workers[STARPU_NMAXWORKERS];

static struct cuda_worker *me(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS || starpu_worker_get_type(id) != STARPU_CUDA_WORKER ||
        !workers[id].ready)
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

static void init_worker(void *arg)
{
    (void)arg;
    int id = starpu_worker_get_id();
    struct cuda_worker *w = &workers[id];
    memset(w, 0, sizeof *w);
    w->stream = starpu_cuda_get_local_stream();
    if (sc_cudnn_check(cudnnCreate(&w->cudnn), "cuDNN start-up") ||
        sc_cudnn_check(cudnnSetStream(w->cudnn, w->stream), "cuDNN start-up") ||
        sc_cublas_check(cublasCreate(&w->cublas), "cuBLAS start-up") ||
        sc_cublas_check(cublasSetStream(w->cublas, w->stream), "cuBLAS start-up") ||
        sc_cuda_check(cudaMallocHost((void **)&w->pinned, sizeof *w->pinned), "CUDA start-up"))
        return; /* not ready: its kernels report the failure */
    w->ready = 1;
}

static void release_worker(struct cuda_worker *w)
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
#define SC_CUDNN_WORKSPACE_MB_MAX 4095

int sc_cuda_workspace_bytes(size_t *bytes)
{
    *bytes = 4;
    long mb = SC_CUDNN_WORKSPACE_MB_DEFAULT;
    const char *env = getenv("SC_CUDNN_WORKSPACE_MB");
    if (env) {
        char *end;
        mb = strtol(env, &end, 10);
        if (end == env || *end || mb < 0 || mb > SC_CUDNN_WORKSPACE_MB_MAX)
            return sc_error(SC_ERR_ARG, "SC_CUDNN_WORKSPACE_MB: '%.32s' is not a size in MiB from 0 to %d", env,
                            SC_CUDNN_WORKSPACE_MB_MAX);
    }
    /* Checked even without a CUDA worker: a bad value is refused alike
     * everywhere. */
    if (mb && starpu_cuda_worker_get_count() > 0)
        *bytes = (size_t)mb << 20;
    return 0;
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
            return sc_error(SC_ERR_RUNTIME, "CUDA worker %s: its cuDNN/cuBLAS handles could not be made (see the "
                            "error above); run without it (STARPU_NCUDA=0) or check the GPU", name);
        }
    return 0;
}

void sc_cuda_shutdown(void)
{
    if (starpu_is_initialized() && starpu_cuda_worker_get_count() > 0)
        starpu_execute_on_each_worker(shutdown_worker, NULL, STARPU_CUDA);
}

cudnnHandle_t sc_cudnn_handle(void)
{
    struct cuda_worker *w = me();
    return w ? w->cudnn : NULL;
}

cublasHandle_t sc_cublas_handle(void)
{
    struct cuda_worker *w = me();
    return w ? w->cublas : NULL;
}

void *sc_cuda_worker_buf(int i, size_t bytes)
{
    struct cuda_worker *w = me();
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

/* ---- the vector codelets of cl_vector.c ---- */

void sc_cuda_cl_accumulate_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_cuda_check(sc_cuda_accumulate((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                     (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                     STARPU_VECTOR_GET_NX(buffers[0]), starpu_cuda_get_local_stream()),
                  "accumulate");
}

void sc_cuda_cl_zero_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_cuda_check(cudaMemsetAsync((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
                                  STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]),
                                  starpu_cuda_get_local_stream()),
                  "zero");
}

/* The device int beside the cross-entropy's accumulators. */
static int *small_int(void)
{
    char *p = sc_cuda_worker_buf(SC_CUDA_BUF_SMALL, SC_CUDA_XENT_SCRATCH + sizeof(int));
    return p ? (int *)(p + SC_CUDA_XENT_SCRATCH) : NULL;
}

void sc_cuda_cl_count_nonfinite_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int *flag = small_int();
    if (!flag) {
        sc_kernel_failed("count_nonfinite");
        return;
    }
    sc_cuda_check(sc_cuda_count_nonfinite((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                          (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                          STARPU_VECTOR_GET_NX(buffers[1]), flag, starpu_cuda_get_local_stream()),
                  "count_nonfinite");
}

struct labels_report {
    const char *op;
    int classes;
    const struct verdict *v;
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
    struct cuda_worker *w = me();
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

struct sgd_record {
    struct sc_nonfinite *watch;
    int64_t iteration;
    int flagged, gated;
    const struct verdict *v;
};

/* Host function on the worker's stream, after the verdict's copies. */
static void CUDART_CB sgd_record_cb(void *arg)
{
    struct sgd_record *r = arg;
    if ((r->flagged && r->v->flag) || (r->gated && r->v->gate != 0.0f))
        sc_nonfinite_record(r->watch, r->iteration);
    free(r);
}

/* As cl_vector.c's cl_sgd_cpu_func: the gate, then (with a watch) the
 * finiteness check decide on the device whether the update happens; a
 * host function on the stream records a refused update in the watch. */
void sc_cuda_cl_sgd_func(void *buffers[], void *cl_arg)
{
    struct sc_sgd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    cudaStream_t s = starpu_cuda_get_local_stream();
    struct cuda_worker *w = me();
    const float *gate = a.gate ? (const float *)STARPU_VECTOR_GET_PTR(buffers[3]) : NULL;
    const float *g = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
    int *flag = NULL;
    /* Frozen: no update, but a closed gate is still recorded (the CPU
     * function looks at the gate first). */
    int frozen = a.watch && a.watch->freeze && __atomic_load_n(&a.watch->first_iteration, __ATOMIC_SEQ_CST);
    if (a.watch) {
        if (!w || !(flag = small_int())) {
            sc_kernel_failed("sgd");
            return;
        }
        if (frozen && !gate)
            return;
        if (!frozen && (sc_cuda_check(cudaMemsetAsync(flag, 0, sizeof *flag, s), "sgd") ||
                        sc_cuda_check(sc_cuda_find_nonfinite(flag, g, n, s), "sgd")))
            return;
    }
    if (!frozen && sc_cuda_check(sc_cuda_sgd((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                             (float *)STARPU_VECTOR_GET_PTR(buffers[1]), g, n, a.lr, a.momentum,
                                             a.weight_decay, flag, gate, s),
                                 "sgd"))
        return;
    if (!a.watch)
        return;
    struct sgd_record *r = malloc(sizeof *r);
    if (!r) {
        sc_kernel_failed("sgd");
        return;
    }
    *r = (struct sgd_record){a.watch, a.iteration, !frozen, gate != NULL, w->pinned};
    if ((!frozen &&
         sc_cuda_check(cudaMemcpyAsync(&w->pinned->flag, flag, sizeof(int), cudaMemcpyDeviceToHost, s), "sgd")) ||
        (gate && sc_cuda_check(cudaMemcpyAsync(&w->pinned->gate, gate, sizeof(float), cudaMemcpyDeviceToHost, s),
                               "sgd")) ||
        sc_cuda_check(cudaLaunchHostFunc(s, sgd_record_cb, r), "sgd"))
        free(r);
}
