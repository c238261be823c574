/* The training loop: epochs, progress, metrics, evaluation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "trace_run.h"
#include "train.h"

void sc_train_opts_default(struct sc_train_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->model = "models/lenet.cfg";
    o->data = "/usr/share/datasets/fashion-mnist";
    o->epochs = 1;
    o->iters = -1;
    o->batch = 64;
    o->lr = 0.05f;
    o->momentum = 0.9f;
    o->weight_decay = 0.0f;
    o->seed = 42;
    o->shuffle = 1;
    o->test = 1;
    o->log_every = 50;
    sc_comm_opts_default(&o->comm);
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint64_t mix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* The sample order of an epoch: in file order, or a permutation seeded by
 * (seed, epoch) that every rank computes alike. */
static void epoch_order(int32_t *order, int n, int shuffle, uint64_t seed, int epoch)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!shuffle)
        return;
    uint64_t state = mix(seed ^ mix((uint64_t)epoch + 1));
    for (int i = n - 1; i > 0; i--) {
        state = mix(state);
        int j = (int)(state % (uint64_t)(i + 1));
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

struct progress {
    int tty, rank;
    FILE *metrics;
    double train_time, start;
    long images;
};

static void fmt_eta(char *buf, size_t size, double s)
{
    if (s < 0 || s > 1e7)
        snprintf(buf, size, "?");
    else if (s >= 3600)
        snprintf(buf, size, "%dh%02dm", (int)s / 3600, (int)s % 3600 / 60);
    else if (s >= 60)
        snprintf(buf, size, "%dm%02ds", (int)s / 60, (int)s % 60);
    else
        snprintf(buf, size, "%ds", (int)s);
}

static void report_iteration(struct progress *p, int epoch, int epochs, long it, long it_epoch, long per_epoch,
                             long remaining, double loss, double rate)
{
    if (p->rank)
        return;
    char eta[32];
    fmt_eta(eta, sizeof(eta), rate > 0 ? remaining / rate : -1);
    fprintf(stderr, "%sepoch %d/%d %5.1f%%  iter %ld  loss %.4f  %.0f images/s  ETA %s%s",
            p->tty ? "\r\033[K" : "", epoch + 1, epochs, 100.0 * it_epoch / per_epoch, it, loss, rate, eta,
            p->tty ? "" : "\n");
    if (p->metrics) {
        fprintf(p->metrics, "{\"iteration\": %ld, \"epoch\": %d, \"loss\": %.6f, \"images_per_s\": %.1f}\n", it,
                epoch + 1, loss, rate);
        fflush(p->metrics);
    }
}

static void report_test(struct progress *p, int epoch, long it, double acc, double loss)
{
    if (p->rank)
        return;
    fprintf(stderr, "%sepoch %d: test accuracy %.2f%%, test loss %.4f\n", p->tty ? "\r\033[K" : "", epoch + 1,
            100 * acc, loss);
    if (p->metrics) {
        fprintf(p->metrics, "{\"iteration\": %ld, \"epoch\": %d, \"test_accuracy\": %.6f, \"test_loss\": %.6f}\n",
                it, epoch + 1, acc, loss);
        fflush(p->metrics);
    }
}

/* Sync point, collective: stop the trace of iterations first..last, write
 * it and print the report on rank 0. */
static int finish_trace(const struct sc_train_opts *o, struct sc_runtime *rt, struct sc_net *net,
                        struct progress *p, long first, long last)
{
    sc_net_wait(net);
    struct sc_trace t;
    int err = sc_trace_run_stop(rt, &t);
    if (err)
        return err;
    if (rt->rank == 0) {
        t.first_iteration = first;
        t.last_iteration = last;
        t.global_batch = o->batch;
        snprintf(t.model, sizeof(t.model), "%s", o->model);
        if (o->trace && !(err = sc_trace_write_json(&t, o->trace)))
            fprintf(stderr, "%strace of iterations %ld..%ld (%zu events) written to %s\n", p->tty ? "\r\033[K" : "",
                    first, last, t.n, o->trace);
        struct sc_overlap *ov = calloc(t.ranks, sizeof(*ov));
        if (!err && o->report && !ov)
            err = sc_error(SC_ERR_NOMEM, "out of memory");
        if (!err && o->report && !(err = sc_trace_analyze(&t, ov))) {
            fputs(p->tty ? "\r\033[K" : "", stderr);
            sc_trace_print_report(&t, ov, stdout);
            fflush(stdout);
        }
        free(ov);
    }
    sc_trace_free(&t);
    return sc_runtime_agree(rt, err);
}

int sc_train_run(const struct sc_train_opts *o, struct sc_runtime *rt, struct sc_net *net,
                 const struct sc_dataset *train, const struct sc_dataset *test)
{
    struct progress p = {.tty = isatty(2), .rank = rt->rank};
    long per_epoch = train->n / o->batch;
    if (per_epoch < 1)
        return sc_error(SC_ERR_ARG, "batch %d is larger than the %d training samples", o->batch, train->n);
    long total = (long)o->epochs * per_epoch;
    if (o->iters >= 0 && o->iters < total)
        total = o->iters;
    if (rt->rank == 0 && o->metrics && !(p.metrics = fopen(o->metrics, "w")))
        return sc_error(SC_ERR_IO, "%s: cannot write the metrics file", o->metrics);
    int32_t *order = malloc((size_t)train->n * sizeof(*order));
    if (!order) {
        if (p.metrics)
            fclose(p.metrics);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    struct sc_sgd_args sgd = {o->lr, o->momentum, o->weight_decay};
    double acc = -1, test_loss = 0;
    long done = 0;
    int err = 0, trace_wanted = (o->trace || o->report) && o->trace_first > 0, tracing = 0;
    for (int epoch = 0; epoch < o->epochs && done < total && !err; epoch++) {
        epoch_order(order, train->n, o->shuffle, o->seed, epoch);
        double t0 = now(), last_t = t0;
        long last_done = done, it_epoch = 0;
        for (; it_epoch < per_epoch && done < total; it_epoch++) {
            if (trace_wanted && done + 1 == o->trace_first) {
                /* Drained before and after, so the traced iterations are
                 * all there is in the picture. */
                sc_net_wait(net);
                sc_trace_run_start(rt, done + 1);
                tracing = 1;
            }
            if (tracing)
                sc_trace_run_iteration(done + 1);
            if ((err = sc_net_train_batch(net, train, order + it_epoch * o->batch, &sgd)))
                break;
            done++;
            if (tracing && done == o->trace_last) {
                tracing = 0;
                if ((err = finish_trace(o, rt, net, &p, o->trace_first, done)))
                    break;
            }
            if (done % o->log_every == 0 || done == total || it_epoch + 1 == per_epoch) {
                double loss = sc_net_last_loss(net), t = now();
                double rate = (done - last_done) * o->batch / (t - last_t);
                report_iteration(&p, epoch, o->epochs, net->iteration, it_epoch + 1, per_epoch,
                                 (total - done) * o->batch, loss, rate);
                last_t = t;
                last_done = done;
            }
        }
        if (tracing && !err) { /* the trace stops at the end of an epoch, before the evaluation */
            tracing = 0;
            err = finish_trace(o, rt, net, &p, o->trace_first, done);
        }
        sc_net_wait(net);
        p.train_time += now() - t0;
        p.images += it_epoch * (long)o->batch;
        if (!err && o->test && (it_epoch == per_epoch || done == total)) {
            if (!(err = sc_net_evaluate(net, test, &acc, &test_loss)))
                report_test(&p, epoch, net->iteration, acc, test_loss);
        }
    }
    free(order);
    if (p.metrics)
        fclose(p.metrics);
    if (err)
        return err;
    if (rt->rank == 0) {
        char accs[48] = "not measured";
        if (acc >= 0)
            snprintf(accs, sizeof(accs), "%.2f%%", 100 * acc);
        printf("starconv-train: %ld iterations, %.1f images/s, test accuracy %s\n", done,
               p.train_time > 0 ? p.images / p.train_time : 0.0, accs);
        fflush(stdout);
    }
    return 0;
}
