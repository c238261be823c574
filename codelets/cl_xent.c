/* Softmax cross-entropy on logits, with the log-sum-exp taken around the
 * row maximum so that large logits neither overflow nor lose the loss. */
#include "cl_common.h"
#ifdef SC_USE_CUDA
#include "kernels/cuda/sc_cuda.h"

#include <starpu_cuda.h>
#endif

#include <math.h>
#include <stdio.h>

/* Loss and accuracy of n rows into stats; dlogits too when not NULL. */
static void xent(const struct sc_xent_args *a, const float *logits, const int32_t *labels,
                 float *dlogits, float *stats)
{
    double loss = 0.0;
    int correct = 0, bad = 0;
    for (int i = 0; i < a->n; i++) {
        const float *l = logits + (size_t)i * a->classes;
        if (labels[i] == -1) { /* a padding sample (see sc_insert_load_labels) */
            for (int k = 0; dlogits && k < a->classes; k++)
                dlogits[(size_t)i * a->classes + k] = 0.0f;
            continue;
        }
        int arg = 0;
        for (int k = 1; k < a->classes; k++)
            if (l[k] > l[arg])
                arg = k;
        double sum = 0.0;
        for (int k = 0; k < a->classes; k++)
            sum += exp((double)l[k] - l[arg]);
        int y = labels[i];
        if (y < 0 || y >= a->classes) {
            bad++;
            y = -1;
        } else {
            loss += log(sum) - ((double)l[y] - l[arg]);
            correct += arg == y;
        }
        if (dlogits) {
            float *d = dlogits + (size_t)i * a->classes;
            for (int k = 0; k < a->classes; k++)
                d[k] = a->scale * (float)(exp((double)l[k] - l[arg]) / sum - (k == y));
        }
    }
    if (bad)
        fprintf(stderr, "starconv: xent: %d labels outside [0, %d)\n", bad, a->classes);
    stats[0] = (float)loss;
    stats[1] = (float)correct;
}

static int xent_check(const struct sc_xent_args *a, const char *op, starpu_data_handle_t logits,
                      starpu_data_handle_t labels, starpu_data_handle_t dlogits,
                      starpu_data_handle_t stats)
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
/* The same pass on the GPU: one thread per sample (cuda/sc_kernels_nn.cu). */
static void xent_cuda(void *buffers[], void *cl_arg, int train)
{
    struct sc_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_run_xent(train ? "xent" : "xent_eval", a.n, a.classes, 1, a.scale, 1,
                     (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
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
    xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
         (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
         (float *)STARPU_VECTOR_GET_PTR(buffers[3]));
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
    xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
         (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), NULL,
         (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
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
