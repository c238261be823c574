/* The planner tests' fixture (tests/test_plan.c, tests/test_plan_search.c):
 * models written to a scratch folder and parsed, calibrations with fixed
 * or work-proportional kernel times, plans made from them, and the small
 * model most cases use.  Static, as check.h: one copy per test program. */
#ifndef SC_TESTS_PLAN_FIXTURE_H
#define SC_TESTS_PLAN_FIXTURE_H

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "src/planner/plan.h"

#include "check.h"
static char dir[] = "/tmp/sc_test_plan_XXXXXX";

/* The scratch folder model() writes to, made before the first case: 0 when
 * it cannot be. */
static int fixture_open(void)
{
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 0;
    }
    return 1;
}

/* Removes the folder and prints the tally: main's exit status. */
static int fixture_close(void)
{
    rmdir(dir);
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}

static struct sc_net *model(const char *name, const char *text)
{
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
    struct sc_net *net = NULL;
    if (sc_net_parse(path, &net))
        printf("parse %s: %s\n", name, sc_last_error());
    unlink(path);
    return net;
}

static int near(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (fabs(a) + fabs(b)) + 1e-15;
}

/* Kernel times for the tests: fixed per kind (FIXED), or proportional to
 * the kernel's multiply-adds (WORK), or none (ZERO). */
enum { FIXED, WORK, ZERO };
struct fill {
    struct sc_calib *c;
    int mode;
};
#define F1 1e-3 /* conv forward */
#define D1 5e-3 /* conv backward data: never counted for a first layer */
#define G1 2e-3 /* conv backward filter */
#define F2 3e-4 /* fc */
#define D2 4e-4
#define G2 5e-4

static int add_kernel(void *ctx, const struct sc_layer_work *w, const char *key)
{
    struct fill *f = ctx;
    double a = 0, b = 0, g = 0;
    if (f->mode == FIXED) {
        a = w->kind == SC_WORK_CONV ? F1 : F2;
        b = w->kind == SC_WORK_CONV ? D1 : D2;
        g = w->kind == SC_WORK_CONV ? G1 : G2;
    } else if (f->mode == WORK) {
        double macs = w->kind == SC_WORK_CONV ? (double)w->conv.n * w->conv.c * w->conv.f * w->conv.oh * w->conv.ow *
                                                    w->conv.kh * w->conv.kw
                      : w->kind == SC_WORK_POOL
                          ? (double)w->pool.n * w->pool.c * w->pool.oh * w->pool.ow * w->pool.kh * w->pool.kw
                          : (double)w->fc.n * w->fc.in * w->fc.out;
        a = b = g = macs * 1e-10;
    }
    return sc_calib_add_kernel(f->c, key, a, b, g);
}

static struct sc_calib *calib(double alpha, double beta)
{
    struct sc_calib *c;
    sc_calib_new(&c);
    c->workers = 1;
    c->cores = 0; /* no oversubscription */
    c->stream = 1e9;
    c->task = 0;
    c->p2p_alpha = alpha;
    c->p2p_beta = beta;
    return c;
}

static void fill(struct sc_calib *c, const struct sc_net *net, int P, int B, int mode)
{
    struct fill f = {c, mode};
    struct sc_plan_opts o = {P, B, 1, 0, NULL, NULL, 0, 0, 0, 1, 0, SC_OPT_SGD};
    sc_plan_kernels(net, &o, add_kernel, &f);
}

static struct sc_plan *plan(const struct sc_net *net, const struct sc_calib *c, int P, int B, const char *grid,
                            double mem_limit)
{
    struct sc_plan_opts o = {P, B, 1, mem_limit, grid, NULL, 0, 0, 0, 1, 0, SC_OPT_SGD};
    struct sc_plan *p = NULL;
    if (sc_plan_make(net, c, &o, &p))
        printf("plan: %s\n", sc_last_error());
    return p;
}

static const char *m2_text = "[net]\nchannels=1\nheight=4\nwidth=4\nclasses=10\n"
                             "[convolutional]\nfilters=2\nsize=3\npad=1\nactivation=linear\n"
                             "[connected]\noutput=10\nactivation=linear\n[softmax]\n";

#endif
