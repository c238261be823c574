/* Copy of the first n floats of a vector (sums of gradients with several readers). */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static void cl_copy_cpu_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    sc_copy((float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), n);
}

#ifdef SC_USE_CUDA
static void cl_copy_cuda_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    sc_cuda_check(cudaMemcpyAsync((void *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                  (const void *)STARPU_VECTOR_GET_PTR(buffers[0]), (size_t)n * sizeof(float),
                                  cudaMemcpyDeviceToDevice, starpu_cuda_get_local_stream()),
                  "copy");
}
#endif

SC_PERFMODEL(copy_model, "sc_copy", sc_footprint_args);

SC_CODELET(cl_copy, "copy", &copy_model, cl_copy_cpu_func, cl_copy_cuda_func, 2, STARPU_R, STARPU_W);

int sc_insert_copy(const struct sc_task_opts *opts, int n, starpu_data_handle_t src, starpu_data_handle_t dst,
                   const char *name)
{
    const char *op = "copy";
    int ret;
    if (n < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad length %d", op, n);
    if ((ret = sc_check_vec(src, (size_t)n, sizeof(float), op, "src")) ||
        (ret = sc_check_vec(dst, (size_t)n, sizeof(float), op, "dst")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_copy, STARPU_VALUE, &n, sizeof n, STARPU_R, src, STARPU_W, dst,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}
