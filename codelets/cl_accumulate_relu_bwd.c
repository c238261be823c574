/* The last part of a gradient sum and ReLU's backward in one task: dy +=
 * part, then dy[i] = y[i] > 0 ? dy[i] : 0 over the first n (the layers
 * whose output several read and whose ReLU is fused into the forward,
 * kernels/vector.c).  The same bits as sc_insert_accumulate then
 * sc_insert_relu_bwd. */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static void cl_accumulate_relu_bwd_cpu_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    sc_accumulate_relu_bwd((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                           (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), n, STARPU_VECTOR_GET_NX(buffers[0]));
}

#ifdef SC_USE_CUDA
/* The two tasks' kernels in their order on the worker's stream. */
static void cl_accumulate_relu_bwd_cuda_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    float *dy = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (sc_cuda_check(sc_cuda_accumulate(dy, (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                         STARPU_VECTOR_GET_NX(buffers[0]), s),
                      "accumulate_relu_bwd"))
        return;
    sc_cuda_check(sc_cuda_relu_bwd(dy, (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), (size_t)n, s),
                  "accumulate_relu_bwd");
}
#endif

SC_PERFMODEL(accumulate_relu_bwd_model, "sc_accumulate_relu_bwd", sc_footprint_args);

SC_CODELET(cl_accumulate_relu_bwd, "accumulate_relu_bwd", &accumulate_relu_bwd_model, cl_accumulate_relu_bwd_cpu_func,
           cl_accumulate_relu_bwd_cuda_func, 3, STARPU_RW, STARPU_R, STARPU_R);

int sc_insert_accumulate_relu_bwd(const struct sc_task_opts *opts, int n, starpu_data_handle_t dy,
                                  starpu_data_handle_t part, starpu_data_handle_t y, const char *name)
{
    const char *op = "accumulate_relu_bwd";
    int ret;
    if (n < 0)
        return sc_error(SC_ERR_SHAPE, "%s: negative length %d", op, n);
    if ((ret = sc_check_same_length(op, dy, "dy", part, "part")) ||
        (ret = sc_check_vec(dy, (size_t)n, sizeof(float), op, "dy")) ||
        (ret = sc_check_vec(y, (size_t)n, sizeof(float), op, "y")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_accumulate_relu_bwd, STARPU_VALUE, &n, sizeof n, STARPU_RW, dy,
                                               STARPU_R, part, STARPU_R, y, SC_TASK_ATTRS(opts, name), 0),
                            op);
}
