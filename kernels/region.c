/* Region kernels (region.h): assemble the input window from the source
 * blocks into a dense buffer, run the convolution or pooling kernel on it,
 * and write the result into the destination block. */
#include "region.h"
#include "fail.h"

#include <stdlib.h>
#include <string.h>
#ifdef SC_USE_CUDA
#include "cuda_ctx.h"
#endif

struct sc_cuda_ctx;

static int rows(struct sc_box b)
{
    return b.r1 - b.r0;
}
static int cols(struct sc_box b)
{
    return b.c1 - b.c0;
}

/* A 4-D box of floats: for s < ns, ch < nc, r < nr, the nx floats at
 * src + s*ss + ch*sc + r*sr go to dst + s*ds + ch*dc + r*dr (strides in
 * floats); src NULL writes zeros.  The one copy primitive of a backend. */
struct box_copy {
    float *dst;
    size_t ds, dc, dr;
    const float *src;
    size_t ss, sc, sr;
    int ns, nc, nr, nx;
};

/* Where the window work runs: the CPU (oneDNN, memcpy) or a CUDA worker
 * (cuDNN and the kernels of cuda/, on the worker's stream), with the
 * worker's state.  The region functions below are the same for both. */
struct backend {
    struct sc_kernel_worker *kw;    /* CPU */
    const struct sc_cuda_ctx *cuda; /* CUDA */
    float *(*tmp)(const struct backend *be, int i, size_t n);
    void (*copy)(const struct backend *be, const struct box_copy *b);
    /* ws: the task's replicate of the scratch handle, cuDNN's workspace */
    void (*conv)(const struct backend *be, enum sc_conv_dir dir, const struct sc_conv_args *a, const float *in0,
                 const float *in1, float *out, float *bias, const struct sc_workspace *ws);
    void (*pool)(const struct backend *be, enum sc_pool_dir dir, const struct sc_pool_args *a, const float *in,
                 float *out, void *ws);
};

static void copy_box_cpu(const struct backend *be, const struct box_copy *b)
{
    (void)be;
    size_t len = (size_t)b->nx * sizeof(float);
    for (int s = 0; s < b->ns; s++)
        for (int ch = 0; ch < b->nc; ch++)
            for (int r = 0; r < b->nr; r++) {
                float *d = b->dst + s * b->ds + ch * b->dc + r * b->dr;
                if (b->src)
                    memcpy(d, b->src + s * b->ss + ch * b->sc + r * b->sr, len);
                else
                    memset(d, 0, len);
            }
}

/* Copy samples [s0, s0 + n) x c channels x win of the sources into buf
 * (n, c, rows(win), cols(win)); what no source covers is left alone. */
static void gather(const struct backend *be, const struct sc_region_src *src, float *const *bufs, int nsrc, int c,
                   int s0, int n, struct sc_box win, float *buf)
{
    size_t wh = rows(win), ww = cols(win);
    for (int i = 0; i < nsrc; i++) {
        const struct sc_region_src *b = &src[i];
        const float *p = bufs[i];
        int sa = s0 > b->s0 ? s0 : b->s0, sb = s0 + n < b->s0 + b->n ? s0 + n : b->s0 + b->n;
        struct sc_box x = sc_box_intersect(win, b->box);
        if (sa >= sb || sc_box_empty(x))
            continue;
        size_t bh = rows(b->box), bw = cols(b->box);
        be->copy(be, &(struct box_copy){
                         .dst = buf + ((size_t)(sa - s0) * c * wh + (x.r0 - win.r0)) * ww + (x.c0 - win.c0),
                         .ds = c * wh * ww,
                         .dc = wh * ww,
                         .dr = ww,
                         .src = p + ((size_t)(sa - b->s0) * c * bh + (x.r0 - b->box.r0)) * bw + (x.c0 - b->box.c0),
                         .ss = c * bh * bw,
                         .sc = bh * bw,
                         .sr = bw,
                         .ns = sb - sa,
                         .nc = c,
                         .nr = rows(x),
                         .nx = cols(x)});
    }
}

/* COPY and SUM: the destination's block (dst_n samples from dst_s0,
 * channels [dst_ch0, dst_ch0 + c), dst_box) from the parts of the sources
 * within it, copied (what no source covers is left alone) or summed in
 * source order over zeros (on the CPU: channel splitting's reductions). */
static void assemble(const struct backend *be, int sum, const struct sc_region_args *a, float *const *bufs)
{
    struct sc_box win = a->dst_box;
    float *dst = bufs[a->na];
    size_t wh = rows(win), ww = cols(win), plane = wh * ww;
    if (sum)
        memset(dst, 0, (size_t)a->dst_n * a->c * plane * sizeof(float));
    for (int i = 0; i < a->na; i++) {
        const struct sc_region_src *b = &a->src[i];
        const float *p = bufs[i];
        int bch0 = b->nch ? b->ch0 : a->dst_ch0, bnch = b->nch ? b->nch : a->c;
        int ca = a->dst_ch0 > bch0 ? a->dst_ch0 : bch0,
            cb = a->dst_ch0 + a->c < bch0 + bnch ? a->dst_ch0 + a->c : bch0 + bnch;
        int sa = a->dst_s0 > b->s0 ? a->dst_s0 : b->s0,
            sb = a->dst_s0 + a->dst_n < b->s0 + b->n ? a->dst_s0 + a->dst_n : b->s0 + b->n;
        struct sc_box x = sc_box_intersect(win, b->box);
        if (sa >= sb || ca >= cb || sc_box_empty(x))
            continue;
        size_t bh = rows(b->box), bw = cols(b->box);
        struct box_copy c = {.dst = dst + ((size_t)(sa - a->dst_s0) * a->c + (ca - a->dst_ch0)) * plane +
                                    (x.r0 - win.r0) * ww + (x.c0 - win.c0),
                             .ds = a->c * plane,
                             .dc = plane,
                             .dr = ww,
                             .src = p + ((size_t)(sa - b->s0) * bnch + (ca - bch0)) * bh * bw +
                                    (x.r0 - b->box.r0) * bw + (x.c0 - b->box.c0),
                             .ss = bnch * bh * bw,
                             .sc = bh * bw,
                             .sr = bw,
                             .ns = sb - sa,
                             .nc = cb - ca,
                             .nr = rows(x),
                             .nx = cols(x)};
        if (!sum) {
            be->copy(be, &c);
            continue;
        }
        for (int s = 0; s < c.ns; s++)
            for (int ch = 0; ch < c.nc; ch++)
                for (int r = 0; r < c.nr; r++) {
                    float *d = c.dst + s * c.ds + ch * c.dc + r * c.dr;
                    const float *q = c.src + s * c.ss + ch * c.sc + r * c.sr;
                    for (int k = 0; k < c.nx; k++)
                        d[k] += q[k];
                }
    }
    size_t all = (size_t)a->dst_n * a->c * plane;
    if (sum && a->relu)
        sc_relu_inplace(dst, all);
}

/* Write part (within both boxes) of buf (n samples from s0, c channels,
 * block bbox) into dst (samples from dst_s0, block dbox); buf NULL writes
 * zeros. */
static void scatter(const struct backend *be, float *dst, int dst_s0, struct sc_box dbox, int c, int s0, int n,
                    struct sc_box bbox, const float *buf, struct sc_box part)
{
    if (sc_box_empty(part))
        return;
    size_t dh = rows(dbox), dw = cols(dbox), bh = rows(bbox), bw = cols(bbox);
    be->copy(be, &(struct box_copy){.dst = dst + ((size_t)(s0 - dst_s0) * c * dh + (part.r0 - dbox.r0)) * dw +
                                           (part.c0 - dbox.c0),
                                    .ds = c * dh * dw,
                                    .dc = dh * dw,
                                    .dr = dw,
                                    .src = buf ? buf + (size_t)(part.r0 - bbox.r0) * bw + (part.c0 - bbox.c0) : NULL,
                                    .ss = c * bh * bw,
                                    .sc = bh * bw,
                                    .sr = bw,
                                    .ns = n,
                                    .nc = c,
                                    .nr = rows(part),
                                    .nx = cols(part)});
}

/* The input window of output region o under kernel k, stride s, padding
 * p, clipped to the image (h x w); *pt, *pl: the padding left above and to
 * the left of it. */
static struct sc_box in_window(struct sc_box o, int kh, int kw, int sh, int sw, int ph, int pw, int h, int w, int *pt,
                               int *pl)
{
    int r0 = o.r0 * sh - ph, r1 = (o.r1 - 1) * sh - ph + kh;
    int c0 = o.c0 * sw - pw, c1 = (o.c1 - 1) * sw - pw + kw;
    struct sc_box b = {r0 < 0 ? 0 : r0, r1 > h ? h : r1, c0 < 0 ? 0 : c0, c1 > w ? w : c1};
    *pt = b.r0 - r0;
    *pl = b.c0 - c0;
    return b;
}

/* The outputs whose windows touch input region x (clipped to oh x ow). */
static struct sc_box touching(struct sc_box x, int kh, int kw, int sh, int sw, int ph, int pw, int oh, int ow)
{
#define FLOORDIV(a, b) ((a) >= 0 ? (a) / (b) : -((-(a) + (b)-1) / (b)))
    struct sc_box o = {FLOORDIV(x.r0 + ph - kh, sh) + 1, FLOORDIV(x.r1 - 1 + ph, sh) + 1,
                       FLOORDIV(x.c0 + pw - kw, sw) + 1, FLOORDIV(x.c1 - 1 + pw, sw) + 1};
#undef FLOORDIV
    struct sc_box all = {0, oh, 0, ow};
    return sc_box_intersect(o, all);
}

static void fail(const char *op)
{
    sc_fail_record(op, "out of memory for a region window");
}

static void conv_fwd(const struct sc_region_args *a, float *const *buffers, const struct backend *be,
                     const struct sc_workspace *ws)
{
    const struct sc_conv_args *g = &a->conv;
    int pt, pl;
    struct sc_box win = in_window(a->region, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->h, g->w, &pt, &pl);
    struct sc_conv_args k = *g;
    k.n = a->n, k.h = rows(win), k.w = cols(win), k.ph = pt, k.pw = pl;
    k.oh = rows(a->region), k.ow = cols(a->region);
    float *x = be->tmp(be, 0, (size_t)k.n * k.c * k.h * k.w), *y = be->tmp(be, 1, (size_t)k.n * k.f * k.oh * k.ow);
    if (!x || !y)
        return fail("conv_fwd region");
    gather(be, a->src, buffers, a->na, k.c, a->s0, a->n, win, x);
    float *params = buffers[a->na];
    be->conv(be, SC_CONV_FWD, &k, x, params, y, params + (size_t)k.f * k.c * k.kh * k.kw, ws);
    scatter(be, buffers[a->na + 1], a->dst_s0, a->dst_box, k.f, a->s0, a->n, a->region, y, a->region);
}

static void conv_bwd_filter(const struct sc_region_args *a, float *const *buffers, const struct backend *be,
                            const struct sc_workspace *ws)
{
    const struct sc_conv_args *g = &a->conv;
    int pt, pl;
    struct sc_box win = in_window(a->region, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->h, g->w, &pt, &pl);
    struct sc_conv_args k = *g;
    k.n = a->n, k.h = rows(win), k.w = cols(win), k.ph = pt, k.pw = pl;
    k.oh = rows(a->region), k.ow = cols(a->region), k.relu = 0;
    float *x = be->tmp(be, 0, (size_t)k.n * k.c * k.h * k.w), *dy = be->tmp(be, 1, (size_t)k.n * k.f * k.oh * k.ow);
    if (!x || !dy)
        return fail("conv_bwd_filter region");
    gather(be, a->src, buffers, a->na, k.c, a->s0, a->n, win, x);
    gather(be, a->src + a->na, buffers + a->na, a->nb, k.f, a->s0, a->n, a->region, dy);
    float *dparams = buffers[a->na + a->nb];
    be->conv(be, SC_CONV_BWD_FILTER, &k, x, dy, dparams, dparams + (size_t)k.f * k.c * k.kh * k.kw, ws);
}

/* Backward data of convolution and pooling share the shape of the work:
 * the outputs touching the region, their dy window, a dx window computed
 * without padding (conv) or with the image's padding (pooling), and the
 * region cut out of it. */
static void conv_bwd_data(const struct sc_region_args *a, float *const *buffers, const struct backend *be,
                          const struct sc_workspace *ws)
{
    const struct sc_conv_args *g = &a->conv;
    float *dst = buffers[a->na + 1];
    struct sc_box o = touching(a->region, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->oh, g->ow);
    scatter(be, dst, a->dst_s0, a->dst_box, g->c, a->s0, a->n, a->region, NULL, a->region);
    if (sc_box_empty(o))
        return;
    struct sc_box win = {o.r0 * g->sh - g->ph, (o.r1 - 1) * g->sh - g->ph + g->kh, o.c0 * g->sw - g->pw,
                         (o.c1 - 1) * g->sw - g->pw + g->kw};
    struct sc_conv_args k = *g;
    k.n = a->n, k.h = rows(win), k.w = cols(win), k.ph = 0, k.pw = 0, k.oh = rows(o), k.ow = cols(o), k.relu = 0;
    float *dy = be->tmp(be, 0, (size_t)k.n * k.f * k.oh * k.ow), *dx = be->tmp(be, 1, (size_t)k.n * k.c * k.h * k.w);
    if (!dy || !dx)
        return fail("conv_bwd_data region");
    gather(be, a->src, buffers, a->na, k.f, a->s0, a->n, o, dy);
    be->conv(be, SC_CONV_BWD_DATA, &k, dy, buffers[a->na], dx, NULL, ws);
    scatter(be, dst, a->dst_s0, a->dst_box, k.c, a->s0, a->n, win, dx, sc_box_intersect(win, a->region));
}

static void pool_fwd(const struct sc_region_args *a, float *const *buffers, const struct backend *be)
{
    const struct sc_pool_args *g = &a->pool;
    int pt, pl;
    struct sc_box win = in_window(a->region, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->h, g->w, &pt, &pl);
    struct sc_pool_args k = *g;
    k.n = a->n, k.h = rows(win), k.w = cols(win), k.ph = pt, k.pw = pl;
    k.oh = rows(a->region), k.ow = cols(a->region);
    size_t ny = (size_t)k.n * k.c * k.oh * k.ow;
    float *x = be->tmp(be, 0, (size_t)k.n * k.c * k.h * k.w), *y = be->tmp(be, 1, ny), *ws = be->tmp(be, 2, ny);
    if (!x || !y || !ws)
        return fail("pool_fwd region");
    gather(be, a->src, buffers, a->na, k.c, a->s0, a->n, win, x);
    be->pool(be, SC_POOL_FWD, &k, x, y, ws);
    scatter(be, buffers[a->na], a->dst_s0, a->dst_box, k.c, a->s0, a->n, a->region, y, a->region);
}

/* Max pooling recomputes the forward pass of the window to learn which
 * input won each output (oneDNN's workspace), rather than keeping
 * workspaces of every region between the passes. */
static void pool_bwd(const struct sc_region_args *a, float *const *buffers, const struct backend *be)
{
    const struct sc_pool_args *g = &a->pool;
    float *dst = buffers[a->na + a->nb];
    struct sc_box o = touching(a->region, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->oh, g->ow);
    scatter(be, dst, a->dst_s0, a->dst_box, g->c, a->s0, a->n, a->region, NULL, a->region);
    if (sc_box_empty(o))
        return;
    int pt, pl;
    struct sc_box win = in_window(o, g->kh, g->kw, g->sh, g->sw, g->ph, g->pw, g->h, g->w, &pt, &pl);
    struct sc_pool_args k = *g;
    k.n = a->n, k.h = rows(win), k.w = cols(win), k.ph = pt, k.pw = pl, k.oh = rows(o), k.ow = cols(o);
    size_t ny = (size_t)k.n * k.c * k.oh * k.ow;
    float *dy = be->tmp(be, 0, ny), *x = be->tmp(be, 1, (size_t)k.n * k.c * k.h * k.w), *y = be->tmp(be, 2, ny * 2);
    if (!dy || !x || !y)
        return fail("pool_bwd region");
    void *ws = y + ny; /* at most 4 bytes per output */
    gather(be, a->src, buffers, a->na, k.c, a->s0, a->n, o, dy);
    if (k.max) {
        gather(be, a->src + a->na, buffers + a->na, a->nb, k.c, a->s0, a->n, win, x);
        be->pool(be, SC_POOL_FWD, &k, x, y, ws);
    }
    be->pool(be, SC_POOL_BWD, &k, dy, x, ws); /* dx into x's buffer: x is no longer needed */
    scatter(be, dst, a->dst_s0, a->dst_box, k.c, a->s0, a->n, win, x, sc_box_intersect(win, a->region));
}

static void region_run(const struct backend *be, const struct sc_region_args *a, float *const *buffers,
                       const struct sc_workspace *ws)
{
    switch (a->op) {
    case SC_REGION_COPY:
        assemble(be, 0, a, buffers);
        break;
    case SC_REGION_SUM:
        assemble(be, 1, a, buffers);
        break;
    case SC_REGION_CONV_FWD:
        conv_fwd(a, buffers, be, ws);
        break;
    case SC_REGION_CONV_BWD_DATA:
        conv_bwd_data(a, buffers, be, ws);
        break;
    case SC_REGION_CONV_BWD_FILTER:
        conv_bwd_filter(a, buffers, be, ws);
        break;
    case SC_REGION_POOL_FWD:
        pool_fwd(a, buffers, be);
        break;
    case SC_REGION_POOL_BWD:
        pool_bwd(a, buffers, be);
        break;
    }
}

/* ---- on the CPU ----
 * The window buffers are the worker's (a worker runs one task at a time),
 * grown on demand; they belong to its kernel state, which the codelets
 * free at shutdown: thread-local buffers were lost, unfreed, when the
 * worker threads exited (LeakSanitizer). */

static float *tmp_cpu(const struct backend *be, int i, size_t n)
{
    return sc_kernel_worker_buf(be->kw, i, n * sizeof(float));
}

/* oneDNN keeps its own scratchpad per thread. */
static void conv_cpu(const struct backend *be, enum sc_conv_dir dir, const struct sc_conv_args *a, const float *in0,
                     const float *in1, float *out, float *bias, const struct sc_workspace *ws)
{
    (void)ws;
    sc_conv_compute(be->kw, dir, a, in0, in1, out, bias);
}

static void pool_cpu(const struct backend *be, enum sc_pool_dir dir, const struct sc_pool_args *a, const float *in,
                     float *out, void *ws)
{
    sc_pool_compute(be->kw, dir, a, in, out, ws);
}

void sc_region_compute(struct sc_kernel_worker *w, const struct sc_region_args *a, float *const *buf,
                       const struct sc_workspace *ws)
{
    const struct backend cpu = {w, NULL, tmp_cpu, copy_box_cpu, conv_cpu, pool_cpu};
    region_run(&cpu, a, buf, ws);
}

#ifdef SC_USE_CUDA
/* ---- on a CUDA worker: its stream and device buffers ---- */

static float *tmp_cuda(const struct backend *be, int i, size_t n)
{
    return sc_cuda_buf(be->cuda->cw, SC_CUDA_BUF_REGION0 + i, n * sizeof(float));
}

static void copy_box_cuda(const struct backend *be, const struct box_copy *b)
{
    sc_cuda_check(sc_cuda_copy_box(b->dst, b->ds, b->dc, b->dr, b->src, b->ss, b->sc, b->sr, b->ns, b->nc, b->nr, b->nx,
                                   be->cuda->stream),
                  "region copy");
}

static void conv_cuda(const struct backend *be, enum sc_conv_dir dir, const struct sc_conv_args *a, const float *in0,
                      const float *in1, float *out, float *bias, const struct sc_workspace *ws)
{
    sc_conv_compute_cuda(be->cuda, dir, a, in0, in1, out, bias, ws);
}

static void pool_cuda(const struct backend *be, enum sc_pool_dir dir, const struct sc_pool_args *a, const float *in,
                      float *out, void *ws)
{
    sc_pool_compute_cuda(be->cuda, dir, a, in, out, ws);
}

void sc_region_compute_cuda(const struct sc_cuda_ctx *c, const struct sc_region_args *a, float *const *buf,
                            const struct sc_workspace *ws)
{
    const struct backend gpu = {NULL, c, tmp_cuda, copy_box_cuda, conv_cuda, pool_cuda};
    region_run(&gpu, a, buf, ws);
}
#endif
