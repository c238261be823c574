/* Max and average pooling, forward and backward, through oneDNN.  Max
 * pooling's forward leaves in a workspace which input won each window; the
 * backward reads it instead of recomputing. */
#include "cl_common.h"

#include <stdlib.h>
#ifdef SC_USE_CUDA
#include "cuda/sc_cuda.h"

#include <starpu_cuda.h>
#endif

#define POOL_GEOMETRY(a)                                                              \
    dnnl_dims_t strides = {(a)->sh, (a)->sw}, kernel = {(a)->kh, (a)->kw},            \
                pad_l = {(a)->ph, (a)->pw},                                           \
                pad_r = {sc_pad_r((a)->h, (a)->kh, (a)->sh, (a)->ph, (a)->oh),        \
                         sc_pad_r((a)->w, (a)->kw, (a)->sw, (a)->pw, (a)->ow)}

static dnnl_alg_kind_t pool_alg(const struct sc_pool_args *a)
{
    return a->max ? dnnl_pooling_max
                  : a->include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
}

/* Shared by the kernel and sc_pool_workspace_bytes, so that both agree on
 * the workspace layout. */
static dnnl_primitive_desc_t pool_fwd_pd(const struct sc_pool_args *a)
{
    dnnl_memory_desc_t x, y;
    dnnl_pooling_desc_t d;
    dnnl_primitive_desc_t pd;
    dnnl_engine_t e = sc_dnnl_engine();
    POOL_GEOMETRY(a);
    sc_md_nchw(&x, a->n, a->c, a->h, a->w, dnnl_nchw);
    sc_md_nchw(&y, a->n, a->c, a->oh, a->ow, dnnl_nchw);
    if (!e ||
        dnnl_pooling_forward_desc_init(&d, dnnl_forward_training, pool_alg(a), &x, &y, strides, kernel,
                                       pad_l, pad_r) != dnnl_success ||
        dnnl_primitive_desc_create(&pd, &d, NULL, e, NULL) != dnnl_success)
        return NULL;
    return pd;
}

size_t sc_pool_workspace_bytes(const struct sc_pool_args *a)
{
    if (!a->max)
        return 0;
    dnnl_primitive_desc_t pd = pool_fwd_pd(a);
    if (!pd)
        return 0;
    size_t bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0));
    dnnl_primitive_desc_destroy(pd);
    return bytes;
}

/* Pooling runs on the caller's NCHW layout directly: oneDNN has a jit
 * kernel for it, and a blocked layout would need reorders both ways. */
struct pool_prim {
    dnnl_primitive_t p;
    dnnl_memory_t in, out, ws;
};

static void pool_prim_destroy(void *v)
{
    struct pool_prim *c = v;
    if (c->p)
        dnnl_primitive_destroy(c->p);
    dnnl_memory_t *m[3] = {&c->in, &c->out, &c->ws};
    for (int i = 0; i < 3; i++)
        if (*m[i])
            dnnl_memory_destroy(*m[i]);
    free(c);
}

/* Memories without data for what pd reads (qin), writes (qout) and, for
 * max pooling, its workspace; consumes pd. */
static void *pool_prim_make(dnnl_primitive_desc_t pd, int max, dnnl_query_t qin, dnnl_query_t qout)
{
    struct pool_prim *c = pd ? calloc(1, sizeof *c) : NULL;
    if (c) {
        dnnl_memory_t *m[3] = {&c->in, &c->out, &c->ws};
        dnnl_query_t q[3] = {qin, qout, dnnl_query_workspace_md};
        int ok = 1;
        for (int i = 0; ok && i < 2 + max; i++) {
            dnnl_memory_t mem;
            ok = dnnl_memory_create(&mem, dnnl_primitive_desc_query_md(pd, q[i], 0), sc_dnnl_engine(),
                                    DNNL_MEMORY_NONE) == dnnl_success;
            *m[i] = ok ? mem : NULL;
        }
        c->p = ok ? sc_prim_from_pd(pd) : NULL;
        pd = ok ? NULL : pd;
        if (c->p)
            return c;
        pool_prim_destroy(c);
    }
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return NULL;
}

static void *pool_fwd_create(const void *key)
{
    const struct sc_pool_args *a = key;
    return pool_prim_make(pool_fwd_pd(a), a->max, dnnl_query_src_md, dnnl_query_dst_md);
}

static void *pool_bwd_create(const void *key)
{
    const struct sc_pool_args *a = key;
    dnnl_memory_desc_t x, y;
    dnnl_pooling_desc_t d;
    dnnl_primitive_desc_t hint = pool_fwd_pd(a), pd = NULL;
    POOL_GEOMETRY(a);
    sc_md_nchw(&x, a->n, a->c, a->h, a->w, dnnl_nchw);
    sc_md_nchw(&y, a->n, a->c, a->oh, a->ow, dnnl_nchw);
    if (hint && dnnl_pooling_backward_desc_init(&d, pool_alg(a), &x, &y, strides, kernel, pad_l,
                                                pad_r) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &d, NULL, sc_dnnl_engine(), hint) != dnnl_success)
        pd = NULL;
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return pool_prim_make(pd, a->max, dnnl_query_diff_dst_md, dnnl_query_diff_src_md);
}

static void pool_run(const char *op, int bwd, const struct sc_pool_args *a, const float *in, float *out,
                     void *ws)
{
    struct pool_prim *c = sc_prim_get(bwd ? SC_PRIM_POOL_BWD : SC_PRIM_POOL_FWD, a, sizeof *a,
                                      bwd ? pool_bwd_create : pool_fwd_create, pool_prim_destroy);
    dnnl_stream_t s = sc_dnnl_stream();
    if (!c || !s)
        return;
    dnnl_exec_arg_t args[3] = {{bwd ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, c->in},
                               {bwd ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DST, c->out},
                               {DNNL_ARG_WORKSPACE, c->ws}};
    if (dnnl_memory_set_data_handle(c->in, (void *)in) != dnnl_success ||
        dnnl_memory_set_data_handle(c->out, out) != dnnl_success ||
        (c->ws && dnnl_memory_set_data_handle(c->ws, ws) != dnnl_success) ||
        sc_exec(c->p, s, c->ws ? 3 : 2, args))
        sc_kernel_failed(op);
}

#ifdef SC_USE_CUDA
/* Own kernels rather than cuDNN's pooling: the backward pass has only dy
 * and the workspace (no x, y), and the workspace must be oneDNN's, so that
 * a forward and a backward may run on different kinds of workers
 * (cuda/sc_kernels_nn.cu). */
void sc_pool_compute_cuda(int bwd, const struct sc_pool_args *a, const float *in, float *out, void *ws)
{
    struct sc_cuda_pool p = {a->n, a->c, a->h, a->w, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw,
                             a->oh, a->ow, a->max, a->include_pad};
    cudaStream_t s = starpu_cuda_get_local_stream();
    if (bwd)
        sc_cuda_check(sc_cuda_pool_bwd(&p, in, ws, out, s), "pool_bwd");
    else
        sc_cuda_check(sc_cuda_pool_fwd(&p, in, out, ws, s), "pool_fwd");
}

static void cl_pool_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_pool_compute_cuda(0, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (float *)STARPU_VECTOR_GET_PTR(buffers[1]), (void *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

static void cl_pool_bwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_pool_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_pool_compute_cuda(1, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (float *)STARPU_VECTOR_GET_PTR(buffers[2]), (void *)STARPU_VECTOR_GET_PTR(buffers[1]));
}
#endif

static int pool_check(const struct sc_pool_args *a, const char *op, starpu_data_handle_t x,
                      const char *xname, starpu_data_handle_t y, const char *yname,
                      starpu_data_handle_t ws)
{
    int prh = (a->oh - 1) * a->sh + a->kh - a->h - a->ph;
    int prw = (a->ow - 1) * a->sw + a->kw - a->w - a->pw;
    size_t nx = (size_t)a->n * a->c * a->h * a->w, ny = (size_t)a->n * a->c * a->oh * a->ow;
    int ret;
    if (a->n < 1 || a->c < 1 || a->h < 1 || a->w < 1 || a->kh < 1 || a->kw < 1 || a->sh < 1 ||
        a->sw < 1 || a->ph < 0 || a->pw < 0 || a->oh < 1 || a->ow < 1 || a->ph >= a->kh ||
        a->pw >= a->kw || prh <= -a->sh || prw <= -a->sw || prh >= a->kh || prw >= a->kw)
        return sc_error(SC_ERR_SHAPE, "%s: inconsistent shape n%d c%d %dx%d k%dx%d s%dx%d p%dx%d "
                        "-> %dx%d", op, a->n, a->c, a->h, a->w, a->kh, a->kw, a->sh, a->sw, a->ph,
                        a->pw, a->oh, a->ow);
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
    pool_run("pool_fwd", 0, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
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
    pool_run("pool_bwd", 1, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
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

/* ---- for the region kernels (cl_region.c) ---- */

void sc_pool_compute(int bwd, const struct sc_pool_args *a, const float *in, float *out, void *ws)
{
    pool_run(bwd ? "pool_bwd" : "pool_fwd", bwd, a, in, out, ws);
}
