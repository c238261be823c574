/* Softmax cross-entropy on logits (kernels/loss.c), for training and for
 * evaluation. */
#include "cl_common.h"
#include "kernels/loss.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static int xent_check(const struct sc_xent_args *a, const char *op, starpu_data_handle_t logits,
                      starpu_data_handle_t labels, starpu_data_handle_t dlogits, starpu_data_handle_t stats)
{
    size_t nl = (size_t)a->n * a->classes;
    int ret;
    if (a->n < 1 || a->classes < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d classes%d", op, a->n, a->classes);
    if ((ret = sc_check_vec(logits, nl, sizeof(float), op, "logits")) ||
        (ret = sc_check_vec(labels, a->n, sizeof(int32_t), op, "labels")) ||
        (dlogits && (ret = sc_check_vec(dlogits, nl, sizeof(float), op, "dlogits"))) ||
        (ret = sc_check_vec(stats, 2, sizeof(float), op, "stats")))
        return ret;
    return 0;
}

#ifdef SC_USE_CUDA
/* The same pass on the GPU: one thread per sample. */
static void xent_cuda(void *buffers[], void *cl_arg, int train)
{
    struct sc_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_xent_compute_cuda(&c, train ? "xent" : "xent_eval", a.n, a.classes, 1, a.scale, 1,
                         (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
                         train ? (float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL,
                         (float *)STARPU_VECTOR_GET_PTR(buffers[train ? 3 : 2]));
}

static void cl_xent_cuda_func(void *buffers[], void *cl_arg)
{
    xent_cuda(buffers, cl_arg, 1);
}

static void cl_xent_eval_cuda_func(void *buffers[], void *cl_arg)
{
    xent_cuda(buffers, cl_arg, 0);
}
#endif

/* ---- training: loss, accuracy and dlogits ---- */

static void cl_xent_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
            (float *)STARPU_VECTOR_GET_PTR(buffers[2]), (float *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

SC_PERFMODEL(xent_model, "sc_xent", sc_footprint_args);

SC_CODELET(cl_xent, "xent", &xent_model, cl_xent_cpu_func, cl_xent_cuda_func, 4, STARPU_R, STARPU_R, STARPU_W,
           STARPU_W);

int sc_insert_xent(const struct sc_task_opts *opts, const struct sc_xent_args *a, starpu_data_handle_t logits,
                   starpu_data_handle_t labels, starpu_data_handle_t dlogits, starpu_data_handle_t stats,
                   const char *name)
{
    int ret = xent_check(a, "xent", logits, labels, dlogits, stats);
    if (!ret && !dlogits)
        ret = sc_error(SC_ERR_ARG, "xent: no dlogits handle");
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_xent, STARPU_VALUE, a, sizeof *a, STARPU_R, logits, STARPU_R, labels,
                                               STARPU_W, dlogits, STARPU_W, stats, SC_TASK_ATTRS(opts, name), 0),
                            "xent");
}

/* ---- evaluation: loss and accuracy only ---- */

static void cl_xent_eval_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
            NULL, (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

SC_PERFMODEL(xent_eval_model, "sc_xent_eval", sc_footprint_args);

SC_CODELET(cl_xent_eval, "xent_eval", &xent_eval_model, cl_xent_eval_cpu_func, cl_xent_eval_cuda_func, 3, STARPU_R,
           STARPU_R, STARPU_W);

int sc_insert_xent_eval(const struct sc_task_opts *opts, const struct sc_xent_args *a, starpu_data_handle_t logits,
                        starpu_data_handle_t labels, starpu_data_handle_t stats, const char *name)
{
    int ret = xent_check(a, "xent_eval", logits, labels, NULL, stats);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_xent_eval, STARPU_VALUE, a, sizeof *a, STARPU_R, logits, STARPU_R,
                                               labels, STARPU_W, stats, SC_TASK_ATTRS(opts, name), 0),
                            "xent_eval");
}
