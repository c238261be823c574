/* Convolution forward (optionally with ReLU), backward data, backward
 * weights + bias: on CPU workers through oneDNN (kernels/conv.c), on CUDA
 * workers through cuDNN (kernels/conv_cudnn.c). */
#include "cl_common.h"

#include <stdlib.h>
#include <string.h>
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static size_t conv_nw(const struct sc_conv_args *a)
{
    return (size_t)a->f * a->c * a->kh * a->kw;
}

#ifdef SC_USE_CUDA
static void cl_conv_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *params = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    struct sc_workspace ws = sc_workspace_of(buffers[3]);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_conv_compute_cuda(&c, SC_CONV_FWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), params,
                         (float *)STARPU_VECTOR_GET_PTR(buffers[2]), params + conv_nw(&a), &ws);
}

static void cl_conv_bwd_data_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_workspace ws = sc_workspace_of(buffers[3]);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_conv_compute_cuda(&c, SC_CONV_BWD_DATA, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                         NULL, &ws);
}

static void cl_conv_bwd_filter_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *dparams = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    struct sc_workspace ws = sc_workspace_of(buffers[3]);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_conv_compute_cuda(&c, SC_CONV_BWD_FILTER, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), dparams, dparams + conv_nw(&a), &ws);
}
#endif

/* ---- forward ---- */

static void cl_conv_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *params = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    sc_conv_compute(sc_kernel_worker_self(), SC_CONV_FWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), params,
                    (float *)STARPU_VECTOR_GET_PTR(buffers[2]), params + conv_nw(&a));
}

SC_PERFMODEL(conv_fwd_model, "sc_conv_fwd", sc_footprint_args);

/* buffer 3: the workspace (cuDNN only) */
SC_CODELET(cl_conv_fwd, "conv_fwd", &conv_fwd_model, cl_conv_fwd_cpu_func, cl_conv_fwd_cuda_func, 4, STARPU_R, STARPU_R,
           STARPU_W, STARPU_SCRATCH);

/* oh, ow come from the caller, so a tile of a spatially split tensor may
 * have its padding on one side only: the right/bottom padding is whatever
 * makes oh come out (see sc_pad_r), and must stay within what oneDNN
 * accepts. */
static int conv_args_check(const struct sc_conv_args *a, const char *op)
{
    if (!sc_workspace_handle())
        return sc_error(SC_ERR_RUNTIME, "%s: the codelets are not initialised (sc_codelets_init)", op);
    int prh = (a->oh - 1) * a->sh + a->kh - a->h - a->ph;
    int prw = (a->ow - 1) * a->sw + a->kw - a->w - a->pw;
    if (a->n < 1 || a->c < 1 || a->h < 1 || a->w < 1 || a->f < 1 || a->kh < 1 || a->kw < 1 || a->sh < 1 || a->sw < 1 ||
        a->ph < 0 || a->pw < 0 || a->oh < 1 || a->ow < 1 || a->ph >= a->kh || a->pw >= a->kw || prh <= -a->sh ||
        prw <= -a->sw || prh >= a->kh || prw >= a->kw)
        return sc_error(SC_ERR_SHAPE,
                        "%s: inconsistent shape n%d c%d %dx%d f%d k%dx%d s%dx%d "
                        "p%dx%d -> %dx%d",
                        op, a->n, a->c, a->h, a->w, a->f, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw, a->oh, a->ow);
    return 0;
}

static size_t conv_nx(const struct sc_conv_args *a)
{
    return (size_t)a->n * a->c * a->h * a->w;
}

static size_t conv_ny(const struct sc_conv_args *a)
{
    return (size_t)a->n * a->f * a->oh * a->ow;
}

int sc_insert_conv_fwd(const struct sc_task_opts *opts, const struct sc_conv_args *a, starpu_data_handle_t x,
                       starpu_data_handle_t params, starpu_data_handle_t y, const char *name)
{
    int ret;
    if ((ret = conv_args_check(a, "conv_fwd")) || (ret = sc_check_vec(x, conv_nx(a), sizeof(float), "conv_fwd", "x")) ||
        (ret = sc_check_vec(params, conv_nw(a) + (a->nobias ? 0 : a->f), sizeof(float), "conv_fwd", "params")) ||
        (ret = sc_check_vec(y, conv_ny(a), sizeof(float), "conv_fwd", "y")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_conv_fwd, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R, params,
                                               STARPU_W, y, STARPU_SCRATCH, sc_workspace_handle(),
                                               SC_TASK_ATTRS(opts, name), 0),
                            "conv_fwd");
}

/* ---- backward data ---- */

static void cl_conv_bwd_data_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_conv_compute(sc_kernel_worker_self(), SC_CONV_BWD_DATA, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]), NULL);
}

SC_PERFMODEL(conv_bwd_data_model, "sc_conv_bwd_data", sc_footprint_args);

/* buffer 3: the workspace (cuDNN only) */
SC_CODELET(cl_conv_bwd_data, "conv_bwd_data", &conv_bwd_data_model, cl_conv_bwd_data_cpu_func,
           cl_conv_bwd_data_cuda_func, 4, STARPU_R, STARPU_R, STARPU_W, STARPU_SCRATCH);

int sc_insert_conv_bwd_data(const struct sc_task_opts *opts, const struct sc_conv_args *a, starpu_data_handle_t dy,
                            starpu_data_handle_t params, starpu_data_handle_t dx, const char *name)
{
    int ret;
    if ((ret = conv_args_check(a, "conv_bwd_data")) ||
        (ret = sc_check_vec(dy, conv_ny(a), sizeof(float), "conv_bwd_data", "dy")) ||
        (ret = sc_check_vec(params, conv_nw(a), sizeof(float), "conv_bwd_data", "params")) ||
        (ret = sc_check_vec(dx, conv_nx(a), sizeof(float), "conv_bwd_data", "dx")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_conv_bwd_data, STARPU_VALUE, a, sizeof *a, STARPU_R, dy, STARPU_R,
                                               params, STARPU_W, dx, STARPU_SCRATCH, sc_workspace_handle(),
                                               SC_TASK_ATTRS(opts, name), 0),
                            "conv_bwd_data");
}

/* ---- backward weights and bias ---- */

static void cl_conv_bwd_filter_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *dparams = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    sc_conv_compute(sc_kernel_worker_self(), SC_CONV_BWD_FILTER, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                    (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), dparams, dparams + conv_nw(&a));
}

SC_PERFMODEL(conv_bwd_filter_model, "sc_conv_bwd_filter", sc_footprint_args);

/* buffer 3: the workspace (cuDNN only) */
SC_CODELET(cl_conv_bwd_filter, "conv_bwd_filter", &conv_bwd_filter_model, cl_conv_bwd_filter_cpu_func,
           cl_conv_bwd_filter_cuda_func, 4, STARPU_R, STARPU_R, STARPU_W, STARPU_SCRATCH);

int sc_insert_conv_bwd_filter(const struct sc_task_opts *opts, const struct sc_conv_args *a, starpu_data_handle_t x,
                              starpu_data_handle_t dy, starpu_data_handle_t dparams, const char *name)
{
    int ret;
    if ((ret = conv_args_check(a, "conv_bwd_filter")) ||
        (ret = sc_check_vec(x, conv_nx(a), sizeof(float), "conv_bwd_filter", "x")) ||
        (ret = sc_check_vec(dy, conv_ny(a), sizeof(float), "conv_bwd_filter", "dy")) ||
        (ret = sc_check_vec(dparams, conv_nw(a) + (size_t)(a->nobias ? 0 : a->f), sizeof(float), "conv_bwd_filter",
                            "dparams")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_conv_bwd_filter, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R,
                                               dy, STARPU_W, dparams, STARPU_SCRATCH, sc_workspace_handle(),
                                               SC_TASK_ATTRS(opts, name), 0),
                            "conv_bwd_filter");
}

/* ---- for the region kernels (cl_region.c) ---- */

int sc_conv_args_check(const struct sc_conv_args *a, const char *op)
{
    return conv_args_check(a, op);
}
