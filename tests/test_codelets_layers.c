/* The kernels of codelets_layers.h against naive double-precision loops:
 * batch normalization (statistics over tiles, forward, running statistics,
 * backward against the references and against central differences of a
 * scalar loss), residual add, copy, global average pooling, per-pixel
 * cross-entropy, the ordered sum, and the wrappers' shape errors.
 *
 * Every output buffer starts as NaN, and its handle covers GUARD more
 * elements than the arguments need, filled with a sentinel: a kernel that
 * skips an element or writes past its tile fails. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codelets/codelets.h"
#include "src/starconv.h"

#define GUARD    8
#define SENTINEL 1234.5
#define RTOL     1e-5
#define ATOL     1e-5

static unsigned rng = 77;

static double frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 8388608.0 - 1.0;
}

static void *xmalloc(size_t bytes)
{
    void *p = malloc(bytes ? bytes : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

/* ---- buffers: float, double or int32 arrays registered as vectors of
 * n + GUARD elements, the last GUARD holding SENTINEL ---- */

struct buf {
    void *p;
    size_t n, es;
    starpu_data_handle_t h;
};

enum { ZERO, RANDOM, UNSET };

static struct buf mk_es(size_t n, size_t es, int fill, size_t handle_len)
{
    struct buf b = {xmalloc((n + GUARD) * es), n, es, NULL};
    for (size_t i = 0; i < n + GUARD; i++) {
        double v = i >= n ? SENTINEL : fill == RANDOM ? frand() : fill == UNSET ? NAN : 0.0;
        if (es == sizeof(double))
            ((double *)b.p)[i] = v;
        else
            ((float *)b.p)[i] = (float)v;
    }
    starpu_vector_data_register(&b.h, STARPU_MAIN_RAM, (uintptr_t)b.p, handle_len, es);
    return b;
}

static struct buf mkf(size_t n, int fill)
{
    return mk_es(n, sizeof(float), fill, n + GUARD);
}

static struct buf mkd(size_t n, int fill)
{
    return mk_es(n, sizeof(double), fill, n + GUARD);
}

/* Exactly n long (for the kernels whose length is the handle's). */
static struct buf mkf_exact(size_t n, int fill)
{
    return mk_es(n, sizeof(float), fill, n);
}

static struct buf mkd_exact(size_t n, int fill)
{
    return mk_es(n, sizeof(double), fill, n);
}

static struct buf mki(size_t n, const int32_t *v)
{
    struct buf b = {xmalloc((n + GUARD) * sizeof(int32_t)), n, sizeof(int32_t), NULL};
    int32_t *p = b.p;
    memcpy(p, v, n * sizeof *p);
    for (size_t i = n; i < n + GUARD; i++)
        p[i] = -7;
    starpu_vector_data_register(&b.h, STARPU_MAIN_RAM, (uintptr_t)b.p, n + GUARD, sizeof(int32_t));
    return b;
}

static float *F(const struct buf *b)
{
    return b->p;
}

static double *D(const struct buf *b)
{
    return b->p;
}

static double val(const struct buf *b, size_t i)
{
    return b->es == sizeof(double) ? D(b)[i] : F(b)[i];
}

/* Wait for the submitted tasks and hand the buffers back to the host. */
static void sync_all(void)
{
    starpu_task_wait_for_all();
}

static void host(struct buf *b) /* acquire for reading on the host */
{
    starpu_data_acquire(b->h, STARPU_R);
    starpu_data_release(b->h);
}

static void rm(struct buf *b)
{
    if (b->h)
        starpu_data_unregister(b->h);
    b->h = NULL;
    free(b->p);
    b->p = NULL;
}

/* Copy of a buffer's first n elements in double. */
static double *dbl(const struct buf *b)
{
    double *d = xmalloc(b->n * sizeof *d);
    for (size_t i = 0; i < b->n; i++)
        d[i] = val(b, i);
    return d;
}

/* Elements with |got - ref| > max(rtol*|ref|, atol), NaNs and touched
 * sentinels count as bad; returns the number of bad elements, and the worst
 * error (relative where |ref| > 1) in *worst. */
static size_t n_bad(const struct buf *got, const double *ref, double rtol, double atol, double *worst)
{
    size_t bad = 0;
    double w = 0.0;
    for (size_t i = 0; i < got->n; i++) {
        double g = val(got, i), d = fabs(g - ref[i]);
        double e = d / fmax(1.0, fabs(ref[i]));
        if (!(d <= fmax(rtol * fabs(ref[i]), atol)))
            bad++;
        if (!(e <= w))
            w = isnan(e) ? INFINITY : e;
    }
    for (size_t i = got->n; i < got->n + GUARD; i++)
        if (val(got, i) != SENTINEL) {
            bad++;
            w = INFINITY;
        }
    if (worst)
        *worst = w;
    return bad;
}

static void expect(const char *what, struct buf *got, const double *ref, double rtol, double atol)
{
    double w;
    host(got);
    size_t bad = n_bad(got, ref, rtol, atol, &w);
    check(bad == 0, "%s: %zu of %zu bad, worst err %.2e", what, bad, got->n, w);
}

static void expect_close(const char *what, struct buf *got, const double *ref)
{
    expect(what, got, ref, RTOL, ATOL);
}

static void inserted(int ret, const char *what)
{
    if (ret)
        check(0, "%s: insert returned %d (%s)", what, ret, sc_last_error());
}

/* ---- references ---- */

#define IDX(i, ch, p, c, hw) (((size_t)(i) * (c) + (ch)) * (hw) + (p))

static void bn_stats_ref(const struct sc_bn_args *a, const double *x, double *st)
{
    for (int ch = 0; ch < 2 * a->c; ch++)
        st[ch] = 0.0;
    for (int i = 0; i < a->n; i++)
        for (int ch = 0; ch < a->c; ch++)
            for (int p = 0; p < a->hw; p++) {
                double v = x[IDX(i, ch, p, a->c, a->hw)];
                st[ch] += v;
                st[a->c + ch] += v * v;
            }
}

/* mean and invstd from sums over count elements */
static void bn_moments(int c, double count, double eps, const double *st, double *mean, double *invstd)
{
    for (int ch = 0; ch < c; ch++) {
        mean[ch] = st[ch] / count;
        double var = st[c + ch] / count - mean[ch] * mean[ch];
        invstd[ch] = 1.0 / sqrt(var + eps);
    }
}

/* y = gamma*(x - mean)*invstd + beta (+relu) */
static void bn_apply_ref(const struct sc_bn_args *a, const double *x, const double *mean, const double *invstd,
                         const double *prm, double *y)
{
    for (int i = 0; i < a->n; i++)
        for (int ch = 0; ch < a->c; ch++)
            for (int p = 0; p < a->hw; p++) {
                size_t k = IDX(i, ch, p, a->c, a->hw);
                double v = prm[ch] * (x[k] - mean[ch]) * invstd[ch] + prm[a->c + ch];
                y[k] = a->relu && v < 0.0 ? 0.0 : v;
            }
}

/* A random tile whose channels have means around ch - 1 and scales
 * 0.5..1.5, so that a kernel that mixes channels up shows. */
static void fill_tile(struct buf *x, const struct sc_bn_args *a)
{
    for (int i = 0; i < a->n; i++)
        for (int ch = 0; ch < a->c; ch++)
            for (int p = 0; p < a->hw; p++)
                F(x)[IDX(i, ch, p, a->c, a->hw)] = (float)((ch - 1) + (1.0 + 0.5 * sin(ch)) * frand());
}

static void fill_params(struct buf *prm, int c)
{
    for (int ch = 0; ch < c; ch++) {
        F(prm)[ch] = (float)(0.5 + 0.25 * ch + 0.1 * frand());
        F(prm)[c + ch] = (float)(0.3 * frand());
    }
}

/* ---- batch normalization: statistics, tiles, forward ---- */

static void test_bn_fwd(int n, int c, int hw, int relu, float eps)
{
    char what[160];
    struct sc_bn_args a = {n, c, hw, eps, 0.1f, relu};
    size_t ne = (size_t)n * c * hw;
    struct buf x = mkf(ne, RANDOM), st = mkd(2 * c, UNSET), prm = mkf(2 * c, ZERO);
    struct buf y = mkf(ne, UNSET), saved = mkf(2 * c, UNSET);
    fill_tile(&x, &a);
    fill_params(&prm, c);
    double count = (double)n * hw;
    inserted(sc_insert_bn_stats(NULL, &a, x.h, st.h, "bn_stats"), "bn_stats");
    inserted(sc_insert_bn_fwd(NULL, &a, count, x.h, st.h, prm.h, y.h, saved.h, "bn_fwd"), "bn_fwd");
    sync_all();

    double *xd = dbl(&x), *pd = dbl(&prm), *sref = xmalloc(2 * c * sizeof(double));
    double *yref = xmalloc(ne * sizeof(double)), *svref = xmalloc(2 * c * sizeof(double));
    bn_stats_ref(&a, xd, sref);
    bn_moments(c, count, a.eps, sref, svref, svref + c);
    double *svf = xmalloc(2 * c * sizeof(double)); /* as the kernel keeps them: float */
    for (int k = 0; k < 2 * c; k++)
        svf[k] = (float)svref[k];
    bn_apply_ref(&a, xd, svf, svf + c, pd, yref);
    free(svf);
    snprintf(what, sizeof what, "bn_stats n%d c%d hw%d", n, c, hw);
    expect(what, &st, sref, 1e-12, 1e-12);
    snprintf(what, sizeof what, "bn_fwd saved mean|invstd n%d c%d hw%d", n, c, hw);
    expect_close(what, &saved, svref);
    snprintf(what, sizeof what, "bn_fwd y n%d c%d hw%d relu%d eps%g", n, c, hw, relu, (double)eps);
    expect_close(what, &y, yref);
    if (relu) {
        size_t zeros = 0;
        for (size_t i = 0; i < ne; i++)
            zeros += yref[i] == 0.0;
        check(zeros > 0 && zeros < ne, "bn_fwd relu test has both signs (%zu of %zu zero)", zeros, ne);
    }

    /* Evaluation with running statistics and the same params. */
    struct buf run = mkf(2 * c, ZERO), ye = mkf(ne, UNSET);
    for (int ch = 0; ch < c; ch++) {
        F(&run)[ch] = (float)(ch - 1 + 0.2 * frand());
        F(&run)[c + ch] = (float)(0.5 + 0.5 * (frand() + 1.0));
    }
    double *rd = dbl(&run), *eref = xmalloc(ne * sizeof(double)), *ris = xmalloc(c * sizeof(double));
    for (int ch = 0; ch < c; ch++)
        ris[ch] = 1.0 / sqrt(rd[c + ch] + a.eps);
    bn_apply_ref(&a, xd, rd, ris, pd, eref);
    inserted(sc_insert_bn_fwd_eval(NULL, &a, x.h, run.h, prm.h, ye.h, "bn_fwd_eval"), "bn_fwd_eval");
    sync_all();
    snprintf(what, sizeof what, "bn_fwd_eval y n%d c%d hw%d relu%d eps%g", n, c, hw, relu, (double)eps);
    expect_close(what, &ye, eref);

    /* Running update from the batch statistics. */
    double *rref = xmalloc(2 * c * sizeof(double));
    for (int ch = 0; ch < c; ch++) {
        double mean = sref[ch] / count, var = sref[c + ch] / count - mean * mean;
        double unb = count > 1 ? var * count / (count - 1) : var;
        rref[ch] = 0.9 * rd[ch] + 0.1 * mean;
        rref[c + ch] = 0.9 * rd[c + ch] + 0.1 * unb;
    }
    inserted(sc_insert_bn_running_update(NULL, &a, count, st.h, run.h, NULL, "bn_running"), "bn_running_update");
    sync_all();
    snprintf(what, sizeof what, "bn_running_update n%d c%d hw%d", n, c, hw);
    expect_close(what, &run, rref);

    free(xd), free(pd), free(sref), free(yref), free(svref), free(rd), free(eref), free(ris), free(rref);
    rm(&x), rm(&st), rm(&prm), rm(&y), rm(&saved), rm(&run), rm(&ye);
}

/* Statistics of two tiles of a batch, added with accumulate_f64, equal
 * those of the whole; forward on each tile with them equals forward on the
 * whole. */
static void test_bn_tiles(int n0, int n1, int c, int hw)
{
    struct sc_bn_args a0 = {n0, c, hw, 1e-5f, 0.1f, 0}, a1 = {n1, c, hw, 1e-5f, 0.1f, 0};
    struct sc_bn_args aw = {n0 + n1, c, hw, 1e-5f, 0.1f, 0};
    size_t e0 = (size_t)n0 * c * hw, e1 = (size_t)n1 * c * hw;
    struct buf x0 = mkf(e0, RANDOM), x1 = mkf(e1, RANDOM), xw = mkf(e0 + e1, ZERO);
    fill_tile(&x0, &a0);
    fill_tile(&x1, &a1);
    memcpy(F(&xw), F(&x0), e0 * sizeof(float));
    memcpy(F(&xw) + e0, F(&x1), e1 * sizeof(float));
    /* accumulate_f64 takes its length from the handles */
    struct buf s0 = mkd_exact(2 * c, UNSET), s1 = mkd_exact(2 * c, UNSET), sw = mkd(2 * c, UNSET);
    inserted(sc_insert_bn_stats(NULL, &a0, x0.h, s0.h, "bn_stats0"), "bn_stats tile 0");
    inserted(sc_insert_bn_stats(NULL, &a1, x1.h, s1.h, "bn_stats1"), "bn_stats tile 1");
    inserted(sc_insert_bn_stats(NULL, &aw, xw.h, sw.h, "bn_stats_whole"), "bn_stats whole");
    inserted(sc_insert_accumulate_f64(NULL, s0.h, s1.h, "acc"), "accumulate_f64");
    double count = (double)(n0 + n1) * hw;
    struct buf prm = mkf(2 * c, ZERO), y0 = mkf(e0, UNSET), y1 = mkf(e1, UNSET), yw = mkf(e0 + e1, UNSET);
    struct buf sv0 = mkf(2 * c, UNSET), sv1 = mkf(2 * c, UNSET), svw = mkf(2 * c, UNSET);
    fill_params(&prm, c);
    inserted(sc_insert_bn_fwd(NULL, &a0, count, x0.h, s0.h, prm.h, y0.h, sv0.h, "fwd0"), "bn_fwd tile 0");
    inserted(sc_insert_bn_fwd(NULL, &a1, count, x1.h, s0.h, prm.h, y1.h, sv1.h, "fwd1"), "bn_fwd tile 1");
    inserted(sc_insert_bn_fwd(NULL, &aw, count, xw.h, sw.h, prm.h, yw.h, svw.h, "fwdw"), "bn_fwd whole");
    sync_all();
    host(&sw), host(&s0), host(&yw);

    /* s0 (the tile sums) against the sums of the whole */
    double *swd = dbl(&sw);
    size_t bad = 0;
    for (int k = 0; k < 2 * c; k++)
        bad += !(fabs(D(&s0)[k] - swd[k]) <= 1e-12 * fmax(1.0, fabs(swd[k])));
    check(bad == 0, "bn_stats of 2 tiles (n%d + n%d) + accumulate_f64 = stats of the whole: %zu bad", n0, n1, bad);
    double *ywd = dbl(&yw);
    expect_close("bn_fwd tile 0 with the summed stats = the whole's", &y0, ywd);
    expect_close("bn_fwd tile 1 with the summed stats = the whole's", &y1, ywd + e0);
    free(swd), free(ywd);
    rm(&x0), rm(&x1), rm(&xw), rm(&s0), rm(&s1), rm(&sw), rm(&prm), rm(&y0), rm(&y1), rm(&yw);
    rm(&sv0), rm(&sv1), rm(&svw);
}

/* Running update of a single element: var is 0, used as it is. */
static void test_bn_running_count1(void)
{
    struct sc_bn_args a = {1, 2, 1, 1e-5f, 0.25f, 0};
    struct buf x = mkf(2, ZERO), st = mkd(4, UNSET), run = mkf(4, ZERO);
    F(&x)[0] = 3.0f, F(&x)[1] = -2.0f;
    F(&run)[0] = 1.0f, F(&run)[1] = 0.5f, F(&run)[2] = 2.0f, F(&run)[3] = 4.0f;
    inserted(sc_insert_bn_stats(NULL, &a, x.h, st.h, NULL), "bn_stats count 1");
    inserted(sc_insert_bn_running_update(NULL, &a, 1.0, st.h, run.h, NULL, NULL), "bn_running_update count 1");
    sync_all();
    double ref[4] = {0.75 * 1.0 + 0.25 * 3.0, 0.75 * 0.5 + 0.25 * -2.0, 0.75 * 2.0, 0.75 * 4.0};
    expect_close("bn_running_update with count 1 (var 0, not divided by 0)", &run, ref);
    rm(&x), rm(&st), rm(&run);
}

/* ---- batch normalization: backward ---- */

/* Forward in training mode on host data through the kernels; y in out. */
static void bn_forward_host(const struct sc_bn_args *a, const float *x, const float *prm, float *y)
{
    size_t ne = (size_t)a->n * a->c * a->hw;
    starpu_data_handle_t hx, hp, hy, hs, hv;
    double *st = xmalloc(2 * a->c * sizeof(double));
    float *sv = xmalloc(2 * a->c * sizeof(float));
    starpu_vector_data_register(&hx, STARPU_MAIN_RAM, (uintptr_t)x, ne, sizeof(float));
    starpu_vector_data_register(&hp, STARPU_MAIN_RAM, (uintptr_t)prm, 2 * a->c, sizeof(float));
    starpu_vector_data_register(&hy, STARPU_MAIN_RAM, (uintptr_t)y, ne, sizeof(float));
    starpu_vector_data_register(&hs, STARPU_MAIN_RAM, (uintptr_t)st, 2 * a->c, sizeof(double));
    starpu_vector_data_register(&hv, STARPU_MAIN_RAM, (uintptr_t)sv, 2 * a->c, sizeof(float));
    inserted(sc_insert_bn_stats(NULL, a, hx, hs, NULL), "bn_stats (fd)");
    inserted(sc_insert_bn_fwd(NULL, a, (double)a->n * a->hw, hx, hs, hp, hy, hv, NULL), "bn_fwd (fd)");
    starpu_data_unregister(hx), starpu_data_unregister(hp), starpu_data_unregister(hy);
    starpu_data_unregister(hs), starpu_data_unregister(hv);
    free(st), free(sv);
}

static double loss_of(const float *y, const double *w, size_t ne)
{
    double l = 0.0;
    for (size_t i = 0; i < ne; i++)
        l += w[i] * y[i];
    return l;
}

/* max |got - ref| / max |ref| over n */
static double vec_rel(const double *got, const double *ref, size_t n)
{
    double md = 0.0, mr = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        md = isnan(d) || d > md ? (isnan(d) ? INFINITY : d) : md;
        mr = fmax(mr, fabs(ref[i]));
    }
    return md / (mr > 0.0 ? mr : 1.0);
}

static void test_bn_bwd(int n, int c, int hw, int relu, int fd)
{
    char what[160];
    struct sc_bn_args a = {n, c, hw, 1e-5f, 0.1f, relu};
    size_t ne = (size_t)n * c * hw;
    double count = (double)n * hw;
    struct buf x = mkf(ne, RANDOM), prm = mkf(2 * c, ZERO), st = mkd(2 * c, UNSET);
    struct buf y = mkf(ne, UNSET), saved = mkf(2 * c, UNSET), dy = mkf(ne, RANDOM);
    struct buf ds = mkd(2 * c, UNSET), dp = mkf(2 * c, UNSET), dx = mkf(ne, UNSET);
    fill_tile(&x, &a);
    fill_params(&prm, c);
    double *w = dbl(&dy); /* the loss weights: L = sum w*y */
    inserted(sc_insert_bn_stats(NULL, &a, x.h, st.h, NULL), "bn_stats");
    inserted(sc_insert_bn_fwd(NULL, &a, count, x.h, st.h, prm.h, y.h, saved.h, NULL), "bn_fwd");
    if (relu)
        inserted(sc_insert_relu_bwd(NULL, (int)ne, dy.h, y.h, NULL), "relu_bwd");
    inserted(sc_insert_bn_bwd_stats(NULL, &a, x.h, dy.h, saved.h, ds.h, "bn_bwd_stats"), "bn_bwd_stats");
    inserted(sc_insert_bn_param_grad(NULL, c, ds.h, dp.h, "bn_param_grad"), "bn_param_grad");
    inserted(sc_insert_bn_bwd_data(NULL, &a, count, x.h, dy.h, prm.h, saved.h, ds.h, dx.h, "bn_bwd_data"),
             "bn_bwd_data");
    sync_all();
    host(&dy), host(&y), host(&saved);

    /* naive references from the same (float) saved mean and invstd */
    double *xd = dbl(&x), *pd = dbl(&prm), *g = dbl(&dy), *sv = dbl(&saved);
    double *dsref = xmalloc(2 * c * sizeof(double)), *dpref = xmalloc(2 * c * sizeof(double));
    double *dxref = xmalloc(ne * sizeof(double));
    for (int ch = 0; ch < c; ch++) {
        double s = 0, sx = 0;
        for (int i = 0; i < n; i++)
            for (int p = 0; p < hw; p++) {
                size_t k = IDX(i, ch, p, c, hw);
                s += g[k];
                sx += g[k] * (xd[k] - sv[ch]) * sv[c + ch];
            }
        dsref[ch] = s, dsref[c + ch] = sx;
        dpref[ch] = sx, dpref[c + ch] = s;
        for (int i = 0; i < n; i++)
            for (int p = 0; p < hw; p++) {
                size_t k = IDX(i, ch, p, c, hw);
                double xh = (xd[k] - sv[ch]) * sv[c + ch];
                dxref[k] = pd[ch] * sv[c + ch] * (g[k] - s / count - xh * sx / count);
            }
    }
    snprintf(what, sizeof what, "bn_bwd_stats n%d c%d hw%d relu%d", n, c, hw, relu);
    expect(what, &ds, dsref, 1e-9, 1e-9);
    snprintf(what, sizeof what, "bn_param_grad c%d", c);
    expect_close(what, &dp, dpref);
    snprintf(what, sizeof what, "bn_bwd_data n%d c%d hw%d relu%d", n, c, hw, relu);
    expect_close(what, &dx, dxref);

    if (fd) {
        /* Central differences of L = sum w*y through the forward kernels,
         * w.r.t. x, gamma and beta. */
        const double h = 1e-2;
        float *xs = xmalloc(ne * sizeof(float)), *ps = xmalloc(2 * c * sizeof(float));
        float *ys = xmalloc(ne * sizeof(float));
        double *fdx = xmalloc(ne * sizeof(double)), *fdp = xmalloc(2 * c * sizeof(double));
        double *anx = dbl(&dx), *anp = dbl(&dp);
        memcpy(xs, F(&x), ne * sizeof(float));
        memcpy(ps, F(&prm), 2 * c * sizeof(float));
        for (size_t k = 0; k < ne + 2 * (size_t)c; k++) {
            float *v = k < ne ? &xs[k] : &ps[k - ne];
            float v0 = *v;
            *v = (float)(v0 + h);
            double hp = *v - (double)v0;
            bn_forward_host(&a, xs, ps, ys);
            double lp = loss_of(ys, w, ne);
            *v = (float)(v0 - h);
            double hm = (double)v0 - *v;
            bn_forward_host(&a, xs, ps, ys);
            double lm = loss_of(ys, w, ne);
            *v = v0;
            double d = (lp - lm) / (hp + hm);
            if (k < ne)
                fdx[k] = d;
            else
                fdp[k - ne] = d;
        }
        double ex = vec_rel(anx, fdx, ne), ep = vec_rel(anp, fdp, 2 * c);
        check(ex <= 2e-2, "bn_bwd_data = central differences of sum(w*y) n%d c%d hw%d relu%d (rel %.2e)", n, c, hw,
              relu, ex);
        check(ep <= 2e-2, "bn_param_grad = central differences of sum(w*y) c%d relu%d (rel %.2e)", c, relu, ep);
        free(xs), free(ps), free(ys), free(fdx), free(fdp), free(anx), free(anp);
    }
    free(w), free(xd), free(pd), free(g), free(sv), free(dsref), free(dpref), free(dxref);
    rm(&x), rm(&prm), rm(&st), rm(&y), rm(&saved), rm(&dy), rm(&ds), rm(&dp), rm(&dx);
}

/* Backward over two tiles with dstats summed between the phases equals the
 * backward of the whole. */
static void test_bn_bwd_tiles(int n0, int n1, int c, int hw)
{
    struct sc_bn_args a0 = {n0, c, hw, 1e-5f, 0.1f, 0}, a1 = {n1, c, hw, 1e-5f, 0.1f, 0};
    struct sc_bn_args aw = {n0 + n1, c, hw, 1e-5f, 0.1f, 0};
    size_t e0 = (size_t)n0 * c * hw, e1 = (size_t)n1 * c * hw;
    double count = (double)(n0 + n1) * hw;
    struct buf xw = mkf(e0 + e1, RANDOM), gw = mkf(e0 + e1, RANDOM), prm = mkf(2 * c, ZERO);
    fill_tile(&xw, &aw);
    fill_params(&prm, c);
    struct buf x0 = mkf(e0, ZERO), x1 = mkf(e1, ZERO), g0 = mkf(e0, ZERO), g1 = mkf(e1, ZERO);
    memcpy(F(&x0), F(&xw), e0 * sizeof(float)), memcpy(F(&x1), F(&xw) + e0, e1 * sizeof(float));
    memcpy(F(&g0), F(&gw), e0 * sizeof(float)), memcpy(F(&g1), F(&gw) + e0, e1 * sizeof(float));
    struct buf st = mkd(2 * c, UNSET), sv = mkf(2 * c, UNSET), yw = mkf(e0 + e1, UNSET);
    struct buf dsw = mkd(2 * c, UNSET), ds0 = mkd_exact(2 * c, UNSET), ds1 = mkd_exact(2 * c, UNSET);
    struct buf dxw = mkf(e0 + e1, UNSET), dx0 = mkf(e0, UNSET), dx1 = mkf(e1, UNSET);
    inserted(sc_insert_bn_stats(NULL, &aw, xw.h, st.h, NULL), "bn_stats whole");
    inserted(sc_insert_bn_fwd(NULL, &aw, count, xw.h, st.h, prm.h, yw.h, sv.h, NULL), "bn_fwd whole");
    inserted(sc_insert_bn_bwd_stats(NULL, &aw, xw.h, gw.h, sv.h, dsw.h, NULL), "bn_bwd_stats whole");
    inserted(sc_insert_bn_bwd_data(NULL, &aw, count, xw.h, gw.h, prm.h, sv.h, dsw.h, dxw.h, NULL), "bwd_data whole");
    inserted(sc_insert_bn_bwd_stats(NULL, &a0, x0.h, g0.h, sv.h, ds0.h, NULL), "bn_bwd_stats tile 0");
    inserted(sc_insert_bn_bwd_stats(NULL, &a1, x1.h, g1.h, sv.h, ds1.h, NULL), "bn_bwd_stats tile 1");
    inserted(sc_insert_accumulate_f64(NULL, ds0.h, ds1.h, NULL), "accumulate_f64");
    inserted(sc_insert_bn_bwd_data(NULL, &a0, count, x0.h, g0.h, prm.h, sv.h, ds0.h, dx0.h, NULL), "bwd_data 0");
    inserted(sc_insert_bn_bwd_data(NULL, &a1, count, x1.h, g1.h, prm.h, sv.h, ds0.h, dx1.h, NULL), "bwd_data 1");
    sync_all();
    host(&dsw), host(&dxw);
    double *dswd = dbl(&dsw), *dxwd = dbl(&dxw);
    expect("bn_bwd_stats of 2 tiles + accumulate_f64 = the whole's", &ds0, dswd, 1e-10, 1e-10);
    expect_close("bn_bwd_data tile 0 with the summed dstats = the whole's", &dx0, dxwd);
    expect_close("bn_bwd_data tile 1 with the summed dstats = the whole's", &dx1, dxwd + e0);
    free(dswd), free(dxwd);
    rm(&xw), rm(&gw), rm(&prm), rm(&x0), rm(&x1), rm(&g0), rm(&g1), rm(&st), rm(&sv), rm(&yw);
    rm(&dsw), rm(&ds0), rm(&ds1), rm(&dxw), rm(&dx0), rm(&dx1);
}

/* ---- add, copy ---- */

static void test_add_copy(int n, int relu)
{
    char what[96];
    struct buf a = mkf(n, RANDOM), b = mkf(n, RANDOM), y = mkf(n, UNSET), d = mkf(n, UNSET);
    inserted(sc_insert_add(NULL, n, relu, a.h, b.h, y.h, "add"), "add");
    inserted(sc_insert_copy(NULL, n, a.h, d.h, "copy"), "copy");
    sync_all();
    double *ref = xmalloc(n * sizeof(double)), *ad = dbl(&a);
    size_t zeros = 0;
    for (int i = 0; i < n; i++) {
        double v = (double)F(&a)[i] + F(&b)[i];
        ref[i] = relu && v < 0 ? 0.0 : v;
        zeros += ref[i] == 0.0;
    }
    snprintf(what, sizeof what, "add n%d relu%d", n, relu);
    expect_close(what, &y, ref);
    if (relu)
        check(zeros > 0 && zeros < (size_t)n, "add relu test has both signs (%zu zero)", zeros);
    snprintf(what, sizeof what, "copy n%d", n);
    expect(what, &d, ad, 0.0, 0.0);
    free(ref), free(ad);
    rm(&a), rm(&b), rm(&y), rm(&d);
}

/* ---- global average pooling ---- */

static void test_gap(int n, int c, int hw, float scale)
{
    char what[96];
    size_t ne = (size_t)n * c * hw;
    struct buf x = mkf(ne, RANDOM), y = mkf((size_t)n * c, UNSET);
    struct buf dy = mkf((size_t)n * c, RANDOM), dx = mkf(ne, UNSET);
    inserted(sc_insert_gap_fwd(NULL, n, c, hw, 0, scale, x.h, y.h, "gap_fwd"), "gap_fwd");
    inserted(sc_insert_gap_bwd(NULL, n, c, hw, 0, scale, dy.h, dx.h, "gap_bwd"), "gap_bwd");
    sync_all();
    double *yref = xmalloc(n * c * sizeof(double)), *dxref = xmalloc(ne * sizeof(double));
    for (int i = 0; i < n * c; i++) {
        double s = 0.0;
        for (int p = 0; p < hw; p++) {
            s += F(&x)[(size_t)i * hw + p];
            dxref[(size_t)i * hw + p] = (double)scale * F(&dy)[i];
        }
        yref[i] = scale * s;
    }
    snprintf(what, sizeof what, "gap_fwd n%d c%d hw%d", n, c, hw);
    expect_close(what, &y, yref);
    snprintf(what, sizeof what, "gap_bwd n%d c%d hw%d", n, c, hw);
    expect_close(what, &dx, dxref);
    free(yref), free(dxref);
    rm(&x), rm(&y), rm(&dy), rm(&dx);
}

/* Partial blocks summed by the caller give the whole image's average. */
static void test_gap_blocks(void)
{
    /* one image, 2 channels, 4x4 split into a 4x1 and a 4x3 column block */
    int c = 2;
    struct buf xa = mkf(c * 4, RANDOM), xb = mkf(c * 12, RANDOM);
    struct buf ya = mkf(c, UNSET), yb = mkf(c, UNSET);
    inserted(sc_insert_gap_fwd(NULL, 1, c, 4, 0, 1.0f / 16, xa.h, ya.h, NULL), "gap_fwd block a");
    inserted(sc_insert_gap_fwd(NULL, 1, c, 12, 0, 1.0f / 16, xb.h, yb.h, NULL), "gap_fwd block b");
    sync_all();
    host(&ya), host(&yb);
    int ok = 1;
    for (int ch = 0; ch < c; ch++) {
        double s = 0;
        for (int p = 0; p < 4; p++)
            s += F(&xa)[ch * 4 + p];
        for (int p = 0; p < 12; p++)
            s += F(&xb)[ch * 12 + p];
        double got = (double)F(&ya)[ch] + F(&yb)[ch];
        ok &= fabs(got - s / 16) <= 1e-6;
    }
    check(ok, "gap_fwd of two blocks with scale 1/(H*W) add up to the image's average");
    rm(&xa), rm(&xb), rm(&ya), rm(&yb);
}

/* ---- per-pixel softmax cross-entropy ---- */

static void test_pixel_xent(int n, int classes, int hw, double offset, int bad_label)
{
    char what[128];
    struct sc_pixel_xent_args a = {n, classes, hw, 1.0f / (n * hw)};
    size_t nl = (size_t)n * classes * hw, np = (size_t)n * hw;
    struct buf lg = mkf(nl, RANDOM), dl = mkf(nl, UNSET), st = mkf(2, UNSET), ste = mkf(2, UNSET);
    for (size_t i = 0; i < nl; i++)
        F(&lg)[i] = (float)(3.0 * F(&lg)[i] + offset);
    int32_t *lab = xmalloc(np * sizeof *lab);
    for (size_t i = 0; i < np; i++)
        lab[i] = (int32_t)((frand() + 1.0) * 0.5 * classes) % classes;
    /* make some pixels right: the label's logit the largest */
    for (int i = 0; i < n; i++)
        for (int p = 0; p < hw; p += 3)
            F(&lg)[IDX(i, lab[i * hw + p], p, classes, hw)] = (float)(offset + 5.0);
    if (bad_label)
        lab[np - 1] = classes; /* out of range: no loss, no accuracy */
    struct buf lb = mki(np, lab);
    inserted(sc_insert_pixel_xent(NULL, &a, lg.h, lb.h, dl.h, st.h, "pixel_xent"), "pixel_xent");
    inserted(sc_insert_pixel_xent_eval(NULL, &a, lg.h, lb.h, ste.h, "pixel_xent_eval"), "pixel_xent_eval");
    sync_all();

    double *dref = xmalloc(nl * sizeof(double)), loss = 0.0, sref[2];
    long correct = 0;
    for (int i = 0; i < n; i++)
        for (int p = 0; p < hw; p++) {
            int y = lab[i * hw + p];
            double mx = -INFINITY;
            int arg = 0;
            for (int k = 0; k < classes; k++) {
                double v = F(&lg)[IDX(i, k, p, classes, hw)];
                if (v > mx)
                    mx = v, arg = k;
            }
            double s = 0;
            for (int k = 0; k < classes; k++)
                s += exp(F(&lg)[IDX(i, k, p, classes, hw)] - mx);
            int ok = y >= 0 && y < classes;
            if (ok) {
                loss += -(F(&lg)[IDX(i, y, p, classes, hw)] - mx - log(s));
                correct += arg == y;
            }
            for (int k = 0; k < classes; k++)
                dref[IDX(i, k, p, classes, hw)] =
                    a.scale * (exp(F(&lg)[IDX(i, k, p, classes, hw)] - mx) / s - (k == y));
        }
    sref[0] = loss, sref[1] = (double)correct;
    snprintf(what, sizeof what, "pixel_xent dlogits n%d classes%d hw%d offset%g%s", n, classes, hw, offset,
             bad_label ? " bad label" : "");
    expect_close(what, &dl, dref);
    snprintf(what, sizeof what, "pixel_xent loss, correct (%.4f, %ld) n%d classes%d hw%d", loss, correct, n, classes,
             hw);
    expect_close(what, &st, sref);
    if (np > 3)
        check(correct > 0 && correct < (long)np, "pixel_xent test has right and wrong pixels (%ld of %zu)", correct,
              np);
    snprintf(what, sizeof what, "pixel_xent_eval loss, correct n%d classes%d hw%d", n, classes, hw);
    expect_close(what, &ste, sref);
    free(lab), free(dref);
    rm(&lg), rm(&dl), rm(&st), rm(&ste), rm(&lb);
}

/* ---- ordered sum ---- */

static void test_sum_ordered(size_t es, int count, size_t len, int alias)
{
    char what[128];
    struct buf src[64], dst = mk_es(len, es, UNSET, len);
    starpu_data_handle_t h[64];
    for (int k = 0; k < count; k++) {
        src[k] = mk_es(len, es, RANDOM, len);
        for (size_t i = 0; i < len; i++) /* magnitudes apart, so the order shows in the rounding */
            if (es == sizeof(float))
                F(&src[k])[i] *= (float)pow(10.0, (k * 7 + (int)i) % 9 - 4);
            else
                D(&src[k])[i] *= pow(10.0, (k * 7 + (int)i) % 17 - 8);
        h[k] = src[k].h;
    }
    /* reference in the element type, in order */
    int exact = 1;
    float *rf = xmalloc(len * sizeof(float));
    double *rd = xmalloc(len * sizeof(double));
    for (size_t i = 0; i < len; i++) {
        if (es == sizeof(float)) {
            rf[i] = F(&src[0])[i];
            for (int k = 1; k < count; k++)
                rf[i] += F(&src[k])[i];
        } else {
            rd[i] = D(&src[0])[i];
            for (int k = 1; k < count; k++)
                rd[i] += D(&src[k])[i];
        }
    }
    struct buf *out = alias ? &src[0] : &dst;
    inserted(sc_insert_sum_ordered(NULL, count, h, out->h, "sum_ordered"), "sum_ordered");
    sync_all();
    host(out);
    for (size_t i = 0; i < len; i++)
        exact &= es == sizeof(float) ? F(out)[i] == rf[i] : D(out)[i] == rd[i];
    for (size_t i = len; i < len + GUARD; i++)
        exact &= val(out, i) == SENTINEL;
    snprintf(what, sizeof what, "sum_ordered %s, %d sources of %zu%s: bit-exact in order",
             es == sizeof(float) ? "float" : "double", count, len, alias ? ", dst = src[0]" : "");
    check(exact, "%s", what);
    free(rf), free(rd);
    for (int k = 0; k < count; k++)
        rm(&src[k]);
    rm(&dst);
}

/* The checker of the order: a different order gives different bits here. */
static void test_sum_order_matters(void)
{
    float a = 1e8f, b = -1e8f, c = 1.0f;
    float in_order = (a + b) + c, other = a + (b + c);
    check(in_order != other, "float addition order is visible (%g vs %g)", (double)in_order, (double)other);
    struct buf s0 = mkf_exact(1, ZERO), s1 = mkf_exact(1, ZERO), s2 = mkf_exact(1, ZERO), d = mkf_exact(1, UNSET);
    F(&s0)[0] = a, F(&s1)[0] = b, F(&s2)[0] = c;
    starpu_data_handle_t h[3] = {s0.h, s1.h, s2.h};
    inserted(sc_insert_sum_ordered(NULL, 3, h, d.h, NULL), "sum_ordered order");
    sync_all();
    host(&d);
    check(F(&d)[0] == in_order, "sum_ordered adds src[0] + src[1] first (%g)", (double)F(&d)[0]);
    rm(&s0), rm(&s1), rm(&s2), rm(&d);
}

/* ---- wrapper errors ---- */

static void expect_err(int ret, int want, const char *op, const char *what)
{
    int named = strstr(sc_last_error(), op) != NULL;
    check(ret == want && named, "%s: returns %d (want %d), message \"%s\"", what, ret, want, sc_last_error());
}

static void test_errors(void)
{
    struct sc_bn_args a = {2, 3, 4, 1e-5f, 0.1f, 0};
    size_t ne = 2 * 3 * 4;
    struct buf x = mkf_exact(ne, ZERO), xs = mkf_exact(ne - 1, ZERO), st = mkd_exact(6, ZERO);
    struct buf sts = mkd_exact(5, ZERO), stf = mkf_exact(6, ZERO), prm = mkf_exact(6, ZERO);
    struct buf y = mkf_exact(ne, ZERO), sv = mkf_exact(6, ZERO), svs = mkf_exact(5, ZERO);
    struct buf d7 = mkd_exact(7, ZERO), lab = mki(8, (const int32_t[8]){0});
    int R = SC_ERR_SHAPE;

    expect_err(sc_insert_bn_stats(NULL, &a, xs.h, st.h, NULL), R, "bn_stats", "bn_stats short x");
    expect_err(sc_insert_bn_stats(NULL, &a, x.h, sts.h, NULL), R, "bn_stats", "bn_stats short stats");
    expect_err(sc_insert_bn_stats(NULL, &a, x.h, stf.h, NULL), R, "bn_stats", "bn_stats float stats");
    struct sc_bn_args z = a;
    z.hw = 0;
    expect_err(sc_insert_bn_stats(NULL, &z, x.h, st.h, NULL), R, "bn_stats", "bn_stats hw 0");
    expect_err(sc_insert_accumulate_f64(NULL, st.h, d7.h, NULL), R, "accumulate_f64", "accumulate_f64 lengths");
    expect_err(sc_insert_accumulate_f64(NULL, stf.h, stf.h, NULL), R, "accumulate_f64", "accumulate_f64 floats");
    expect_err(sc_insert_bn_fwd(NULL, &a, 8, x.h, st.h, prm.h, xs.h, sv.h, NULL), R, "bn_fwd", "bn_fwd short y");
    expect_err(sc_insert_bn_fwd(NULL, &a, 8, x.h, st.h, prm.h, y.h, svs.h, NULL), R, "bn_fwd", "bn_fwd short saved");
    expect_err(sc_insert_bn_fwd(NULL, &a, 8, x.h, stf.h, prm.h, y.h, sv.h, NULL), R, "bn_fwd", "bn_fwd float stats");
    expect_err(sc_insert_bn_fwd(NULL, &a, 0, x.h, st.h, prm.h, y.h, sv.h, NULL), SC_ERR_ARG, "bn_fwd",
               "bn_fwd count 0");
    expect_err(sc_insert_bn_fwd_eval(NULL, &a, x.h, svs.h, prm.h, y.h, NULL), R, "bn_fwd_eval",
               "bn_fwd_eval short running");
    expect_err(sc_insert_bn_running_update(NULL, &a, 8, st.h, svs.h, NULL, NULL), R, "bn_running_update",
               "bn_running_update short running");
    expect_err(sc_insert_bn_bwd_stats(NULL, &a, x.h, xs.h, sv.h, st.h, NULL), R, "bn_bwd_stats",
               "bn_bwd_stats short dy");
    expect_err(sc_insert_bn_param_grad(NULL, 3, sts.h, prm.h, NULL), R, "bn_param_grad", "bn_param_grad short dstats");
    expect_err(sc_insert_bn_param_grad(NULL, 3, st.h, svs.h, NULL), R, "bn_param_grad", "bn_param_grad short dparams");
    expect_err(sc_insert_bn_bwd_data(NULL, &a, 8, x.h, y.h, prm.h, sv.h, st.h, xs.h, NULL), R, "bn_bwd_data",
               "bn_bwd_data short dx");
    expect_err(sc_insert_bn_bwd_data(NULL, &a, 8, x.h, y.h, prm.h, sv.h, sts.h, y.h, NULL), R, "bn_bwd_data",
               "bn_bwd_data short dstats");
    expect_err(sc_insert_add(NULL, (int)ne, 0, x.h, xs.h, y.h, NULL), R, "add", "add short b");
    expect_err(sc_insert_add(NULL, 0, 0, x.h, x.h, y.h, NULL), R, "add", "add n 0");
    expect_err(sc_insert_copy(NULL, (int)ne, x.h, xs.h, NULL), R, "copy", "copy short dst");
    expect_err(sc_insert_gap_fwd(NULL, 2, 3, 4, 0, 0.25f, xs.h, sv.h, NULL), R, "gap_fwd", "gap_fwd short x");
    expect_err(sc_insert_gap_fwd(NULL, 2, 3, 4, 0, 0.25f, x.h, svs.h, NULL), R, "gap_fwd", "gap_fwd short y");
    expect_err(sc_insert_gap_bwd(NULL, 2, 3, 4, 0, 0.25f, sv.h, xs.h, NULL), R, "gap_bwd", "gap_bwd short dx");
    struct sc_pixel_xent_args px = {2, 3, 4, 0.125f};
    expect_err(sc_insert_pixel_xent(NULL, &px, xs.h, lab.h, y.h, sv.h, NULL), R, "pixel_xent",
               "pixel_xent short logits");
    expect_err(sc_insert_pixel_xent(NULL, &px, x.h, lab.h, xs.h, sv.h, NULL), R, "pixel_xent",
               "pixel_xent short dlogits");
    expect_err(sc_insert_pixel_xent(NULL, &px, x.h, d7.h, y.h, sv.h, NULL), R, "pixel_xent",
               "pixel_xent labels of doubles");
    expect_err(sc_insert_pixel_xent_eval(NULL, &px, x.h, lab.h, sts.h, NULL), R, "pixel_xent_eval",
               "pixel_xent_eval double stats");
    starpu_data_handle_t mixed[3] = {sv.h, sv.h, svs.h}, kinds[2] = {sv.h, st.h};
    expect_err(sc_insert_sum_ordered(NULL, 3, mixed, sv.h, NULL), R, "sum_ordered", "sum_ordered short source");
    expect_err(sc_insert_sum_ordered(NULL, 2, kinds, sv.h, NULL), R, "sum_ordered", "sum_ordered float + double");
    expect_err(sc_insert_sum_ordered(NULL, 0, kinds, sv.h, NULL), SC_ERR_ARG, "sum_ordered", "sum_ordered 0 sources");
    sync_all();
    rm(&x), rm(&xs), rm(&st), rm(&sts), rm(&stf), rm(&prm), rm(&y), rm(&sv), rm(&svs), rm(&d7), rm(&lab);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0); /* in order with the kernels' lines on stderr */
    setenv("STARPU_NCPU", "2", 0);
    if (starpu_init(NULL)) {
        fprintf(stderr, "starpu_init failed\n");
        return 1;
    }
    sc_codelets_init();

    /* The checker itself must see a small error and a touched sentinel. */
    {
        struct buf b = mkf(2, ZERO);
        double ref[2] = {1.0, 2.0};
        F(&b)[0] = 1.0f, F(&b)[1] = 2.0f + 1e-3f;
        int caught = n_bad(&b, ref, RTOL, ATOL, NULL) == 1;
        F(&b)[1] = 2.0f, F(&b)[2] = 0.0f;
        caught &= n_bad(&b, ref, RTOL, ATOL, NULL) == 1;
        F(&b)[2] = (float)SENTINEL;
        caught &= n_bad(&b, ref, RTOL, ATOL, NULL) == 0;
        check(caught, "checker catches a 1e-3 error and a write past the end");
        rm(&b);
    }

    /*          n  c  hw  relu eps */
    test_bn_fwd(1, 1, 1, 0, 1e-5f);
    test_bn_fwd(3, 5, 7, 0, 1e-5f);
    test_bn_fwd(3, 5, 7, 1, 0.05f);
    test_bn_fwd(2, 4, 33, 1, 1e-3f);
    test_bn_fwd(4, 16, 64, 0, 0.1f);
    test_bn_tiles(2, 3, 4, 9);
    test_bn_tiles(1, 1, 3, 1);
    test_bn_running_count1();
    /*          n  c  hw relu fd */
    test_bn_bwd(3, 5, 7, 0, 0);
    test_bn_bwd(3, 5, 7, 1, 0);
    test_bn_bwd(4, 16, 65, 1, 0);
    test_bn_bwd(2, 3, 5, 0, 1);
    test_bn_bwd(3, 2, 4, 0, 1);
    test_bn_bwd_tiles(2, 3, 4, 9);

    test_add_copy(1, 0);
    test_add_copy(37, 0);
    test_add_copy(1000, 1);
    test_gap(1, 1, 1, 1.0f);
    test_gap(3, 5, 7, 1.0f / 7);
    test_gap(2, 8, 49, 1.0f / 100);
    test_gap_blocks();

    /*              n classes hw offset bad */
    test_pixel_xent(1, 2, 1, 0.0, 0);
    test_pixel_xent(2, 5, 9, 0.0, 0);
    test_pixel_xent(2, 4, 70, 0.0, 0);    /* more than one block of pixels */
    test_pixel_xent(3, 7, 130, 200.0, 0); /* large logits */
    test_pixel_xent(2, 3, 10, 0.0, 1);

    test_sum_order_matters();
    test_sum_ordered(sizeof(float), 3, 11, 0);
    test_sum_ordered(sizeof(double), 3, 11, 0);
    test_sum_ordered(sizeof(float), 3, 600, 0);
    test_sum_ordered(sizeof(double), 1, 5, 0);
    test_sum_ordered(sizeof(float), 20, 300, 0); /* more buffers than STARPU_NMAXBUFS */
    test_sum_ordered(sizeof(double), 3, 40, 1);

    test_errors();

    sc_codelets_shutdown();
    starpu_shutdown();
    printf("%d passed, %d failed\n", passes, failures);
    return failures != 0;
}
