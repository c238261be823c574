/* Batch normalization's fused tasks: where a layer's statistics need no
 * sum over tiles or ranks, its training forward (statistics, normalization,
 * running statistics) and its backward (ReLU's backward, statistics,
 * parameter gradient, data gradient) are one task each; where they do, the
 * running update rides with tile 0's forward and ReLU's backward with each
 * tile's backward statistics.  Each task calls the kernels of the separate
 * tasks (cl_bn.c, cl_relu.c) in their order on the same buffers, so that
 * the results are the same bits: fewer tasks, not other arithmetic. */
#include "cl_common.h"
#include "kernels/bn.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#include <limits.h>
#include <math.h>

/* ---- argument checks (as cl_bn.c's) ---- */

static int fused_shape(const struct sc_bn_args *a, const char *op)
{
    if (!a)
        return sc_error(SC_ERR_ARG, "%s: no arguments", op);
    if (a->n < 1 || a->c < 1 || a->hw < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d c%d hw%d", op, a->n, a->c, a->hw);
    if (a->relu != 0 && a->relu != 1)
        return sc_error(SC_ERR_ARG, "%s: relu must be 0 or 1, not %d", op, a->relu);
    return 0;
}

static int fused_count(double count, const char *op)
{
    if (!(count > 0.0) || !isfinite(count))
        return sc_error(SC_ERR_ARG, "%s: bad element count %g", op, count);
    return 0;
}

static int fused_fwd_args(const struct sc_bn_args *a, double count, int running, const char *op)
{
    int ret;
    if ((ret = fused_shape(a, op)) || (ret = fused_count(count, op)))
        return ret;
    if (!(a->eps >= 0.0f) || !isfinite(a->eps))
        return sc_error(SC_ERR_ARG, "%s: bad eps %g", op, (double)a->eps);
    if (running && !(a->momentum >= 0.0f && a->momentum <= 1.0f))
        return sc_error(SC_ERR_ARG, "%s: momentum %g outside [0, 1]", op, (double)a->momentum);
    return 0;
}

/* ReLU's backward of a tile: y given exactly when a->relu, and the tile
 * within relu_bwd's int length. */
static int fused_relu(const struct sc_bn_args *a, starpu_data_handle_t y, const char *op)
{
    if (a->relu != (y != NULL))
        return sc_error(SC_ERR_ARG, "%s: relu=%d %s y", op, a->relu, y ? "with" : "without");
    if ((size_t)a->n * a->c * a->hw > INT_MAX)
        return sc_error(SC_ERR_SHAPE, "%s: tile of n%d c%d hw%d too large for ReLU's backward", op, a->n, a->c, a->hw);
    return 0;
}

static size_t fused_elems(const struct sc_bn_args *a)
{
    return (size_t)a->n * a->c * a->hw;
}

/* ---- training forward: [statistics], normalization, [running update] ----
 * Buffers: x, stats, params, y, saved, then running when it is updated. */

static void cl_bn_fwd_fused_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    int with_stats, with_running;
    starpu_codelet_unpack_args(cl_arg, &a, &count, &with_stats, &with_running);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    double *st = (double *)STARPU_VECTOR_GET_PTR(buffers[1]);
    if (with_stats)
        sc_bn_stats(&a, x, st);
    sc_bn_fwd(&a, count, x, st, (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
              (float *)STARPU_VECTOR_GET_PTR(buffers[3]), (float *)STARPU_VECTOR_GET_PTR(buffers[4]));
    if (with_running)
        sc_bn_running_update(&a, count, st, (float *)STARPU_VECTOR_GET_PTR(buffers[5]), NULL);
}

#ifdef SC_USE_CUDA
static void cl_bn_fwd_fused_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    int with_stats, with_running;
    starpu_codelet_unpack_args(cl_arg, &a, &count, &with_stats, &with_running);
    cudaStream_t s = starpu_cuda_get_local_stream();
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    double *st = (double *)STARPU_VECTOR_GET_PTR(buffers[1]);
    if (with_stats && sc_cuda_check(sc_cuda_bn_stats(x, st, a.n, a.c, a.hw, s), "bn_stats"))
        return;
    if (sc_cuda_check(sc_cuda_bn_fwd(x, st, (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                     (float *)STARPU_VECTOR_GET_PTR(buffers[3]),
                                     (float *)STARPU_VECTOR_GET_PTR(buffers[4]), a.n, a.c, a.hw, count, a.eps, a.relu,
                                     s),
                      "bn_fwd"))
        return;
    if (with_running)
        sc_cuda_check(
            sc_cuda_bn_running(st, (float *)STARPU_VECTOR_GET_PTR(buffers[5]), a.c, count, a.momentum, NULL, s),
            "bn_running_update");
}
#endif

SC_PERFMODEL(bn_fwd_running_model, "sc_bn_fwd_running", sc_footprint_args);
SC_PERFMODEL(bn_fwd_whole_model, "sc_bn_fwd_whole", sc_footprint_args);

SC_CODELET(cl_bn_fwd_running, "bn_fwd_running", &bn_fwd_running_model, cl_bn_fwd_fused_cpu_func,
           cl_bn_fwd_fused_cuda_func, 6, STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_RW);

SC_CODELET(cl_bn_fwd_whole, "bn_fwd_whole", &bn_fwd_whole_model, cl_bn_fwd_fused_cpu_func, cl_bn_fwd_fused_cuda_func, 5,
           STARPU_R, STARPU_W, STARPU_R, STARPU_W, STARPU_W);

SC_CODELET(cl_bn_fwd_whole_running, "bn_fwd_whole", &bn_fwd_whole_model, cl_bn_fwd_fused_cpu_func,
           cl_bn_fwd_fused_cuda_func, 6, STARPU_R, STARPU_W, STARPU_R, STARPU_W, STARPU_W, STARPU_RW);

static int fwd_check(const struct sc_bn_args *a, double count, starpu_data_handle_t x, starpu_data_handle_t stats,
                     starpu_data_handle_t params, starpu_data_handle_t y, starpu_data_handle_t saved,
                     starpu_data_handle_t running, const char *op)
{
    int ret;
    if ((ret = fused_fwd_args(a, count, running != NULL, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, fused_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(stats, c2, sizeof(double), op, "stats")) ||
        (ret = sc_check_vec(params, c2, sizeof(float), op, "params")) ||
        (ret = sc_check_vec(y, fused_elems(a), sizeof(float), op, "y")) ||
        (ret = sc_check_vec(saved, c2, sizeof(float), op, "saved")) ||
        (running && (ret = sc_check_vec(running, c2, sizeof(float), op, "running"))))
        return ret;
    return 0;
}

int sc_insert_bn_fwd_running(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                             starpu_data_handle_t x, starpu_data_handle_t stats, starpu_data_handle_t params,
                             starpu_data_handle_t y, starpu_data_handle_t saved, starpu_data_handle_t running,
                             const char *name)
{
    const char *op = "bn_fwd_running";
    int ret, with_stats = 0, with_running = 1;
    if (!running)
        return sc_error(SC_ERR_ARG, "%s: no running statistics", op);
    if ((ret = fwd_check(a, count, x, stats, params, y, saved, running, op)))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_fwd_running, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                               sizeof count, STARPU_VALUE, &with_stats, sizeof with_stats, STARPU_VALUE,
                                               &with_running, sizeof with_running, STARPU_R, x, STARPU_R, stats,
                                               STARPU_R, params, STARPU_W, y, STARPU_W, saved, STARPU_RW, running,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

int sc_insert_bn_fwd_whole(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                           starpu_data_handle_t x, starpu_data_handle_t params, starpu_data_handle_t y,
                           starpu_data_handle_t stats, starpu_data_handle_t saved, starpu_data_handle_t running,
                           const char *name)
{
    const char *op = "bn_fwd_whole";
    int ret, with_stats = 1, with_running = running != NULL;
    if ((ret = fwd_check(a, count, x, stats, params, y, saved, running, op)))
        return ret;
    if (!running)
        return sc_insert_result(starpu_task_insert(&cl_bn_fwd_whole, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                                   sizeof count, STARPU_VALUE, &with_stats, sizeof with_stats,
                                                   STARPU_VALUE, &with_running, sizeof with_running, STARPU_R, x,
                                                   STARPU_W, stats, STARPU_R, params, STARPU_W, y, STARPU_W, saved,
                                                   SC_TASK_ATTRS(opts, name), 0),
                                op);
    return sc_insert_result(starpu_task_insert(&cl_bn_fwd_whole_running, STARPU_VALUE, a, sizeof *a, STARPU_VALUE,
                                               &count, sizeof count, STARPU_VALUE, &with_stats, sizeof with_stats,
                                               STARPU_VALUE, &with_running, sizeof with_running, STARPU_R, x, STARPU_W,
                                               stats, STARPU_R, params, STARPU_W, y, STARPU_W, saved, STARPU_RW,
                                               running, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- backward statistics after ReLU's backward ----
 * Buffers: x, dy (masked in place), saved, dstats, y. */

static void cl_bn_bwd_stats_relu_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *dy = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    sc_relu_bwd(dy, (const float *)STARPU_VECTOR_GET_PTR(buffers[4]), (int)fused_elems(&a));
    sc_bn_bwd_stats(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), dy,
                    (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), (double *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

#ifdef SC_USE_CUDA
static void cl_bn_bwd_stats_relu_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    cudaStream_t s = starpu_cuda_get_local_stream();
    float *dy = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    if (sc_cuda_check(sc_cuda_relu_bwd(dy, (const float *)STARPU_VECTOR_GET_PTR(buffers[4]), fused_elems(&a), s),
                      "relu_bwd"))
        return;
    sc_cuda_check(sc_cuda_bn_bwd_stats((const float *)STARPU_VECTOR_GET_PTR(buffers[0]), dy,
                                       (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                       (double *)STARPU_VECTOR_GET_PTR(buffers[3]), a.n, a.c, a.hw, s),
                  "bn_bwd_stats");
}
#endif

SC_PERFMODEL(bn_bwd_stats_relu_model, "sc_bn_bwd_stats_relu", sc_footprint_args);

SC_CODELET(cl_bn_bwd_stats_relu, "bn_bwd_stats_relu", &bn_bwd_stats_relu_model, cl_bn_bwd_stats_relu_cpu_func,
           cl_bn_bwd_stats_relu_cuda_func, 5, STARPU_R, STARPU_RW, STARPU_R, STARPU_W, STARPU_R);

int sc_insert_bn_bwd_stats_relu(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                                starpu_data_handle_t dy, starpu_data_handle_t y, starpu_data_handle_t saved,
                                starpu_data_handle_t dstats, const char *name)
{
    const char *op = "bn_bwd_stats_relu";
    int ret;
    if ((ret = fused_shape(a, op)))
        return ret;
    if (!a->relu)
        return sc_error(SC_ERR_ARG, "%s: relu=0: use bn_bwd_stats", op);
    if ((ret = fused_relu(a, y, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, fused_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(dy, fused_elems(a), sizeof(float), op, "dy")) ||
        (ret = sc_check_vec(y, fused_elems(a), sizeof(float), op, "y")) ||
        (ret = sc_check_vec(saved, c2, sizeof(float), op, "saved")) ||
        (ret = sc_check_vec(dstats, c2, sizeof(double), op, "dstats")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_bwd_stats_relu, STARPU_VALUE, a, sizeof *a, STARPU_R, x,
                                               STARPU_RW, dy, STARPU_R, saved, STARPU_W, dstats, STARPU_R, y,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- the whole backward: [ReLU's], statistics, parameter and data gradients ----
 * Buffers: x, dy, params, saved, dstats, dparams, dx, then y with ReLU. */

static void cl_bn_bwd_whole_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    starpu_codelet_unpack_args(cl_arg, &a, &count);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    float *dy = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    const float *prm = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    const float *saved = (const float *)STARPU_VECTOR_GET_PTR(buffers[3]);
    double *ds = (double *)STARPU_VECTOR_GET_PTR(buffers[4]);
    if (a.relu)
        sc_relu_bwd(dy, (const float *)STARPU_VECTOR_GET_PTR(buffers[7]), (int)fused_elems(&a));
    sc_bn_bwd_stats(&a, x, dy, saved, ds);
    sc_bn_param_grad(a.c, ds, (float *)STARPU_VECTOR_GET_PTR(buffers[5]));
    sc_bn_bwd_data(&a, count, x, dy, prm, saved, ds, (float *)STARPU_VECTOR_GET_PTR(buffers[6]));
}

#ifdef SC_USE_CUDA
static void cl_bn_bwd_whole_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    starpu_codelet_unpack_args(cl_arg, &a, &count);
    cudaStream_t s = starpu_cuda_get_local_stream();
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    float *dy = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    const float *prm = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    const float *saved = (const float *)STARPU_VECTOR_GET_PTR(buffers[3]);
    double *ds = (double *)STARPU_VECTOR_GET_PTR(buffers[4]);
    if (a.relu &&
        sc_cuda_check(sc_cuda_relu_bwd(dy, (const float *)STARPU_VECTOR_GET_PTR(buffers[7]), fused_elems(&a), s),
                      "relu_bwd"))
        return;
    if (sc_cuda_check(sc_cuda_bn_bwd_stats(x, dy, saved, ds, a.n, a.c, a.hw, s), "bn_bwd_stats") ||
        sc_cuda_check(sc_cuda_bn_param_grad(ds, (float *)STARPU_VECTOR_GET_PTR(buffers[5]), a.c, s), "bn_param_grad"))
        return;
    sc_cuda_check(sc_cuda_bn_bwd_data(x, dy, prm, saved, ds, (float *)STARPU_VECTOR_GET_PTR(buffers[6]), a.n, a.c, a.hw,
                                      count, s),
                  "bn_bwd_data");
}
#endif

SC_PERFMODEL(bn_bwd_whole_model, "sc_bn_bwd_whole", sc_footprint_args);

SC_CODELET(cl_bn_bwd_whole, "bn_bwd_whole", &bn_bwd_whole_model, cl_bn_bwd_whole_cpu_func, cl_bn_bwd_whole_cuda_func, 7,
           STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W);

SC_CODELET(cl_bn_bwd_whole_relu, "bn_bwd_whole", &bn_bwd_whole_model, cl_bn_bwd_whole_cpu_func,
           cl_bn_bwd_whole_cuda_func, 8, STARPU_R, STARPU_RW, STARPU_R, STARPU_R, STARPU_W, STARPU_W, STARPU_W,
           STARPU_R);

int sc_insert_bn_bwd_whole(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                           starpu_data_handle_t x, starpu_data_handle_t dy, starpu_data_handle_t y,
                           starpu_data_handle_t params, starpu_data_handle_t saved, starpu_data_handle_t dstats,
                           starpu_data_handle_t dparams, starpu_data_handle_t dx, const char *name)
{
    const char *op = "bn_bwd_whole";
    int ret;
    if ((ret = fused_shape(a, op)) || (ret = fused_count(count, op)) || (ret = fused_relu(a, y, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, fused_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(dy, fused_elems(a), sizeof(float), op, "dy")) ||
        (y && (ret = sc_check_vec(y, fused_elems(a), sizeof(float), op, "y"))) ||
        (ret = sc_check_vec(params, c2, sizeof(float), op, "params")) ||
        (ret = sc_check_vec(saved, c2, sizeof(float), op, "saved")) ||
        (ret = sc_check_vec(dstats, c2, sizeof(double), op, "dstats")) ||
        (ret = sc_check_vec(dparams, c2, sizeof(float), op, "dparams")) ||
        (ret = sc_check_vec(dx, fused_elems(a), sizeof(float), op, "dx")))
        return ret;
    if (!y)
        return sc_insert_result(starpu_task_insert(&cl_bn_bwd_whole, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                                   sizeof count, STARPU_R, x, STARPU_R, dy, STARPU_R, params, STARPU_R,
                                                   saved, STARPU_W, dstats, STARPU_W, dparams, STARPU_W, dx,
                                                   SC_TASK_ATTRS(opts, name), 0),
                                op);
    return sc_insert_result(starpu_task_insert(&cl_bn_bwd_whole_relu, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                               sizeof count, STARPU_R, x, STARPU_RW, dy, STARPU_R, params, STARPU_R,
                                               saved, STARPU_W, dstats, STARPU_W, dparams, STARPU_W, dx, STARPU_R, y,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}
