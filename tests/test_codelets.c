/* Every codelet against naive double-precision loops, then the gradients of
 * a small conv->relu->maxpool->fc->xent chain against central differences
 * of its loss.  Outputs start as NaN and are followed by sentinels, so a
 * kernel that skips an element or writes past its tile fails too. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/codelets.h"
#include "src/starconv.h"

#define GUARD    16
#define SENTINEL 1234.5f
#define TOL      1e-4

static int failures;
static unsigned rng = 2024;

static double frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 8388608.0 - 1.0;
}

/* ---- buffers: float arrays registered as vectors GUARD elements longer
 * than the arguments need, as a tile of a larger handle is ---- */

struct buf {
    float *p;
    size_t n;
    starpu_data_handle_t h;
};

enum { ZERO, RANDOM, UNSET };

/* handle_extra: how many of the GUARD elements the handle covers. */
static struct buf mk_handle(size_t n, int fill, size_t handle_extra)
{
    struct buf b = {malloc((n + GUARD) * sizeof(float)), n, NULL};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n; i++)
        b.p[i] = fill == RANDOM ? (float)frand() : fill == UNSET ? NAN : 0.0f;
    for (size_t i = n; i < n + GUARD; i++)
        b.p[i] = SENTINEL;
    starpu_vector_data_register(&b.h, STARPU_MAIN_RAM, (uintptr_t)b.p, n + handle_extra, sizeof(float));
    return b;
}

static struct buf mk(size_t n, int fill)
{
    return mk_handle(n, fill, GUARD);
}

/* For the vector kernels, whose length is the handle's. */
static struct buf mkv(size_t n, int fill)
{
    return mk_handle(n, fill, 0);
}

/* Hand the data back to the host (the test's "wait"). */
static void unreg(struct buf *b)
{
    if (b->h)
        starpu_data_unregister(b->h);
    b->h = NULL;
}

static void rm(struct buf *b)
{
    unreg(b);
    free(b->p);
    b->p = NULL;
}

static double *dbl(const struct buf *b)
{
    double *d = malloc(b->n * sizeof(double));
    for (size_t i = 0; i < b->n; i++)
        d[i] = b->p[i];
    return d;
}

static int report(int ok, const char *what, double err)
{
    printf("%s %s (rel err %.2e)\n", ok ? "ok" : "FAIL", what, err);
    if (!ok)
        failures++;
    return ok;
}

/* max |got - ref| / max |ref|, infinite on NaN or a touched sentinel. */
static double rel_err(const float *got, size_t n, const double *ref)
{
    double md = 0.0, mr = 0.0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs(got[i] - ref[i]);
        if (!(d <= md)) /* also catches NaN */
            md = isnan(d) ? INFINITY : d;
        mr = fmax(mr, fabs(ref[i]));
    }
    for (size_t i = n; i < n + GUARD; i++)
        if (got[i] != SENTINEL)
            md = INFINITY;
    return md / (mr > 0.0 ? mr : 1.0);
}

static void check(const char *what, const struct buf *got, const double *ref, double tol)
{
    double e = rel_err(got->p, got->n, ref);
    report(e <= tol, what, e);
}

static void insert_ok(int ret, const char *what)
{
    if (ret) {
        printf("FAIL %s: insert returned %d\n", what, ret);
        failures++;
    }
}

/* ---- naive references, double precision ---- */

#define AT4(t, n, c, h, w, C, H, W) (t)[(((size_t)(n) * (C) + (c)) * (H) + (h)) * (W) + (w)]

static void conv_fwd_ref(const struct sc_conv_args *a, const double *x, const double *p, double *y)
{
    const double *b = p + (size_t)a->f * a->c * a->kh * a->kw;
    for (int n = 0; n < a->n; n++)
        for (int f = 0; f < a->f; f++)
            for (int oy = 0; oy < a->oh; oy++)
                for (int ox = 0; ox < a->ow; ox++) {
                    double s = b[f];
                    for (int c = 0; c < a->c; c++)
                        for (int ky = 0; ky < a->kh; ky++)
                            for (int kx = 0; kx < a->kw; kx++) {
                                int iy = oy * a->sh - a->ph + ky, ix = ox * a->sw - a->pw + kx;
                                if (iy >= 0 && iy < a->h && ix >= 0 && ix < a->w)
                                    s += AT4(x, n, c, iy, ix, a->c, a->h, a->w) *
                                         AT4(p, f, c, ky, kx, a->c, a->kh, a->kw);
                            }
                    AT4(y, n, f, oy, ox, a->f, a->oh, a->ow) = a->relu && s < 0.0 ? 0.0 : s;
                }
}

/* dx (if not NULL) and dp = [dw | db] (if not NULL) from dy. */
static void conv_bwd_ref(const struct sc_conv_args *a, const double *x, const double *p, const double *dy, double *dx,
                         double *dp)
{
    size_t nw = (size_t)a->f * a->c * a->kh * a->kw;
    if (dx)
        memset(dx, 0, (size_t)a->n * a->c * a->h * a->w * sizeof *dx);
    if (dp)
        memset(dp, 0, (nw + a->f) * sizeof *dp);
    for (int n = 0; n < a->n; n++)
        for (int f = 0; f < a->f; f++)
            for (int oy = 0; oy < a->oh; oy++)
                for (int ox = 0; ox < a->ow; ox++) {
                    double g = AT4(dy, n, f, oy, ox, a->f, a->oh, a->ow);
                    if (dp)
                        dp[nw + f] += g;
                    for (int c = 0; c < a->c; c++)
                        for (int ky = 0; ky < a->kh; ky++)
                            for (int kx = 0; kx < a->kw; kx++) {
                                int iy = oy * a->sh - a->ph + ky, ix = ox * a->sw - a->pw + kx;
                                if (iy < 0 || iy >= a->h || ix < 0 || ix >= a->w)
                                    continue;
                                if (dx)
                                    AT4(dx, n, c, iy, ix, a->c, a->h, a->w) +=
                                        g * AT4(p, f, c, ky, kx, a->c, a->kh, a->kw);
                                if (dp)
                                    AT4(dp, f, c, ky, kx, a->c, a->kh, a->kw) +=
                                        g * AT4(x, n, c, iy, ix, a->c, a->h, a->w);
                            }
                }
}

/* Forward, or backward when dy is given (then y is unused and dx written). */
static void pool_ref(const struct sc_pool_args *a, const double *x, double *y, const double *dy, double *dx)
{
    if (dy)
        memset(dx, 0, (size_t)a->n * a->c * a->h * a->w * sizeof *dx);
    for (int n = 0; n < a->n; n++)
        for (int c = 0; c < a->c; c++)
            for (int oy = 0; oy < a->oh; oy++)
                for (int ox = 0; ox < a->ow; ox++) {
                    double best = -INFINITY, sum = 0.0;
                    int at = -1, cnt = 0;
                    for (int ky = 0; ky < a->kh; ky++)
                        for (int kx = 0; kx < a->kw; kx++) {
                            int iy = oy * a->sh - a->ph + ky, ix = ox * a->sw - a->pw + kx;
                            if (iy < 0 || iy >= a->h || ix < 0 || ix >= a->w)
                                continue;
                            double v = AT4(x, n, c, iy, ix, a->c, a->h, a->w);
                            if (v > best) { /* first maximum, as PyTorch */
                                best = v;
                                at = iy * a->w + ix;
                            }
                            sum += v;
                            cnt++;
                        }
                    double div = a->include_pad ? a->kh * a->kw : cnt;
                    if (!dy) {
                        AT4(y, n, c, oy, ox, a->c, a->oh, a->ow) = a->max ? best : sum / div;
                        continue;
                    }
                    double g = AT4(dy, n, c, oy, ox, a->c, a->oh, a->ow);
                    double *plane = dx + ((size_t)n * a->c + c) * a->h * a->w;
                    if (a->max) {
                        plane[at] += g;
                        continue;
                    }
                    for (int ky = 0; ky < a->kh; ky++)
                        for (int kx = 0; kx < a->kw; kx++) {
                            int iy = oy * a->sh - a->ph + ky, ix = ox * a->sw - a->pw + kx;
                            if (iy >= 0 && iy < a->h && ix >= 0 && ix < a->w)
                                plane[iy * a->w + ix] += g / div;
                        }
                }
}

static void fc_fwd_ref(const struct sc_fc_args *a, const double *x, const double *p, double *y)
{
    for (int i = 0; i < a->n; i++)
        for (int o = 0; o < a->out; o++) {
            double s = p[(size_t)a->out * a->in + o];
            for (int k = 0; k < a->in; k++)
                s += x[(size_t)i * a->in + k] * p[(size_t)o * a->in + k];
            y[(size_t)i * a->out + o] = a->relu && s < 0.0 ? 0.0 : s;
        }
}

static void fc_bwd_ref(const struct sc_fc_args *a, const double *x, const double *p, const double *dy, double *dx,
                       double *dp)
{
    size_t nw = (size_t)a->out * a->in;
    if (dx)
        memset(dx, 0, (size_t)a->n * a->in * sizeof *dx);
    if (dp)
        memset(dp, 0, (nw + a->out) * sizeof *dp);
    for (int i = 0; i < a->n; i++)
        for (int o = 0; o < a->out; o++) {
            double g = dy[(size_t)i * a->out + o];
            if (dp)
                dp[nw + o] += g;
            for (int k = 0; k < a->in; k++) {
                if (dx)
                    dx[(size_t)i * a->in + k] += g * p[(size_t)o * a->in + k];
                if (dp)
                    dp[(size_t)o * a->in + k] += g * x[(size_t)i * a->in + k];
            }
        }
}

/* Returns the summed loss; dl (if not NULL) gets scale * (softmax - onehot). */
static double xent_ref(int n, int classes, double scale, const double *l, const int32_t *labels, double *dl,
                       int *correct)
{
    double loss = 0.0;
    *correct = 0;
    for (int i = 0; i < n; i++) {
        const double *r = l + (size_t)i * classes;
        int arg = 0;
        for (int k = 1; k < classes; k++)
            if (r[k] > r[arg])
                arg = k;
        double s = 0.0;
        for (int k = 0; k < classes; k++)
            s += exp(r[k] - r[arg]);
        loss += log(s) + r[arg] - r[labels[i]];
        *correct += arg == labels[i];
        if (dl)
            for (int k = 0; k < classes; k++)
                dl[(size_t)i * classes + k] = scale * (exp(r[k] - r[arg]) / s - (k == labels[i]));
    }
    return loss;
}

/* ---- convolution ---- */

static void test_conv(int n, int c, int h, int w, int f, int kh, int kw, int sh, int sw, int ph, int pw, int oh_cut)
{
    struct sc_conv_args a = {
        n, c, h, w, f, kh, kw, sh, sw, ph, pw, (h + 2 * ph - kh) / sh + 1 - oh_cut, (w + 2 * pw - kw) / sw + 1, 0};
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * f * a.oh * a.ow, np = (size_t)f * c * kh * kw + f;
    char tag[128], what[160];
    snprintf(tag, sizeof tag, "n%d c%d %dx%d f%d k%dx%d s%dx%d p%dx%d%s", n, c, h, w, f, kh, kw, sh, sw, ph, pw,
             oh_cut ? " (one-sided padding)" : "");
    struct buf x = mk(nx, RANDOM), p = mk(np, RANDOM), dy = mk(ny, RANDOM);
    struct buf y0 = mk(ny, UNSET), y1 = mk(ny, UNSET), dx = mk(nx, UNSET), dp = mk(np, UNSET);
    struct sc_conv_args r = a;
    r.relu = 1;
    insert_ok(sc_insert_conv_fwd(NULL, &a, x.h, p.h, y0.h, "conv_fwd"), "conv_fwd");
    insert_ok(sc_insert_conv_fwd(NULL, &r, x.h, p.h, y1.h, "conv_fwd_relu"), "conv_fwd relu");
    insert_ok(sc_insert_conv_bwd_data(NULL, &a, dy.h, p.h, dx.h, "conv_bwd_data"), "conv_bwd_data");
    insert_ok(sc_insert_conv_bwd_filter(NULL, &a, x.h, dy.h, dp.h, "conv_bwd_filter"), "conv_bwd_filter");
    starpu_task_wait_for_all();
    struct buf *all[] = {&x, &p, &dy, &y0, &y1, &dx, &dp};
    for (int i = 0; i < 7; i++)
        unreg(all[i]);

    double *xd = dbl(&x), *pd = dbl(&p), *dyd = dbl(&dy);
    double *ref = malloc((nx > ny ? (nx > np ? nx : np) : (ny > np ? ny : np)) * sizeof(double));
    conv_fwd_ref(&a, xd, pd, ref);
    snprintf(what, sizeof what, "conv_fwd %s", tag);
    check(what, &y0, ref, TOL);
    conv_fwd_ref(&r, xd, pd, ref);
    snprintf(what, sizeof what, "conv_fwd+relu %s", tag);
    check(what, &y1, ref, TOL);
    conv_bwd_ref(&a, xd, pd, dyd, ref, NULL);
    snprintf(what, sizeof what, "conv_bwd_data %s", tag);
    check(what, &dx, ref, TOL);
    conv_bwd_ref(&a, xd, pd, dyd, NULL, ref);
    snprintf(what, sizeof what, "conv_bwd_filter+bias %s", tag);
    check(what, &dp, ref, TOL);
    free(xd), free(pd), free(dyd), free(ref);
    for (int i = 0; i < 7; i++)
        rm(all[i]);
}

/* ---- pooling ---- */

/* oneDNN 2.6 has no jit kernel for NCHW pooling without AVX-512, and its
 * reference kernel is 20 to 50 times slower: average pooling must find a
 * layout with a jit kernel, which every x86-64 has (max pooling is ours). */
static void test_pool_not_reference(void)
{
    struct sc_pool_args a = {64, 32, 28, 28, 2, 2, 2, 2, 0, 0, 14, 14, 0, 1};
    char impl[64] = "";
    int got = sc_pool_impl(&a, impl, sizeof impl) == 0;
#if defined(__x86_64__)
    int fast = got && strncmp(impl, "ref", 3) && strncmp(impl, "simple", 6);
    report(fast, "average pooling 64x32x28x28 runs a jit kernel", 0.0);
    printf("# pooling implementation: %s\n", impl);
#else
    report(got, "max pooling has an implementation", 0.0);
    printf("# pooling implementation: %s (no jit expected off x86-64)\n", impl);
#endif
}

static void test_pool(int max, int include_pad, int n, int c, int h, int w, int kh, int kw, int sh, int sw, int ph,
                      int pw)
{
    struct sc_pool_args a = {
        n, c, h, w, kh, kw, sh, sw, ph, pw, (h + 2 * ph - kh) / sh + 1, (w + 2 * pw - kw) / sw + 1, max, include_pad};
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * a.oh * a.ow;
    size_t wsb = sc_pool_workspace_bytes(&a);
    char what[160];
    const char *kind = max ? "max" : include_pad ? "avg(incl pad)" : "avg(excl pad)";
    if (max && !wsb) {
        printf("FAIL pool %s: no workspace size\n", kind);
        failures++;
        return;
    }
    uint8_t *ws = calloc(wsb ? wsb : 1, 1);
    starpu_data_handle_t wsh;
    starpu_vector_data_register(&wsh, STARPU_MAIN_RAM, (uintptr_t)ws, wsb ? wsb : 1, 1);
    struct buf x = mk(nx, RANDOM), y = mk(ny, UNSET), dy = mk(ny, RANDOM), dx = mk(nx, UNSET);
    insert_ok(sc_insert_pool_fwd(NULL, &a, x.h, y.h, wsh, "pool_fwd"), "pool_fwd");
    insert_ok(sc_insert_pool_bwd(NULL, &a, dy.h, wsh, dx.h, "pool_bwd"), "pool_bwd");
    starpu_task_wait_for_all();
    starpu_data_unregister(wsh);
    unreg(&x), unreg(&y), unreg(&dy), unreg(&dx);

    double *xd = dbl(&x), *dyd = dbl(&dy), *ref = malloc(nx * sizeof(double));
    pool_ref(&a, xd, ref, NULL, NULL);
    snprintf(what, sizeof what, "pool_fwd %s n%d c%d %dx%d k%dx%d s%dx%d p%dx%d", kind, n, c, h, w, kh, kw, sh, sw, ph,
             pw);
    check(what, &y, ref, TOL);
    pool_ref(&a, xd, NULL, dyd, ref);
    memcpy(what, "pool_bwd", 8);
    check(what, &dx, ref, TOL);
    free(xd), free(dyd), free(ref), free(ws);
    rm(&x), rm(&y), rm(&dy), rm(&dx);
}

/* ---- fully connected ---- */

static void test_fc(int n, int in, int out, int relu)
{
    struct sc_fc_args a = {n, in, out, relu};
    size_t np = (size_t)out * in + out;
    char what[128];
    struct buf x = mk((size_t)n * in, RANDOM), p = mk(np, RANDOM), dy = mk((size_t)n * out, RANDOM);
    struct buf y = mk((size_t)n * out, UNSET), dx = mk((size_t)n * in, UNSET), dp = mk(np, UNSET);
    insert_ok(sc_insert_fc_fwd(NULL, &a, x.h, p.h, y.h, "fc_fwd"), "fc_fwd");
    insert_ok(sc_insert_fc_bwd_data(NULL, &a, dy.h, p.h, dx.h, "fc_bwd_data"), "fc_bwd_data");
    insert_ok(sc_insert_fc_bwd_weights(NULL, &a, x.h, dy.h, dp.h, "fc_bwd_weights"), "fc_bwd_weights");
    starpu_task_wait_for_all();
    struct buf *all[] = {&x, &p, &dy, &y, &dx, &dp};
    for (int i = 0; i < 6; i++)
        unreg(all[i]);
    double *xd = dbl(&x), *pd = dbl(&p), *dyd = dbl(&dy), *ref = malloc((np + (size_t)n * in) * sizeof(double));
    fc_fwd_ref(&a, xd, pd, ref);
    snprintf(what, sizeof what, "fc_fwd%s n%d %d->%d", relu ? "+relu" : "", n, in, out);
    check(what, &y, ref, TOL);
    fc_bwd_ref(&a, xd, pd, dyd, ref, NULL);
    snprintf(what, sizeof what, "fc_bwd_data n%d %d->%d", n, in, out);
    check(what, &dx, ref, TOL);
    fc_bwd_ref(&a, xd, pd, dyd, NULL, ref);
    snprintf(what, sizeof what, "fc_bwd_weights+bias n%d %d->%d", n, in, out);
    check(what, &dp, ref, TOL);
    free(xd), free(pd), free(dyd), free(ref);
    for (int i = 0; i < 6; i++)
        rm(all[i]);
}

/* ---- element-wise kernels ---- */

static void test_relu_bwd(int n)
{
    struct buf dy = mk(n, RANDOM), y = mk(n, RANDOM);
    for (int i = 0; i < n; i += 7)
        y.p[i] = 0.0f; /* the boundary: ReLU's output is exactly 0 there */
    double *ref = dbl(&dy);
    for (int i = 0; i < n; i++)
        if (!(y.p[i] > 0.0f))
            ref[i] = 0.0;
    insert_ok(sc_insert_relu_bwd(NULL, n, dy.h, y.h, "relu_bwd"), "relu_bwd");
    starpu_task_wait_for_all();
    unreg(&dy), unreg(&y);
    char what[64];
    snprintf(what, sizeof what, "relu_bwd n%d", n);
    check(what, &dy, ref, 0.0);
    free(ref);
    rm(&dy), rm(&y);
}

static void test_xent(void)
{
    enum { N = 6, K = 10 };
    const float scale = 1.0f / 8; /* as for a global batch larger than the tile */
    struct buf l = mk(N * K, RANDOM), dl = mk(N * K, UNSET), st = mk(2, UNSET), st2 = mk(2, UNSET);
    int32_t labels[N + GUARD];
    for (int i = 0; i < N; i++) {
        labels[i] = (int32_t)((frand() + 1.0) * K / 2) % K;
        for (int k = 0; k < K; k++)
            l.p[i * K + k] *= 4.0f;
    }
    l.p[0 * K + labels[0]] = 9.0f; /* certainly correct */
    for (int k = 0; k < K; k++)    /* would overflow a naive exp */
        l.p[1 * K + k] = k == 3 ? 1000.0f : k == labels[1] ? 990.0f : -1000.0f;
    if (labels[1] == 3)
        labels[1] = 4, l.p[1 * K + 4] = 990.0f;
    starpu_data_handle_t lh;
    starpu_vector_data_register(&lh, STARPU_MAIN_RAM, (uintptr_t)labels, N, sizeof(int32_t));
    struct sc_xent_args a = {N, K, scale};
    insert_ok(sc_insert_xent(NULL, &a, l.h, lh, dl.h, st.h, "xent"), "xent");
    insert_ok(sc_insert_xent_eval(NULL, &a, l.h, lh, st2.h, "xent_eval"), "xent_eval");
    starpu_task_wait_for_all();
    starpu_data_unregister(lh);
    unreg(&l), unreg(&dl), unreg(&st), unreg(&st2);
    double *ld = dbl(&l), ref[N * K], stats[2];
    int correct;
    stats[0] = xent_ref(N, K, scale, ld, labels, ref, &correct);
    stats[1] = correct;
    check("xent dlogits (incl. logits of +-1000)", &dl, ref, TOL);
    check("xent stats {loss sum, correct}", &st, stats, 1e-5);
    check("xent_eval stats", &st2, stats, 1e-5);
    report(st.p[1] == correct && correct >= 1, "xent correct count is exact", fabs(st.p[1] - correct));
    free(ld);
    rm(&l), rm(&dl), rm(&st), rm(&st2);
}

static void test_load_batch(void)
{
    enum { S = 20, P = 13, N = 6 };
    uint8_t images[S * P], labels[S];
    for (int i = 0; i < S * P; i++)
        images[i] = (uint8_t)(i * 37 + 11);
    images[5 * P] = 255, images[5 * P + 1] = 0;
    for (int i = 0; i < S; i++)
        labels[i] = (uint8_t)(i % 10);
    int32_t idx[N] = {3, 17, 0, 3, 19, 5};
    struct buf x = mk(N * P, UNSET);
    int32_t got[N + GUARD];
    for (int i = 0; i < N + GUARD; i++)
        got[i] = -7;
    starpu_data_handle_t lh;
    starpu_vector_data_register(&lh, STARPU_MAIN_RAM, (uintptr_t)got, N + GUARD, sizeof(int32_t));
    insert_ok(sc_insert_load_batch(NULL, images, labels, P, N, idx, x.h, lh, "load_batch"), "load_batch");
    idx[0] = 1; /* the task must have its own copy of the indices */
    starpu_task_wait_for_all();
    starpu_data_unregister(lh);
    unreg(&x);
    int32_t want[N] = {3, 17, 0, 3, 19, 5};
    double ref[N * P];
    int lab_ok = 1;
    for (int i = 0; i < N; i++) {
        for (int p = 0; p < P; p++)
            ref[i * P + p] = images[want[i] * P + p] / 255.0f;
        lab_ok &= got[i] == labels[want[i]];
    }
    lab_ok &= got[N] == -7;
    check("load_batch pixels / 255", &x, ref, 0.0);
    report(lab_ok, "load_batch labels", !lab_ok);
    rm(&x);
}

static void test_accumulate(int n)
{
    struct buf d = mkv(n, RANDOM), s = mkv(n, RANDOM);
    double *ref = malloc(n * sizeof(double));
    for (int i = 0; i < n; i++)
        ref[i] = d.p[i] + s.p[i]; /* a float sum, so the result is exact */
    insert_ok(sc_insert_accumulate(NULL, d.h, s.h, "accumulate"), "accumulate");
    insert_ok(sc_insert_accumulate(NULL, d.h, s.h, "accumulate"), "accumulate");
    starpu_task_wait_for_all();
    unreg(&d), unreg(&s);
    for (int i = 0; i < n; i++)
        ref[i] = (float)ref[i] + s.p[i];
    char what[64];
    snprintf(what, sizeof what, "accumulate twice n%d", n);
    check(what, &d, ref, 0.0);
    free(ref);
    rm(&d), rm(&s);
}

static void test_sgd(int n)
{
    struct sc_sgd_args a = {0.1f, 0.9f, 0.01f};
    struct buf w = mkv(n, RANDOM), v = mkv(n, ZERO), g[3];
    for (int k = 0; k < 3; k++)
        g[k] = mkv(n, RANDOM);
    double *wr = dbl(&w), *vr = calloc(n, sizeof(double));
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < n; i++) { /* torch.optim.SGD, dampening 0, no Nesterov */
            double gp = g[k].p[i] + (double)a.weight_decay * wr[i];
            vr[i] = k == 0 ? gp : a.momentum * vr[i] + gp;
            wr[i] -= a.lr * vr[i];
        }
    for (int k = 0; k < 3; k++)
        insert_ok(sc_insert_sgd(NULL, &a, w.h, v.h, g[k].h, "sgd"), "sgd");
    starpu_task_wait_for_all();
    unreg(&w), unreg(&v);
    check("sgd 3 steps: weights", &w, wr, 1e-5);
    check("sgd 3 steps: momentum buffer", &v, vr, 1e-5);
    free(wr), free(vr);
    rm(&w), rm(&v);
    for (int k = 0; k < 3; k++)
        rm(&g[k]);
}

/* sc_task_opts.where reaches the tasks: with CPU workers only, a task kept
 * to CUDA workers cannot be submitted, and one kept to CPU workers runs. */
static void test_where(int n)
{
    struct buf d = mkv(n, RANDOM), s = mkv(n, RANDOM);
    double *ref = malloc(n * sizeof(double));
    for (int i = 0; i < n; i++)
        ref[i] = d.p[i] + s.p[i];
    struct sc_task_opts cuda = {0, SC_WHERE_CUDA}, cpu = {0, SC_WHERE_CPU};
    int on_cuda = sc_insert_accumulate(&cuda, d.h, s.h, "accumulate on CUDA");
    int on_cpu = sc_insert_accumulate(&cpu, d.h, s.h, "accumulate on CPU");
    starpu_task_wait_for_all();
    unreg(&d), unreg(&s);
    report(on_cuda != 0 && on_cpu == 0, "a task kept to CUDA workers is refused without one; kept to CPU, it runs",
           0.0);
    check("accumulate kept to CPU workers", &d, ref, 0.0);
    free(ref);
    rm(&d), rm(&s);
}

/* ---- the argument checks of the submit wrappers ---- */

static void test_rejects(void)
{
    struct sc_conv_args a = {2, 3, 8, 8, 4, 3, 3, 1, 1, 1, 1, 8, 8, 0};
    struct buf x = mk(2 * 3 * 64, RANDOM), p = mk(4 * 27 + 4, RANDOM), y = mk(2 * 4 * 64 - GUARD - 1, ZERO);
    struct buf s = mk(10, ZERO);
    int r1 = sc_insert_conv_fwd(NULL, &a, x.h, p.h, y.h, NULL);
    a.oh = 7, a.h = 12; /* 5 rows too many for oh: oneDNN would refuse */
    int r2 = sc_insert_conv_fwd(NULL, &a, x.h, p.h, s.h, NULL);
    int r3 = sc_insert_accumulate(NULL, x.h, p.h, NULL);
    starpu_task_wait_for_all();
    report(r1 == SC_ERR_SHAPE && r2 == SC_ERR_SHAPE && r3 == SC_ERR_SHAPE,
           "inserts reject short handles, inconsistent shapes, length mismatches", 0.0);
    rm(&x), rm(&p), rm(&y), rm(&s);
}

/* ---- gradients of a small network against central differences ---- */

static const struct sc_conv_args gc = {2, 2, 6, 5, 3, 3, 3, 1, 1, 1, 1, 6, 5, 1};
static const struct sc_pool_args gp = {2, 3, 6, 5, 2, 2, 2, 2, 0, 0, 3, 2, 1, 0};
static const struct sc_fc_args gf = {2, 3 * 3 * 2, 4, 0};
static const int32_t glabels[2] = {1, 3};
#define G_SCALE 0.5 /* 1 / batch */

static double chain_loss(const double *x, const double *cp, const double *fp)
{
    double y1[2 * 3 * 30], y2[2 * 18], l[2 * 4];
    int correct;
    conv_fwd_ref(&gc, x, cp, y1);
    pool_ref(&gp, y1, y2, NULL, NULL);
    fc_fwd_ref(&gf, y2, fp, l);
    return G_SCALE * xent_ref(2, 4, G_SCALE, l, glabels, NULL, &correct);
}

/* Central differences of chain_loss w.r.t. each element of v. */
static void chain_fd(double *x, double *cp, double *fp, double *v, size_t n, double *out)
{
    const double eps = 1e-6;
    for (size_t i = 0; i < n; i++) {
        double keep = v[i];
        v[i] = keep + eps;
        double lp = chain_loss(x, cp, fp);
        v[i] = keep - eps;
        double lm = chain_loss(x, cp, fp);
        v[i] = keep;
        out[i] = (lp - lm) / (2 * eps);
    }
}

static void test_gradients(void)
{
    size_t nx = 2 * 2 * 30, ncp = 3 * 2 * 9 + 3, nfp = 4 * 18 + 4, ny1 = 2 * 3 * 30, ny2 = 2 * 18;
    struct buf x = mk(nx, RANDOM), cp = mk(ncp, RANDOM), fp = mk(nfp, RANDOM);
    struct buf y1 = mk(ny1, UNSET), y2 = mk(ny2, UNSET), l = mk(8, UNSET), dl = mk(8, UNSET), st = mk(2, UNSET);
    struct buf dfp = mk(nfp, UNSET), dy2 = mk(ny2, UNSET), dy1 = mk(ny1, UNSET), dcp = mk(ncp, UNSET),
               dx = mk(nx, UNSET);
    for (size_t i = 0; i < nfp; i++)
        fp.p[i] *= 2.0f; /* logits of a few units, so that the softmax is not flat */
    int32_t labels[2] = {glabels[0], glabels[1]};
    size_t wsb = sc_pool_workspace_bytes(&gp);
    uint8_t *ws = calloc(wsb, 1);
    starpu_data_handle_t lh, wsh;
    starpu_vector_data_register(&lh, STARPU_MAIN_RAM, (uintptr_t)labels, 2, sizeof(int32_t));
    starpu_vector_data_register(&wsh, STARPU_MAIN_RAM, (uintptr_t)ws, wsb, 1);
    struct sc_xent_args xa = {2, 4, (float)G_SCALE};
    insert_ok(sc_insert_conv_fwd(NULL, &gc, x.h, cp.h, y1.h, NULL) ||
                  sc_insert_pool_fwd(NULL, &gp, y1.h, y2.h, wsh, NULL) ||
                  sc_insert_fc_fwd(NULL, &gf, y2.h, fp.h, l.h, NULL) ||
                  sc_insert_xent(NULL, &xa, l.h, lh, dl.h, st.h, NULL) ||
                  sc_insert_fc_bwd_weights(NULL, &gf, y2.h, dl.h, dfp.h, NULL) ||
                  sc_insert_fc_bwd_data(NULL, &gf, dl.h, fp.h, dy2.h, NULL) ||
                  sc_insert_pool_bwd(NULL, &gp, dy2.h, wsh, dy1.h, NULL) ||
                  sc_insert_relu_bwd(NULL, (int)ny1, dy1.h, y1.h, NULL) ||
                  sc_insert_conv_bwd_filter(NULL, &gc, x.h, dy1.h, dcp.h, NULL) ||
                  sc_insert_conv_bwd_data(NULL, &gc, dy1.h, cp.h, dx.h, NULL),
              "gradient chain");
    starpu_task_wait_for_all();
    starpu_data_unregister(lh);
    starpu_data_unregister(wsh);
    struct buf *all[] = {&x, &cp, &fp, &y1, &y2, &l, &dl, &st, &dfp, &dy2, &dy1, &dcp, &dx};
    for (int i = 0; i < 13; i++)
        unreg(all[i]);

    double *xd = dbl(&x), *cpd = dbl(&cp), *fpd = dbl(&fp), fd[200];
    double loss = chain_loss(xd, cpd, fpd);
    report(fabs(G_SCALE * st.p[0] - loss) <= 1e-5 * fabs(loss), "chain loss matches the reference",
           fabs(G_SCALE * st.p[0] - loss) / fabs(loss));
    chain_fd(xd, cpd, fpd, xd, nx, fd);
    check("finite differences dL/dx", &dx, fd, 1e-3);
    chain_fd(xd, cpd, fpd, cpd, ncp, fd);
    check("finite differences dL/dconv (weights, bias)", &dcp, fd, 1e-3);
    chain_fd(xd, cpd, fpd, fpd, nfp, fd);
    check("finite differences dL/dfc (weights, bias)", &dfp, fd, 1e-3);
    free(xd), free(cpd), free(fpd), free(ws);
    for (int i = 0; i < 13; i++)
        rm(all[i]);
}

/* A kernel's own failure goes to its worker's record (kernels/fail.h:
 * struct sc_fail), which the training loop reads: none after every test
 * above, then an xent task given a label outside the classes. */
static void test_fail_record(void)
{
    enum { N = 3, K = 10 };
    struct sc_fail f;
    report(!sc_fail_first(&f), "no kernel failed in the tests above", 0.0);
    struct buf l = mk(N * K, RANDOM), dl = mk(N * K, UNSET), st = mk(2, UNSET);
    int32_t labels[N] = {1, 12, 3};
    starpu_data_handle_t lh;
    starpu_vector_data_register(&lh, STARPU_MAIN_RAM, (uintptr_t)labels, N, sizeof(int32_t));
    struct sc_xent_args a = {N, K, 1.0f};
    insert_ok(sc_insert_xent(NULL, &a, l.h, lh, dl.h, st.h, "loss.bad"), "xent");
    starpu_task_wait_for_all();
    starpu_data_unregister(lh);
    unreg(&l), unreg(&dl), unreg(&st);
    char line[512] = "";
    int got = sc_fail_first(&f);
    if (got)
        sc_fail_describe(&f, line, sizeof line);
    printf("  %s\n", line);
    report(got && !strncmp(line, "kernel loss.bad (xent) failed on worker cpu ", 44) &&
               strstr(line, ": 1 labels outside [0, 10)") && f.worker >= 0,
           "a label outside the classes: recorded, naming the task, kernel, worker and cause", 0.0);
    sc_fail_set_reported(); /* the failure was the test's */
    rm(&l), rm(&dl), rm(&st);
}

int main(void)
{
    setenv("STARPU_NCPU", "2", 0);
    if (starpu_init(NULL)) {
        fprintf(stderr, "starpu_init failed\n");
        return 1;
    }
    sc_codelets_init();

    /* The checker itself must see a small error. */
    {
        float got[1 + GUARD];
        double ref = 1.0;
        for (int i = 1; i <= GUARD; i++)
            got[i] = SENTINEL;
        got[0] = 1.0f + 1e-3f;
        int caught = rel_err(got, 1, &ref) > TOL;
        got[0] = 1.0f, got[GUARD] = 0.0f;
        caught &= rel_err(got, 1, &ref) > TOL;
        report(caught, "checker catches a 1e-3 error and a write past the end", 0.0);
    }
    test_pool_not_reference();

    /*        n  c   h   w   f  kh kw sh sw ph pw cut */
    test_conv(1, 1, 5, 5, 2, 1, 1, 1, 1, 0, 0, 0);
    test_conv(3, 2, 7, 6, 4, 1, 1, 2, 2, 0, 0, 0);
    test_conv(3, 2, 7, 6, 4, 3, 3, 1, 1, 1, 1, 0);
    test_conv(1, 3, 9, 8, 5, 3, 3, 2, 2, 1, 1, 0);
    test_conv(3, 3, 9, 8, 5, 3, 3, 2, 2, 0, 0, 0);
    test_conv(1, 4, 10, 7, 3, 5, 5, 1, 1, 2, 2, 0);
    test_conv(3, 2, 11, 9, 3, 5, 5, 2, 2, 0, 0, 0);
    test_conv(3, 5, 12, 11, 6, 5, 5, 2, 2, 2, 2, 0);
    test_conv(3, 3, 8, 10, 2, 3, 5, 2, 1, 1, 2, 0);
    test_conv(3, 17, 6, 7, 19, 3, 3, 1, 1, 1, 1, 0);
    test_conv(3, 8, 9, 9, 16, 3, 3, 1, 1, 1, 1, 1);
    test_conv(2, 1, 28, 28, 32, 3, 3, 1, 1, 1, 1, 0);
    test_conv(2, 32, 14, 14, 64, 3, 3, 1, 1, 1, 1, 0);

    /*             max incl n  c   h   w  kh kw sh sw ph pw */
    test_pool(1, 0, 2, 32, 28, 28, 2, 2, 2, 2, 0, 0);
    test_pool(1, 0, 2, 3, 9, 21, 2, 2, 2, 2, 0, 0); /* 2x2: odd last row and column, a 4-wide body and a tail */
    test_pool(1, 0, 3, 5, 9, 7, 3, 3, 2, 2, 1, 1);
    test_pool(1, 0, 1, 3, 6, 6, 3, 3, 1, 1, 1, 1);
    test_pool(1, 0, 3, 4, 7, 9, 2, 2, 1, 1, 0, 0);
    test_pool(1, 0, 2, 3, 8, 7, 3, 2, 2, 1, 1, 0);
    test_pool(1, 0, 3, 17, 10, 10, 3, 3, 3, 3, 0, 0);
    test_pool(0, 0, 3, 4, 8, 8, 2, 2, 2, 2, 0, 0);
    test_pool(0, 1, 2, 3, 9, 7, 3, 3, 2, 2, 1, 1);
    test_pool(0, 0, 2, 3, 9, 7, 3, 3, 2, 2, 1, 1);
    test_pool(0, 1, 1, 5, 7, 8, 3, 2, 1, 2, 1, 1);
    test_pool(0, 0, 1, 5, 7, 8, 3, 2, 1, 2, 1, 1);
    test_pool(0, 0, 3, 2, 10, 11, 3, 3, 3, 3, 0, 0);

    test_fc(3, 37, 11, 0);
    test_fc(3, 37, 11, 1);
    test_fc(1, 5, 3, 1);
    test_fc(32, 300, 128, 1);

    test_relu_bwd(1000);
    test_relu_bwd(7);
    test_xent();
    test_load_batch();
    test_accumulate(1003);
    test_sgd(1003);
    if (starpu_worker_get_count_by_type(STARPU_CUDA_WORKER) == 0)
        test_where(101);
    test_rejects();
    test_gradients();
    test_fail_record();

    starpu_task_wait_for_all();
    sc_codelets_shutdown();
    starpu_shutdown();
    printf("%s: %d failure%s\n", failures ? "FAIL" : "PASS", failures, failures == 1 ? "" : "s");
    return failures ? 1 : 0;
}
