/* Convolution forward (optionally with ReLU), backward data, backward
 * weights + bias, through oneDNN. */
#include "cl_common.h"

#include <stdlib.h>
#include <string.h>
#ifdef SC_USE_CUDA
#include "cuda/sc_cuda.h"

#include <starpu_cuda.h>
#endif

#define TRY(x) do { if ((x) != dnnl_success) goto fail; } while (0)

struct conv_mds {
    dnnl_memory_desc_t x, w, b, y;
};

/* The caller's buffers are NCHW/OIHW (plain).  oneDNN's fast kernels want
 * channel-blocked layouts (measured 2-4x faster for LeNet's layers, reorders
 * included), so the primitives are created on "any" layouts and reorders
 * bridge the two. */
static void conv_mds(struct conv_mds *m, const struct sc_conv_args *a, int plain)
{
    dnnl_format_tag_t act = plain ? dnnl_nchw : dnnl_format_tag_any;
    sc_md_nchw(&m->x, a->n, a->c, a->h, a->w, act);
    sc_md_nchw(&m->w, a->f, a->c, a->kh, a->kw, plain ? dnnl_oihw : dnnl_format_tag_any);
    sc_md_1d(&m->b, a->f);
    sc_md_nchw(&m->y, a->n, a->f, a->oh, a->ow, act);
}

#define CONV_GEOMETRY(a)                                                              \
    dnnl_dims_t strides = {(a)->sh, (a)->sw}, pad_l = {(a)->ph, (a)->pw},             \
                pad_r = {sc_pad_r((a)->h, (a)->kh, (a)->sh, (a)->ph, (a)->oh),        \
                         sc_pad_r((a)->w, (a)->kw, (a)->sw, (a)->pw, (a)->ow)}

/* The forward descriptor, also the hint the backward primitives need. */
static dnnl_primitive_desc_t conv_fwd_pd(const struct sc_conv_args *a, int relu)
{
    struct conv_mds m;
    dnnl_convolution_desc_t d;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t po = NULL;
    dnnl_primitive_desc_t pd = NULL;
    CONV_GEOMETRY(a);
    conv_mds(&m, a, 0);
    TRY(dnnl_convolution_forward_desc_init(&d, dnnl_forward_training, dnnl_convolution_direct,
                                           &m.x, &m.w, &m.b, &m.y, strides, pad_l, pad_r));
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
static void *conv_prim_make(dnnl_primitive_desc_t pd, const dnnl_memory_desc_t *u[3],
                            const dnnl_query_t q[3], int output, const dnnl_memory_desc_t *bias)
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
    conv_mds(&m, a, 1);
    const dnnl_memory_desc_t *u[3] = {&m.x, &m.w, &m.y};
    const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_weights_md, dnnl_query_dst_md};
    return conv_prim_make(conv_fwd_pd(a, a->relu), u, q, 2, &m.b);
}

static void *conv_bwd_data_create(const void *key)
{
    const struct sc_conv_args *a = key;
    struct conv_mds m, any;
    dnnl_convolution_desc_t d;
    dnnl_primitive_desc_t hint = conv_fwd_pd(a, 0), pd = NULL;
    CONV_GEOMETRY(a);
    conv_mds(&m, a, 1);
    /* Blocking pads c to 16: for a few input channels the plain
     * (gemm-based) kernel is faster (c = 1: 0.36 ms against 1.7 ms). */
    conv_mds(&any, a, a->c <= 4);
    if (hint && dnnl_convolution_backward_data_desc_init(&d, dnnl_convolution_direct, &any.x, &any.w,
                                                         &any.y, strides, pad_l, pad_r) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &d, NULL, sc_dnnl_engine(), hint) != dnnl_success)
        pd = NULL;
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    const dnnl_memory_desc_t *u[3] = {&m.y, &m.w, &m.x};
    const dnnl_query_t q[3] = {dnnl_query_diff_dst_md, dnnl_query_weights_md, dnnl_query_diff_src_md};
    return conv_prim_make(pd, u, q, 2, NULL);
}

static void *conv_bwd_filter_create(const void *key)
{
    const struct sc_conv_args *a = key;
    struct conv_mds m, any;
    dnnl_convolution_desc_t d;
    dnnl_primitive_desc_t hint = conv_fwd_pd(a, 0), pd = NULL;
    CONV_GEOMETRY(a);
    conv_mds(&m, a, 1);
    conv_mds(&any, a, 0);
    if (hint && dnnl_convolution_backward_weights_desc_init(&d, dnnl_convolution_direct, &any.x, &any.w,
                                                            &m.b, &any.y, strides, pad_l,
                                                            pad_r) == dnnl_success &&
        dnnl_primitive_desc_create(&pd, &d, NULL, sc_dnnl_engine(), hint) != dnnl_success)
        pd = NULL;
    if (hint)
        dnnl_primitive_desc_destroy(hint);
    const dnnl_memory_desc_t *u[3] = {&m.x, &m.y, &m.w};
    const dnnl_query_t q[3] = {dnnl_query_src_md, dnnl_query_diff_dst_md, dnnl_query_diff_weights_md};
    return conv_prim_make(pd, u, q, 2, &m.b);
}

/* Runs a cached primitive on (in0, in1) -> out, plus bias if any; the
 * primitive argument ids are given in the io order. */
static void conv_run(const char *op, int which, const struct sc_conv_args *a, const int ids[3],
                     const float *in0, const float *in1, float *out, float *bias)
{
    static void *(*const create[])(const void *) = {conv_fwd_create, conv_bwd_data_create,
                                                    conv_bwd_filter_create};
    static const int prim_op[] = {SC_PRIM_CONV_FWD, SC_PRIM_CONV_BWD_DATA, SC_PRIM_CONV_BWD_FILTER};
    static const int bias_id[] = {DNNL_ARG_BIAS, 0, DNNL_ARG_DIFF_BIAS};
    struct sc_conv_args key = *a;
    if (which)
        key.relu = 0; /* backward does not depend on it: share one entry */
    struct conv_prim *c = sc_prim_get(prim_op[which], &key, sizeof key, create[which], conv_prim_destroy);
    dnnl_stream_t s = sc_dnnl_stream();
    if (!c || !s)
        return;
    if (sc_io_bind(c->io, 3)) {
        sc_kernel_failed(op);
        return;
    }
    dnnl_exec_arg_t args[4] = {{ids[0], sc_io_in(&c->io[0], in0, s)},
                               {ids[1], sc_io_in(&c->io[1], in1, s)},
                               {ids[2], sc_io_out(&c->io[2], out)},
                               {bias_id[which], c->bias}};
    int nargs = c->bias ? 4 : 3;
    if (!args[0].memory || !args[1].memory || !args[2].memory ||
        (c->bias && dnnl_memory_set_data_handle(c->bias, bias) != dnnl_success) ||
        sc_exec(c->p, s, nargs, args) || sc_io_out_done(&c->io[2], s))
        sc_kernel_failed(op);
}

static size_t conv_nw(const struct sc_conv_args *a)
{
    return (size_t)a->f * a->c * a->kh * a->kw;
}

#ifdef SC_USE_CUDA
/* ---- the same three kernels through cuDNN ----
 *
 * cuDNN pads symmetrically; a tile of a spatially split tensor (and a
 * region window) has its padding on one side only, so such inputs are
 * copied into a zero-padded buffer and convolved without padding.  The
 * algorithms are picked once per shape and worker from cuDNN's heuristics
 * (the first that works in plain FP32: CUDNN_FMA_MATH, no TF32, so that
 * results match the CPU's to float rounding) among those whose workspace
 * fits the task's replicate of the scratch handle (sc_workspace_handle),
 * which StarPU allocates once per worker from its own device allocator. */

struct conv_cuda_geom {
    int explicit_pad;  /* 1: x goes through a padded copy, cuDNN pads 0 */
    int pt, pl;        /* padding above and left of x in that copy */
    int hp, wp;        /* the input cuDNN sees */
    int ph, pw;        /* cuDNN's (symmetric) padding */
};

static void conv_cuda_geom(const struct sc_conv_args *a, struct conv_cuda_geom *g)
{
    int prh = sc_pad_r(a->h, a->kh, a->sh, a->ph, a->oh), prw = sc_pad_r(a->w, a->kw, a->sw, a->pw, a->ow);
    int sym = prh == a->ph && prw == a->pw && (a->h + 2 * a->ph - a->kh) / a->sh + 1 == a->oh &&
              (a->w + 2 * a->pw - a->kw) / a->sw + 1 == a->ow;
    if (sym)
        *g = (struct conv_cuda_geom){0, 0, 0, a->h, a->w, a->ph, a->pw};
    else
        *g = (struct conv_cuda_geom){1, a->ph, a->pw, a->h + a->ph + prh, a->w + a->pw + prw, 0, 0};
}

struct conv_cuda_desc {
    cudnnTensorDescriptor_t x, y, b;
    cudnnFilterDescriptor_t w;
    cudnnConvolutionDescriptor_t conv;
};

static void conv_cuda_desc_destroy(struct conv_cuda_desc *d)
{
    if (d->x)
        cudnnDestroyTensorDescriptor(d->x);
    if (d->y)
        cudnnDestroyTensorDescriptor(d->y);
    if (d->b)
        cudnnDestroyTensorDescriptor(d->b);
    if (d->w)
        cudnnDestroyFilterDescriptor(d->w);
    if (d->conv)
        cudnnDestroyConvolutionDescriptor(d->conv);
}

static int conv_cuda_desc(struct conv_cuda_desc *d, const struct sc_conv_args *a, const struct conv_cuda_geom *g,
                          const char *op)
{
    memset(d, 0, sizeof *d);
    if (sc_cudnn_check(cudnnCreateTensorDescriptor(&d->x), op) ||
        sc_cudnn_check(cudnnCreateTensorDescriptor(&d->y), op) ||
        sc_cudnn_check(cudnnCreateTensorDescriptor(&d->b), op) ||
        sc_cudnn_check(cudnnCreateFilterDescriptor(&d->w), op) ||
        sc_cudnn_check(cudnnCreateConvolutionDescriptor(&d->conv), op) ||
        sc_cudnn_check(cudnnSetTensor4dDescriptor(d->x, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->n, a->c, g->hp, g->wp),
                       op) ||
        sc_cudnn_check(cudnnSetTensor4dDescriptor(d->y, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, a->n, a->f, a->oh, a->ow),
                       op) ||
        sc_cudnn_check(cudnnSetTensor4dDescriptor(d->b, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, a->f, 1, 1), op) ||
        sc_cudnn_check(cudnnSetFilter4dDescriptor(d->w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, a->f, a->c, a->kh, a->kw),
                       op) ||
        sc_cudnn_check(cudnnSetConvolution2dDescriptor(d->conv, g->ph, g->pw, a->sh, a->sw, 1, 1,
                                                       CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
                       op) ||
        sc_cudnn_check(cudnnSetConvolutionMathType(d->conv, CUDNN_FMA_MATH), op)) {
        conv_cuda_desc_destroy(d);
        return -1;
    }
    return 0;
}

/* Per shape and worker: the algorithm of each direction and its
 * workspace; chosen[i] says whether direction i has been chosen. */
struct conv_cuda_algos {
    int chosen[3];
    cudnnConvolutionFwdAlgo_t fwd;
    cudnnConvolutionBwdDataAlgo_t bwd_data;
    cudnnConvolutionBwdFilterAlgo_t bwd_filter;
    size_t ws[3];
};

/* Heuristics list the algorithms best first.  Only FMA-math entries: the
 * descriptor is set to CUDNN_FMA_MATH (no TF32), so others would not run
 * as listed.  Deterministic ones first: the atomics of the others change
 * the last bits from run to run, and a replicated layer's gradient, which
 * every rank computes for itself, must have the same bits on every rank;
 * else the first that fits the workspace limit. */
#define PICK_ALGO(perf, count, limit, out, ws_out)                                                              \
    do {                                                                                                        \
        int found_ = 0;                                                                                         \
        for (int pass_ = 0; pass_ < 2 && !found_; pass_++)                                                      \
            for (int i_ = 0; i_ < (count) && !found_; i_++)                                                     \
                if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].memory <= (limit) &&                \
                    (perf)[i_].mathType == CUDNN_FMA_MATH &&                                                    \
                    (pass_ || (perf)[i_].determinism == CUDNN_DETERMINISTIC)) {                                 \
                    (out) = (perf)[i_].algo;                                                                    \
                    (ws_out) = (perf)[i_].memory;                                                               \
                    found_ = 1;                                                                                 \
                }                                                                                               \
        if (!found_) {                                                                                          \
            fprintf(stderr, "starconv: %s: no cuDNN algorithm fits a workspace of %zu bytes "                   \
                    "(SC_CUDNN_WORKSPACE_MB)\n", op, (size_t)(limit));                                          \
            return -1;                                                                                          \
        }                                                                                                       \
    } while (0)

static void *conv_cuda_algos_create(const void *key)
{
    (void)key;
    return calloc(1, sizeof(struct conv_cuda_algos)); /* none chosen yet */
}

static int conv_cuda_choose(cudnnHandle_t h, int which, const struct conv_cuda_desc *d, struct conv_cuda_algos *al,
                            size_t limit, const char *op)
{
    int n = 0;
    if (al->chosen[which])
        return 0;
    if (which == 0) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (sc_cudnn_check(cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y,
                                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf),
                           op))
            return -1;
        PICK_ALGO(perf, n, limit, al->fwd, al->ws[0]);
        if (sc_cudnn_check(cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y, al->fwd, &al->ws[0]),
                           op))
            return -1;
    } else if (which == 1) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (sc_cudnn_check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x,
                                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n,
                                                                       perf),
                           op))
            return -1;
        PICK_ALGO(perf, n, limit, al->bwd_data, al->ws[1]);
        if (sc_cudnn_check(cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->w, d->y, d->conv, d->x, al->bwd_data,
                                                                        &al->ws[1]),
                           op))
            return -1;
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (sc_cudnn_check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d->x, d->y, d->conv, d->w,
                                                                         CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n,
                                                                         perf),
                           op))
            return -1;
        PICK_ALGO(perf, n, limit, al->bwd_filter, al->ws[2]);
        if (sc_cudnn_check(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->x, d->y, d->conv, d->w,
                                                                          al->bwd_filter, &al->ws[2]),
                           op))
            return -1;
    }
    if (al->ws[which] > limit) { /* the size query disagreed with the heuristics' */
        fprintf(stderr, "starconv: %s: cuDNN wants a workspace of %zu bytes, over the %zu of "
                "SC_CUDNN_WORKSPACE_MB\n", op, al->ws[which], limit);
        return -1;
    }
    al->chosen[which] = 1;
    return 0;
}

void sc_conv_compute_cuda(int which, const struct sc_conv_args *a, const float *in0, const float *in1, float *out,
                          float *bias, const struct sc_workspace *wsp)
{
    static const char *const ops[3] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"};
    const char *op = ops[which];
    static const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = sc_cudnn_handle();
    cudaStream_t s = starpu_cuda_get_local_stream();
    struct sc_conv_args key = *a;
    key.relu = 0;
    struct conv_cuda_algos *al =
        h ? sc_prim_get(SC_PRIM_CUDNN_CONV_ALGOS, &key, sizeof key, conv_cuda_algos_create, free) : NULL;
    struct conv_cuda_geom g;
    struct conv_cuda_desc d;
    if (!al) {
        sc_kernel_failed(op);
        return;
    }
    conv_cuda_geom(a, &g);
    if (conv_cuda_desc(&d, a, &g, op))
        return;
    float *xp = NULL;
    size_t nxp = (size_t)a->n * a->c * g.hp * g.wp, plane = (size_t)g.hp * g.wp;
    size_t off = (size_t)g.pt * g.wp + g.pl; /* of x in the padded copy */
    if (conv_cuda_choose(h, which, &d, al, wsp->bytes, op) ||
        (g.explicit_pad && !(xp = sc_cuda_worker_buf(which == 1 ? SC_CUDA_BUF_CONV_PAD2 : SC_CUDA_BUF_CONV_PAD,
                                                     nxp * sizeof(float))))) {
        sc_kernel_failed(op);
        conv_cuda_desc_destroy(&d);
        return;
    }
    void *ws = al->ws[which] ? wsp->ptr : NULL;
    /* The input x (fwd, filter) into its padded copy. */
    if (xp && which != 1 &&
        (sc_cuda_check(cudaMemsetAsync(xp, 0, nxp * sizeof(float), s), op) ||
         sc_cuda_check(sc_cuda_copy_box(xp + off, (size_t)a->c * plane, plane, (size_t)g.wp, in0,
                                        (size_t)a->c * a->h * a->w, (size_t)a->h * a->w, (size_t)a->w, a->n, a->c,
                                        a->h, a->w, s),
                       op)))
        goto done;
    const float *x = xp ? xp : in0;
    switch (which) {
    case 0:
        if (sc_cudnn_check(cudnnConvolutionForward(h, &one, d.x, x, d.w, in1, d.conv, al->fwd, ws, al->ws[0], &zero,
                                                   d.y, out),
                           op) ||
            sc_cudnn_check(cudnnAddTensor(h, &one, d.b, bias, &one, d.y, out), op))
            break;
        if (a->relu)
            sc_cuda_check(sc_cuda_relu(out, (size_t)a->n * a->f * a->oh * a->ow, s), op);
        break;
    case 1:
        if (sc_cudnn_check(cudnnConvolutionBackwardData(h, &one, d.w, in1, d.y, in0, d.conv, al->bwd_data, ws,
                                                        al->ws[1], &zero, d.x, xp ? xp : out),
                           op))
            break;
        if (xp) /* cut dx out of the padded gradient */
            sc_cuda_check(sc_cuda_copy_box(out, (size_t)a->c * a->h * a->w, (size_t)a->h * a->w, (size_t)a->w,
                                           xp + off, (size_t)a->c * plane, plane, (size_t)g.wp, a->n, a->c, a->h,
                                           a->w, s),
                          op);
        break;
    case 2:
        if (sc_cudnn_check(cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, in1, d.conv, al->bwd_filter, ws,
                                                          al->ws[2], &zero, d.w, out),
                           op))
            break;
        sc_cudnn_check(cudnnConvolutionBackwardBias(h, &one, d.y, in1, &zero, d.b, bias), op);
        break;
    }
done:
    conv_cuda_desc_destroy(&d);
}

static void cl_conv_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *params = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    struct sc_workspace ws = sc_workspace_of(buffers[3]);
    sc_conv_compute_cuda(0, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), params,
                         (float *)STARPU_VECTOR_GET_PTR(buffers[2]), params + conv_nw(&a), &ws);
}

static void cl_conv_bwd_data_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_workspace ws = sc_workspace_of(buffers[3]);
    sc_conv_compute_cuda(1, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
                         NULL, &ws);
}

static void cl_conv_bwd_filter_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *dparams = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    struct sc_workspace ws = sc_workspace_of(buffers[3]);
    sc_conv_compute_cuda(2, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                         (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), dparams, dparams + conv_nw(&a), &ws);
}
#endif

/* ---- forward ---- */

static void cl_conv_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_conv_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    float *params = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    static const int ids[3] = {DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST};
    conv_run("conv_fwd", 0, &a, ids, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), params,
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
    if (a->n < 1 || a->c < 1 || a->h < 1 || a->w < 1 || a->f < 1 || a->kh < 1 || a->kw < 1 ||
        a->sh < 1 || a->sw < 1 || a->ph < 0 || a->pw < 0 || a->oh < 1 || a->ow < 1 ||
        a->ph >= a->kh || a->pw >= a->kw || prh <= -a->sh || prw <= -a->sw || prh >= a->kh ||
        prw >= a->kw)
        return sc_error(SC_ERR_SHAPE, "%s: inconsistent shape n%d c%d %dx%d f%d k%dx%d s%dx%d "
                        "p%dx%d -> %dx%d", op, a->n, a->c, a->h, a->w, a->f, a->kh, a->kw,
                        a->sh, a->sw, a->ph, a->pw, a->oh, a->ow);
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
    if ((ret = conv_args_check(a, "conv_fwd")) ||
        (ret = sc_check_vec(x, conv_nx(a), sizeof(float), "conv_fwd", "x")) ||
        (ret = sc_check_vec(params, conv_nw(a) + a->f, sizeof(float), "conv_fwd", "params")) ||
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
    static const int ids[3] = {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC};
    conv_run("conv_bwd_data", 1, &a, ids, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
             (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
             (float *)STARPU_VECTOR_GET_PTR(buffers[2]), NULL);
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
    static const int ids[3] = {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS};
    conv_run("conv_bwd_filter", 2, &a, ids, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
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
        (ret = sc_check_vec(dparams, conv_nw(a) + (size_t)a->f, sizeof(float), "conv_bwd_filter",
                            "dparams")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_conv_bwd_filter, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R,
                                               dy, STARPU_W, dparams, STARPU_SCRATCH, sc_workspace_handle(),
                                               SC_TASK_ATTRS(opts, name), 0),
                            "conv_bwd_filter");
}

/* ---- for the region kernels (cl_region.c) ---- */

void sc_conv_compute(int which, const struct sc_conv_args *a, const float *in0, const float *in1, float *out,
                     float *bias)
{
    static const int ids[3][3] = {{DNNL_ARG_SRC, DNNL_ARG_WEIGHTS, DNNL_ARG_DST},
                                  {DNNL_ARG_DIFF_DST, DNNL_ARG_WEIGHTS, DNNL_ARG_DIFF_SRC},
                                  {DNNL_ARG_SRC, DNNL_ARG_DIFF_DST, DNNL_ARG_DIFF_WEIGHTS}};
    static const char *const op[3] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"};
    conv_run(op[which], which, a, ids[which], in0, in1, out, bias);
}

int sc_conv_args_check(const struct sc_conv_args *a, const char *op)
{
    return conv_args_check(a, op);
}
