/* Convolution forward (optionally with ReLU), backward data, backward
 * weights + bias, through oneDNN (kernels.h). */
#include "onednn.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TRY(x)                                                                                                         \
    do {                                                                                                               \
        if ((x) != dnnl_success)                                                                                       \
            goto fail;                                                                                                 \
    } while (0)

struct conv_mds {
    dnnl_memory_desc_t x, w, b, y;
};

/* The layout tag of an activation in channel blocks of blk (0: NCHW). */
static dnnl_format_tag_t act_tag(int blk)
{
    return blk == 16 ? dnnl_aBcd16b : blk == 8 ? dnnl_aBcd8b : dnnl_nchw;
}

/* The caller's weights are OIHW, its activations NCHW or channel-blocked
 * (xblk, yblk).  oneDNN's fast kernels want channel-blocked layouts
 * (faster for LeNet's layers even with the reorders), so the primitives
 * are created on "any" layouts for what the caller holds plain, and on
 * the caller's own layout for what it holds blocked, which then needs no
 * reorder; reorders bridge the rest.  user: the caller's layouts (fp32);
 * else the primitive's for direction dir, plain for every tensor when
 * plain (a blocked tensor then gets its reorder).  In bf16 the
 * primitive's inputs are bf16, so that the reorders which bridge the
 * layouts also round the caller's fp32 values, and its output fp32. */
static void conv_mds(struct conv_mds *m, const struct sc_conv_args *a, int user, int plain, enum sc_conv_dir dir)
{
    dnnl_format_tag_t xt = user || plain ? dnnl_nchw : dnnl_format_tag_any, yt = xt;
    if (!plain) {
        xt = a->xblk ? act_tag(a->xblk) : xt;
        yt = a->yblk ? act_tag(a->yblk) : yt;
    }
    int bf16 = !user && a->precision == SC_PRECISION_BF16;
    dnnl_data_type_t in = bf16 ? dnnl_bf16 : dnnl_f32;
    sc_md_nchw_typed(&m->x, a->n, a->c, a->h, a->w, xt, dir == SC_CONV_BWD_DATA ? dnnl_f32 : in);
    sc_md_nchw_typed(&m->w, a->f, a->c, a->kh, a->kw, plain || user ? dnnl_oihw : dnnl_format_tag_any,
                     dir == SC_CONV_BWD_FILTER ? dnnl_f32 : in);
    sc_md_1d(&m->b, a->f);
    sc_md_nchw_typed(&m->y, a->n, a->f, a->oh, a->ow, yt, dir == SC_CONV_FWD ? dnnl_f32 : in);
}

#define CONV_GEOMETRY(a)                                                                                               \
    dnnl_dims_t strides = {(a)->sh, (a)->sw}, pad_l = {(a)->ph, (a)->pw},                                              \
                pad_r = {sc_pad_r((a)->h, (a)->kh, (a)->sh, (a)->ph, (a)->oh),                                         \
                         sc_pad_r((a)->w, (a)->kw, (a)->sw, (a)->pw, (a)->ow)}

/* Whether oneDNN fell back to its reference implementation, which runs
 * orders of magnitude below its JIT kernels: it does so for some shapes
 * (a spatial size below the kernel's, e.g.) on the caller's blocked
 * layouts while it has a JIT kernel on layouts of its own choice. */
static int pd_is_ref(const_dnnl_primitive_desc_t pd)
{
    const char *impl = NULL;
    return pd && dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success && impl &&
           !strncmp(impl, "ref", 3);
}

/* a on layouts oneDNN chooses for every tensor: the retry for a primitive
 * that got the reference implementation on the caller's (reorders then
 * bridge the caller's layouts). */
static int conv_args_unblocked(const struct sc_conv_args *a, struct sc_conv_args *out)
{
    *out = *a;
    out->xblk = out->yblk = 0;
    return a->xblk || a->yblk;
}

static dnnl_primitive_desc_t conv_fwd_pd_on(const struct sc_conv_args *a, int relu);

/* The forward descriptor, also the hint the backward primitives need. */
static dnnl_primitive_desc_t conv_fwd_pd(const struct sc_conv_args *a, int relu)
{
    struct sc_conv_args u;
    dnnl_primitive_desc_t pd = conv_fwd_pd_on(a, relu);
    if (pd_is_ref(pd) && conv_args_unblocked(a, &u)) {
        dnnl_primitive_desc_t jit = conv_fwd_pd_on(&u, relu);
        if (jit && !pd_is_ref(jit)) {
            dnnl_primitive_desc_destroy(pd);
            return jit;
        }
        if (jit)
            dnnl_primitive_desc_destroy(jit);
    }
    return pd;
}

static dnnl_primitive_desc_t conv_fwd_pd_on(const struct sc_conv_args *a, int relu)
{
    struct conv_mds m;
    dnnl_convolution_desc_t d;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    CONV_GEOMETRY(a);
    conv_mds(&m, a, 0, 0, SC_CONV_FWD);
    TRY(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct, &m.x, &m.w,
                                           a->nobias ? NULL : &m.b, &m.y, strides, pad_l, pad_r));
    TRY(dnnl_primitive_attr_create(&attr));
    if (relu) {
        TRY(dnnl_post_ops_create(&po));
        TRY(dnnl_post_ops_append_eltwise(po, 1.0f, dnnl_eltwise_relu, 0.0f, 0.0f));
        TRY(dnnl_primitive_attr_set_post_ops(attr, po));
    }
    if (dnnl_primitive_desc_create(&pd, &d, attr, sc_dnnl_engine(), NULL) != dnnl_success)
        pd = NULL;
fail:
    if (po)
        dnnl_post_ops_destroy(po);
    if (attr)
        dnnl_primitive_attr_destroy(attr);
    return pd;
}

/* What one direction caches: the primitive, its two inputs and its output
 * (in that order, each with its reorder if any) and the bias, which is
 * plain on both sides. */
struct conv_prim {
    dnnl_primitive_t p;
    struct sc_io io[3];
    dnnl_memory_t bias;
};

static void conv_prim_destroy(void *v)
{
    struct conv_prim *c = v;
    if (c->p)
        dnnl_primitive_destroy(c->p);
    for (int i = 0; i < 3; i++)
        sc_io_destroy(&c->io[i]);
    if (c->bias)
        dnnl_memory_destroy(c->bias);
    free(c);
}

/* io[i] bridges the user layout u[i] and the primitive's layout queried
 * with q[i]; consumes pd. */
static void *conv_prim_make(dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *u[3], const dnnl_query_t q[3],
                            int output, const dnnl_memory_desc_t *bias)
{
    struct conv_prim *c = calloc(1, sizeof *c);
    if (!c || !pd)
        goto fail;
    for (int i = 0; i < 3; i++)
        if (sc_io_init(&c->io[i], u[i], dnnl_primitive_desc_query_md(pd, q[i], 0), i == output))
            goto fail;
    if (bias && dnnl_memory_create(&c->bias, bias, sc_dnnl_engine(), DNNL_MEMORY_NONE) != dnnl_success) {
        c->bias = NULL;
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
        conv_prim_destroy(c);
    return NULL;
}

static void *conv_fwd_create(const void *key)
{
    const struct sc_conv_args *a = key;
    struct conv_mds m;
    conv_mds(&m, a, 1, 0, SC_CONV_FWD);
    const dnnl_memory_desc_t *u[3] = {&m.x, &m.w, &m.y};
    const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
    return conv_prim_make(conv_fwd_pd(a, a->relu), u, q, 2, a->nobias ? NULL : &m.b);
}

/* A backward primitive's descriptor (filter: weights, else data) on the
 * layouts a gives for what the caller holds blocked and oneDNN's choice
 * for the rest. */
static dnnl_primitive_desc_t conv_bwd_pd_on(const struct sc_conv_args *a, int filter)
{
    struct conv_mds any;
    dnnl_convolution_desc_t d;
    dnnl_primitive_desc_t hint = conv_fwd_pd(a, 0), pd = NULL;
    CONV_GEOMETRY(a);
    /* Blocking pads c to a whole block: for a few input channels the plain
     * (gemm-based) kernels are faster, the padded channels being mostly
     * zeros, and than a blocked one with the reorders of x and dy.  Not
     * in bf16: there the reorders exist anyway (to bf16), and oneDNN's bf16
     * gemm kernel runs a 1-channel weight gradient several times slower
     * than its blocked JIT kernel. */
    conv_mds(&any, a, 0, sc_conv_few_channels(a->c) && a->precision == SC_PRECISION_FP32,
             filter ? SC_CONV_BWD_FILTER : SC_CONV_BWD_DATA);
    dnnl_status_t st =
        filter ? dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &any.x, &any.w,
                                                             a->nobias ? NULL : &any.b, &any.y, strides, pad_l, pad_r)
               : dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &any.x, &any.w, &any.y, strides,
                                                          pad_l, pad_r);
    if (hint && st == dnnl_success && dnnl_primitive_desc_create(&pd, &d, NULL, sc_dnnl_engine(), hint) != dnnl_success)
        pd = NULL;
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    return pd;
}

static dnnl_primitive_desc_t conv_bwd_pd(const struct sc_conv_args *a, int filter)
{
    struct sc_conv_args u;
    dnnl_primitive_desc_t pd = conv_bwd_pd_on(a, filter);
    if (pd_is_ref(pd) && conv_args_unblocked(a, &u)) {
        dnnl_primitive_desc_t jit = conv_bwd_pd_on(&u, filter);
        if (jit && !pd_is_ref(jit)) {
            dnnl_primitive_desc_destroy(pd);
            return jit;
        }
        if (jit)
            dnnl_primitive_desc_destroy(jit);
    }
    return pd;
}

static void *conv_bwd_data_create(const void *key)
{
    const struct sc_conv_args *a = key;
    struct conv_mds m;
    conv_mds(&m, a, 1, 0, SC_CONV_FWD);
    const dnnl_memory_desc_t *u[3] = {&m.y, &m.w, &m.x};
    const dnnl_query_t q[3] = {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md};
    return conv_prim_make(conv_bwd_pd(a, 0), u, q, 2, NULL);
}

static void *conv_bwd_filter_create(const void *key)
{
    const struct sc_conv_args *a = key;
    struct conv_mds m;
    conv_mds(&m, a, 1, 0, SC_CONV_FWD);
    const dnnl_memory_desc_t *u[3] = {&m.x, &m.y, &m.w};
    const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md};
    return conv_prim_make(conv_bwd_pd(a, 1), u, q, 2, a->nobias ? NULL : &m.b);
}

/* Runs a cached primitive on (in0, in1) -> out, plus bias if any; the
 * primitive argument ids are given in the io order. */
static void conv_run(struct sc_kernel_worker *w, const char *op, enum sc_conv_dir dir, const struct sc_conv_args *a,
                     const int ids[3], const float *in0, const float *in1, float *out, float *bias)
{
    static void *(*const create[])(const void *) = {conv_fwd_create, conv_bwd_data_create, conv_bwd_filter_create};
    static const int prim_op[] = {SC_PRIM_CONV_FWD, SC_PRIM_CONV_BWD_DATA, SC_PRIM_CONV_BWD_FILTER};
    static const int bias_id[] = {DNNL_ARG_BIAS, 0, DNNL_ARG_DIFF_BIAS};
    struct sc_conv_args key = *a;
    if (dir != SC_CONV_FWD)
        key.relu = 0; /* backward does not depend on it: share one entry */
    struct conv_prim *c = sc_kernel_worker_prim(w, prim_op[dir], &key, sizeof key, create[dir], conv_prim_destroy);
    dnnl_stream_t s = sc_kernel_worker_stream(w);
    if (!c || !s) /* recorded where it failed */
        return;
    if (sc_io_bind(w, c->io, 3)) {
        sc_fail_record(op, "out of memory for the primitive's layouts");
        return;
    }
    dnnl_exec_arg_t args[4] = {{ids[0], sc_io_in(&c->io[0], in0, s)},
                               {ids[1], sc_io_in(&c->io[1], in1, s)},
                               {ids[2], sc_io_out(&c->io[2], out)},
                               {bias_id[dir], c->bias}};
    int nargs = c->bias ? 4 : 3;
    if (!args[0].memory || !args[1].memory || !args[2].memory ||
        (c->bias && dnnl_memory_set_data_handle(c->bias, bias) != dnnl_success) || sc_exec(c->p, s, nargs, args) ||
        sc_io_out_done(&c->io[2], s))
        sc_fail_record(op, "oneDNN: the primitive or a reorder failed to run");
}

void sc_conv_compute(struct sc_kernel_worker *w, enum sc_conv_dir dir, const struct sc_conv_args *a, const float *in0,
                     const float *in1, float *out, float *bias)
{
    static const int ids[3][3] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                                  {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                                  {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
    static const char *const op[3] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"};
    conv_run(w, op[dir], dir, a, ids[dir], in0, in1, out, bias);
}

int sc_conv_impl_name(const struct sc_conv_args *a, char *buf, size_t n)
{
    dnnl_primitive_desc_t pd = conv_fwd_pd(a, a->relu);
    const char *impl = NULL;
    if (!pd || dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl) != dnnl_success || !impl) {
        if (pd)
            dnnl_primitive_desc_destroy(pd);
        return -1;
    }
    snprintf(buf, n, "%s", impl);
    dnnl_primitive_desc_destroy(pd);
    return 0;
}

const char *sc_precision_name(enum sc_precision p)
{
    return p == SC_PRECISION_BF16 ? "bf16" : "fp32";
}

int sc_conv_bf16_native(char *buf, size_t n)
{
    struct sc_conv_args a = {.n = 1,
                             .c = 64,
                             .h = 14,
                             .w = 14,
                             .f = 64,
                             .kh = 3,
                             .kw = 3,
                             .sh = 1,
                             .sw = 1,
                             .ph = 1,
                             .pw = 1,
                             .oh = 14,
                             .ow = 14,
                             .precision = SC_PRECISION_BF16};
    if (sc_conv_impl_name(&a, buf, n)) {
        snprintf(buf, n, "none");
        return -1;
    }
    /* "jit_bf16:avx512_core" is oneDNN's emulation of bf16 on AVX-512
     * without AVX512-BF16: the ISA after the ':' must be one with bf16. */
    const char *isa = strrchr(buf, ':');
    isa = isa ? isa + 1 : buf;
    return strncmp(buf, "ref", 3) && (strstr(isa, "bf16") || strstr(isa, "amx")) ? 0 : -1;
}

int sc_conv_act_block(const struct sc_conv_args *a)
{
    struct sc_conv_args plain = *a;
    plain.xblk = plain.yblk = 0;
    dnnl_primitive_desc_t pd = conv_fwd_pd(&plain, 0);
    if (!pd)
        return 0;
    const dnnl_memory_desc_t *md = dnnl_primitive_desc_query_md(pd, dnnl_query_dst_md, 0);
    int blk = 0;
    if (md && md->format_kind == dnnl_blocked && md->format_desc.blocking.inner_nblks == 1 &&
        md->format_desc.blocking.inner_idxs[0] == 1)
        blk = (int)md->format_desc.blocking.inner_blks[0];
    dnnl_primitive_desc_destroy(pd);
    return blk == 8 || blk == 16 ? blk : 0;
}

int sc_conv_few_channels(int c)
{
    return c <= 4;
}
