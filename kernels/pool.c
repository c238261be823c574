/* Max and average pooling, forward and backward (kernels.h): average
 * pooling through oneDNN, max pooling in plain loops on NCHW or on a
 * channel-blocked layout (a->blk).
 *
 * Why max pooling is ours: oneDNN 2.6 pools NCHW with a jit kernel only on
 * AVX-512, and even its jit kernels write their workspace (the argmax) in
 * a slow path; with the reorders between NCHW and a blocked layout around
 * them, max pooling cost as much as the convolution beside it.  A max is
 * exact, so the loops below give oneDNN's outputs bit for bit; the
 * workspace is the one kernels/cuda/sc_kernels_nn.cu writes (the index of
 * the first maximum in the window, kh * kw_extent + kw, one byte per output
 * in NCHW order, int32 from 256 window positions), so that a forward and a
 * backward may run on different kinds of workers. */
#include "onednn.h"

#include <float.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#define POOL_GEOMETRY(a)                                                                                               \
    dnnl_dims_t strides = {(a)->sh, (a)->sw}, kernel = {(a)->kh, (a)->kw}, pad_l = {(a)->ph, (a)->pw},                 \
                pad_r = {sc_pad_r((a)->h, (a)->kh, (a)->sh, (a)->ph, (a)->oh),                                         \
                         sc_pad_r((a)->w, (a)->kw, (a)->sw, (a)->pw, (a)->ow)}

static dnnl_alg_kind_t pool_alg(const struct sc_pool_args *a)
{
    return a->include_pad ? dnnl_pooling_avg_include_padding : dnnl_pooling_avg_exclude_padding;
}

/* The layouts average pooling is tried in, the caller's first.  oneDNN 2.6 pools
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

/* The first layout of pool_tags with a jit kernel, else NCHW; its index
 * goes to *tag unless tag is NULL. */
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

/* Whether the window indices need int32 (as the CUDA kernels decide). */
static int ws_wide(const struct sc_pool_args *a)
{
    return a->kh * a->kw >= 256;
}

size_t sc_pool_workspace_bytes(const struct sc_pool_args *a)
{
    if (!a->max)
        return 0;
    return (size_t)a->n * a->c * a->oh * a->ow * (ws_wide(a) ? sizeof(int32_t) : 1);
}

int sc_pool_impl(const struct sc_pool_args *a, char *buf, size_t n)
{
    if (a->max) {
        snprintf(buf, n, "starconv:nchw");
        return 0;
    }
    dnnl_primitive_desc_t pd = pool_fwd_pd(a, NULL);
    const char *impl = pd ? pool_impl_name(pd) : NULL;
    int ok = impl != NULL;
    if (ok)
        snprintf(buf, n, "%s", impl);
    if (pd)
        dnnl_primitive_desc_destroy(pd);
    return ok ? 0 : -1;
}

static void ws_put(void *ws, int wide, size_t i, int idx)
{
    if (wide)
        ((int32_t *)ws)[i] = idx;
    else
        ((uint8_t *)ws)[i] = (uint8_t)idx;
}

static int ws_get(const void *ws, int wide, size_t i)
{
    return wide ? ((const int32_t *)ws)[i] : ((const uint8_t *)ws)[i];
}

/* 2x2 windows at stride 2 without padding, the common case: two rows in,
 * one out, no bounds to test, four outputs at a time where SSE2 is there.
 * The maximum of each row's pair, then of the two: the first maximum in
 * row-major order, as the general loop finds it, for every window without
 * a NaN. */
static inline void max_2x2_one(const float *r0, const float *r1, float *y, uint8_t *ws)
{
    int i0 = r0[1] > r0[0], i1 = r1[1] > r1[0];
    float m0 = i0 ? r0[1] : r0[0], m1 = i1 ? r1[1] : r1[0];
    int second = m1 > m0;
    *y = second ? m1 : m0;
    *ws = (uint8_t)(second ? 2 + i1 : i0);
}

#ifdef __SSE2__
static inline __m128 pick(__m128 c, __m128 a, __m128 b)
{
    return _mm_or_ps(_mm_and_ps(c, a), _mm_andnot_ps(c, b));
}

/* max_2x2_one on outputs j..j+3 */
static inline void max_2x2_four(const float *r0, const float *r1, float *y, uint8_t *ws)
{
    __m128 p0 = _mm_loadu_ps(r0), q0 = _mm_loadu_ps(r0 + 4), p1 = _mm_loadu_ps(r1), q1 = _mm_loadu_ps(r1 + 4);
    __m128 a0 = _mm_shuffle_ps(p0, q0, _MM_SHUFFLE(2, 0, 2, 0)), a1 = _mm_shuffle_ps(p0, q0, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 b0 = _mm_shuffle_ps(p1, q1, _MM_SHUFFLE(2, 0, 2, 0)), b1 = _mm_shuffle_ps(p1, q1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 c0 = _mm_cmpgt_ps(a1, a0), c1 = _mm_cmpgt_ps(b1, b0);
    __m128 m0 = pick(c0, a1, a0), m1 = pick(c1, b1, b0), c2 = _mm_cmpgt_ps(m1, m0);
    _mm_storeu_ps(y, pick(c2, m1, m0));
    __m128i one = _mm_set1_epi32(1), c2i = _mm_castps_si128(c2);
    __m128i i0 = _mm_and_si128(_mm_castps_si128(c0), one);
    __m128i i1 = _mm_add_epi32(_mm_and_si128(_mm_castps_si128(c1), one), _mm_set1_epi32(2));
    __m128i idx = _mm_or_si128(_mm_and_si128(c2i, i1), _mm_andnot_si128(c2i, i0));
    idx = _mm_packs_epi32(idx, idx);
    int bytes = _mm_cvtsi128_si32(_mm_packus_epi16(idx, idx));
    memcpy(ws, &bytes, 4);
}
#endif

static void max_fwd_2x2(const struct sc_pool_args *a, const float *x, float *y, uint8_t *ws)
{
    size_t planes = (size_t)a->n * a->c;
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * a->h * a->w;
        for (int oh = 0; oh < a->oh; oh++) {
            const float *r0 = xp + (size_t)2 * oh * a->w, *r1 = r0 + a->w;
            size_t o = (p * a->oh + oh) * a->ow;
            int ow = 0;
#ifdef __SSE2__
            for (; ow + 4 <= a->ow; ow += 4)
                max_2x2_four(r0 + 2 * ow, r1 + 2 * ow, y + o + ow, ws + o + ow);
#endif
            for (; ow < a->ow; ow++)
                max_2x2_one(r0 + 2 * ow, r1 + 2 * ow, y + o + ow, ws + o + ow);
        }
    }
}

/* Every input of a window gets 0 + its gradient when it was the maximum,
 * else 0 (0 + g, so that a -0 gradient becomes +0 as in the general
 * loop's sum); a last odd row or column belongs to no window. */
static void max_bwd_2x2(const struct sc_pool_args *a, const float *dy, const uint8_t *ws, float *dx)
{
    size_t planes = (size_t)a->n * a->c;
    for (size_t p = 0; p < planes; p++) {
        float *dxp = dx + p * a->h * a->w;
        for (int oh = 0; oh < a->oh; oh++) {
            float *d0 = dxp + (size_t)2 * oh * a->w, *d1 = d0 + a->w;
            size_t o = (p * a->oh + oh) * a->ow;
            int ow = 0;
#ifdef __SSE2__
            const __m128i zi = _mm_setzero_si128();
            const __m128 z = _mm_setzero_ps();
            for (; ow + 4 <= a->ow; ow += 4) {
                __m128 g = _mm_add_ps(_mm_loadu_ps(dy + o + ow), z);
                int bytes;
                memcpy(&bytes, ws + o + ow, 4);
                __m128i idx = _mm_unpacklo_epi16(_mm_unpacklo_epi8(_mm_cvtsi32_si128(bytes), zi), zi);
                __m128 e[4];
                for (int k = 0; k < 4; k++)
                    e[k] = _mm_and_ps(_mm_castsi128_ps(_mm_cmpeq_epi32(idx, _mm_set1_epi32(k))), g);
                _mm_storeu_ps(d0 + 2 * ow, _mm_unpacklo_ps(e[0], e[1]));
                _mm_storeu_ps(d0 + 2 * ow + 4, _mm_unpackhi_ps(e[0], e[1]));
                _mm_storeu_ps(d1 + 2 * ow, _mm_unpacklo_ps(e[2], e[3]));
                _mm_storeu_ps(d1 + 2 * ow + 4, _mm_unpackhi_ps(e[2], e[3]));
            }
#endif
            for (; ow < a->ow; ow++) {
                float g = 0.0f + dy[o + ow];
                int idx = ws[o + ow];
                d0[2 * ow] = idx == 0 ? g : 0.0f;
                d0[2 * ow + 1] = idx == 1 ? g : 0.0f;
                d1[2 * ow] = idx == 2 ? g : 0.0f;
                d1[2 * ow + 1] = idx == 3 ? g : 0.0f;
            }
            for (int iw = 2 * a->ow; iw < a->w; iw++)
                d0[iw] = d1[iw] = 0.0f;
        }
        if (a->h > 2 * a->oh)
            memset(dxp + (size_t)2 * a->oh * a->w, 0, (size_t)(a->h - 2 * a->oh) * a->w * sizeof(float));
    }
}

static int is_2x2(const struct sc_pool_args *a)
{
    return a->kh == 2 && a->kw == 2 && a->sh == 2 && a->sw == 2 && !a->ph && !a->pw && !ws_wide(a);
}

int sc_pool_max_prefers_nchw(const struct sc_pool_args *a)
{
    return is_2x2(a);
}

static void max_fwd(const struct sc_pool_args *a, const float *x, float *y, void *ws)
{
    int wide = ws_wide(a);
    if (is_2x2(a)) {
        max_fwd_2x2(a, x, y, ws);
        return;
    }
    size_t planes = (size_t)a->n * a->c;
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * a->h * a->w;
        for (int oh = 0; oh < a->oh; oh++)
            for (int ow = 0; ow < a->ow; ow++) {
                int ih0 = oh * a->sh - a->ph, iw0 = ow * a->sw - a->pw, idx = 0;
                float d = -FLT_MAX;
                for (int kh = 0; kh < a->kh; kh++) {
                    int ih = ih0 + kh;
                    if (ih < 0 || ih >= a->h)
                        continue;
                    for (int kw = 0; kw < a->kw; kw++) {
                        int iw = iw0 + kw;
                        if (iw >= 0 && iw < a->w && xp[(size_t)ih * a->w + iw] > d)
                            d = xp[(size_t)ih * a->w + iw], idx = kh * a->kw + kw;
                    }
                }
                size_t o = (p * a->oh + oh) * a->ow + ow;
                y[o] = d;
                ws_put(ws, wide, o, idx);
            }
    }
}

/* dx: each input the sum, in increasing output order, of the gradients of
 * the outputs whose maximum it was (the CUDA kernel's gather gives the
 * same sums in the same order). */
static void max_bwd(const struct sc_pool_args *a, const float *dy, const void *ws, float *dx)
{
    int wide = ws_wide(a);
    if (is_2x2(a)) {
        max_bwd_2x2(a, dy, ws, dx);
        return;
    }
    size_t planes = (size_t)a->n * a->c;
    memset(dx, 0, planes * a->h * a->w * sizeof(float));
    for (size_t p = 0; p < planes; p++) {
        float *dxp = dx + p * a->h * a->w;
        for (int oh = 0; oh < a->oh; oh++)
            for (int ow = 0; ow < a->ow; ow++) {
                size_t o = (p * a->oh + oh) * a->ow + ow;
                int idx = ws_get(ws, wide, o);
                int ih = oh * a->sh - a->ph + idx / a->kw, iw = ow * a->sw - a->pw + idx % a->kw;
                dxp[(size_t)ih * a->w + iw] += dy[o];
            }
    }
}

/* Channel-blocked max pooling (a->blk > 0): the general loop on each
 * row of blk channel lanes, the workspace in y's layout.  The same
 * maxima, first maxima and sums as the NCHW loops, lane by lane. */
enum { POOL_BLK_MAX = 16 };

static void max_fwd_blocked(const struct sc_pool_args *a, const float *x, float *y, void *ws)
{
    const int b = a->blk, wide = ws_wide(a);
    size_t planes = (size_t)a->n * (a->c / b);
    for (size_t p = 0; p < planes; p++) {
        const float *xp = x + p * a->h * a->w * b;
        for (int oh = 0; oh < a->oh; oh++)
            for (int ow = 0; ow < a->ow; ow++) {
                int ih0 = oh * a->sh - a->ph, iw0 = ow * a->sw - a->pw;
                float d[POOL_BLK_MAX];
                int idx[POOL_BLK_MAX];
                for (int k = 0; k < b; k++)
                    d[k] = -FLT_MAX, idx[k] = 0;
                for (int kh = 0; kh < a->kh; kh++) {
                    int ih = ih0 + kh;
                    if (ih < 0 || ih >= a->h)
                        continue;
                    for (int kw = 0; kw < a->kw; kw++) {
                        int iw = iw0 + kw, at = kh * a->kw + kw;
                        if (iw < 0 || iw >= a->w)
                            continue;
                        const float *v = xp + ((size_t)ih * a->w + iw) * b;
#pragma omp simd
                        for (int k = 0; k < b; k++) {
                            int more = v[k] > d[k];
                            d[k] = more ? v[k] : d[k];
                            idx[k] = more ? at : idx[k];
                        }
                    }
                }
                size_t o = ((p * a->oh + oh) * a->ow + ow) * b;
                for (int k = 0; k < b; k++) {
                    y[o + k] = d[k];
                    ws_put(ws, wide, o + k, idx[k]);
                }
            }
    }
}

static void max_bwd_blocked(const struct sc_pool_args *a, const float *dy, const void *ws, float *dx)
{
    const int b = a->blk, wide = ws_wide(a);
    size_t planes = (size_t)a->n * (a->c / b);
    memset(dx, 0, (size_t)a->n * a->c * a->h * a->w * sizeof(float));
    for (size_t p = 0; p < planes; p++) {
        float *dxp = dx + p * a->h * a->w * b;
        for (int oh = 0; oh < a->oh; oh++)
            for (int ow = 0; ow < a->ow; ow++) {
                size_t o = ((p * a->oh + oh) * a->ow + ow) * b;
                for (int k = 0; k < b; k++) {
                    int idx = ws_get(ws, wide, o + k);
                    int ih = oh * a->sh - a->ph + idx / a->kw, iw = ow * a->sw - a->pw + idx % a->kw;
                    dxp[((size_t)ih * a->w + iw) * b + k] += dy[o + k];
                }
            }
    }
}

/* What one direction of average pooling caches: the primitive and what it
 * reads and writes (each with its reorder from or to the caller's NCHW
 * when the primitive runs blocked). */
struct pool_prim {
    dnnl_primitive_t p;
    struct sc_io io[2];
};

static void pool_prim_destroy(void *v)
{
    struct pool_prim *c = v;
    if (c->p)
        dnnl_primitive_destroy(c->p);
    for (int i = 0; i < 2; i++)
        sc_io_destroy(&c->io[i]);
    free(c);
}

/* io[0] bridges the caller's NCHW input and what pd reads (qin), io[1]
 * what pd writes (qout) and the caller's NCHW output; consumes pd. */
static void *pool_prim_make(dnnl_primitive_desc_t pd, const struct sc_pool_args *a, int bwd, dnnl_query_t qin,
                            dnnl_query_t qout)
{
    struct pool_prim *c = calloc(1, sizeof *c);
    dnnl_memory_desc_t x, y;
    dnnl_format_tag_t tag = a->blk == 16 ? dnnl_nChw16c : a->blk == 8 ? dnnl_nChw8c : dnnl_nchw;
    sc_md_nchw(&x, a->n, a->c, a->h, a->w, tag);
    sc_md_nchw(&y, a->n, a->c, a->oh, a->ow, tag);
    if (!c || !pd || sc_io_init(&c->io[0], bwd ? &y : &x, dnnl_primitive_desc_query_md(pd, qin, 0), 0) ||
        sc_io_init(&c->io[1], bwd ? &x : &y, dnnl_primitive_desc_query_md(pd, qout, 0), 1))
        goto fail;
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
    if (a->max) {
        if (a->blk > 0 && a->blk <= POOL_BLK_MAX && bwd)
            max_bwd_blocked(a, in, ws, out);
        else if (a->blk > 0 && a->blk <= POOL_BLK_MAX)
            max_fwd_blocked(a, in, out, ws);
        else if (bwd)
            max_bwd(a, in, ws, out);
        else
            max_fwd(a, in, out, ws);
        return;
    }
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
    dnnl_exec_arg_t args[2] = {{bwd ? DNNL_ARG_DIFF_DST : DNNL_ARG_SRC, sc_io_in(&c->io[0], in, s)},
                               {bwd ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DST, sc_io_out(&c->io[1], out)}};
    if (!args[0].memory || !args[1].memory || sc_exec(c->p, s, 2, args) || sc_io_out_done(&c->io[1], s))
        sc_fail_record(op, "oneDNN: the primitive or a reorder failed to run");
}
