/* Batch normalization over the tiles of a batch: per-channel sums of the
 * forward and backward passes (in double, so that they can be added up over
 * tiles and ranks before use), and the element-wise passes that use them
 * (kernels/bn.c). */
#include "cl_common.h"
#include "kernels/bn.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#include <math.h>

/* ---- argument checks ---- */

static int bn_shape(const struct sc_bn_args *a, const char *op)
{
    if (!a)
        return sc_error(SC_ERR_ARG, "%s: no arguments", op);
    if (a->n < 1 || a->c < 1 || a->hw < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d c%d hw%d", op, a->n, a->c, a->hw);
    if (a->relu != 0 && a->relu != 1)
        return sc_error(SC_ERR_ARG, "%s: relu must be 0 or 1, not %d", op, a->relu);
    return 0;
}

static int bn_eps(const struct sc_bn_args *a, const char *op)
{
    if (!(a->eps >= 0.0f) || !isfinite(a->eps))
        return sc_error(SC_ERR_ARG, "%s: bad eps %g", op, (double)a->eps);
    return 0;
}

static int bn_count(double count, const char *op)
{
    if (!(count > 0.0) || !isfinite(count))
        return sc_error(SC_ERR_ARG, "%s: bad element count %g", op, count);
    return 0;
}

static size_t bn_elems(const struct sc_bn_args *a)
{
    return (size_t)a->n * a->c * a->hw;
}

/* ---- statistics: stats = [sum x | sum x^2] ---- */

static void cl_bn_stats_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_bn_stats(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (double *)STARPU_VECTOR_GET_PTR(buffers[1]));
}

#ifdef SC_USE_CUDA
static void cl_bn_stats_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_bn_stats((const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                   (double *)STARPU_VECTOR_GET_PTR(buffers[1]), a.n, a.c, a.hw,
                                   starpu_cuda_get_local_stream()),
                  "bn_stats");
}
#endif

SC_PERFMODEL(bn_stats_model, "sc_bn_stats", sc_footprint_args);

SC_CODELET(cl_bn_stats, "bn_stats", &bn_stats_model, cl_bn_stats_cpu_func, cl_bn_stats_cuda_func, 2, STARPU_R,
           STARPU_W);

int sc_insert_bn_stats(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                       starpu_data_handle_t stats, const char *name)
{
    const char *op = "bn_stats";
    int ret;
    if ((ret = bn_shape(a, op)) || (ret = sc_check_vec(x, bn_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(stats, 2 * (size_t)a->c, sizeof(double), op, "stats")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_stats, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_W, stats,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- training forward ---- */

static void cl_bn_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    starpu_codelet_unpack_args(cl_arg, &a, &count);
    sc_bn_fwd(&a, count, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
              (const double *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
              (float *)STARPU_VECTOR_GET_PTR(buffers[3]), (float *)STARPU_VECTOR_GET_PTR(buffers[4]));
}

#ifdef SC_USE_CUDA
static void cl_bn_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    starpu_codelet_unpack_args(cl_arg, &a, &count);
    sc_cuda_check(sc_cuda_bn_fwd((const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                 (const double *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                 (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                 (float *)STARPU_VECTOR_GET_PTR(buffers[3]), (float *)STARPU_VECTOR_GET_PTR(buffers[4]),
                                 a.n, a.c, a.hw, count, a.eps, a.relu, starpu_cuda_get_local_stream()),
                  "bn_fwd");
}
#endif

SC_PERFMODEL(bn_fwd_model, "sc_bn_fwd", sc_footprint_args);

SC_CODELET(cl_bn_fwd, "bn_fwd", &bn_fwd_model, cl_bn_fwd_cpu_func, cl_bn_fwd_cuda_func, 5, STARPU_R, STARPU_R, STARPU_R,
           STARPU_W, STARPU_W);

int sc_insert_bn_fwd(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count, starpu_data_handle_t x,
                     starpu_data_handle_t stats, starpu_data_handle_t params, starpu_data_handle_t y,
                     starpu_data_handle_t saved, const char *name)
{
    const char *op = "bn_fwd";
    int ret;
    if ((ret = bn_shape(a, op)) || (ret = bn_eps(a, op)) || (ret = bn_count(count, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, bn_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(stats, c2, sizeof(double), op, "stats")) ||
        (ret = sc_check_vec(params, c2, sizeof(float), op, "params")) ||
        (ret = sc_check_vec(y, bn_elems(a), sizeof(float), op, "y")) ||
        (ret = sc_check_vec(saved, c2, sizeof(float), op, "saved")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_fwd, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                               sizeof count, STARPU_R, x, STARPU_R, stats, STARPU_R, params, STARPU_W,
                                               y, STARPU_W, saved, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- evaluation forward, with the running statistics ---- */

static void cl_bn_fwd_eval_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_bn_fwd_eval(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                   (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                   (float *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

#ifdef SC_USE_CUDA
static void cl_bn_fwd_eval_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_bn_fwd_eval((const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                      (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                      (float *)STARPU_VECTOR_GET_PTR(buffers[3]), a.n, a.c, a.hw, a.eps, a.relu,
                                      starpu_cuda_get_local_stream()),
                  "bn_fwd_eval");
}
#endif

SC_PERFMODEL(bn_fwd_eval_model, "sc_bn_fwd_eval", sc_footprint_args);

SC_CODELET(cl_bn_fwd_eval, "bn_fwd_eval", &bn_fwd_eval_model, cl_bn_fwd_eval_cpu_func, cl_bn_fwd_eval_cuda_func, 4,
           STARPU_R, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_bn_fwd_eval(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                          starpu_data_handle_t running, starpu_data_handle_t params, starpu_data_handle_t y,
                          const char *name)
{
    const char *op = "bn_fwd_eval";
    int ret;
    if ((ret = bn_shape(a, op)) || (ret = bn_eps(a, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, bn_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(running, c2, sizeof(float), op, "running")) ||
        (ret = sc_check_vec(params, c2, sizeof(float), op, "params")) ||
        (ret = sc_check_vec(y, bn_elems(a), sizeof(float), op, "y")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_fwd_eval, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R,
                                               running, STARPU_R, params, STARPU_W, y, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- running statistics, as PyTorch ----
 * except that a channel whose batch statistics are not finite (a NaN in
 * a sample, under --nonfinite skip) keeps its running statistics, so that
 * evaluation survives a skipped batch. */

/* The gated variant has the gate as buffer 2. */
static void cl_bn_running_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    int gated;
    starpu_codelet_unpack_args(cl_arg, &a, &count, &gated);
    sc_bn_running_update(&a, count, (const double *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                         gated ? (const float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL);
}

#ifdef SC_USE_CUDA
static void cl_bn_running_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    int gated;
    starpu_codelet_unpack_args(cl_arg, &a, &count, &gated);
    sc_cuda_check(sc_cuda_bn_running((const double *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                     (float *)STARPU_VECTOR_GET_PTR(buffers[1]), a.c, count, a.momentum,
                                     gated ? (const float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL,
                                     starpu_cuda_get_local_stream()),
                  "bn_running_update");
}
#endif

SC_PERFMODEL(bn_running_model, "sc_bn_running_update", sc_footprint_args);

SC_CODELET(cl_bn_running, "bn_running_update", &bn_running_model, cl_bn_running_cpu_func, cl_bn_running_cuda_func, 2,
           STARPU_R, STARPU_RW);

SC_CODELET(cl_bn_running_gated, "bn_running_update", &bn_running_model, cl_bn_running_cpu_func, cl_bn_running_cuda_func,
           3, STARPU_R, STARPU_RW, STARPU_R);

int sc_insert_bn_running_update(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                                starpu_data_handle_t stats, starpu_data_handle_t running, starpu_data_handle_t gate,
                                const char *name)
{
    const char *op = "bn_running_update";
    int ret;
    if (!a)
        return sc_error(SC_ERR_ARG, "%s: no arguments", op);
    if (a->c < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad channel count %d", op, a->c);
    if (!(a->momentum >= 0.0f && a->momentum <= 1.0f))
        return sc_error(SC_ERR_ARG, "%s: momentum %g outside [0, 1]", op, (double)a->momentum);
    if ((ret = bn_count(count, op)) || (ret = sc_check_vec(stats, 2 * (size_t)a->c, sizeof(double), op, "stats")) ||
        (ret = sc_check_vec(running, 2 * (size_t)a->c, sizeof(float), op, "running")) ||
        (gate && (ret = sc_check_vec(gate, 1, sizeof(float), op, "gate"))))
        return ret;
    int gated = gate != NULL;
    if (gated)
        return sc_insert_result(starpu_task_insert(&cl_bn_running_gated, STARPU_VALUE, a, sizeof *a, STARPU_VALUE,
                                                   &count, sizeof count, STARPU_VALUE, &gated, sizeof gated, STARPU_R,
                                                   stats, STARPU_RW, running, STARPU_R, gate, SC_TASK_ATTRS(opts, name),
                                                   0),
                                op);
    return sc_insert_result(starpu_task_insert(&cl_bn_running, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                               sizeof count, STARPU_VALUE, &gated, sizeof gated, STARPU_R, stats,
                                               STARPU_RW, running, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- backward, phase 1: dstats = [sum dy | sum dy*xhat] ---- */

static void cl_bn_bwd_stats_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_bn_bwd_stats(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                    (double *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

#ifdef SC_USE_CUDA
static void cl_bn_bwd_stats_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_bn_bwd_stats((const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                       (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                                       (double *)STARPU_VECTOR_GET_PTR(buffers[3]), a.n, a.c, a.hw,
                                       starpu_cuda_get_local_stream()),
                  "bn_bwd_stats");
}
#endif

SC_PERFMODEL(bn_bwd_stats_model, "sc_bn_bwd_stats", sc_footprint_args);

SC_CODELET(cl_bn_bwd_stats, "bn_bwd_stats", &bn_bwd_stats_model, cl_bn_bwd_stats_cpu_func, cl_bn_bwd_stats_cuda_func, 4,
           STARPU_R, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_bn_bwd_stats(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                           starpu_data_handle_t dy, starpu_data_handle_t saved, starpu_data_handle_t dstats,
                           const char *name)
{
    const char *op = "bn_bwd_stats";
    int ret;
    if ((ret = bn_shape(a, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, bn_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(dy, bn_elems(a), sizeof(float), op, "dy")) ||
        (ret = sc_check_vec(saved, c2, sizeof(float), op, "saved")) ||
        (ret = sc_check_vec(dstats, c2, sizeof(double), op, "dstats")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_bwd_stats, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R, dy,
                                               STARPU_R, saved, STARPU_W, dstats, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- parameter gradients from the summed dstats ---- */

static void cl_bn_param_grad_cpu_func(void *buffers[], void *cl_arg)
{
    int c;
    starpu_codelet_unpack_args(cl_arg, &c);
    sc_bn_param_grad(c, (const double *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]));
}

#ifdef SC_USE_CUDA
static void cl_bn_param_grad_cuda_func(void *buffers[], void *cl_arg)
{
    int c;
    starpu_codelet_unpack_args(cl_arg, &c);
    sc_cuda_check(sc_cuda_bn_param_grad((const double *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                        (float *)STARPU_VECTOR_GET_PTR(buffers[1]), c, starpu_cuda_get_local_stream()),
                  "bn_param_grad");
}
#endif

SC_PERFMODEL(bn_param_grad_model, "sc_bn_param_grad", sc_footprint_args);

SC_CODELET(cl_bn_param_grad, "bn_param_grad", &bn_param_grad_model, cl_bn_param_grad_cpu_func,
           cl_bn_param_grad_cuda_func, 2, STARPU_R, STARPU_W);

int sc_insert_bn_param_grad(const struct sc_task_opts *opts, int c, starpu_data_handle_t dstats,
                            starpu_data_handle_t dparams, const char *name)
{
    const char *op = "bn_param_grad";
    int ret;
    if (c < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad channel count %d", op, c);
    if ((ret = sc_check_vec(dstats, 2 * (size_t)c, sizeof(double), op, "dstats")) ||
        (ret = sc_check_vec(dparams, 2 * (size_t)c, sizeof(float), op, "dparams")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_param_grad, STARPU_VALUE, &c, sizeof c, STARPU_R, dstats,
                                               STARPU_W, dparams, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- backward, phase 2: dx ---- */

static void cl_bn_bwd_data_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    starpu_codelet_unpack_args(cl_arg, &a, &count);
    sc_bn_bwd_data(&a, count, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                   (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                   (const float *)STARPU_VECTOR_GET_PTR(buffers[3]), (const double *)STARPU_VECTOR_GET_PTR(buffers[4]),
                   (float *)STARPU_VECTOR_GET_PTR(buffers[5]));
}

#ifdef SC_USE_CUDA
static void cl_bn_bwd_data_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_bn_args a;
    double count;
    starpu_codelet_unpack_args(cl_arg, &a, &count);
    sc_cuda_check(
        sc_cuda_bn_bwd_data(
            (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
            (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const float *)STARPU_VECTOR_GET_PTR(buffers[3]),
            (const double *)STARPU_VECTOR_GET_PTR(buffers[4]), (float *)STARPU_VECTOR_GET_PTR(buffers[5]), a.n, a.c,
            a.hw, count, starpu_cuda_get_local_stream()),
        "bn_bwd_data");
}
#endif

SC_PERFMODEL(bn_bwd_data_model, "sc_bn_bwd_data", sc_footprint_args);

SC_CODELET(cl_bn_bwd_data, "bn_bwd_data", &bn_bwd_data_model, cl_bn_bwd_data_cpu_func, cl_bn_bwd_data_cuda_func, 6,
           STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_bn_bwd_data(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                          starpu_data_handle_t x, starpu_data_handle_t dy, starpu_data_handle_t params,
                          starpu_data_handle_t saved, starpu_data_handle_t dstats, starpu_data_handle_t dx,
                          const char *name)
{
    const char *op = "bn_bwd_data";
    int ret;
    if ((ret = bn_shape(a, op)) || (ret = bn_count(count, op)))
        return ret;
    size_t c2 = 2 * (size_t)a->c;
    if ((ret = sc_check_vec(x, bn_elems(a), sizeof(float), op, "x")) ||
        (ret = sc_check_vec(dy, bn_elems(a), sizeof(float), op, "dy")) ||
        (ret = sc_check_vec(params, c2, sizeof(float), op, "params")) ||
        (ret = sc_check_vec(saved, c2, sizeof(float), op, "saved")) ||
        (ret = sc_check_vec(dstats, c2, sizeof(double), op, "dstats")) ||
        (ret = sc_check_vec(dx, bn_elems(a), sizeof(float), op, "dx")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_bn_bwd_data, STARPU_VALUE, a, sizeof *a, STARPU_VALUE, &count,
                                               sizeof count, STARPU_R, x, STARPU_R, dy, STARPU_R, params, STARPU_R,
                                               saved, STARPU_R, dstats, STARPU_W, dx, SC_TASK_ATTRS(opts, name), 0),
                            op);
}
