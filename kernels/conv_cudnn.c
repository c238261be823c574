/* Convolution forward, backward data and backward weights + bias through
 * cuDNN, for the CUDA workers (cuda_ctx.h).  Built with SC_USE_CUDA
 * only. */
#include "cuda_ctx.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* cuDNN pads symmetrically; a tile of a spatially split tensor (and a
 * region window) has its padding on one side only, so such inputs are
 * copied into a zero-padded buffer and convolved without padding.  The
 * algorithms are picked once per shape and worker from cuDNN's heuristics
 * (the first that works in plain FP32: CUDNN_FMA_MATH, no TF32, so that
 * results match the CPU's to float rounding) among those whose workspace
 * fits the workspace the caller gives (a CUDA worker's replicate of the
 * codelets' scratch handle, allocated once per worker from the runtime's
 * own device allocator). */

struct conv_cuda_geom {
    int explicit_pad; /* 1: x goes through a padded copy, cuDNN pads 0 */
    int pt, pl;       /* padding above and left of x in that copy */
    int hp, wp;       /* the input cuDNN sees */
    int ph, pw;       /* cuDNN's (symmetric) padding */
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
 * workspace, indexed by enum sc_conv_dir; chosen[dir] says whether
 * direction dir has been chosen. */
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
#define PICK_ALGO(perf, count, limit, out, ws_out)                                                                     \
    do {                                                                                                               \
        int found_ = 0;                                                                                                \
        for (int pass_ = 0; pass_ < 2 && !found_; pass_++)                                                             \
            for (int i_ = 0; i_ < (count) && !found_; i_++)                                                            \
                if ((perf)[i_].status == CUDNN_STATUS_SUCCESS && (perf)[i_].memory <= (limit) &&                       \
                    (perf)[i_].mathType == CUDNN_FMA_MATH &&                                                           \
                    (pass_ || (perf)[i_].determinism == CUDNN_DETERMINISTIC)) {                                        \
                    (out) = (perf)[i_].algo;                                                                           \
                    (ws_out) = (perf)[i_].memory;                                                                      \
                    found_ = 1;                                                                                        \
                }                                                                                                      \
        if (!found_) {                                                                                                 \
            sc_fail_record(op, "no cuDNN algorithm fits a workspace of %zu bytes (SC_CUDNN_WORKSPACE_MB)",             \
                           (size_t)(limit));                                                                           \
            return -1;                                                                                                 \
        }                                                                                                              \
    } while (0)

static void *conv_cuda_algos_create(const void *key)
{
    (void)key;
    return calloc(1, sizeof(struct conv_cuda_algos)); /* none chosen yet */
}

static int conv_cuda_choose(cudnnHandle_t h, enum sc_conv_dir dir, const struct conv_cuda_desc *d,
                            struct conv_cuda_algos *al, size_t limit, const char *op)
{
    int n = 0;
    if (al->chosen[dir])
        return 0;
    if (dir == SC_CONV_FWD) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        if (sc_cudnn_check(cudnnGetConvolutionForwardAlgorithm_v7(h, d->x, d->w, d->conv, d->y,
                                                                  CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf),
                           op))
            return -1;
        PICK_ALGO(perf, n, limit, al->fwd, al->ws[0]);
        if (sc_cudnn_check(cudnnGetConvolutionForwardWorkspaceSize(h, d->x, d->w, d->conv, d->y, al->fwd, &al->ws[0]),
                           op))
            return -1;
    } else if (dir == SC_CONV_BWD_DATA) {
        cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
        if (sc_cudnn_check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d->w, d->y, d->conv, d->x,
                                                                       CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf),
                           op))
            return -1;
        PICK_ALGO(perf, n, limit, al->bwd_data, al->ws[1]);
        if (sc_cudnn_check(
                cudnnGetConvolutionBackwardDataWorkspaceSize(h, d->w, d->y, d->conv, d->x, al->bwd_data, &al->ws[1]),
                op))
            return -1;
    } else {
        cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
        if (sc_cudnn_check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(
                               h, d->x, d->y, d->conv, d->w, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf),
                           op))
            return -1;
        PICK_ALGO(perf, n, limit, al->bwd_filter, al->ws[2]);
        if (sc_cudnn_check(cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d->x, d->y, d->conv, d->w, al->bwd_filter,
                                                                          &al->ws[2]),
                           op))
            return -1;
    }
    if (al->ws[dir] > limit) { /* the size query disagreed with the heuristics' */
        sc_fail_record(op, "cuDNN wants a workspace of %zu bytes, over the %zu of SC_CUDNN_WORKSPACE_MB", al->ws[dir],
                       limit);
        return -1;
    }
    al->chosen[dir] = 1;
    return 0;
}

void sc_conv_compute_cuda(const struct sc_cuda_ctx *c, enum sc_conv_dir dir, const struct sc_conv_args *a,
                          const float *in0, const float *in1, float *out, float *bias, const struct sc_workspace *wsp)
{
    static const char *const ops[3] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"};
    const char *op = ops[dir];
    static const float one = 1.0f, zero = 0.0f;
    cudnnHandle_t h = c->cudnn;
    cudaStream_t s = c->stream;
    struct sc_conv_args key = *a;
    key.relu = 0;
    struct conv_cuda_algos *al =
        h ? sc_kernel_worker_prim(c->kw, SC_PRIM_CUDNN_CONV_ALGOS, &key, sizeof key, conv_cuda_algos_create, free)
          : NULL;
    struct conv_cuda_geom g;
    struct conv_cuda_desc d;
    if (!al) {
        if (!h) /* else recorded by the cache */
            sc_fail_record(op, "no cuDNN handle on this worker");
        return;
    }
    conv_cuda_geom(a, &g);
    if (conv_cuda_desc(&d, a, &g, op))
        return;
    float *xp = NULL;
    size_t nxp = (size_t)a->n * a->c * g.hp * g.wp, plane = (size_t)g.hp * g.wp;
    size_t off = (size_t)g.pt * g.wp + g.pl; /* of x in the padded copy */
    if (conv_cuda_choose(h, dir, &d, al, wsp->bytes, op) ||
        (g.explicit_pad &&
         !(xp = sc_cuda_buf(c->cw, dir == SC_CONV_BWD_DATA ? SC_CUDA_BUF_CONV_PAD2 : SC_CUDA_BUF_CONV_PAD,
                            nxp * sizeof(float))))) {
        /* the algorithm's choice has recorded its failure; the buffer's may not have */
        sc_fail_record(op, "no device buffer for the padded input");
        conv_cuda_desc_destroy(&d);
        return;
    }
    void *ws = al->ws[dir] ? wsp->ptr : NULL;
    /* The input x (fwd, filter) into its padded copy. */
    if (xp && dir != SC_CONV_BWD_DATA &&
        (sc_cuda_check(cudaMemsetAsync(xp, 0, nxp * sizeof(float), s), op) ||
         sc_cuda_check(sc_cuda_copy_box(xp + off, (size_t)a->c * plane, plane, (size_t)g.wp, in0,
                                        (size_t)a->c * a->h * a->w, (size_t)a->h * a->w, (size_t)a->w, a->n, a->c, a->h,
                                        a->w, s),
                       op)))
        goto done;
    const float *x = xp ? xp : in0;
    switch (dir) {
    case SC_CONV_FWD:
        if (sc_cudnn_check(
                cudnnConvolutionForward(h, &one, d.x, x, d.w, in1, d.conv, al->fwd, ws, al->ws[0], &zero, d.y, out),
                op) ||
            (!a->nobias && sc_cudnn_check(cudnnAddTensor(h, &one, d.b, bias, &one, d.y, out), op)))
            break;
        if (a->relu)
            sc_cuda_check(sc_cuda_relu(out, (size_t)a->n * a->f * a->oh * a->ow, s), op);
        break;
    case SC_CONV_BWD_DATA:
        if (sc_cudnn_check(cudnnConvolutionBackwardData(h, &one, d.w, in1, d.y, in0, d.conv, al->bwd_data, ws,
                                                        al->ws[1], &zero, d.x, xp ? xp : out),
                           op))
            break;
        if (xp) /* cut dx out of the padded gradient */
            sc_cuda_check(sc_cuda_copy_box(out, (size_t)a->c * a->h * a->w, (size_t)a->h * a->w, (size_t)a->w, xp + off,
                                           (size_t)a->c * plane, plane, (size_t)g.wp, a->n, a->c, a->h, a->w, s),
                          op);
        break;
    case SC_CONV_BWD_FILTER:
        if (sc_cudnn_check(cudnnConvolutionBackwardFilter(h, &one, d.x, x, d.y, in1, d.conv, al->bwd_filter, ws,
                                                          al->ws[2], &zero, d.w, out),
                           op))
            break;
        if (!a->nobias)
            sc_cudnn_check(cudnnConvolutionBackwardBias(h, &one, d.y, in1, &zero, d.b, bias), op);
        break;
    }
done:
    conv_cuda_desc_destroy(&d);
}
