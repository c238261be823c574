/* h = 0, for a vector of any element type (the gate's count). */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static void cl_zero_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_zero((void *)STARPU_VECTOR_GET_PTR(buffers[0]),
            STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

#ifdef SC_USE_CUDA
static void cl_zero_cuda_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_cuda_check(cudaMemsetAsync((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
                                  STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]),
                                  starpu_cuda_get_local_stream()),
                  "zero");
}
#endif

SC_CODELET(cl_zero, "zero", NULL, cl_zero_cpu_func, cl_zero_cuda_func, 1, STARPU_W);

int sc_insert_zero(const struct sc_task_opts *opts, starpu_data_handle_t h, const char *name)
{
    return sc_insert_result(starpu_task_insert(&cl_zero, STARPU_W, h, SC_TASK_ATTRS(opts, name), 0), "zero");
}
