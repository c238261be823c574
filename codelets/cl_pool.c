/* Max and average pooling, forward and backward: on CPU workers through
 * kernels/pool.c (max pooling in plain loops, average through oneDNN), on
 * CUDA workers through our own kernels (kernels/pool_cuda.c).  Max pooling's forward leaves in a workspace
 * which input won each window; the backward reads it instead of
 * recomputing. */
#include "cl_common.h"

#include <stdlib.h>
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#ifdef SC_USE_CUDA
static void cl_pool_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_pool_compute_cuda(&c, SC_POOL_FWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (float *)STARPU_VECTOR_GET_PTR(buffers[1]), (void *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

static void cl_pool_bwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_pool_compute_cuda(&c, SC_POOL_BWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (float *)STARPU_VECTOR_GET_PTR(buffers[2]), (void *)STARPU_VECTOR_GET_PTR(buffers[1]));
}
#endif

static int pool_check(const struct sc_pool_args *a, const char *op, starpu_data_handle_t x, const char *xname,
                      starpu_data_handle_t y, const char *yname, starpu_data_handle_t ws)
{
    int prh = (a->oh - 1) * a->sh + a->kh - a->h - a->ph;
    int prw = (a->ow - 1) * a->sw + a->kw - a->w - a->pw;
    size_t nx = (size_t)a->n * a->c * a->h * a->w, ny = (size_t)a->n * a->c * a->oh * a->ow;
    int ret;
    if (a->n < 1 || a->c < 1 || a->h < 1 || a->w < 1 || a->kh < 1 || a->kw < 1 || a->sh < 1 || a->sw < 1 || a->ph < 0 ||
        a->pw < 0 || a->oh < 1 || a->ow < 1 || a->ph >= a->kh || a->pw >= a->kw || prh <= -a->sh || prw <= -a->sw ||
        prh >= a->kh || prw >= a->kw)
        return sc_error(SC_ERR_SHAPE,
                        "%s: inconsistent shape n%d c%d %dx%d k%dx%d s%dx%d p%dx%d "
                        "-> %dx%d",
                        op, a->n, a->c, a->h, a->w, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw, a->oh, a->ow);
    if ((ret = sc_check_vec(x, nx, sizeof(float), op, xname)) ||
        (ret = sc_check_vec(y, ny, sizeof(float), op, yname)) ||
        /* the exact size needs a oneDNN descriptor, too slow here; one
         * byte per output is what any max-pooling workspace holds */
        (ret = sc_check_vec(ws, a->max ? ny : 1, 1, op, "ws")))
        return ret;
    return 0;
}

/* ---- forward ---- */

static void cl_pool_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_pool_compute(sc_kernel_worker_self(), SC_POOL_FWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                    (float *)STARPU_VECTOR_GET_PTR(buffers[1]), (void *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

SC_PERFMODEL(pool_fwd_model, "sc_pool_fwd", sc_footprint_args);

SC_CODELET(cl_pool_fwd, "pool_fwd", &pool_fwd_model, cl_pool_fwd_cpu_func, cl_pool_fwd_cuda_func, 3, STARPU_R, STARPU_W,
           STARPU_W);

int sc_insert_pool_fwd(const struct sc_task_opts *opts, const struct sc_pool_args *a, starpu_data_handle_t x,
                       starpu_data_handle_t y, starpu_data_handle_t ws, const char *name)
{
    int ret = pool_check(a, "pool_fwd", x, "x", y, "y", ws);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_pool_fwd, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_W, y,
                                               STARPU_W, ws, SC_TASK_ATTRS(opts, name), 0),
                            "pool_fwd");
}

/* ---- backward ---- */

static void cl_pool_bwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_pool_compute(sc_kernel_worker_self(), SC_POOL_BWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                    (float *)STARPU_VECTOR_GET_PTR(buffers[2]), (void *)STARPU_VECTOR_GET_PTR(buffers[1]));
}

SC_PERFMODEL(pool_bwd_model, "sc_pool_bwd", sc_footprint_args);

SC_CODELET(cl_pool_bwd, "pool_bwd", &pool_bwd_model, cl_pool_bwd_cpu_func, cl_pool_bwd_cuda_func, 3, STARPU_R, STARPU_R,
           STARPU_W);

int sc_insert_pool_bwd(const struct sc_task_opts *opts, const struct sc_pool_args *a, starpu_data_handle_t dy,
                       starpu_data_handle_t ws, starpu_data_handle_t dx, const char *name)
{
    int ret = pool_check(a, "pool_bwd", dx, "dx", dy, "dy", ws);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_pool_bwd, STARPU_VALUE, a, sizeof *a, STARPU_R, dy, STARPU_R, ws,
                                               STARPU_W, dx, SC_TASK_ATTRS(opts, name), 0),
                            "pool_bwd");
}
