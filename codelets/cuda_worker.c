/* The CUDA workers' state under StarPU (cuda_worker.h): one
 * struct sc_cuda_worker (kernels/cuda_ctx.h) per CUDA worker, made on the
 * worker's StarPU stream (the convolution algorithms chosen per shape live
 * in the per-worker kernel state of cl_common.c), and the cuDNN
 * workspace's size.  Built only with SC_USE_CUDA. */
#include "cl_common.h"
#include "cuda_worker.h"

#include <starpu_cuda.h>

static struct sc_cuda_worker workers[STARPU_NMAXWORKERS];

static struct sc_cuda_worker *me(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS || starpu_worker_get_type(id) != STARPU_CUDA_WORKER || !workers[id].ready)
        return NULL;
    return &workers[id];
}

static void init_worker(void *arg)
{
    (void)arg;
    int id = starpu_worker_get_id();
    sc_cuda_worker_init(&workers[id], starpu_cuda_get_local_stream()); /* sc_cuda_init checks it is ready */
}

static void shutdown_worker(void *arg)
{
    (void)arg;
    sc_cuda_worker_release(&workers[starpu_worker_get_id()]);
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
     * outputs unwritten: stop here instead, with the library's error (in
     * the worker's failure record). */
    for (int i = 0; i < n; i++)
        if (!workers[ids[i]].ready) {
            char name[64];
            struct sc_fail f;
            starpu_worker_get_name(ids[i], name, sizeof name);
            int known = sc_fail_first(&f);
            sc_fail_set_reported();
            return sc_error(SC_ERR_RUNTIME,
                            "CUDA worker %s: its cuDNN/cuBLAS handles could not be made (%s%s%s); run without it "
                            "(STARPU_NCUDA=0) or check the GPU",
                            name, known ? f.kernel : "unknown error", known ? ": " : "", known ? f.cause : "");
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

/* The device int beside the cross-entropy's accumulators. */
int *sc_cuda_small_int(void)
{
    char *p = sc_cuda_buf(me(), SC_CUDA_BUF_SMALL, SC_CUDA_XENT_SCRATCH + sizeof(int));
    return p ? (int *)(p + SC_CUDA_XENT_SCRATCH) : NULL;
}

struct sc_cuda_verdict *sc_cuda_worker_verdict(void)
{
    struct sc_cuda_worker *w = me();
    return w ? w->pinned : NULL;
}
