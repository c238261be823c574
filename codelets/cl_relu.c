/* ReLU backward, for the layers whose ReLU is fused into the forward
 * kernel (kernels/vector.c). */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static void cl_relu_bwd_cpu_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    sc_relu_bwd((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), n);
}

#ifdef SC_USE_CUDA
static void cl_relu_bwd_cuda_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    sc_cuda_check(sc_cuda_relu_bwd((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                   (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (size_t)n,
                                   starpu_cuda_get_local_stream()),
                  "relu_bwd");
}
#endif

SC_PERFMODEL(relu_bwd_model, "sc_relu_bwd", sc_footprint_args);

SC_CODELET(cl_relu_bwd, "relu_bwd", &relu_bwd_model, cl_relu_bwd_cpu_func, cl_relu_bwd_cuda_func, 2, STARPU_RW,
           STARPU_R);

int sc_insert_relu_bwd(const struct sc_task_opts *opts, int n, starpu_data_handle_t dy, starpu_data_handle_t y,
                       const char *name)
{
    int ret;
    if (n < 0)
        return sc_error(SC_ERR_SHAPE, "relu_bwd: negative length %d", n);
    if ((ret = sc_check_vec(dy, n, sizeof(float), "relu_bwd", "dy")) ||
        (ret = sc_check_vec(y, n, sizeof(float), "relu_bwd", "y")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_relu_bwd, STARPU_VALUE, &n, sizeof n, STARPU_RW, dy, STARPU_R, y,
                                               SC_TASK_ATTRS(opts, name), 0),
                            "relu_bwd");
}
