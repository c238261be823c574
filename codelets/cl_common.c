#include "cl_common.h"
#include "kernels/onednn.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"
#endif

#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Each worker's kernel state, made on first use on the worker's thread and
 * touched only by it while tasks run; shutdown releases each on its own
 * thread (kernels.h says why). */
static struct sc_kernel_worker *workers[STARPU_NMAXWORKERS];

struct sc_kernel_worker *sc_kernel_worker_self(void)
{
    int id = starpu_worker_get_id();
    if (id < 0 || id >= STARPU_NMAXWORKERS)
        return NULL;
    if (!workers[id])
        workers[id] = sc_kernel_worker_create();
    return workers[id];
}

/* StarPU gives the parallelism (one worker per core), so every library
 * must stay on its worker's core; OpenMP's thread count is per calling
 * thread, hence set on each worker. */
static void single_thread(void *arg)
{
    (void)arg;
    omp_set_num_threads(1);
    sc_kernel_worker_stream(sc_kernel_worker_self());
}

/* The kernels' scratch memory, used in STARPU_SCRATCH mode: StarPU gives
 * each worker its own replicate on its memory node, allocated once from its
 * own allocator and kept between tasks, and adds no dependency between the
 * tasks that use it.  The cuDNN convolutions take their workspace from it;
 * where this rank has no CUDA worker it is 4 bytes, as no CPU kernel needs
 * one (oneDNN keeps its own per-thread scratchpad). */
static starpu_data_handle_t workspace;

starpu_data_handle_t sc_workspace_handle(void)
{
    return workspace;
}

int sc_codelets_init(void)
{
    sc_fail_workers_init();
    size_t ws_bytes = 4;
#ifdef SC_USE_CUDA
    int err = sc_cuda_workspace_bytes(&ws_bytes);
    if (err)
        return err;
#endif
#ifdef OPENBLAS_VERSION /* from OpenBLAS's cblas.h; its thread count is global */
    openblas_set_num_threads(1);
#endif
    starpu_execute_on_each_worker(single_thread, NULL, STARPU_CPU);
#ifdef SC_USE_CUDA
    if ((err = sc_cuda_init())) /* the CUDA workers' cuDNN/cuBLAS handles */
        return err;
#endif
    if (!workspace)
        starpu_vector_data_register(&workspace, -1, 0, (uint32_t)ws_bytes, 1);
    return 0;
}

static void release_mine(void *arg)
{
    (void)arg;
    int id = starpu_worker_get_id();
    if (id >= 0 && id < STARPU_NMAXWORKERS) {
        sc_kernel_worker_destroy(workers[id]);
        workers[id] = NULL;
    }
}

/* A worker's primitives are destroyed on that worker's thread: oneDNN
 * (without DNNL_ENABLE_CONCURRENT_EXEC, as Debian builds it) backs them with
 * a per-thread scratchpad whose reference count is thread_local, taken by
 * dnnl_primitive_create and dropped by dnnl_primitive_destroy.  Destroyed
 * from the main thread, the worker's count never came back to zero and its
 * scratchpad (and through it the engine) leaked when the worker thread
 * exited (LeakSanitizer; gemm-based convolution backward data). */
void sc_codelets_shutdown(void)
{
    sc_fail_say_unreported();
    if (workspace)
        starpu_data_unregister(workspace);
    workspace = NULL;
#ifdef SC_USE_CUDA
    sc_cuda_shutdown();
#endif
    if (starpu_is_initialized())
        starpu_execute_on_each_worker(release_mine, NULL, STARPU_CPU);
    for (int w = 0; w < STARPU_NMAXWORKERS; w++) { /* whatever no CPU worker released */
        sc_kernel_worker_destroy(workers[w]);
        workers[w] = NULL;
    }
    sc_kernels_shutdown();
}

int sc_check_vec(starpu_data_handle_t h, size_t count, size_t elemsize, const char *op, const char *what)
{
    if (!h || starpu_data_get_interface_id(h) != STARPU_VECTOR_INTERFACE_ID)
        return sc_error(SC_ERR_SHAPE, "%s: %s is not a vector handle", op, what);
    size_t nx = starpu_vector_get_nx(h), es = starpu_vector_get_elemsize(h);
    if (es != elemsize || nx < count)
        return sc_error(SC_ERR_SHAPE, "%s: %s holds %zu elements of %zu bytes, needs %zu of %zu", op, what, nx, es,
                        count, elemsize);
    return 0;
}

int sc_insert_result(int ret, const char *op)
{
    if (ret == 0)
        return 0;
    return sc_error(SC_ERR_RUNTIME, "%s: starpu_task_insert failed (%s)", op, strerror(-ret));
}

uint32_t sc_footprint_args(struct starpu_task *task)
{
    return starpu_hash_crc32c_be_n(task->cl_arg, task->cl_arg_size, 0);
}

int sc_check_same_length(const char *op, starpu_data_handle_t h0, const char *n0, starpu_data_handle_t h1,
                         const char *n1)
{
    int ret;
    if ((ret = sc_check_vec(h0, 0, sizeof(float), op, n0)) || (ret = sc_check_vec(h1, 0, sizeof(float), op, n1)))
        return ret;
    if (starpu_vector_get_nx(h0) != starpu_vector_get_nx(h1))
        return sc_error(SC_ERR_SHAPE, "%s: %s has %zu elements, %s %zu", op, n0, (size_t)starpu_vector_get_nx(h0), n1,
                        (size_t)starpu_vector_get_nx(h1));
    return 0;
}
