/* Max and average pooling, forward and backward, through oneDNN
 * (kernels.h). */
#include "kernel_dnnl.h"

#include <stdlib.h>

#define POOL_GEOMETRY(a)                                                                                               \
    dnnl_dims_t strides = {(a)->sh, (a)->sw}, kernel = {(a)->kh, (a)->kw}, pad_l = {(a)->ph, (a)->pw},                 \
                pad_r = {sc_pad_r((a)->h, (a)->kh, (a)->sh, (a)->ph, (a)->oh),                                         \
                         sc_pad_r((a)->w, (a)->kw, (a)->sw, (a)->pw, (a)->ow)}

static dnnl_alg_kind_t pool_alg(const struct sc_pool_args *a)
{
    return a->max           ? dnnl_pooling_max
           : a->include_pad ? dnnl_pooling_avg_include_padding
                            : dnnl_pooling_avg_exclude_padding;
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
        dnnl_pooling_forward_desc_init(&d, dnnl_forward_training, pool_alg(a), &x, &y, strides, kernel, pad_l, pad_r) !=
            dnnl_success ||
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
    if (hint &&
        dnnl_pooling_backward_desc_init(&d, pool_alg(a), &x, &y, strides, kernel, pad_l, pad_r) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &d, NULL, sc_dnnl_engine(), hint) != dnnl_success)
        pd = NULL;
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return pool_prim_make(pd, a->max, dnnl_query_diff_dst_md, dnnl_query_diff_src_md);
}

void sc_pool_compute(struct sc_kernel_worker *w, int bwd, const struct sc_pool_args *a, const float *in, float *out,
                     void *ws)
{
    const char *op = bwd ? "pool_bwd" : "pool_fwd";
    struct pool_prim *c = sc_kernel_worker_prim(w, bwd ? SC_PRIM_POOL_BWD : SC_PRIM_POOL_FWD, a, sizeof *a,
                                                bwd ? pool_bwd_create : pool_fwd_create, pool_prim_destroy);
    dnnl_stream_t s = sc_kernel_worker_stream(w);
    if (!c || !s)
        return;
    dnnl_exec_arg_t args[3] = {{bwd ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, c->in},
                               {bwd ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DST, c->out},
                               {DNNL_ARG_WORKSPACE, c->ws}};
    if (dnnl_memory_set_data_handle(c->in, (void *)in) != dnnl_success ||
        dnnl_memory_set_data_handle(c->out, out) != dnnl_success ||
        (c->ws && dnnl_memory_set_data_handle(c->ws, ws) != dnnl_success) || sc_exec(c->p, s, c->ws ? 3 : 2, args))
        sc_kernel_failed(op);
}
