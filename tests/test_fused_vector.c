/* The vector tasks that stand for several (codelets/cl_sgd.c's
 * sc_insert_sgd_multi, codelets/cl_accumulate_relu_bwd.c) give the bits of
 * the tasks they replace, on the same inputs: the updates of several
 * vectors in one task against one task each, with and without the
 * non-finite watch (a refused vector, a frozen watch) and the whole-batch
 * gate (open and closed), the watch's records included; the last part of
 * a gradient sum with ReLU's backward against the accumulation then the
 * ReLU backward, on a handle longer than the ReLU's length.  Each buffer
 * is compared byte for byte, GUARD elements past its end included; the
 * wrappers' argument errors.  Adam's one task over several vectors and
 * their one state against its kernel on the vectors end to end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "codelets/codelets.h"
#include "kernels/adam.h"
#include "src/starconv.h"

#define GUARD 4
#define NVEC  3

static unsigned rng = 48;

static double frand(void) /* uniform in [-1, 1) */
{
    rng = rng * 1664525u + 1013904223u;
    return (rng >> 8) / 8388608.0 - 1.0;
}

/* n floats plus GUARD, registered as a vector of n + extra. */
struct buf {
    float *p;
    size_t n;
    starpu_data_handle_t h;
};

static struct buf mk(size_t n, size_t extra)
{
    struct buf b = {calloc(n + GUARD, sizeof(float)), n, NULL};
    if (!b.p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    for (size_t i = 0; i < n + GUARD; i++)
        b.p[i] = (float)frand();
    starpu_vector_data_register(&b.h, STARPU_MAIN_RAM, (uintptr_t)b.p, n + extra, sizeof(float));
    return b;
}

static struct buf copy_of(const struct buf *src, size_t extra)
{
    struct buf b = mk(src->n, extra);
    memcpy(b.p, src->p, (src->n + GUARD) * sizeof(float));
    return b;
}

static void rm(struct buf *b)
{
    starpu_data_unregister(b->h);
    free(b->p);
}

static int same_bits(const struct buf *a, const struct buf *b)
{
    starpu_data_acquire(a->h, STARPU_R);
    starpu_data_acquire(b->h, STARPU_R);
    int same = a->n == b->n && !memcmp(a->p, b->p, (a->n + GUARD) * sizeof(float));
    starpu_data_release(b->h);
    starpu_data_release(a->h);
    return same;
}

static void inserted(int ret, const char *what)
{
    if (ret)
        check(0, "%s: insert returned %d (%s)", what, ret, sc_last_error());
}

static void refused(int ret, const char *what)
{
    check(ret < 0, "%s: refused (%d: %s)", what, ret, ret < 0 ? sc_last_error() : "accepted");
}

static const size_t lengths[NVEC] = {5, 1000, 37};

/* Vectors w, v, g of each length, and their copies, for the two ways. */
struct set {
    struct buf w[NVEC], v[NVEC], g[NVEC];
    starpu_data_handle_t hw[NVEC], hv[NVEC], hg[NVEC];
};

static void set_make(struct set *s, const struct set *from)
{
    for (int i = 0; i < NVEC; i++) {
        s->w[i] = from ? copy_of(&from->w[i], 0) : mk(lengths[i], 0);
        s->v[i] = from ? copy_of(&from->v[i], 0) : mk(lengths[i], 0);
        s->g[i] = from ? copy_of(&from->g[i], 0) : mk(lengths[i], 0);
        s->hw[i] = s->w[i].h, s->hv[i] = s->v[i].h, s->hg[i] = s->g[i].h;
    }
}

static int set_same(const struct set *a, const struct set *b)
{
    int same = 1;
    for (int i = 0; i < NVEC; i++)
        same &= same_bits(&a->w[i], &b->w[i]) && same_bits(&a->v[i], &b->v[i]);
    return same;
}

static int set_changed(const struct set *a, const struct set *b, int i)
{
    return !same_bits(&a->w[i], &b->w[i]);
}

static void set_rm(struct set *s)
{
    for (int i = 0; i < NVEC; i++)
        rm(&s->w[i]), rm(&s->v[i]), rm(&s->g[i]);
}

/* One case: the separate tasks, one at a time in order (a frozen watch
 * makes the order matter), then the one task, from the same inputs; the
 * outputs and the watches' records must agree.  bad: a vector whose
 * gradient holds a NaN (-1: none); gate: -1 none, else its value. */
static void test_sgd_case(const char *what, int watch, int freeze, int bad, float gate_value)
{
    struct set orig, sep, one;
    set_make(&orig, NULL);
    if (bad >= 0)
        orig.g[bad].p[lengths[bad] / 2] = NAN;
    set_make(&sep, &orig);
    set_make(&one, &orig);
    float gate[2] = {gate_value, gate_value};
    starpu_data_handle_t hgate[2] = {NULL, NULL};
    struct sc_nonfinite wt[2] = {{0, 0, 0, freeze}, {0, 0, 0, freeze}};
    struct sc_sgd_args a[2];
    for (int k = 0; k < 2; k++) {
        if (gate_value >= 0)
            starpu_vector_data_register(&hgate[k], STARPU_MAIN_RAM, (uintptr_t)&gate[k], 1, sizeof(float));
        a[k] = (struct sc_sgd_args){.lr = 0.1f,
                                    .momentum = 0.9f,
                                    .weight_decay = 0.01f,
                                    .iteration = 7,
                                    .watch = watch ? &wt[k] : NULL,
                                    .gate = hgate[k]};
    }
    for (int i = 0; i < NVEC; i++) {
        inserted(sc_insert_sgd(NULL, &a[0], sep.hw[i], sep.hv[i], sep.hg[i], "sgd"), "sgd");
        starpu_task_wait_for_all();
    }
    inserted(sc_insert_sgd_multi(NULL, &a[1], NVEC, one.hw, one.hv, one.hg, "sgd_multi"), "sgd_multi");
    starpu_task_wait_for_all();
    int same_watch = wt[0].first_iteration == wt[1].first_iteration && wt[0].last_iteration == wt[1].last_iteration &&
                     wt[0].iterations == wt[1].iterations;
    check(set_same(&sep, &one) && same_watch,
          "sgd_multi of %d vectors, %s: weights, momentum and the watch's records bit for bit the separate tasks'",
          NVEC, what);
    int changed = 0;
    for (int i = 0; i < NVEC; i++)
        changed += set_changed(&orig, &one, i);
    int want = gate_value > 0 ? 0 : bad < 0 ? NVEC : freeze ? bad : NVEC - 1;
    check(changed == want, "sgd_multi, %s: %d of %d vectors updated (want %d)", what, changed, NVEC, want);
    if (watch)
        check((want < NVEC) == (wt[1].first_iteration == 7 && wt[1].iterations == 1),
              "sgd_multi, %s: the watch recorded iteration %lld (%lld iterations)", what,
              (long long)wt[1].first_iteration, (long long)wt[1].iterations);
    for (int k = 0; k < 2; k++)
        if (hgate[k])
            starpu_data_unregister(hgate[k]);
    set_rm(&orig), set_rm(&sep), set_rm(&one);
}

/* sc_insert_adam over NVEC vectors and one state: two steps give the bits
 * of the kernel on the vectors laid end to end (the state's exp_avg and
 * exp_avg_sq one after the other, the step count last: 2).  Then a third
 * step with a NaN in vector 1 under a watch, and one behind a closed
 * gate: no vector and no state changes (the count stays 2), and the watch
 * records the iteration. */
static void test_adam(int decoupled)
{
    size_t total = 0;
    for (int i = 0; i < NVEC; i++)
        total += lengths[i];
    struct set one;
    set_make(&one, NULL);
    struct buf state = mk(sc_adam_state_floats(total), 0);
    float *w = malloc(total * sizeof(float)), *g[2], *m = calloc(2 * total, sizeof(float));
    g[0] = malloc(total * sizeof(float)), g[1] = malloc(total * sizeof(float));
    memset(state.p, 0, sc_adam_state_floats(total) * sizeof(float));
    for (size_t i = 0, off = 0; i < NVEC; off += lengths[i++])
        memcpy(w + off, one.w[i].p, lengths[i] * sizeof(float));
    struct sc_sgd_args a = {1e-3f, 0, 0.05f, 7, NULL, NULL, decoupled ? SC_OPT_ADAMW : SC_OPT_ADAM, 0.9, 0.999, 1e-8};
    for (int step = 1; step <= 2; step++) {
        for (size_t i = 0, off = 0; i < NVEC; off += lengths[i++]) {
            for (size_t j = 0; j < lengths[i]; j++)
                one.g[i].p[j] = (float)frand();
            memcpy(g[step - 1] + off, one.g[i].p, lengths[i] * sizeof(float));
        }
        inserted(sc_insert_adam(NULL, &a, NVEC, one.hw, one.hg, state.h, "adam"), "adam");
        starpu_task_wait_for_all();
        struct sc_adam_step sc;
        sc_adam_step_scalars(&sc, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, decoupled, step);
        sc_adam_update(w, m, m + total, g[step - 1], total, &sc);
    }
    int same = !memcmp(state.p, m, 2 * total * sizeof(float)) && state.p[2 * total] == 2.0f;
    for (size_t i = 0, off = 0; i < NVEC; off += lengths[i++])
        same &= !memcmp(one.w[i].p, w + off, lengths[i] * sizeof(float));
    check(same, "%s over %d vectors, 2 steps: weights and state bit for bit the kernel's on them end to end",
          decoupled ? "adamw" : "adam", NVEC);
    struct buf before = copy_of(&state, 0);
    struct set kept;
    set_make(&kept, &one);
    struct sc_nonfinite watch = {0, 0, 0, 0};
    one.g[1].p[3] = NAN;
    a.watch = &watch;
    inserted(sc_insert_adam(NULL, &a, NVEC, one.hw, one.hg, state.h, "adam"), "adam");
    starpu_task_wait_for_all();
    float closed = 1;
    one.g[1].p[3] = 0;
    a.watch = NULL;
    starpu_vector_data_register(&a.gate, STARPU_MAIN_RAM, (uintptr_t)&closed, 1, sizeof(float));
    inserted(sc_insert_adam(NULL, &a, NVEC, one.hw, one.hg, state.h, "adam"), "adam");
    starpu_task_wait_for_all();
    starpu_data_unregister(a.gate);
    int unchanged = same_bits(&state, &before);
    for (int i = 0; i < NVEC; i++)
        unchanged &= !set_changed(&kept, &one, i);
    check(unchanged && watch.first_iteration == 7 && watch.iterations == 1,
          "%s: a NaN under a watch, then a closed gate: no vector, no state, no step count changed; recorded",
          decoupled ? "adamw" : "adam");
    a.gate = NULL;
    struct buf short_state = mk(sc_adam_state_floats(total) - 1, 0);
    refused(sc_insert_adam(NULL, &a, NVEC, one.hw, one.hg, short_state.h, NULL), "adam with a short state");
    a.optimizer = SC_OPT_SGD;
    refused(sc_insert_adam(NULL, &a, NVEC, one.hw, one.hg, state.h, NULL), "adam with SGD's arguments");
    rm(&state), rm(&before), rm(&short_state), set_rm(&one), set_rm(&kept);
    free(w), free(g[0]), free(g[1]), free(m);
}

/* A sum's last part with ReLU's backward of the first n of nx elements. */
static void test_accumulate_relu_bwd(int n, size_t nx)
{
    struct buf dy = mk(nx, 0), part = mk(nx, 0), y = mk(nx, 0);
    for (int i = 0; i < n; i += 5)
        y.p[i] = 0.0f; /* the boundary: ReLU's output is exactly 0 there */
    struct buf dy2 = copy_of(&dy, 0);
    inserted(sc_insert_accumulate(NULL, dy.h, part.h, "accumulate"), "accumulate");
    inserted(sc_insert_relu_bwd(NULL, n, dy.h, y.h, "relu_bwd"), "relu_bwd");
    inserted(sc_insert_accumulate_relu_bwd(NULL, n, dy2.h, part.h, y.h, "accumulate_relu_bwd"), "accumulate_relu_bwd");
    starpu_task_wait_for_all();
    int zeroed = 0;
    starpu_data_acquire(dy2.h, STARPU_R);
    for (int i = 0; i < n; i++)
        zeroed += dy2.p[i] == 0.0f;
    starpu_data_release(dy2.h);
    check(same_bits(&dy, &dy2) && (n == 0 || zeroed > 0),
          "accumulate_relu_bwd n%d of %zu: dy bit for bit accumulate then relu_bwd's (%d zeroed)", n, nx, zeroed);
    rm(&dy), rm(&dy2), rm(&part), rm(&y);
}

static void test_errors(void)
{
    struct buf a = mk(10, 0), b = mk(10, 0), c = mk(10, 0), short_ = mk(9, 0);
    struct sc_sgd_args s = {.lr = 0.1f, .momentum = 0.9f, .iteration = 1};
    starpu_data_handle_t w[SC_SGD_MULTI_MAX + 1], v[SC_SGD_MULTI_MAX + 1], g[SC_SGD_MULTI_MAX + 1];
    for (int i = 0; i <= SC_SGD_MULTI_MAX; i++)
        w[i] = a.h, v[i] = b.h, g[i] = c.h;
    refused(sc_insert_sgd_multi(NULL, &s, 0, w, v, g, NULL), "sgd_multi of no vector");
    refused(sc_insert_sgd_multi(NULL, &s, SC_SGD_MULTI_MAX + 1, w, v, g, NULL), "sgd_multi of too many vectors");
    refused(sc_insert_sgd_multi(NULL, &s, 2, w, v, NULL, NULL), "sgd_multi without gradients");
    g[1] = short_.h;
    refused(sc_insert_sgd_multi(NULL, &s, 2, w, v, g, NULL), "sgd_multi with a short gradient");
    refused(sc_insert_accumulate_relu_bwd(NULL, 10, a.h, short_.h, b.h, NULL), "accumulate_relu_bwd with a short part");
    refused(sc_insert_accumulate_relu_bwd(NULL, 10, short_.h, short_.h, b.h, NULL),
            "accumulate_relu_bwd beyond dy's end");
    refused(sc_insert_accumulate_relu_bwd(NULL, 10, a.h, b.h, short_.h, NULL), "accumulate_relu_bwd with a short y");
    refused(sc_insert_accumulate_relu_bwd(NULL, -1, a.h, b.h, c.h, NULL), "accumulate_relu_bwd of a negative length");
    starpu_task_wait_for_all();
    rm(&a), rm(&b), rm(&c), rm(&short_);
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
        struct buf a = mk(3, 0), b = copy_of(&a, 0);
        int caught = same_bits(&a, &b);
        ((unsigned char *)b.p)[5] ^= 1;
        caught &= !same_bits(&a, &b);
        ((unsigned char *)b.p)[5] ^= 1;
        ((unsigned char *)b.p)[3 * sizeof(float) + 1] ^= 1;
        caught &= !same_bits(&a, &b);
        check(caught, "the comparison catches a flipped bit, inside and past the end");
        rm(&a), rm(&b);
    }

    /*                                    watch freeze bad gate */
    test_sgd_case("no watch", 0, 0, -1, -1);
    test_sgd_case("a watch, all finite", 1, 0, -1, -1);
    test_sgd_case("a watch, vector 1 not finite", 1, 0, 1, -1);
    test_sgd_case("a frozen watch, vector 1 not finite", 1, 1, 1, -1);
    test_sgd_case("a gate open", 1, 0, -1, 0);
    test_sgd_case("a gate closed", 1, 0, -1, 1);
    test_sgd_case("a gate closed, no watch", 0, 0, -1, 1);
    test_adam(0);
    test_adam(1);
    test_accumulate_relu_bwd(1000, 1000);
    test_accumulate_relu_bwd(1000, 1003);
    test_accumulate_relu_bwd(0, 17);
    test_errors();

    sc_codelets_shutdown();
    starpu_shutdown();
    printf("%d passed, %d failed\n", passes, failures);
    return failures != 0;
}
