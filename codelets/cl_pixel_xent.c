/* Per-pixel softmax cross-entropy (the loss of segmentation networks;
 * kernels/loss.c), for training and for evaluation. */
#include "cl_common.h"
#include "kernels/loss.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#include <math.h>

static int pixel_xent_check(const struct sc_pixel_xent_args *a, const char *op, starpu_data_handle_t logits,
                            starpu_data_handle_t labels, starpu_data_handle_t dlogits, starpu_data_handle_t stats)
{
    int ret;
    if (!a)
        return sc_error(SC_ERR_ARG, "%s: no arguments", op);
    if (a->n < 1 || a->classes < 1 || a->hw < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d classes%d hw%d", op, a->n, a->classes, a->hw);
    if (!isfinite(a->scale))
        return sc_error(SC_ERR_ARG, "%s: bad scale %g", op, (double)a->scale);
    size_t nl = (size_t)a->n * a->classes * a->hw;
    if ((ret = sc_check_vec(logits, nl, sizeof(float), op, "logits")) ||
        (ret = sc_check_vec(labels, (size_t)a->n * a->hw, sizeof(int32_t), op, "labels")) ||
        (dlogits && (ret = sc_check_vec(dlogits, nl, sizeof(float), op, "dlogits"))) ||
        (ret = sc_check_vec(stats, 2, sizeof(float), op, "stats")))
        return ret;
    return 0;
}

static void cl_pixel_xent_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_pixel_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_pixel_xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                  (float *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

#ifdef SC_USE_CUDA
static void pixel_xent_cuda(void *buffers[], void *cl_arg, int train)
{
    struct sc_pixel_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_xent_compute_cuda(&c, train ? "pixel_xent" : "pixel_xent_eval", a.n, a.classes, a.hw, a.scale, 0,
                         (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
                         train ? (float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL,
                         (float *)STARPU_VECTOR_GET_PTR(buffers[train ? 3 : 2]));
}

static void cl_pixel_xent_cuda_func(void *buffers[], void *cl_arg)
{
    pixel_xent_cuda(buffers, cl_arg, 1);
}

static void cl_pixel_xent_eval_cuda_func(void *buffers[], void *cl_arg)
{
    pixel_xent_cuda(buffers, cl_arg, 0);
}
#endif

SC_PERFMODEL(pixel_xent_model, "sc_pixel_xent", sc_footprint_args);

SC_CODELET(cl_pixel_xent, "pixel_xent", &pixel_xent_model, cl_pixel_xent_cpu_func, cl_pixel_xent_cuda_func, 4, STARPU_R,
           STARPU_R, STARPU_W, STARPU_W);

int sc_insert_pixel_xent(const struct sc_task_opts *opts, const struct sc_pixel_xent_args *a,
                         starpu_data_handle_t logits, starpu_data_handle_t labels, starpu_data_handle_t dlogits,
                         starpu_data_handle_t stats, const char *name)
{
    const char *op = "pixel_xent";
    int ret = pixel_xent_check(a, op, logits, labels, dlogits, stats);
    if (!ret && !dlogits)
        ret = sc_error(SC_ERR_ARG, "%s: no dlogits handle", op);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_pixel_xent, STARPU_VALUE, a, sizeof *a, STARPU_R, logits, STARPU_R,
                                               labels, STARPU_W, dlogits, STARPU_W, stats, SC_TASK_ATTRS(opts, name),
                                               0),
                            op);
}

static void cl_pixel_xent_eval_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_pixel_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_pixel_xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), NULL, (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

SC_PERFMODEL(pixel_xent_eval_model, "sc_pixel_xent_eval", sc_footprint_args);

SC_CODELET(cl_pixel_xent_eval, "pixel_xent_eval", &pixel_xent_eval_model, cl_pixel_xent_eval_cpu_func,
           cl_pixel_xent_eval_cuda_func, 3, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_pixel_xent_eval(const struct sc_task_opts *opts, const struct sc_pixel_xent_args *a,
                              starpu_data_handle_t logits, starpu_data_handle_t labels, starpu_data_handle_t stats,
                              const char *name)
{
    const char *op = "pixel_xent_eval";
    int ret = pixel_xent_check(a, op, logits, labels, NULL, stats);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_pixel_xent_eval, STARPU_VALUE, a, sizeof *a, STARPU_R, logits,
                                               STARPU_R, labels, STARPU_W, stats, SC_TASK_ATTRS(opts, name), 0),
                            op);
}
