/* Global average pooling, forward and backward (kernels/vector.c). */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#include <math.h>

struct gap_args {
    int n, c, hw, blk;
    float scale;
};

static int gap_check(const struct gap_args *a, const char *op)
{
    if (a->n < 1 || a->c < 1 || a->hw < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d c%d hw%d", op, a->n, a->c, a->hw);
    if ((a->blk != 0 && a->blk != 8 && a->blk != 16) || (a->blk && a->c % a->blk))
        return sc_error(SC_ERR_SHAPE, "%s: %d channels in blocks of %d", op, a->c, a->blk);
    if (!isfinite(a->scale))
        return sc_error(SC_ERR_ARG, "%s: bad scale %g", op, (double)a->scale);
    return 0;
}

static void cl_gap_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_gap_fwd((float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
               (size_t)a.n * a.c, a.hw, a.blk, a.scale);
}

#ifdef SC_USE_CUDA
static void cl_gap_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_gap_fwd((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (size_t)a.n * a.c, a.hw, a.scale,
                                  starpu_cuda_get_local_stream()),
                  "gap_fwd");
}
#endif

SC_PERFMODEL(gap_fwd_model, "sc_gap_fwd", sc_footprint_args);

SC_CODELET(cl_gap_fwd, "gap_fwd", &gap_fwd_model, cl_gap_fwd_cpu_func, cl_gap_fwd_cuda_func, 2, STARPU_R, STARPU_W);

int sc_insert_gap_fwd(const struct sc_task_opts *opts, int n, int c, int hw, int blk, float scale,
                      starpu_data_handle_t x, starpu_data_handle_t y, const char *name)
{
    const char *op = "gap_fwd";
    struct gap_args a = {n, c, hw, blk, scale};
    int ret;
    if ((ret = gap_check(&a, op)) || (ret = sc_check_vec(x, (size_t)n * c * hw, sizeof(float), op, "x")) ||
        (ret = sc_check_vec(y, (size_t)n * c, sizeof(float), op, "y")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_gap_fwd, STARPU_VALUE, &a, sizeof a, STARPU_R, x, STARPU_W, y,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

static void cl_gap_bwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_gap_bwd((float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
               (size_t)a.n * a.c, a.hw, a.blk, a.scale);
}

#ifdef SC_USE_CUDA
static void cl_gap_bwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_gap_bwd((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (size_t)a.n * a.c, a.hw, a.scale,
                                  starpu_cuda_get_local_stream()),
                  "gap_bwd");
}
#endif

SC_PERFMODEL(gap_bwd_model, "sc_gap_bwd", sc_footprint_args);

SC_CODELET(cl_gap_bwd, "gap_bwd", &gap_bwd_model, cl_gap_bwd_cpu_func, cl_gap_bwd_cuda_func, 2, STARPU_R, STARPU_W);

int sc_insert_gap_bwd(const struct sc_task_opts *opts, int n, int c, int hw, int blk, float scale,
                      starpu_data_handle_t dy, starpu_data_handle_t dx, const char *name)
{
    const char *op = "gap_bwd";
    struct gap_args a = {n, c, hw, blk, scale};
    int ret;
    if ((ret = gap_check(&a, op)) || (ret = sc_check_vec(dy, (size_t)n * c, sizeof(float), op, "dy")) ||
        (ret = sc_check_vec(dx, (size_t)n * c * hw, sizeof(float), op, "dx")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_gap_bwd, STARPU_VALUE, &a, sizeof a, STARPU_R, dy, STARPU_W, dx,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}
