/* Max and average pooling, forward and backward, through oneDNN
 * (kernels.h). */
#include "onednn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* The layouts pooling is tried in, the caller's first.  oneDNN 2.6 pools
 * NCHW with a jit kernel only on AVX-512; elsewhere (AVX2) NCHW gets its
 * reference kernel, several times slower than a blocked layout with its
 * reorders both ways, so a blocked layout is used where NCHW has no jit
 * kernel: AVX-512's block, then AVX2's (a block without a jit kernel gets
 * the reference kernel too). */
static const dnnl_format_tag_t pool_tags[] = {dnnl_nchw, dnnl_nChw16c, dnnl_nChw8c};
#define POOL_NTAGS ((int)(sizeof pool_tags / sizeof pool_tags[0]))

/* oneDNN's name for pd's implementation (e.g. "jit:avx2"), NULL unknown. */
static const char *pool_impl_name(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success ? impl : NULL;
}

static int pool_is_reference(const_dnnl_primitive_desc_t pd)
{
    const char *impl = pool_impl_name(pd);
    return !impl || !strncmp(impl, "ref", 3) || !strncmp(impl, "simple", 6);
}

/* The forward primitive descriptor in layout pool_tags[t]. */
static dnnl_primitive_desc_t pool_fwd_pd_in(const struct sc_pool_args *a, int t)
{
    dnnl_memory_desc_t x, y;
    dnnl_pooling_desc_t d;
    dnnl_primitive_desc_t pd;
    dnnl_engine_t e = sc_dnnl_engine();
    POOL_GEOMETRY(a);
    sc_md_nchw(&x, a->n, a->c, a->h, a->w, pool_tags[t]);
    sc_md_nchw(&y, a->n, a->c, a->oh, a->ow, pool_tags[t]);
    if (!e ||
        dnnl_pooling_forward_desc_init(&d, dnnl_forward_training, pool_alg(a), &x, &y, strides, kernel, pad_l, pad_r) !=
            dnnl_success ||
        dnnl_primitive_desc_create(&pd, &d, NULL, e, NULL) != dnnl_success)
        return NULL;
    return pd;
}

/* Shared by the kernel and sc_pool_workspace_bytes, so that both agree on
 * the workspace layout: the first layout of pool_tags with a jit kernel,
 * else NCHW; its index goes to *tag unless tag is NULL. */
static dnnl_primitive_desc_t pool_fwd_pd(const struct sc_pool_args *a, int *tag)
{
    for (int t = 0; t < POOL_NTAGS; t++) {
        dnnl_primitive_desc_t pd = pool_fwd_pd_in(a, t);
        if (pd && !pool_is_reference(pd)) {
            if (tag)
                *tag = t;
            return pd;
        }
        if (pd)
            dnnl_primitive_desc_destroy(pd);
    }
    if (tag)
        *tag = 0;
    return pool_fwd_pd_in(a, 0);
}

size_t sc_pool_workspace_bytes(const struct sc_pool_args *a)
{
    if (!a->max)
        return 0;
    dnnl_primitive_desc_t pd = pool_fwd_pd(a, NULL);
    if (!pd)
        return 0;
    size_t bytes = dnnl_memory_desc_get_size(dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0));
    dnnl_primitive_desc_destroy(pd);
    return bytes;
}

int sc_pool_impl(const struct sc_pool_args *a, char *buf, size_t n)
{
    dnnl_primitive_desc_t pd = pool_fwd_pd(a, NULL);
    const char *impl = pd ? pool_impl_name(pd) : NULL;
    int ok = impl != NULL;
    if (ok)
        snprintf(buf, n, "%s", impl);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok ? 0 : -1;
}

/* What one direction caches: the primitive, what it reads and writes
 * (each with its reorder from or to the caller's NCHW when the primitive
 * runs blocked) and, for max pooling, the workspace, which stays in the
 * primitive's layout between forward and backward. */
struct pool_prim {
    dnnl_primitive_t p;
    struct sc_io io[2];
    dnnl_memory_t ws;
};

static void pool_prim_destroy(void *v)
{
    struct pool_prim *c = v;
    if (c->p)
        dnnl_primitive_destroy(c->p);
    for (int i = 0; i < 2; i++)
        sc_io_destroy(&c->io[i]);
    if (c->ws)
        dnnl_memory_destroy(c->ws);
    free(c);
}

/* io[0] bridges the caller's NCHW input and what pd reads (qin), io[1]
 * what pd writes (qout) and the caller's NCHW output; consumes pd. */
static void *pool_prim_make(dnnl_primitive_desc_t pd, const struct sc_pool_args *a, int bwd, dnnl_query_t qin,
                            dnnl_query_t qout)
{
    struct pool_prim *c = calloc(1, sizeof *c);
    dnnl_memory_desc_t x, y;
    sc_md_nchw(&x, a->n, a->c, a->h, a->w, dnnl_nchw);
    sc_md_nchw(&y, a->n, a->c, a->oh, a->ow, dnnl_nchw);
    if (!c || !pd || sc_io_init(&c->io[0], bwd ? &y : &x, dnnl_primitive_desc_query_md(pd, qin, 0), 0) ||
        sc_io_init(&c->io[1], bwd ? &x : &y, dnnl_primitive_desc_query_md(pd, qout, 0), 1))
        goto fail;
    if (a->max && dnnl_memory_create(&c->ws, dnnl_primitive_desc_query_md(pd, dnnl_query_workspace_md, 0),
                                     sc_dnnl_engine(), DNNL_MEMORY_NONE) != dnnl_success) {
        c->ws = NULL;
        goto fail;
    }
    c->p = sc_prim_from_pd(pd);
    pd = NULL;
    if (c->p)
        return c;
fail:
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    if (c)
        pool_prim_destroy(c);
    return NULL;
}

static void *pool_fwd_create(const void *key)
{
    const struct sc_pool_args *a = key;
    return pool_prim_make(pool_fwd_pd(a, NULL), a, 0, dnnl_query_src_md, dnnl_query_dst_md);
}

static void *pool_bwd_create(const void *key)
{
    const struct sc_pool_args *a = key;
    dnnl_memory_desc_t x, y;
    dnnl_pooling_desc_t d;
    int t;
    dnnl_primitive_desc_t hint = pool_fwd_pd(a, &t), pd = NULL;
    POOL_GEOMETRY(a);
    sc_md_nchw(&x, a->n, a->c, a->h, a->w, pool_tags[t]);
    sc_md_nchw(&y, a->n, a->c, a->oh, a->ow, pool_tags[t]);
    if (hint &&
        dnnl_pooling_backward_desc_init(&d, pool_alg(a), &x, &y, strides, kernel, pad_l, pad_r) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &d, NULL, sc_dnnl_engine(), hint) != dnnl_success)
        pd = NULL;
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return pool_prim_make(pd, a, 1, dnnl_query_diff_dst_md, dnnl_query_diff_src_md);
}

void sc_pool_compute(struct sc_kernel_worker *w, enum sc_pool_dir dir, const struct sc_pool_args *a, const float *in,
                     float *out, void *ws)
{
    int bwd = dir == SC_POOL_BWD;
    const char *op = bwd ? "pool_bwd" : "pool_fwd";
    struct pool_prim *c = sc_kernel_worker_prim(w, bwd ? SC_PRIM_POOL_BWD : SC_PRIM_POOL_FWD, a, sizeof *a,
                                                bwd ? pool_bwd_create : pool_fwd_create, pool_prim_destroy);
    dnnl_stream_t s = sc_kernel_worker_stream(w);
    if (!c || !s) /* recorded where it failed */
        return;
    if (sc_io_bind(w, c->io, 2)) {
        sc_fail_record(op, "out of memory for the primitive's layouts");
        return;
    }
    dnnl_exec_arg_t args[3] = {{bwd ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, sc_io_in(&c->io[0], in, s)},
                               {bwd ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DST, sc_io_out(&c->io[1], out)},
                               {DNNL_ARG_WORKSPACE, c->ws}};
    if (!args[0].memory || !args[1].memory || (c->ws && dnnl_memory_set_data_handle(c->ws, ws) != dnnl_success) ||
        sc_exec(c->p, s, c->ws ? 3 : 2, args) || sc_io_out_done(&c->io[1], s))
        sc_fail_record(op, "oneDNN: the primitive or a reorder failed to run");
}
