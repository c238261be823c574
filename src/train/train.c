/* The training loop: epochs, progress, metrics, evaluation. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "src/planner/calibrate.h"
#include "src/planner/plan.h"
#include "src/report/report.h"
#include "src/runtime/kernel_failure.h"
#include "src/runtime/stall.h"
#include "src/runtime/trace_run.h"
#include "src/train/preempt.h"
#include "src/train/train.h"
#include "base/rng.h"

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
    o->beta1 = 0.9;
    o->beta2 = 0.999;
    o->eps = 1e-8;
    o->seed = 42;
    o->shuffle = 1;
    o->test = 1;
    o->log_every = 50;
    o->peer_timeout = -1;
    sc_lr_schedule_default(&o->lr_schedule);
    o->stall_timeout = -1;
    sc_comm_opts_default(&o->comm);
}

struct sc_data_order sc_train_data_order(const struct sc_train_opts *o, const struct sc_dataset *train)
{
    return (struct sc_data_order){(int64_t)o->seed, o->batch, train->n, o->shuffle, o->comm.accumulate};
}

int sc_train_check_resume(const struct sc_train_opts *o, const struct sc_dataset *train, const struct sc_checkpoint *ck)
{
    struct sc_data_order want = sc_train_data_order(o, train);
    const struct sc_data_order *got = &ck->order;
    if (got->seed < 0 || got->global_batch < 0 || got->train_samples < 0 || got->shuffle < 0)
        return sc_error(SC_ERR_ARG,
                        "--resume %s: the checkpoint has no data order (saved by an older starconv); "
                        "start from it with --load instead",
                        o->load);
    if (got->global_batch != want.global_batch)
        return sc_error(SC_ERR_ARG, "--resume %s: saved with --batch %lld, this run has --batch %lld", o->load,
                        (long long)got->global_batch, (long long)want.global_batch);
    if (!ck->has_state)
        return sc_error(SC_ERR_ARG, "--resume %s: the checkpoint has no state of --optimizer %s (saved with another)",
                        o->load,
                        o->comm.optimizer == SC_OPT_SGD    ? "sgd"
                        : o->comm.optimizer == SC_OPT_ADAM ? "adam"
                                                           : "adamw");
    if (got->accumulate != want.accumulate)
        return sc_error(SC_ERR_ARG, "--resume %s: saved with --accumulate %lld, this run has --accumulate %lld",
                        o->load, (long long)got->accumulate, (long long)want.accumulate);
    if (got->seed != want.seed)
        return sc_error(SC_ERR_ARG, "--resume %s: saved with --seed %lld, this run has --seed %lld", o->load,
                        (long long)got->seed, (long long)want.seed);
    if (got->shuffle != want.shuffle)
        return sc_error(SC_ERR_ARG, "--resume %s: saved with --shuffle %s, this run has --shuffle %s", o->load,
                        got->shuffle ? "on" : "off", want.shuffle ? "on" : "off");
    if (got->train_samples != want.train_samples)
        return sc_error(SC_ERR_ARG, "--resume %s: saved on %lld training samples, --data %s has %lld", o->load,
                        (long long)got->train_samples, o->data, (long long)want.train_samples);
    return 0;
}

/* The metrics file's first record: where each rank's workers run. */
static void write_placement(FILE *f, const struct sc_runtime *rt)
{
    fprintf(f, "{\"ranks\": %d, \"placement\": [", rt->size);
    for (int r = 0; rt->placements && r < rt->size; r++) {
        fputs(r ? ", \"" : "\"", f);
        for (const char *c = rt->placements[r]; *c; c++) { /* plain text: quote and backslash only */
            if (*c == '"' || *c == '\\')
                putc('\\', f);
            putc(*c, f);
        }
        fputs("\"", f);
    }
    fputs("]}\n", f);
    fflush(f);
}

/* FNV-1a, 64 bits: a fingerprint, not a defence against forgery. */
static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ULL;
    return h;
}
#define FNV_START 0xcbf29ce484222325ULL

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s ? s : "(none)", s ? strlen(s) + 1 : 7);
}

static uint64_t file_fingerprint(const char *path)
{
    uint64_t h = FNV_START;
    FILE *f = fopen(path, "rb");
    if (!f)
        return fnv_str(h, path);
    char buf[65536];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        h = fnv(h, buf, n);
    fclose(f);
    return h;
}

static uint64_t dataset_fingerprint(uint64_t h, const struct sc_dataset *ds)
{
    int32_t dims[7] = {ds->n, ds->c, ds->h, ds->w, ds->classes, ds->synthetic, ds->nan_sample};
    h = fnv(h, dims, sizeof dims);
    h = fnv(h, &ds->seed, sizeof ds->seed);
    if (ds->images)
        h = fnv(h, ds->images, (size_t)ds->n * ds->c * ds->h * ds->w);
    if (ds->labels)
        h = fnv(h, ds->labels, (size_t)ds->n);
    return h;
}

int sc_train_check_ranks(const struct sc_train_opts *o, struct sc_runtime *rt, const struct sc_dataset *train,
                         const struct sc_dataset *test, const struct sc_net *net, const struct sc_checkpoint *ck)
{
    enum { MODEL, OPTIONS, DATA, CHECKPOINT, WORKERS, N };
    static const char *const what[N] = {
        "models (the contents of the --model files)",
        "options (--batch, --lr, --epochs, --parallel, --grad-comm, ...)",
        "training or test data (--data)",
        "checkpoints (--load/--resume)",
        "numbers of CPU workers (STARPU_NCPU)",
    };
    uint64_t mine[N];
    mine[MODEL] = file_fingerprint(o->model);
    /* Every option that shapes the task graph or the numbers; output paths
     * and progress may differ. */
    uint64_t h = FNV_START;
    int64_t ints[] = {o->epochs,
                      o->iters,
                      o->batch,
                      (int64_t)o->seed,
                      o->shuffle,
                      o->test,
                      o->log_every,
                      o->resume,
                      o->save_every,
                      o->comm.grad_comm,
                      o->comm.chunk_layers,
                      o->comm.fc_replicate,
                      o->comm.priorities,
                      o->trace_first,
                      o->trace_last,
                      o->report,
                      o->save != NULL,
                      o->trace != NULL,
                      o->report_memory,
                      o->skip_nonfinite,
                      o->comm.gate_updates,
                      o->comm.nccl,
                      o->comm.window,
                      o->comm.segment_kb,
                      o->comm.direct_kb,
                      o->comm.grad_bf16,
                      o->checkpoint_signal,
                      o->comm.accumulate,
                      o->comm.optimizer,
                      o->comm.precision};
    double reals[] = {o->lr, o->momentum, o->weight_decay, o->comm.bucket_mb, o->mem_limit, o->beta1, o->beta2, o->eps};
    h = fnv(h, ints, sizeof ints);
    h = fnv(h, reals, sizeof reals);
    h = fnv_str(h, o->comm.parallel);
    h = fnv_str(h, o->sched);
    char schedule[256];
    sc_lr_schedule_describe(&o->lr_schedule, schedule, sizeof schedule);
    h = fnv_str(h, schedule);
    mine[OPTIONS] = h;
    mine[DATA] = dataset_fingerprint(dataset_fingerprint(FNV_START, train), test);
    h = FNV_START;
    if (ck) {
        h = fnv(h, &ck->iteration, sizeof ck->iteration);
        for (int l = 0; l < net->nlayers; l++) {
            size_t n = net->layers[l].nparams, nb = net->layers[l].nbuffer_values;
            if (n)
                h = fnv(fnv(fnv(h, ck->w[l], n * sizeof(float)), ck->v[l], n * sizeof(float)), ck->sq[l],
                        n * sizeof(float));
            if (nb && ck->b[l])
                h = fnv(h, ck->b[l], nb * sizeof(float));
        }
    }
    mine[CHECKPOINT] = h;
    mine[WORKERS] = (uint64_t)rt->ncpu;
    uint64_t *all = malloc(sizeof(uint64_t) * N * rt->size);
    int err = all ? 0 : SC_ERR_NOMEM;
    if ((err = sc_runtime_agree(rt, err))) {
        free(all);
        return sc_error(SC_ERR_NOMEM, "out of memory comparing the ranks' start-up");
    }
    MPI_Allgather(mine, N, MPI_UINT64_T, all, N, MPI_UINT64_T, rt->ctl);
    for (int r = 1; r < rt->size && !err; r++)
        for (int k = 0; k < N && !err; k++)
            if (all[r * N + k] != all[k])
                err = sc_error(SC_ERR_ARG,
                               "ranks 0 and %d were started with different %s: every rank must run "
                               "the same command line on the same files",
                               r, what[k]);
    free(all);
    return err;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* The sample order of an epoch: in file order, or a permutation seeded by
 * (seed, epoch) that every rank computes alike. */
static void epoch_order(int32_t *order, int n, int shuffle, uint64_t seed, int epoch)
{
    for (int i = 0; i < n; i++)
        order[i] = i;
    if (!shuffle)
        return;
    uint64_t state = sc_splitmix64(seed ^ sc_splitmix64((uint64_t)epoch + 1));
    for (int i = n - 1; i > 0; i--) {
        state = sc_splitmix64(state);
        int j = (int)(state % (uint64_t)(i + 1));
        int32_t t = order[i];
        order[i] = order[j];
        order[j] = t;
    }
}

struct progress {
    int tty, rank;
    long skipped; /* batches skipped for non-finite gradients (seen so far) */
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
                             long remaining, double loss, double rate, double lr)
{
    if (p->rank)
        return;
    char eta[32];
    fmt_eta(eta, sizeof(eta), rate > 0 ? remaining / rate : -1);
    char skipped[64] = "";
    if (p->skipped)
        snprintf(skipped, sizeof skipped, "  (%ld batches skipped: not finite)", p->skipped);
    fprintf(stderr, "%sepoch %d/%d %5.1f%%  iter %ld  loss %.4f  %.0f images/s  ETA %s%s%s", p->tty ? "\r\033[K" : "",
            epoch + 1, epochs, 100.0 * it_epoch / per_epoch, it, loss, rate, eta, skipped, p->tty ? "" : "\n");
    /* Six significant digits: the rate of a slow run (below one image a
     * second) would lose a tenth of itself to one decimal. */
    if (p->metrics) {
        fprintf(p->metrics,
                "{\"iteration\": %ld, \"epoch\": %d, \"loss\": %.6f, \"images_per_s\": %.6g, \"lr\": %.9g}\n", it,
                epoch + 1, loss, rate, lr);
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
        fprintf(p->metrics, "{\"iteration\": %ld, \"epoch\": %d, \"test_accuracy\": %.6f, \"test_loss\": %.6f}\n", it,
                epoch + 1, acc, loss);
        fflush(p->metrics);
    }
}

/* What the loop knows to find a batch again. */
struct loop_state {
    const struct sc_train_opts *o;
    const struct sc_dataset *train;
    long per_epoch;
    long step;            /* samples per iteration: --batch x --accumulate */
    int64_t base;         /* net->iteration before the loop's first iteration counted from 0 */
    long saved_iteration; /* of the last checkpoint written in this run; 0: none */
};

/* What a stopped run leaves of --save, for its message. */
static void kept_checkpoint(const struct loop_state *ls, char *buf, size_t size)
{
    buf[0] = 0;
    if (ls->saved_iteration)
        snprintf(buf, size, "; %s keeps the checkpoint of iteration %ld", ls->o->save, ls->saved_iteration);
    else if (ls->o->save)
        snprintf(buf, size,
                 access(ls->o->save, F_OK) ? "; %s was not written" : "; %s keeps what it held before the run",
                 ls->o->save);
}

/* A file that could not be written (a full disk, an I/O error): the run
 * stops, as going on would put more work at risk than the last checkpoint
 * holds; the writer has left the previous file as it was, and the message
 * says which iteration the --save file keeps. */
static int write_failed(const struct loop_state *ls, int err, int64_t iteration)
{
    char failed[512], kept[600];
    snprintf(failed, sizeof failed, "%s", sc_last_error());
    kept_checkpoint(ls, kept, sizeof kept);
    return sc_error(err, "%s; training stopped at iteration %lld%s", failed, (long long)iteration, kept);
}

/* Sync point, collective, once the tasks whose failures it must see have
 * run: a kernel that failed on any rank (its outputs not valid) stops the
 * run here, with SC_ERR_KERNEL naming it, before anything is computed from
 * them, printed or saved. */
static int check_kernels(const struct loop_state *ls, struct sc_runtime *rt)
{
    int err = sc_kernel_failure_check(rt);
    if (!err)
        return 0;
    char failed[512], kept[600];
    snprintf(failed, sizeof failed, "%s", sc_last_error());
    kept_checkpoint(ls, kept, sizeof kept);
    return sc_error(err, "%s: training stopped%s", failed, kept);
}

/* Sync point, collective: stop the trace of iterations first..last, write
 * it and print the report on rank 0 (unless a kernel failed). */
static int finish_trace(const struct loop_state *ls, struct sc_runtime *rt, struct sc_net *net, struct progress *p,
                        long first, long last)
{
    const struct sc_train_opts *o = ls->o;
    sc_net_wait(net);
    struct sc_trace t;
    int err = sc_trace_run_stop(rt, &t);
    if (err)
        return err;
    if (!(err = check_kernels(ls, rt)) && rt->rank == 0) {
        t.first_iteration = first;
        t.last_iteration = last;
        t.global_batch = o->batch * o->comm.accumulate;
        snprintf(t.model, sizeof(t.model), "%s", o->model);
        snprintf(t.precision, sizeof(t.precision), "%s", sc_precision_name(o->comm.precision));
        snprintf(t.grad_dtype, sizeof t.grad_dtype, "%s", o->comm.grad_bf16 ? "bf16" : "fp32");
        if (o->trace && !(err = sc_trace_write_json(&t, o->trace)))
            fprintf(stderr, "%strace of iterations %ld..%ld (%zu events) written to %s\n", p->tty ? "\r\033[K" : "",
                    first, last, t.n, o->trace);
        else if (o->trace && err == SC_ERR_IO)
            err = write_failed(ls, err, net->iteration);
        struct sc_overlap *ov = calloc(t.ranks, sizeof(*ov));
        if (!err && o->report && !ov)
            err = sc_error(SC_ERR_NOMEM, "out of memory");
        if (!err && o->report && !(err = sc_trace_analyze(&t, ov))) {
            fputs(p->tty ? "\r\033[K" : "", stderr);
            sc_trace_print_report(&t, ov, stdout);
            if (!(err = sc_trace_print_tasks(&t, stdout)) && !(err = sc_trace_print_load(&t, stdout)))
                sc_report_print_compute(stdout, sc_net_flops(net, o->batch * o->comm.accumulate), ov[0].window,
                                        o->peak_gflops);
            fflush(stdout);
        }
        free(ov);
    }
    sc_trace_free(&t);
    return sc_runtime_agree(rt, err);
}

/* Collective, non-blocking: what the SGD tasks of all ranks have recorded
 * so far: the first iteration with a gradient that is not finite (0: none)
 * and, in *count, how many iterations had one. */
static int64_t nonfinite_seen(struct sc_runtime *rt, struct sc_nonfinite *watch, long *count)
{
    int64_t first = __atomic_load_n(&watch->first_iteration, __ATOMIC_SEQ_CST);
    int64_t mine[2] = {first ? first : INT64_MAX, -__atomic_load_n(&watch->iterations, __ATOMIC_SEQ_CST)}, all[2];
    MPI_Allreduce(mine, all, 2, MPI_INT64_T, MPI_MIN, rt->ctl);
    *count = (long)-all[1];
    return all[0] == INT64_MAX ? 0 : all[0];
}

/* Collective, at a progress line or before a save: with --nonfinite stop,
 * SC_ERR_NONFINITE naming the iteration and the first non-finite value
 * when a gradient (or the loss) was not finite. */
static int check_finite(const struct loop_state *ls, struct sc_runtime *rt, struct sc_net *net,
                        struct sc_nonfinite *watch, struct progress *p, double loss)
{
    int64_t first = nonfinite_seen(rt, watch, &p->skipped);
    if (ls->o->skip_nonfinite || (!first && isfinite(loss)))
        return 0;
    /* The updates are frozen since the first bad gradient: drain, so that
     * every rank has recorded what it saw, and agree on the iteration.  A
     * kernel that failed (its outputs not valid) may be the cause. */
    sc_net_wait(net);
    int err = check_kernels(ls, rt);
    if (err)
        return err;
    if (!(first = nonfinite_seen(rt, watch, &p->skipped)))
        first = net->iteration;
    char where[160] = "an unknown place";
    long k = (long)(first - ls->base - 1), epoch = k / ls->per_epoch;
    int32_t *order = malloc((size_t)ls->train->n * sizeof(*order));
    err = order ? 0 : SC_ERR_NOMEM;
    if (!sc_runtime_agree(rt, err) && k >= 0) {
        epoch_order(order, ls->train->n, ls->o->shuffle, ls->o->seed, (int)epoch);
        err = sc_net_find_nonfinite(net, ls->train, order + (k % ls->per_epoch) * ls->step, where, sizeof where);
    }
    free(order);
    if (err)
        return err;
    char kept[600];
    kept_checkpoint(ls, kept, sizeof kept);
    return sc_error(SC_ERR_NONFINITE,
                    "iteration %lld: a NaN or Inf, first in %s: training stopped (--nonfinite "
                    "skip goes on without such batches)%s",
                    (long long)first, where, kept);
}

/* Sync point, collective: the checkpoint of the current iteration, unless
 * a kernel failed or a gradient was not finite: never a checkpoint of
 * weights computed from invalid outputs or diverged, the last good one
 * stays. */
static int save_checkpoint(const struct loop_state *ls, struct sc_runtime *rt, struct sc_net *net,
                           struct sc_nonfinite *watch, struct progress *p, const struct sc_data_order *order)
{
    const struct sc_train_opts *o = ls->o;
    sc_net_wait(net); /* every update recorded before the checks */
    int err = check_kernels(ls, rt);
    if (!err)
        err = check_finite(ls, rt, net, watch, p, 0);
    if (!err && (err = sc_checkpoint_save(net, rt, o->save, order)) == SC_ERR_IO)
        err = write_failed(ls, err, net->iteration);
    if (!err && rt->rank == 0 && o->save_every)
        fprintf(stderr, "%scheckpoint of iteration %lld written to %s\n", p->tty ? "\r\033[K" : "",
                (long long)net->iteration, o->save);
    return err;
}

int sc_train_plan(struct sc_train_opts *o, const struct sc_runtime *rt, struct sc_net *net)
{
    const char *path = o->calibration                   ? o->calibration
                       : getenv("STARCONV_CALIBRATION") ? getenv("STARCONV_CALIBRATION")
                                                        : "starconv-calibration.txt";
    struct sc_calib *c = NULL;
    struct sc_plan *p = NULL;
    /* --fc-replicate F > 0 given: priced as given (the plan is then n<P>);
     * else the planner may choose it. */
    struct sc_plan_opts po = {rt->size,
                              o->batch,
                              rt->ncpu,
                              o->mem_limit,
                              NULL,
                              NULL,
                              SC_PLAN_MIX_MARGIN,
                              o->comm.fc_replicate > 0 ? o->comm.fc_replicate : -1,
                              o->comm.segment_kb,
                              o->comm.accumulate,
                              o->comm.grad_bf16,
                              o->comm.optimizer};
    char how[512];
    snprintf(how, sizeof how,
             "mpirun -np %d starconv-plan calibrate --model %s --batch %d --workers %d --calibration %s", rt->size,
             o->model, o->batch, rt->ncpu, path);
    int err = sc_calib_load(path, &c);
    if (err == SC_ERR_IO && access(path, F_OK))
        err = sc_error(err, "--parallel auto: no calibration %s: make one with `%s`", path, how);
    else if (err)
        err = sc_error(err, "--parallel auto: %s", sc_last_error());
    char here[sizeof c->machine];
    if (!err && (sc_calibrate_machine_name(here, sizeof here), strcmp(here, c->machine)))
        err = sc_error(SC_ERR_PARSE,
                       "--parallel auto: %s was made on '%s', not on this machine ('%s'): make one with `%s`", path,
                       c->machine, here, how);
    if (!err && (err = sc_plan_make(net, c, &po, &p)) == SC_ERR_PARSE)
        err = sc_error(err, "--parallel auto: %s: %s; extend it with `%s`", path, sc_last_error(), how);
    if (!err && !(o->parallel_auto = malloc(8192)))
        err = sc_error(SC_ERR_NOMEM, "out of memory");
    if (!err) {
        sc_plan_parallel_spec(net, p, o->parallel_auto, 8192);
        o->comm.parallel = o->parallel_auto;
        if (!o->grad_comm_given)
            err = sc_comm_opts_parse_grad(p->grad_comm, &o->comm);
        if (o->comm.fc_replicate <= 0) /* one given is kept: the network's setup checks it */
            o->comm.fc_replicate = p->fc_replicate;
        if (rt->rank == 0) {
            printf("--parallel auto (calibration %s): predicted %.3f ms per iteration\n", path, 1e3 * p->time);
            sc_plan_print(stdout, net, p);
            printf("plan: --parallel %s --grad-comm %s", o->parallel_auto,
                   o->grad_comm_given ? "(as given)" : p->grad_comm);
            if (p->fc_replicate)
                printf(" --fc-replicate %d", p->fc_replicate);
            printf("\n");
            fflush(stdout);
        }
    }
    sc_plan_free(p);
    sc_calib_free(c);
    return err;
}

int sc_train_run(const struct sc_train_opts *o, struct sc_runtime *rt, struct sc_net *net,
                 const struct sc_dataset *train, const struct sc_dataset *test)
{
    struct progress p = {.tty = isatty(2), .rank = rt->rank};
    /* An iteration is one optimizer step: K micro-batches of --batch. */
    long step = (long)o->batch * o->comm.accumulate, per_epoch = train->n / step;
    if (per_epoch < 1 && o->comm.accumulate > 1)
        return sc_error(SC_ERR_ARG, "--batch %d x --accumulate %d is more than the %d training samples", o->batch,
                        o->comm.accumulate, train->n);
    if (per_epoch < 1)
        return sc_error(SC_ERR_ARG, "batch %d is larger than the %d training samples", o->batch, train->n);
    long total = (long)o->epochs * per_epoch;
    if (o->iters >= 0 && o->iters < total)
        total = o->iters;
    int err = sc_lr_schedule_check(&o->lr_schedule, total);
    if (err)
        return err;
    /* A resumed run appends to its metrics: nothing of the first part is lost. */
    /* Bad input (the path), on every rank, so that none waits alone. */
    int opened = rt->rank || !o->metrics || (p.metrics = fopen(o->metrics, o->resume ? "a" : "w"));
    if (sc_runtime_agree(rt, opened ? 0 : sc_error(SC_ERR_ARG, "%s: cannot write the metrics file", o->metrics)))
        return SC_ERR_ARG;
    if (p.metrics)
        write_placement(p.metrics, rt);
    if (rt->rank == 0 && (o->lr_schedule.kind != SC_LR_CONSTANT || o->lr_schedule.warmup)) {
        char schedule[256];
        sc_lr_schedule_describe(&o->lr_schedule, schedule, sizeof schedule);
        SC_LOG(1, "learning rate %g, %s, over %ld iterations", o->lr, schedule, total);
    }
    int32_t *order = malloc((size_t)train->n * sizeof(*order));
    if (!order) {
        if (p.metrics)
            fclose(p.metrics);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    struct sc_nonfinite watch = {.freeze = !o->skip_nonfinite};
    struct sc_sgd_args sgd = {.lr = o->lr,
                              .momentum = o->momentum,
                              .weight_decay = o->weight_decay,
                              .watch = &watch,
                              .optimizer = o->comm.optimizer,
                              .beta1 = o->beta1,
                              .beta2 = o->beta2,
                              .eps = o->eps};
    struct sc_data_order data_order = sc_train_data_order(o, train);
    double acc = -1, test_loss = 0;
    long done = o->resume ? (long)net->iteration : 0, saved = -1;
    if (o->resume && rt->rank == 0)
        fprintf(stderr, "resuming at iteration %ld of %ld (epoch %ld, batch %ld of %ld)\n", done, total,
                done / per_epoch + 1, done % per_epoch + 1, per_epoch);
    struct loop_state ls = {o, train, per_epoch, step, net->iteration - done, 0};
    int trace_wanted = (o->trace || o->report) && o->trace_first > 0, tracing = 0;
    struct sc_preempt *preempt = NULL;
    int signalled = 0, signal_from = 0; /* --checkpoint-signal: the signal the ranks stop on */
    if (o->checkpoint_signal && (err = sc_preempt_start(rt, &preempt))) {
        free(order);
        if (p.metrics)
            fclose(p.metrics);
        return err;
    }
    sc_stall_arm(1);
    for (int epoch = (int)(done / per_epoch); epoch < o->epochs && done < total && !err && !signalled; epoch++) {
        epoch_order(order, train->n, o->shuffle, o->seed, epoch);
        double t0 = now(), last_t = t0;
        long last_done = done, it_epoch = done - (long)epoch * per_epoch, first_it = it_epoch;
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
            /* The next batch is loaded while this one computes, but not
             * past the epoch (its order is not drawn yet) and not across
             * a trace's edges, which drain: each trace holds the loads of
             * its own iterations. */
            int ahead = it_epoch + 1 < per_epoch && done + 1 < total &&
                        !(trace_wanted && (done + 1 == o->trace_last || done + 2 == o->trace_first));
            sgd.iteration = net->iteration + 1;
            sgd.lr = (float)sc_lr_at(&o->lr_schedule, o->lr, done, total);
            sc_kernel_failure_iteration(sgd.iteration);
            err = sc_net_train_batch(net, train, order + it_epoch * step, ahead ? order + (it_epoch + 1) * step : NULL,
                                     &sgd);
            sc_kernel_failure_iteration(0);
            if (err)
                break;
            done++;
            if (tracing && done == o->trace_last) {
                tracing = 0;
                if ((err = finish_trace(&ls, rt, net, &p, o->trace_first, done)))
                    break;
            }
            if (done % o->log_every == 0 || done == total || it_epoch + 1 == per_epoch) {
                double loss = sc_net_last_loss(net), t = now();
                if ((err = check_kernels(&ls, rt))) /* the loss's tasks have run */
                    break;
                double rate = (done - last_done) * step / (t - last_t);
                sc_stall_iteration_seconds((t - last_t) / (double)(done - last_done));
                report_iteration(&p, epoch, o->epochs, net->iteration, it_epoch + 1, per_epoch, (total - done) * step,
                                 loss, rate, sgd.lr);
                last_t = t;
                last_done = done;
                if ((err = check_finite(&ls, rt, net, &watch, &p, loss)))
                    break;
            }
            if (o->save_every && net->iteration % o->save_every == 0 && done < total) {
                if ((err = save_checkpoint(&ls, rt, net, &watch, &p, &data_order)))
                    break;
                saved = done;
                ls.saved_iteration = (long)net->iteration;
            }
            if (preempt && done < total && (signalled = sc_preempt_poll(preempt, &signal_from))) {
                it_epoch++;
                break;
            }
        }
        if (tracing && !err) { /* the trace stops at the end of an epoch, before the evaluation */
            tracing = 0;
            err = finish_trace(&ls, rt, net, &p, o->trace_first, done);
        }
        sc_net_wait(net);
        p.train_time += now() - t0;
        p.images += (it_epoch - first_it) * step;
        if (!err) /* every task of the epoch has run */
            err = check_kernels(&ls, rt);
        if (!err && o->test && !signalled && (it_epoch == per_epoch || done == total)) {
            if (!(err = sc_net_evaluate(net, test, &acc, &test_loss)) && !(err = check_kernels(&ls, rt)))
                report_test(&p, epoch, net->iteration, acc, test_loss);
        }
    }
    sc_stall_arm(0);
    free(order);
    if (!err) /* every update has run (the epoch ended with a wait): the final count */
        nonfinite_seen(rt, &watch, &p.skipped);
    if (!err && o->save && saved != done)
        err = save_checkpoint(&ls, rt, net, &watch, &p, &data_order);
    sc_preempt_finish(preempt);
    if (p.metrics)
        fclose(p.metrics);
    if (err)
        return err;
    if (signalled) {
        if (rt->rank == 0)
            fprintf(stderr,
                    "%sstarconv-train: %s (rank %d): stopped after iteration %lld with its checkpoint in %s; go on "
                    "with --resume %s\n",
                    p.tty ? "\r\033[K" : "", sc_preempt_signal_name(signalled), signal_from, (long long)net->iteration,
                    o->save, o->save);
        return SC_TRAIN_SIGNALLED;
    }
    if (o->report_comm) {
        double mine[2] = {(double)sc_net_grad_bytes(net), (double)sc_net_grad_partial_bytes(net)}, all[2 * rt->size];
        MPI_Gather(mine, 2, MPI_DOUBLE, all, 2, MPI_DOUBLE, 0, rt->ctl);
        if (rt->rank == 0) {
            double per = done ? 1.0 / (double)done : 0.0, partial = 0, total = 0;
            printf("gradient reduction, bytes sent per iteration (gradients %s on the wire)\n%4s %14s\n",
                   o->comm.grad_bf16 ? "bf16" : "fp32", "rank", "bytes");
            for (int r = 0; r < rt->size; r++) {
                printf("%4d %14.0f\n", r, all[2 * r] * per);
                total += all[2 * r] * per, partial += all[2 * r + 1] * per;
            }
            /* the part that --grad-dtype halves, and the weights sent back */
            printf("all ranks: %.0f bytes, of which %.0f partial sums (%s), %.0f weights sent back (fp32)\n", total,
                   partial, o->comm.grad_bf16 ? "bf16 outside the direct path" : "fp32", total - partial);
        }
    }
    if (rt->rank == 0) {
        char accs[48] = "not measured";
        if (acc >= 0)
            snprintf(accs, sizeof(accs), "%.2f%%", 100 * acc);
        char skipped[64] = "";
        if (p.skipped)
            snprintf(skipped, sizeof skipped, ", %ld batches skipped (not finite)", p.skipped);
        printf("starconv-train: %ld iterations, %.1f images/s, test accuracy %s%s\n", done,
               p.train_time > 0 ? p.images / p.train_time : 0.0, accs, skipped);
        fflush(stdout);
    }
    return 0;
}
