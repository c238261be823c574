/* Every codelet with a CUDA implementation, run on a CPU worker and on a
 * CUDA worker on the same random inputs: the outputs must agree to 1e-4,
 * relative to max(1, |CPU value|) (so absolute below 1); int32 and the
 * counts exactly.  Tasks go to one kind of worker through two scheduling
 * contexts (the thread's current context picks where the wrappers'
 * tasks go).  A codelet without a CUDA version cannot be submitted to the
 * CUDA context (-ENODEV): it is listed, not failed.  Also max pooling with
 * the forward on one kind of worker and the backward on the other (the
 * workspace is oneDNN's on both).  Exit 77 without a CUDA worker.  Built
 * only with SC_USE_CUDA. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "codelets/codelets.h"
#include "src/starconv.h"

#define TOL  1e-4
#define MAXB 8

static unsigned rng = 77;
static double frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 8388608.0 - 1.0;
}

static unsigned ctx_of[2]; /* 0: the CPU workers, 1: one CUDA worker */
static int no_cuda_version;

enum fill { F_RAND, F_ZERO, F_NAN, F_POS, F_LABELS, F_LABELS_PAD, F_BYTES, F_RAND_F64, F_POS_F64 };

struct tcase {
    const char *name;
    int nb;
    size_t n[MAXB], es[MAXB];
    int fill[MAXB];
    int out[MAXB]; /* compared after the task */
    int classes;   /* for F_LABELS */
    int (*submit)(const void *args, starpu_data_handle_t *h);
    const void *args;
};

static void fill(void *p, size_t n, int how, int classes)
{
    for (size_t i = 0; i < n; i++)
        switch (how) {
        case F_RAND:
            ((float *)p)[i] = (float)frand();
            break;
        case F_ZERO:
            memset((char *)p, 0, n * 4);
            return;
        case F_NAN:
            ((float *)p)[i] = NAN;
            break;
        case F_POS:
            ((float *)p)[i] = (float)(1.5 + frand());
            break;
        case F_LABELS:
        case F_LABELS_PAD: {
            int32_t v = (int32_t)((frand() + 1.0) / 2.0 * classes);
            ((int32_t *)p)[i] = how == F_LABELS_PAD && i % 5 == 3 ? -1 : v >= classes ? classes - 1 : v;
            break;
        }
        case F_BYTES:
            ((uint8_t *)p)[i] = (uint8_t)((rng = rng * 1664525u + 1013904223u) >> 24);
            break;
        case F_RAND_F64:
            ((double *)p)[i] = 10.0 * frand();
            break;
        case F_POS_F64:
            ((double *)p)[i] = 100.0 + 10.0 * frand();
            break;
        }
}

static int is_f64(int how)
{
    return how == F_RAND_F64 || how == F_POS_F64;
}

/* Runs t on kind (0 CPU, 1 CUDA) with copies of in[]; out[] gets the
 * buffers afterwards.  Returns the submission's result. */
static int run_on(const struct tcase *t, int kind, void *const *in, void **out)
{
    starpu_data_handle_t h[MAXB];
    for (int b = 0; b < t->nb; b++) {
        out[b] = malloc(t->n[b] * t->es[b]);
        memcpy(out[b], in[b], t->n[b] * t->es[b]);
        starpu_vector_data_register(&h[b], STARPU_MAIN_RAM, (uintptr_t)out[b], t->n[b], t->es[b]);
    }
    starpu_sched_ctx_set_context(&ctx_of[kind]);
    int ret = t->submit(t->args, h);
    for (int b = 0; b < t->nb; b++)
        starpu_data_unregister(h[b]);
    return ret;
}

/* Largest |g - c| / max(1, |c|) over the output buffers; -1 when a value
 * is NaN on one side only, or ints differ. */
static double compare(const struct tcase *t, void **c, void **g)
{
    double worst = 0.0;
    for (int b = 0; b < t->nb; b++) {
        if (!t->out[b])
            continue;
        for (size_t i = 0; i < t->n[b]; i++) {
            double x, y;
            if (t->es[b] == sizeof(double)) {
                x = ((double *)c[b])[i], y = ((double *)g[b])[i];
            } else if (t->fill[b] == F_LABELS || t->fill[b] == F_LABELS_PAD || t->fill[b] == F_BYTES) {
                int same = t->es[b] == 1 ? ((uint8_t *)c[b])[i] == ((uint8_t *)g[b])[i]
                                         : ((int32_t *)c[b])[i] == ((int32_t *)g[b])[i];
                if (!same)
                    return -1.0;
                continue;
            } else {
                x = ((float *)c[b])[i], y = ((float *)g[b])[i];
            }
            if (isnan(x) || isnan(y)) {
                if (isnan(x) != isnan(y))
                    return -1.0;
                continue;
            }
            double e = fabs(x - y) / (fabs(x) > 1.0 ? fabs(x) : 1.0);
            if (e > worst)
                worst = e;
        }
    }
    return worst;
}

static void run_case(const struct tcase *t)
{
    void *in[MAXB], *c[MAXB], *g[MAXB];
    for (int b = 0; b < t->nb; b++) {
        in[b] = malloc(t->n[b] * t->es[b]);
        fill(in[b], t->n[b], t->fill[b], t->classes);
    }
    int rc = run_on(t, 0, in, c);
    int rg = run_on(t, 1, in, g);
    if (rc)
        check(0, "%s: CPU submission failed (%d)", t->name, rc);
    else if (rg) {
        printf("note - %s: no CUDA version (submission %d), not compared\n", t->name, rg);
        no_cuda_version++;
    } else {
        double e = compare(t, c, g);
        check(e >= 0.0 && e <= TOL, "%s: CUDA vs CPU, max error %.3g (tolerance %g relative to max(1, |cpu|))", t->name,
              e, TOL);
    }
    for (int b = 0; b < t->nb; b++)
        free(in[b]), free(c[b]), free(g[b]);
}

/* ---- submit functions ---- */

static int s_accumulate(const void *a, starpu_data_handle_t *h)
{
    (void)a;
    return sc_insert_accumulate(NULL, h[0], h[1], "accumulate");
}
static int s_sgd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_sgd(NULL, a, h[0], h[1], h[2], "sgd");
}
static int s_sgd_multi(const void *a, starpu_data_handle_t *h)
{
    starpu_data_handle_t w[2] = {h[0], h[3]}, v[2] = {h[1], h[4]}, g[2] = {h[2], h[5]};
    return sc_insert_sgd_multi(NULL, a, 2, w, v, g, "sgd_multi");
}
static int s_accumulate_relu_bwd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_accumulate_relu_bwd(NULL, *(const int *)a, h[0], h[1], h[2], "accumulate_relu_bwd");
}
static int s_zero(const void *a, starpu_data_handle_t *h)
{
    (void)a;
    return sc_insert_zero(NULL, h[0], "zero");
}
static int s_count_nonfinite(const void *a, starpu_data_handle_t *h)
{
    (void)a;
    return sc_insert_count_nonfinite(NULL, h[0], h[1], "count_nonfinite");
}
static int s_relu_bwd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_relu_bwd(NULL, *(const int *)a, h[0], h[1], "relu_bwd");
}
static int s_xent(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_xent(NULL, a, h[0], h[1], h[2], h[3], "xent");
}
static int s_xent_eval(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_xent_eval(NULL, a, h[0], h[1], h[2], "xent_eval");
}
static int s_conv_fwd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_conv_fwd(NULL, a, h[0], h[1], h[2], "conv_fwd");
}
static int s_conv_bwd_data(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_conv_bwd_data(NULL, a, h[0], h[1], h[2], "conv_bwd_data");
}
static int s_conv_bwd_filter(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_conv_bwd_filter(NULL, a, h[0], h[1], h[2], "conv_bwd_filter");
}
static int s_pool_fwd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_pool_fwd(NULL, a, h[0], h[1], h[2], "pool_fwd");
}
static int s_pool_bwd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_pool_bwd(NULL, a, h[0], h[1], h[2], "pool_bwd");
}
static int s_fc_fwd(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_fc_fwd(NULL, a, h[0], h[1], h[2], "fc_fwd");
}
static int s_fc_bwd_data(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_fc_bwd_data(NULL, a, h[0], h[1], h[2], "fc_bwd_data");
}
static int s_fc_bwd_weights(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_fc_bwd_weights(NULL, a, h[0], h[1], h[2], "fc_bwd_weights");
}

struct bn_case {
    struct sc_bn_args a;
    double count;
};
static int s_bn_stats(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_bn_stats(NULL, &((const struct bn_case *)a)->a, h[0], h[1], "bn_stats");
}
static int s_accumulate_f64(const void *a, starpu_data_handle_t *h)
{
    (void)a;
    return sc_insert_accumulate_f64(NULL, h[0], h[1], "accumulate_f64");
}
static int s_bn_fwd(const void *a, starpu_data_handle_t *h)
{
    const struct bn_case *b = a;
    return sc_insert_bn_fwd(NULL, &b->a, b->count, h[0], h[1], h[2], h[3], h[4], "bn_fwd");
}
static int s_bn_fwd_eval(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_bn_fwd_eval(NULL, &((const struct bn_case *)a)->a, h[0], h[1], h[2], h[3], "bn_fwd_eval");
}
static int s_bn_running(const void *a, starpu_data_handle_t *h)
{
    const struct bn_case *b = a;
    return sc_insert_bn_running_update(NULL, &b->a, b->count, h[0], h[1], NULL, "bn_running_update");
}
static int s_bn_bwd_stats(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_bn_bwd_stats(NULL, &((const struct bn_case *)a)->a, h[0], h[1], h[2], h[3], "bn_bwd_stats");
}
static int s_bn_param_grad(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_bn_param_grad(NULL, ((const struct bn_case *)a)->a.c, h[0], h[1], "bn_param_grad");
}
static int s_bn_fwd_whole(const void *a, starpu_data_handle_t *h)
{
    const struct bn_case *b = a;
    return sc_insert_bn_fwd_whole(NULL, &b->a, b->count, h[0], h[1], h[2], h[3], h[4], h[5], "bn_fwd_whole");
}
static int s_bn_fwd_running(const void *a, starpu_data_handle_t *h)
{
    const struct bn_case *b = a;
    return sc_insert_bn_fwd_running(NULL, &b->a, b->count, h[0], h[1], h[2], h[3], h[4], h[5], "bn_fwd_running");
}
static int s_bn_bwd_stats_relu(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_bn_bwd_stats_relu(NULL, &((const struct bn_case *)a)->a, h[0], h[1], h[2], h[3], h[4],
                                       "bn_bwd_stats_relu");
}
/* x, dy, [y with ReLU], params, saved, dstats, dparams, dx */
static int s_bn_bwd_whole(const void *a, starpu_data_handle_t *h)
{
    const struct bn_case *b = a;
    int r = b->a.relu;
    return sc_insert_bn_bwd_whole(NULL, &b->a, b->count, h[0], h[1], r ? h[2] : NULL, h[2 + r], h[3 + r], h[4 + r],
                                  h[5 + r], h[6 + r], "bn_bwd_whole");
}
static int s_bn_bwd_data(const void *a, starpu_data_handle_t *h)
{
    const struct bn_case *b = a;
    return sc_insert_bn_bwd_data(NULL, &b->a, b->count, h[0], h[1], h[2], h[3], h[4], h[5], "bn_bwd_data");
}

struct ew_case {
    int n, relu, c, hw;
    float scale;
};
static int s_add(const void *a, starpu_data_handle_t *h)
{
    const struct ew_case *e = a;
    return sc_insert_add(NULL, e->n, e->relu, h[0], h[1], h[2], "add");
}
static int s_copy(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_copy(NULL, ((const struct ew_case *)a)->n, h[0], h[1], "copy");
}
static int s_gap_fwd(const void *a, starpu_data_handle_t *h)
{
    const struct ew_case *e = a;
    return sc_insert_gap_fwd(NULL, e->n, e->c, e->hw, 0, e->scale, h[0], h[1], "gap_fwd");
}
static int s_gap_bwd(const void *a, starpu_data_handle_t *h)
{
    const struct ew_case *e = a;
    return sc_insert_gap_bwd(NULL, e->n, e->c, e->hw, 0, e->scale, h[0], h[1], "gap_bwd");
}
static int s_pixel_xent(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_pixel_xent(NULL, a, h[0], h[1], h[2], h[3], "pixel_xent");
}
static int s_pixel_xent_eval(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_pixel_xent_eval(NULL, a, h[0], h[1], h[2], "pixel_xent_eval");
}
static int s_sum_ordered(const void *a, starpu_data_handle_t *h)
{
    return sc_insert_sum_ordered(NULL, *(const int *)a, h, h[*(const int *)a], "sum_ordered");
}
static int s_region(const void *a, starpu_data_handle_t *h)
{
    const struct sc_region_args *r = a;
    int conv = r->op >= SC_REGION_CONV_FWD && r->op <= SC_REGION_CONV_BWD_DATA;
    int ns = r->na + r->nb;
    return sc_insert_region(NULL, r, h, conv ? h[ns] : NULL, h[ns + conv], "region");
}

/* ---- cases ---- */

static void conv_cases(int n, int c, int h, int w, int f, int k, int s, int p, int cut, int relu)
{
    struct sc_conv_args a = {n, c, h, w, f, k, k, s, s, p, p, 0, 0, relu};
    a.oh = (h + 2 * p - k) / s + 1 - cut;
    a.ow = (w + 2 * p - k) / s + 1 - cut;
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * f * a.oh * a.ow, nw = (size_t)f * c * k * k + f;
    char name[3][96];
    const char *what[3] = {"conv_fwd", "conv_bwd_data", "conv_bwd_filter"};
    for (int i = 0; i < 3; i++)
        snprintf(name[i], sizeof name[i], "%s n%d c%d %dx%d f%d k%d s%d p%d%s%s", what[i], n, c, h, w, f, k, s, p,
                 cut ? " (one-sided padding)" : "", relu && !i ? " relu" : "");
    struct tcase fwd = {name[0], 3, {nx, nw, ny}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0, s_conv_fwd, &a};
    run_case(&fwd);
    struct tcase bd = {name[1], 3, {ny, nw, nx}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0, s_conv_bwd_data, &a};
    run_case(&bd);
    struct tcase bf = {name[2],   3, {nx, ny, nw},      {4, 4, 4}, {F_RAND, F_RAND, F_NAN},
                       {0, 0, 1}, 0, s_conv_bwd_filter, &a};
    run_case(&bf);
}

static void pool_cases(int n, int c, int h, int w, int k, int s, int p, int max, int include_pad)
{
    struct sc_pool_args a = {n,   c,          h, w, k, k, s, s, p, p, (h + 2 * p - k) / s + 1, (w + 2 * p - k) / s + 1,
                             max, include_pad};
    size_t nx = (size_t)n * c * h * w, ny = (size_t)n * c * a.oh * a.ow;
    size_t nws = max ? sc_pool_workspace_bytes(&a) : 1;
    char name[2][96];
    for (int i = 0; i < 2; i++)
        snprintf(name[i], sizeof name[i], "pool_%s %s n%d c%d %dx%d k%d s%d p%d", i ? "bwd" : "fwd",
                 max           ? "max"
                 : include_pad ? "avg"
                               : "avg (exclude pad)",
                 n, c, h, w, k, s, p);
    struct tcase fwd = {name[0], 3, {nx, ny, nws}, {4, 4, 1}, {F_RAND, F_NAN, F_BYTES}, {0, 1, max}, 0, s_pool_fwd, &a};
    run_case(&fwd);
    if (!max) {
        struct tcase bwd = {name[1],   3, {ny, nws, nx}, {4, 1, 4}, {F_RAND, F_BYTES, F_NAN},
                            {0, 0, 1}, 0, s_pool_bwd,    &a};
        run_case(&bwd);
        return;
    }
    /* Max pooling's backward reads the forward's workspace: forward on one
     * kind, backward on each, against all on the CPU. */
    for (int fk = 0; fk < 2; fk++) {
        float *x = malloc(nx * 4), *y = malloc(ny * 4), *dy = malloc(ny * 4), *dx[2];
        uint8_t *ws = malloc(nws);
        fill(x, nx, F_RAND, 0);
        fill(dy, ny, F_RAND, 0);
        starpu_data_handle_t hx, hy, hws, hdy, hdx;
        starpu_vector_data_register(&hx, STARPU_MAIN_RAM, (uintptr_t)x, nx, 4);
        starpu_vector_data_register(&hy, STARPU_MAIN_RAM, (uintptr_t)y, ny, 4);
        starpu_vector_data_register(&hws, STARPU_MAIN_RAM, (uintptr_t)ws, nws, 1);
        starpu_vector_data_register(&hdy, STARPU_MAIN_RAM, (uintptr_t)dy, ny, 4);
        starpu_sched_ctx_set_context(&ctx_of[fk]);
        int ret = sc_insert_pool_fwd(NULL, &a, hx, hy, hws, "pool_fwd");
        for (int bk = 0; bk < 2; bk++) {
            dx[bk] = malloc(nx * 4);
            starpu_vector_data_register(&hdx, STARPU_MAIN_RAM, (uintptr_t)dx[bk], nx, 4);
            starpu_sched_ctx_set_context(&ctx_of[bk]);
            ret |= sc_insert_pool_bwd(NULL, &a, hdy, hws, hdx, "pool_bwd");
            starpu_data_unregister(hdx);
        }
        starpu_data_unregister(hx), starpu_data_unregister(hy), starpu_data_unregister(hws),
            starpu_data_unregister(hdy);
        double e = 0.0;
        for (size_t i = 0; i < nx; i++)
            e = fmax(e, fabs(dx[1][i] - dx[0][i]) / fmax(1.0, fabs(dx[0][i])));
        check(!ret && e <= TOL, "%s, forward on %s: backward CUDA vs CPU, max error %.3g", name[1], fk ? "CUDA" : "CPU",
              e);
        free(x), free(y), free(dy), free(ws), free(dx[0]), free(dx[1]);
    }
}

static void fc_cases(int n, int in, int out, int relu)
{
    struct sc_fc_args a = {n, in, out, relu};
    size_t nx = (size_t)n * in, ny = (size_t)n * out, nw = (size_t)out * in + out;
    char name[3][64];
    snprintf(name[0], 64, "fc_fwd n%d in%d out%d%s", n, in, out, relu ? " relu" : "");
    snprintf(name[1], 64, "fc_bwd_data n%d in%d out%d", n, in, out);
    snprintf(name[2], 64, "fc_bwd_weights n%d in%d out%d", n, in, out);
    struct tcase f = {name[0], 3, {nx, nw, ny}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0, s_fc_fwd, &a};
    run_case(&f);
    struct tcase bd = {name[1], 3, {ny, nw, nx}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0, s_fc_bwd_data, &a};
    run_case(&bd);
    struct tcase bw = {name[2],   3, {nx, ny, nw},     {4, 4, 4}, {F_RAND, F_RAND, F_NAN},
                       {0, 0, 1}, 0, s_fc_bwd_weights, &a};
    run_case(&bw);
}

static void bn_cases(int n, int c, int hw, int relu)
{
    struct bn_case b = {{n, c, hw, 1e-5f, 0.1f, relu}, (double)n * hw};
    size_t nx = (size_t)n * c * hw, c2 = 2 * (size_t)c;
    struct tcase t[] = {
        {"bn_stats", 2, {nx, c2}, {4, 8}, {F_RAND, F_NAN}, {0, 1}, 0, s_bn_stats, &b},
        {"accumulate_f64", 2, {c2, c2}, {8, 8}, {F_RAND_F64, F_RAND_F64}, {1, 0}, 0, s_accumulate_f64, &b},
        /* stats: sums that give a positive variance: sum x ~ 0, sum x^2 ~ 100 */
        {relu ? "bn_fwd relu" : "bn_fwd",
         5,
         {nx, c2, c2, nx, c2},
         {4, 8, 4, 4, 4},
         {F_RAND, F_POS_F64, F_RAND, F_NAN, F_NAN},
         {0, 0, 0, 1, 1},
         0,
         s_bn_fwd,
         &b},
        {relu ? "bn_fwd_eval relu" : "bn_fwd_eval",
         4,
         {nx, c2, c2, nx},
         {4, 4, 4, 4},
         {F_RAND, F_POS, F_RAND, F_NAN},
         {0, 0, 0, 1},
         0,
         s_bn_fwd_eval,
         &b},
        {"bn_running_update", 2, {c2, c2}, {8, 4}, {F_POS_F64, F_POS}, {0, 1}, 0, s_bn_running, &b},
        {"bn_bwd_stats",
         4,
         {nx, nx, c2, c2},
         {4, 4, 4, 8},
         {F_RAND, F_RAND, F_POS, F_NAN},
         {0, 0, 0, 1},
         0,
         s_bn_bwd_stats,
         &b},
        {"bn_param_grad", 2, {c2, c2}, {8, 4}, {F_RAND_F64, F_NAN}, {0, 1}, 0, s_bn_param_grad, &b},
        {"bn_bwd_data",
         6,
         {nx, nx, c2, c2, c2, nx},
         {4, 4, 4, 4, 8, 4},
         {F_RAND, F_RAND, F_RAND, F_POS, F_RAND_F64, F_NAN},
         {0, 0, 0, 0, 0, 1},
         0,
         s_bn_bwd_data,
         &b},
        /* the fused tasks (cl_bn_fused.c) */
        {relu ? "bn_fwd_whole relu" : "bn_fwd_whole",
         6,
         {nx, c2, nx, c2, c2, c2},
         {4, 4, 4, 8, 4, 4},
         {F_RAND, F_RAND, F_NAN, F_NAN, F_NAN, F_POS},
         {0, 0, 1, 1, 1, 1},
         0,
         s_bn_fwd_whole,
         &b},
        {"bn_fwd_running",
         6,
         {nx, c2, c2, nx, c2, c2},
         {4, 8, 4, 4, 4, 4},
         {F_RAND, F_POS_F64, F_RAND, F_NAN, F_NAN, F_POS},
         {0, 0, 0, 1, 1, 1},
         0,
         s_bn_fwd_running,
         &b},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        run_case(&t[i]);
    if (relu) {
        struct tcase sr = {"bn_bwd_stats_relu",
                           5,
                           {nx, nx, nx, c2, c2},
                           {4, 4, 4, 4, 8},
                           {F_RAND, F_RAND, F_RAND, F_POS, F_NAN},
                           {0, 1, 0, 0, 1},
                           0,
                           s_bn_bwd_stats_relu,
                           &b};
        run_case(&sr);
        struct tcase w = {"bn_bwd_whole relu",
                          8,
                          {nx, nx, nx, c2, c2, c2, c2, nx},
                          {4, 4, 4, 4, 4, 8, 4, 4},
                          {F_RAND, F_RAND, F_RAND, F_RAND, F_POS, F_NAN, F_NAN, F_NAN},
                          {0, 1, 0, 0, 0, 1, 1, 1},
                          0,
                          s_bn_bwd_whole,
                          &b};
        run_case(&w);
    } else {
        struct tcase w = {"bn_bwd_whole",
                          7,
                          {nx, nx, c2, c2, c2, c2, nx},
                          {4, 4, 4, 4, 8, 4, 4},
                          {F_RAND, F_RAND, F_RAND, F_POS, F_NAN, F_NAN, F_NAN},
                          {0, 0, 0, 0, 1, 1, 1},
                          0,
                          s_bn_bwd_whole,
                          &b};
        run_case(&w);
    }
}

static void eltwise_cases(void)
{
    /* n, relu, c, hw, scale: gap's fields by name (n3 c5 hw49, not relu5 c49 hw0) */
    static struct ew_case add = {1000, 0, 0, 0, 0}, addr = {1000, 1, 0, 0, 0},
                          gap = {.n = 3, .c = 5, .hw = 49, .scale = 1.0f / 49};
    struct tcase t[] = {
        {"add", 3, {1000, 1000, 1000}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0, s_add, &add},
        {"add relu", 3, {1000, 1000, 1000}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0, s_add, &addr},
        {"copy", 2, {1000, 1000}, {4, 4}, {F_RAND, F_NAN}, {0, 1}, 0, s_copy, &add},
        {"gap_fwd", 2, {3 * 5 * 49, 15}, {4, 4}, {F_RAND, F_NAN}, {0, 1}, 0, s_gap_fwd, &gap},
        {"gap_bwd", 2, {15, 3 * 5 * 49}, {4, 4}, {F_RAND, F_NAN}, {0, 1}, 0, s_gap_bwd, &gap},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        run_case(&t[i]);
    static struct sc_pixel_xent_args px = {3, 7, 40, 1.0f / 120};
    size_t nl = 3 * 7 * 40;
    struct tcase p = {"pixel_xent", 4, {nl, 120, nl, 2}, {4, 4, 4, 4}, {F_RAND, F_LABELS, F_NAN, F_NAN},
                      {0, 0, 1, 1}, 7, s_pixel_xent,     &px};
    run_case(&p);
    struct tcase pe = {"pixel_xent_eval", 3, {nl, 120, 2},      {4, 4, 4}, {F_RAND, F_LABELS, F_NAN},
                       {0, 0, 1},         7, s_pixel_xent_eval, &px};
    run_case(&pe);
    static int count = 5;
    struct tcase so = {"sum_ordered float",
                       6,
                       {999, 999, 999, 999, 999, 999},
                       {4, 4, 4, 4, 4, 4},
                       {F_RAND, F_RAND, F_RAND, F_RAND, F_RAND, F_NAN},
                       {0, 0, 0, 0, 0, 1},
                       0,
                       s_sum_ordered,
                       &count};
    run_case(&so);
    struct tcase sd = {"sum_ordered double",
                       6,
                       {99, 99, 99, 99, 99, 99},
                       {8, 8, 8, 8, 8, 8},
                       {F_RAND_F64, F_RAND_F64, F_RAND_F64, F_RAND_F64, F_RAND_F64, F_RAND_F64},
                       {0, 0, 0, 0, 0, 1},
                       0,
                       s_sum_ordered,
                       &count};
    run_case(&sd);
}

static void vector_cases(void)
{
    static struct sc_sgd_args sgd = {.lr = 0.05f, .momentum = 0.9f, .weight_decay = 1e-4f, .iteration = 1};
    static int n = 1000;
    struct tcase t[] = {
        {"accumulate", 2, {1000, 1000}, {4, 4}, {F_RAND, F_RAND}, {1, 0}, 0, s_accumulate, NULL},
        {"sgd", 3, {1000, 1000, 1000}, {4, 4, 4}, {F_RAND, F_RAND, F_RAND}, {1, 1, 0}, 0, s_sgd, &sgd},
        {"zero", 1, {1000}, {4}, {F_RAND}, {1}, 0, s_zero, NULL},
        {"count_nonfinite", 2, {1, 1000}, {4, 4}, {F_ZERO, F_NAN}, {1, 0}, 0, s_count_nonfinite, NULL},
        {"relu_bwd", 2, {1000, 1000}, {4, 4}, {F_RAND, F_RAND}, {1, 0}, 0, s_relu_bwd, &n},
        {"sgd_multi",
         6,
         {1000, 1000, 1000, 37, 37, 37},
         {4, 4, 4, 4, 4, 4},
         {F_RAND, F_RAND, F_RAND, F_RAND, F_RAND, F_RAND},
         {1, 1, 0, 1, 1, 0},
         0,
         s_sgd_multi,
         &sgd},
        {"accumulate_relu_bwd (a handle past the ReLU's length)",
         3,
         {1003, 1003, 1003},
         {4, 4, 4},
         {F_RAND, F_RAND, F_RAND},
         {1, 0, 0},
         0,
         s_accumulate_relu_bwd,
         &n},
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        run_case(&t[i]);
}

static void xent_cases(void)
{
    static struct sc_xent_args a = {37, 10, 1.0f / 37};
    struct tcase t = {"xent (with padding labels)",
                      4,
                      {370, 37, 370, 2},
                      {4, 4, 4, 4},
                      {F_RAND, F_LABELS_PAD, F_NAN, F_NAN},
                      {0, 0, 1, 1},
                      10,
                      s_xent,
                      &a};
    run_case(&t);
    struct tcase e = {"xent_eval", 3,  {370, 37, 2}, {4, 4, 4}, {F_RAND, F_LABELS_PAD, F_NAN},
                      {0, 0, 1},   10, s_xent_eval,  &a};
    run_case(&e);
}

/* Region kernels on a 2 x 3 x 9 x 8 image held as two row blocks (rows
 * [0, 5) and [5, 9)): a copy of a box across both, a convolution and a max
 * pooling backward of a region that needs both. */
static void region_cases(void)
{
    static struct sc_region_args cp, cv, pb;
    const int n = 2, c = 3, h = 9, w = 8, f = 4;
    struct sc_region_src top = {0, n, {0, 5, 0, w}}, bot = {0, n, {5, 9, 0, w}};
    size_t ntop = (size_t)n * c * 5 * w, nbot = (size_t)n * c * 4 * w;

    cp.op = SC_REGION_COPY, cp.s0 = 0, cp.n = n, cp.c = c, cp.region = (struct sc_box){3, 7, 1, 6};
    cp.dst_s0 = 0, cp.dst_n = n, cp.dst_box = cp.region, cp.na = 2, cp.nb = 0, cp.src[0] = top, cp.src[1] = bot;
    struct tcase t1 = {
        "region copy", 3,  {ntop, nbot, (size_t)n * c * 4 * 5}, {4, 4, 4}, {F_RAND, F_RAND, F_NAN}, {0, 0, 1}, 0,
        s_region,      &cp};
    run_case(&t1);

    /* output rows [2, 6) of a 3x3 stride-1 pad-1 convolution: input rows 1..6 */
    cv.op = SC_REGION_CONV_FWD, cv.s0 = 0, cv.n = n;
    cv.conv = (struct sc_conv_args){n, c, h, w, f, 3, 3, 1, 1, 1, 1, h, w, 1};
    cv.region = (struct sc_box){2, 6, 0, w};
    cv.dst_s0 = 0, cv.dst_n = n, cv.dst_box = (struct sc_box){0, h, 0, w};
    cv.na = 2, cv.nb = 0, cv.src[0] = top, cv.src[1] = bot;
    size_t np = (size_t)f * c * 9 + f, ny = (size_t)n * f * h * w;
    struct tcase t2 = {"region conv_fwd relu",
                       4,
                       {ntop, nbot, np, ny},
                       {4, 4, 4, 4},
                       {F_RAND, F_RAND, F_RAND, F_ZERO},
                       {0, 0, 0, 1},
                       0,
                       s_region,
                       &cv};
    run_case(&t2);

    /* max pooling 3x3 stride 2 pad 1 (output 5 x 4), dx of input rows [3, 7) */
    pb.op = SC_REGION_POOL_BWD, pb.s0 = 0, pb.n = n;
    pb.pool = (struct sc_pool_args){n, c, h, w, 3, 3, 2, 2, 1, 1, 5, 4, 1, 0};
    pb.region = (struct sc_box){3, 7, 0, w};
    pb.dst_s0 = 0, pb.dst_n = n, pb.dst_box = (struct sc_box){0, h, 0, w};
    pb.na = 1, pb.nb = 2;
    pb.src[0] = (struct sc_region_src){0, n, {0, 5, 0, 4}};
    pb.src[1] = top, pb.src[2] = bot;
    size_t ndy = (size_t)n * c * 5 * 4, ndx = (size_t)n * c * h * w;
    struct tcase t3 = {"region pool_bwd max",
                       4,
                       {ndy, ntop, nbot, ndx},
                       {4, 4, 4, 4},
                       {F_RAND, F_RAND, F_RAND, F_ZERO},
                       {0, 0, 0, 1},
                       0,
                       s_region,
                       &pb};
    run_case(&t3);
}

int main(void)
{
    alarm(600); /* a task no worker of a context can run must not hang CI */
    if (starpu_init(NULL)) {
        fprintf(stderr, "starpu_init failed\n");
        return 1;
    }
    if (starpu_cuda_worker_get_count() == 0 || starpu_cpu_worker_get_count() == 0) {
        printf("SKIP: %u CUDA and %u CPU workers; this test needs both\n", starpu_cuda_worker_get_count(),
               starpu_cpu_worker_get_count());
        starpu_shutdown();
        return 77;
    }
    sc_codelets_init();
    int cpus[STARPU_NMAXWORKERS], gpu;
    int ncpu = starpu_worker_get_ids_by_type(STARPU_CPU_WORKER, cpus, STARPU_NMAXWORKERS);
    starpu_worker_get_ids_by_type(STARPU_CUDA_WORKER, &gpu, 1);
    ctx_of[0] = starpu_sched_ctx_create(cpus, ncpu, "cpu", STARPU_SCHED_CTX_POLICY_NAME, "eager", 0);
    ctx_of[1] = starpu_sched_ctx_create(&gpu, 1, "cuda", STARPU_SCHED_CTX_POLICY_NAME, "eager", 0);

    vector_cases();
    xent_cases();
    /*         n  c   h   w  f  k  s  p cut relu */
    conv_cases(2, 3, 9, 8, 4, 3, 1, 1, 0, 1);
    conv_cases(3, 5, 12, 11, 6, 5, 2, 2, 0, 0);
    conv_cases(2, 3, 9, 8, 4, 3, 1, 1, 1, 0);
    conv_cases(2, 16, 14, 14, 32, 1, 1, 0, 0, 0);
    conv_cases(1, 4, 10, 7, 3, 5, 1, 2, 1, 1);
    /*         n  c   h   w  k  s  p max incl */
    pool_cases(2, 3, 8, 8, 2, 2, 0, 1, 0);
    pool_cases(2, 3, 9, 9, 3, 2, 1, 1, 0);
    pool_cases(2, 3, 9, 9, 3, 2, 1, 0, 1);
    pool_cases(2, 3, 9, 9, 3, 2, 1, 0, 0);
    fc_cases(7, 50, 10, 1);
    fc_cases(64, 256, 120, 0);
    bn_cases(3, 5, 49, 0);
    bn_cases(2, 4, 1, 1);
    eltwise_cases();
    region_cases();

    starpu_sched_ctx_set_context(&ctx_of[0]);
    sc_codelets_shutdown();
    starpu_sched_ctx_delete(ctx_of[1]);
    starpu_sched_ctx_delete(ctx_of[0]);
    starpu_shutdown();
    printf("%d passed, %d failed, %d codelets without a CUDA version\n", passes, failures, no_cuda_version);
    return failures ? 1 : 0;
}
