/* Residual add: y = a + b, then ReLU (the [shortcut] layer;
 * kernels/vector.c). */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

struct add_args {
    int n, relu;
};

static void cl_add_cpu_func(void *buffers[], void *cl_arg)
{
    struct add_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_add((float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
           (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a.n, a.relu);
}

#ifdef SC_USE_CUDA
static void cl_add_cuda_func(void *buffers[], void *cl_arg)
{
    struct add_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_add((float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (size_t)a.n, a.relu,
                              starpu_cuda_get_local_stream()),
                  "add");
}
#endif

SC_PERFMODEL(add_model, "sc_add", sc_footprint_args);

SC_CODELET(cl_add, "add", &add_model, cl_add_cpu_func, cl_add_cuda_func, 3, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_add(const struct sc_task_opts *opts, int n, int relu, starpu_data_handle_t a, starpu_data_handle_t b,
                  starpu_data_handle_t y, const char *name)
{
    const char *op = "add";
    int ret;
    if (n < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad length %d", op, n);
    if (relu != 0 && relu != 1)
        return sc_error(SC_ERR_ARG, "%s: relu must be 0 or 1, not %d", op, relu);
    if ((ret = sc_check_vec(a, (size_t)n, sizeof(float), op, "a")) ||
        (ret = sc_check_vec(b, (size_t)n, sizeof(float), op, "b")) ||
        (ret = sc_check_vec(y, (size_t)n, sizeof(float), op, "y")))
        return ret;
    struct add_args args = {n, relu};
    return sc_insert_result(starpu_task_insert(&cl_add, STARPU_VALUE, &args, sizeof args, STARPU_R, a, STARPU_R, b,
                                               STARPU_W, y, SC_TASK_ATTRS(opts, name), 0),
                            op);
}
