/* Batch normalization's fused tasks (codelets/cl_bn_fused.c) give the bits
 * of the separate tasks they replace, on the same inputs: the whole
 * forward (statistics, normalization, running update) and the whole
 * backward (ReLU's backward, statistics, parameter and data gradients) of
 * a tile; tile 0's forward with the running update; ReLU's backward with
 * the backward statistics.  Each buffer is compared byte for byte,
 * including GUARD elements past its end; the wrappers' argument errors.
 * test_codelets_layers checks the separate tasks against references. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codelets/codelets.h"
#include "src/starconv.h"

#define GUARD 4

static unsigned rng = 91;

static double frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 8388608.0 - 1.0;
}

/* A vector of n elements of es bytes plus GUARD, registered whole. */
struct buf {
    void *p;
    size_t n, es;
    starpu_data_handle_t h;
};

static struct buf mk(size_t n, size_t es)
{
    struct buf b = {calloc(n + GUARD, es), n, es, NULL};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    memset(b.p, 0x5a, (n + GUARD) * es); /* neither 0 nor a plausible value */
    starpu_vector_data_register(&b.h, STARPU_MAIN_RAM, (uintptr_t)b.p, n + GUARD, es);
    return b;
}

static struct buf copy_of(struct buf *src)
{
    struct buf b = mk(src->n, src->es);
    starpu_data_acquire(src->h, STARPU_R);
    starpu_data_acquire(b.h, STARPU_W);
    memcpy(b.p, src->p, (src->n + GUARD) * src->es);
    starpu_data_release(b.h);
    starpu_data_release(src->h);
    return b;
}

static void rm(struct buf *b)
{
    starpu_data_unregister(b->h);
    free(b->p);
}

static int same_bits(struct buf *a, struct buf *b)
{
    starpu_data_acquire(a->h, STARPU_R);
    starpu_data_acquire(b->h, STARPU_R);
    int same = a->n == b->n && !memcmp(a->p, b->p, (a->n + GUARD) * a->es);
    starpu_data_release(b->h);
    starpu_data_release(a->h);
    return same;
}

static void inserted(int ret, const char *what)
{
    if (ret)
        check(0, "%s: insert returned %d (%s)", what, ret, sc_last_error());
}

/* A tile whose channels differ in mean and scale, with both signs after
 * normalization (so that ReLU zeroes some of it). */
static void fill_x(struct buf *x, const struct sc_bn_args *a)
{
    float *p = x->p;
    for (int i = 0; i < a->n; i++)
        for (int ch = 0; ch < a->c; ch++)
            for (int k = 0; k < a->hw; k++)
                p[((size_t)i * a->c + ch) * a->hw + k] = (float)((ch - 1) + (1.0 + 0.5 * sin(ch)) * frand());
}

static void fill(struct buf *b, double scale, double offset)
{
    float *p = b->p;
    for (size_t i = 0; i < b->n; i++)
        p[i] = (float)(offset + scale * frand());
}

/* The whole forward against bn_stats, bn_fwd and the running update, and
 * tile 0's forward with the running update against bn_fwd and the update. */
static void test_fwd(int n, int c, int hw, int relu)
{
    struct sc_bn_args a = {n, c, hw, 1e-5f, 0.1f, relu};
    size_t ne = (size_t)n * c * hw, c2 = 2 * (size_t)c;
    double count = (double)n * hw;
    struct buf x = mk(ne, sizeof(float)), prm = mk(c2, sizeof(float)), run = mk(c2, sizeof(float));
    fill_x(&x, &a);
    fill(&prm, 0.5, 1.0);
    fill(&run, 0.5, 1.0);
    struct buf st[3], y[3], sv[3], rn[3];
    for (int k = 0; k < 3; k++) {
        st[k] = mk(c2, sizeof(double)), y[k] = mk(ne, sizeof(float)), sv[k] = mk(c2, sizeof(float));
        rn[k] = copy_of(&run);
    }
    /* 0: the separate tasks */
    inserted(sc_insert_bn_stats(NULL, &a, x.h, st[0].h, "stats"), "bn_stats");
    inserted(sc_insert_bn_fwd(NULL, &a, count, x.h, st[0].h, prm.h, y[0].h, sv[0].h, "fwd"), "bn_fwd");
    inserted(sc_insert_bn_running_update(NULL, &a, count, st[0].h, rn[0].h, NULL, "running"), "bn_running_update");
    /* 1: one task */
    inserted(sc_insert_bn_fwd_whole(NULL, &a, count, x.h, prm.h, y[1].h, st[1].h, sv[1].h, rn[1].h, "fwd_whole"),
             "bn_fwd_whole");
    /* 2: statistics apart (a sum over tiles would come between), then the
     * forward with the running update */
    inserted(sc_insert_bn_stats(NULL, &a, x.h, st[2].h, "stats"), "bn_stats");
    inserted(sc_insert_bn_fwd_running(NULL, &a, count, x.h, st[2].h, prm.h, y[2].h, sv[2].h, rn[2].h, "fwd_running"),
             "bn_fwd_running");
    starpu_task_wait_for_all();
    const char *how[3] = {NULL, "bn_fwd_whole", "bn_fwd_running"};
    for (int k = 1; k < 3; k++)
        check(same_bits(&st[k], &st[0]) && same_bits(&y[k], &y[0]) && same_bits(&sv[k], &sv[0]) &&
                  same_bits(&rn[k], &rn[0]),
              "%s n%d c%d hw%d relu%d: stats, y, saved and running statistics bit for bit the separate tasks'", how[k],
              n, c, hw, relu);
    check(!same_bits(&rn[0], &run), "the running statistics changed (n%d c%d hw%d)", n, c, hw);

    /* Without running (under a gate): stats and forward alone, running
     * untouched; the deferred update from its stats then gives the bits. */
    struct buf st3 = mk(c2, sizeof(double)), y3 = mk(ne, sizeof(float)), sv3 = mk(c2, sizeof(float));
    struct buf rn3 = copy_of(&run);
    inserted(sc_insert_bn_fwd_whole(NULL, &a, count, x.h, prm.h, y3.h, st3.h, sv3.h, NULL, "fwd_whole"),
             "bn_fwd_whole (no running)");
    starpu_task_wait_for_all();
    check(same_bits(&rn3, &run) && same_bits(&y3, &y[0]) && same_bits(&st3, &st[0]),
          "bn_fwd_whole without running n%d c%d hw%d: y and stats the same, running statistics untouched", n, c, hw);
    inserted(sc_insert_bn_running_update(NULL, &a, count, st3.h, rn3.h, NULL, "running"), "bn_running_update");
    starpu_task_wait_for_all();
    check(same_bits(&rn3, &rn[0]), "the deferred running update from its stats gives the same bits");
    rm(&st3), rm(&y3), rm(&sv3), rm(&rn3);
    for (int k = 0; k < 3; k++)
        rm(&st[k]), rm(&y[k]), rm(&sv[k]), rm(&rn[k]);
    rm(&x), rm(&prm), rm(&run);
}

/* The whole backward against relu_bwd, bn_bwd_stats, bn_param_grad and
 * bn_bwd_data; with ReLU, relu_bwd + bn_bwd_stats against
 * bn_bwd_stats_relu. */
static void test_bwd(int n, int c, int hw, int relu)
{
    struct sc_bn_args a = {n, c, hw, 1e-5f, 0.1f, relu};
    size_t ne = (size_t)n * c * hw, c2 = 2 * (size_t)c;
    double count = (double)n * hw;
    struct buf x = mk(ne, sizeof(float)), prm = mk(c2, sizeof(float)), st = mk(c2, sizeof(double));
    struct buf y = mk(ne, sizeof(float)), sv = mk(c2, sizeof(float)), g = mk(ne, sizeof(float));
    fill_x(&x, &a);
    fill(&prm, 0.5, 1.0);
    fill(&g, 1.0, 0.0);
    inserted(sc_insert_bn_stats(NULL, &a, x.h, st.h, "stats"), "bn_stats");
    inserted(sc_insert_bn_fwd(NULL, &a, count, x.h, st.h, prm.h, y.h, sv.h, "fwd"), "bn_fwd");
    struct buf dy[3], ds[3], dp[3], dx[2];
    for (int k = 0; k < 3; k++) {
        dy[k] = copy_of(&g), ds[k] = mk(c2, sizeof(double)), dp[k] = mk(c2, sizeof(float));
        if (k < 2)
            dx[k] = mk(ne, sizeof(float));
    }
    if (relu)
        inserted(sc_insert_relu_bwd(NULL, (int)ne, dy[0].h, y.h, "relu_bwd"), "relu_bwd");
    inserted(sc_insert_bn_bwd_stats(NULL, &a, x.h, dy[0].h, sv.h, ds[0].h, "bwd_stats"), "bn_bwd_stats");
    inserted(sc_insert_bn_param_grad(NULL, c, ds[0].h, dp[0].h, "param_grad"), "bn_param_grad");
    inserted(sc_insert_bn_bwd_data(NULL, &a, count, x.h, dy[0].h, prm.h, sv.h, ds[0].h, dx[0].h, "bwd_data"),
             "bn_bwd_data");
    inserted(sc_insert_bn_bwd_whole(NULL, &a, count, x.h, dy[1].h, relu ? y.h : NULL, prm.h, sv.h, ds[1].h, dp[1].h,
                                    dx[1].h, "bwd"),
             "bn_bwd_whole");
    if (relu)
        inserted(sc_insert_bn_bwd_stats_relu(NULL, &a, x.h, dy[2].h, y.h, sv.h, ds[2].h, "bwd_stats"),
                 "bn_bwd_stats_relu");
    starpu_task_wait_for_all();
    check(same_bits(&dy[1], &dy[0]) && same_bits(&ds[1], &ds[0]) && same_bits(&dp[1], &dp[0]) &&
              same_bits(&dx[1], &dx[0]),
          "bn_bwd_whole n%d c%d hw%d relu%d: dy, dstats, dparams and dx bit for bit the separate tasks'", n, c, hw,
          relu);
    check(relu ? !same_bits(&dy[0], &g) : same_bits(&dy[0], &g), "relu%d: dy %s", relu,
          relu ? "masked in place" : "untouched");
    if (relu)
        check(same_bits(&dy[2], &dy[0]) && same_bits(&ds[2], &ds[0]),
              "bn_bwd_stats_relu n%d c%d hw%d: dy and dstats bit for bit relu_bwd + bn_bwd_stats", n, c, hw);
    for (int k = 0; k < 3; k++) {
        rm(&dy[k]), rm(&ds[k]), rm(&dp[k]);
        if (k < 2)
            rm(&dx[k]);
    }
    rm(&x), rm(&prm), rm(&st), rm(&y), rm(&sv), rm(&g);
}

static void refused(int ret, const char *what)
{
    check(ret < 0, "%s refused (%d: %s)", what, ret, ret < 0 ? sc_last_error() : "accepted");
}

static void test_errors(void)
{
    struct sc_bn_args a = {2, 3, 4, 1e-5f, 0.1f, 0}, r = a;
    r.relu = 1;
    size_t ne = 24, c2 = 6;
    struct buf x = mk(ne, sizeof(float)), y = mk(ne, sizeof(float)), prm = mk(c2, sizeof(float));
    struct buf st = mk(c2, sizeof(double)), sv = mk(c2, sizeof(float)), run = mk(c2, sizeof(float));
    struct buf dp = mk(c2, sizeof(float)), small = mk(ne - GUARD - 1, sizeof(float));
    refused(sc_insert_bn_fwd_whole(NULL, &a, 0.0, x.h, prm.h, y.h, st.h, sv.h, run.h, NULL), "bn_fwd_whole count 0");
    refused(sc_insert_bn_fwd_whole(NULL, &a, 8.0, small.h, prm.h, y.h, st.h, sv.h, NULL, NULL),
            "bn_fwd_whole with a short x");
    refused(sc_insert_bn_fwd_running(NULL, &a, 8.0, x.h, st.h, prm.h, y.h, sv.h, NULL, NULL),
            "bn_fwd_running without running statistics");
    struct sc_bn_args m = a;
    m.momentum = 2.0f;
    refused(sc_insert_bn_fwd_running(NULL, &m, 8.0, x.h, st.h, prm.h, y.h, sv.h, run.h, NULL),
            "bn_fwd_running momentum 2");
    refused(sc_insert_bn_bwd_whole(NULL, &a, 8.0, x.h, x.h, y.h, prm.h, sv.h, st.h, dp.h, y.h, NULL),
            "bn_bwd_whole with y but relu=0");
    refused(sc_insert_bn_bwd_whole(NULL, &r, 8.0, x.h, x.h, NULL, prm.h, sv.h, st.h, dp.h, y.h, NULL),
            "bn_bwd_whole relu=1 without y");
    refused(sc_insert_bn_bwd_whole(NULL, &a, 8.0, x.h, x.h, NULL, prm.h, sv.h, st.h, dp.h, small.h, NULL),
            "bn_bwd_whole with a short dx");
    refused(sc_insert_bn_bwd_stats_relu(NULL, &a, x.h, x.h, y.h, sv.h, st.h, NULL), "bn_bwd_stats_relu relu=0");
    refused(sc_insert_bn_bwd_stats_relu(NULL, &r, x.h, x.h, NULL, sv.h, st.h, NULL), "bn_bwd_stats_relu without y");
    starpu_task_wait_for_all();
    rm(&x), rm(&y), rm(&prm), rm(&st), rm(&sv), rm(&run), rm(&dp), rm(&small);
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("STARPU_NCPU", "2", 0);
    if (starpu_init(NULL)) {
        fprintf(stderr, "starpu_init failed\n");
        return 1;
    }
    sc_codelets_init();

    /* The comparison itself sees one flipped bit, and one past the end. */
    {
        struct buf a = mk(3, sizeof(float)), b = copy_of(&a);
        int caught = same_bits(&a, &b);
        ((unsigned char *)b.p)[5] ^= 1;
        caught &= !same_bits(&a, &b);
        ((unsigned char *)b.p)[5] ^= 1;
        ((unsigned char *)b.p)[3 * sizeof(float) + 1] ^= 1;
        caught &= !same_bits(&a, &b);
        check(caught, "the comparison catches a flipped bit, inside and past the end");
        rm(&a), rm(&b);
    }

    /*       n  c  hw  relu */
    test_fwd(1, 1, 1, 0);
    test_fwd(3, 5, 7, 0);
    test_fwd(3, 5, 7, 1);
    test_fwd(2, 16, 65, 1);
    test_bwd(1, 2, 3, 0);
    test_bwd(3, 5, 7, 0);
    test_bwd(3, 5, 7, 1);
    test_bwd(2, 16, 65, 1);
    test_errors();

    sc_codelets_shutdown();
    starpu_shutdown();
    printf("%d passed, %d failed\n", passes, failures);
    return failures != 0;
}
