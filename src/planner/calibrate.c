/* The measurements of `starconv-plan calibrate` (calibrate.h): the
 * machine's memory bandwidth, the library kernels the planner's model
 * looks up, and the data's loading (the runtime's task and communication
 * costs: calibrate_comm.c). */
#include "src/planner/calibrate.h"
#include "src/data/hdf5.h"

#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <starpu.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "base/error.h"
#include "base/rng.h"
#include "codelets/codelets.h"
#include "codelets/codelets_synth.h"
#include "kernels/kernels.h"
#include "src/net/net.h"
#include "src/planner/calibrate_private.h"
#include "tasks/tasks.h"
#ifdef SC_USE_CUDA
#include "kernels/cuda_ctx.h"
#endif

/* ---- the machine ---- */

/* The CPU's model name from /proc/cpuinfo ("model name: ..."), else the
 * architecture (some ARM kernels give no model name). */
static void cpu_model(char *buf, size_t len)
{
    char line[512];
    buf[0] = '\0';
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && !buf[0] && fgets(line, sizeof line, f)) {
        char *colon = strchr(line, ':');
        if (strncmp(line, "model name", 10) || !colon)
            continue;
        char *s = colon + 1, *e = s + strlen(s);
        while (*s == ' ' || *s == '\t')
            s++;
        while (e > s && (e[-1] == '\n' || e[-1] == ' ' || e[-1] == '\t'))
            e--;
        snprintf(buf, len, "%.*s", (int)(e - s), s);
    }
    if (f)
        fclose(f);
    struct utsname u;
    if (!buf[0])
        snprintf(buf, len, "%s", uname(&u) == 0 ? u.machine : "unknown CPU");
}

/* 64 MiB per array: far beyond any cache, so each pass streams memory. */
#define STREAM_FLOATS ((size_t)16 << 20)
#define STREAM_PASSES 7

int sc_calibrate_machine_name(char *name, size_t len)
{
    char model[96];
    cpu_model(model, sizeof model);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    snprintf(name, len, "%s, %ld cores", model, cores > 0 ? cores : 1);
    return cores > 0 ? (int)cores : 1;
}

#define ROW_FLOATS 16
/* Not a constant to the compiler, as a region's row length is not: memcpy
 * stays a call. */
static volatile int row_floats = ROW_FLOATS;

static void copy_rows(float *dst, const float *src, size_t nrows, int len)
{
    for (size_t r = 0; r < nrows; r++)
        memcpy(dst + r * len, src + r * 4 * len, (size_t)len * sizeof(float));
}

int sc_calibrate_machine(struct sc_calib *c)
{
    c->cores = sc_calibrate_machine_name(c->machine, sizeof c->machine);

    size_t bytes = STREAM_FLOATS * sizeof(float);
    float *a = aligned_alloc(64, bytes), *b = aligned_alloc(64, bytes);
    if (!a || !b) {
        free(a), free(b);
        return sc_error(SC_ERR_NOMEM, "out of memory for the memory bandwidth test (2 x %zu MiB)", bytes >> 20);
    }
    for (size_t i = 0; i < STREAM_FLOATS; i++) /* also maps the pages before the first timed pass */
        a[i] = b[i] = (float)(i & 1023);
    /* One read and one write per float, as a layer without a library
     * kernel (batch normalization, ReLU, adds) streams its tensors. */
    double t[STREAM_PASSES];
    volatile float sink = 0;
    for (int p = 0; p < STREAM_PASSES; p++) {
        double t0 = now();
        for (size_t i = 0; i < STREAM_FLOATS; i++)
            b[i] = a[i] * 0.5f + 1.0f;
        t[p] = now() - t0;
        sink += b[(size_t)p * 4099 % STREAM_FLOATS]; /* so that the passes are not optimized away */
    }
    c->stream = 2.0 * (double)bytes / median(t, STREAM_PASSES);
    /* A region task gathers its window and scatters its output row by row,
     * one memcpy each (kernels/region.c): a block a few columns wide
     * (a split over W) moves its bytes in many short rows, each dearer than
     * its bytes at stream's rate.  Timed here: rows of ROW_FLOATS out of
     * rows 4 times as long (a quarter of each image's width), beyond the
     * caches; what a row takes beyond its bytes (read and written) at
     * stream's rate. */
    size_t nrows = STREAM_FLOATS / (4 * ROW_FLOATS);
    for (int p = 0; p < STREAM_PASSES; p++) {
        double t0 = now();
        copy_rows(b, a, nrows, row_floats);
        t[p] = now() - t0;
        sink += b[(size_t)p * 4099 % (nrows * ROW_FLOATS)];
    }
    (void)sink;
    free(a), free(b);
    double row = median(t, STREAM_PASSES) / (double)nrows - 2.0 * ROW_FLOATS * sizeof(float) / c->stream;
    c->rowcopy = row > 0 ? row : 0;
    return 0;
}

/* ---- the kernels ---- */

/* The buffers of one kernel's timing: its inputs, outputs and parameters,
 * their gradients, and a pooling's workspace.  Only grow() writes the
 * inputs x and w, so that they keep the values it gives them: a buffer
 * shared with another kernel's output (a max pooling's workspace holds
 * small integers, which read as floats are denormals) would make the next
 * kernel compute on denormals, which Intel cores take about two orders of
 * magnitude longer than normal floats, and the calibration would price
 * that instead of training's kernels. */
enum { B_X, B_Y, B_W, B_DX, B_DW, B_WS, NBUF };

/* A kernel to time: its work and its calibration key. */
struct pending {
    struct sc_layer_work w;
    char key[SC_CALIB_KEY_LEN];
};

struct compute {
    struct sc_calib *c;
    struct sc_kernel_worker *kw;
    int reps;
    FILE *progress;
    struct pending *list; /* the kernels c does not hold yet, each once */
    int n, listcap;
    double *times; /* kernel i's op j in pass p at times[(i * reps + p) * 3 + j] */
    double *t;     /* reps times */
    float *buf[NBUF];
    size_t cap[NBUF]; /* floats */
#ifdef SC_USE_CUDA
    /* On the GPU (cuda 1): the kernels on ctx's stream, on copies of buf
     * in device memory, timed by events around each call. */
    int cuda;
    struct sc_cuda_ctx ctx;
    float *dev[NBUF];
    struct sc_workspace ws; /* cuDNN's, as large as a CUDA worker's */
    cudaEvent_t ev[2];
#endif
};

/* Buffer i of at least n floats, filled with small random values (inputs
 * that are neither zeros nor denormals, which some kernels take faster). */
static int grow(struct compute *k, int i, size_t n)
{
    if (n <= k->cap[i])
        return 0;
    free(k->buf[i]);
    size_t bytes = (n * sizeof(float) + 63) / 64 * 64;
    if (!(k->buf[i] = aligned_alloc(64, bytes))) {
        k->cap[i] = 0;
        return sc_error(SC_ERR_NOMEM, "out of memory for a kernel's buffers (%zu bytes)", bytes);
    }
    for (size_t j = 0; j < n; j++)
        k->buf[i][j] = (float)((double)(sc_splitmix64(j * NBUF + (uint64_t)i) >> 40) * 0x1p-24 - 0.5) * 0.1f;
    k->cap[i] = n;
#ifdef SC_USE_CUDA
    if (k->cuda) {
        cudaFree(k->dev[i]);
        k->dev[i] = NULL;
        if (cudaMalloc((void **)&k->dev[i], bytes) != cudaSuccess ||
            cudaMemcpy(k->dev[i], k->buf[i], n * sizeof(float), cudaMemcpyHostToDevice) != cudaSuccess) {
            k->cap[i] = 0;
            return sc_error(SC_ERR_NOMEM, "out of device memory for a kernel's buffers (%zu bytes)", bytes);
        }
    }
#endif
    return 0;
}

/* The buffers w's kernels need; *nops: how many of forward, backward data
 * and backward filter it has. */
static int prepare(struct compute *k, const struct sc_layer_work *w, int *nops)
{
    size_t n[NBUF] = {0};
    if (w->kind == SC_WORK_CONV) {
        const struct sc_conv_args *a = &w->conv;
        n[B_X] = n[B_DX] = (size_t)a->n * a->c * a->h * a->w;
        n[B_Y] = (size_t)a->n * a->f * a->oh * a->ow;
        n[B_W] = n[B_DW] = (size_t)a->f * a->c * a->kh * a->kw + (size_t)a->f;
        *nops = 3;
    } else if (w->kind == SC_WORK_POOL) {
        const struct sc_pool_args *a = &w->pool;
        n[B_X] = n[B_DX] = (size_t)a->n * a->c * a->h * a->w;
        n[B_Y] = (size_t)a->n * a->c * a->oh * a->ow;
        n[B_WS] = (sc_pool_workspace_bytes(a) + sizeof(float) - 1) / sizeof(float);
        *nops = 2;
    } else {
        const struct sc_fc_args *a = &w->fc;
        n[B_X] = n[B_DX] = (size_t)a->n * a->in;
        n[B_Y] = (size_t)a->n * a->out;
        n[B_W] = n[B_DW] = (size_t)a->out * a->in + (size_t)a->out;
        *nops = 3;
    }
    int err = 0;
    for (int i = 0; i < NBUF && !err; i++)
        err = grow(k, i, n[i] ? n[i] : 1);
    return err;
}

/* One call of w's kernel: op 0 forward, 1 backward data, 2 backward
 * filter (enum sc_conv_dir, sc_fc_dir, sc_pool_dir: pooling has no 2),
 * with the arguments its codelet gives it (codelets/cl_*.c), on the CPU
 * or, k->cuda, its CUDA version on device copies of the buffers. */
static void run(struct compute *k, const struct sc_layer_work *w, int op)
{
    float **b = k->buf;
    int cuda = 0;
#ifdef SC_USE_CUDA
    if ((cuda = k->cuda))
        b = k->dev;
#endif
    /* in0, in1 -> out of each op of a convolution or a fully connected
     * layer: x, w -> y; dy, w -> dx; x, dy -> dw */
    static const int in0[3] = {B_X, B_Y, B_X}, in1[3] = {B_W, B_W, B_Y}, out[3] = {B_Y, B_DX, B_DW};
    if (w->kind == SC_WORK_CONV) {
        const struct sc_conv_args *a = &w->conv;
        size_t nw = (size_t)a->f * a->c * a->kh * a->kw;
        float *bias = op == SC_CONV_FWD ? b[B_W] + nw : op == SC_CONV_BWD_FILTER ? b[B_DW] + nw : NULL;
        if (!cuda)
            sc_conv_compute(k->kw, (enum sc_conv_dir)op, a, b[in0[op]], b[in1[op]], b[out[op]], bias);
#ifdef SC_USE_CUDA
        else
            sc_conv_compute_cuda(&k->ctx, (enum sc_conv_dir)op, a, b[in0[op]], b[in1[op]], b[out[op]], bias, &k->ws);
#endif
    } else if (w->kind == SC_WORK_POOL) {
        /* forward x -> y, backward dy -> dx; the workspace (max) between */
        float *x = b[op ? B_Y : B_X], *y = b[op ? B_DX : B_Y];
        if (!cuda)
            sc_pool_compute(k->kw, (enum sc_pool_dir)op, &w->pool, x, y, b[B_WS]);
#ifdef SC_USE_CUDA
        else
            sc_pool_compute_cuda(&k->ctx, (enum sc_pool_dir)op, &w->pool, x, y, b[B_WS]);
#endif
    } else {
        if (!cuda)
            sc_fc_compute(k->kw, (enum sc_fc_dir)op, &w->fc, b[in0[op]], b[in1[op]], b[out[op]]);
#ifdef SC_USE_CUDA
        else
            sc_fc_compute_cuda(&k->ctx, (enum sc_fc_dir)op, &w->fc, b[in0[op]], b[in1[op]], b[out[op]]);
#endif
    }
}

#ifdef SC_USE_CUDA
/* As time_op, the call between two events on the stream: the GPU's time,
 * launches included where the GPU waits for them (small kernels); a
 * failed call gets a line on stderr from the kernel and a time of -1. */
static double time_op_cuda(struct compute *k, const struct sc_layer_work *w, int op)
{
    cudaStream_t s = k->ctx.stream;
    float ms = 0;
    run(k, w, op);
    if (sc_cuda_check(cudaStreamSynchronize(s), "calibrate"))
        return -1;
    cudaEventRecord(k->ev[0], s);
    run(k, w, op);
    cudaEventRecord(k->ev[1], s);
    if (sc_cuda_check(cudaEventSynchronize(k->ev[1]), "calibrate") ||
        sc_cuda_check(cudaEventElapsedTime(&ms, k->ev[0], k->ev[1]), "calibrate"))
        return -1;
    return ms * 1e-3;
}
#endif

/* A kernel faster than this is timed over as many calls in a row as take
 * about as long (at most SHORT_CALLS): one call of a few microseconds is
 * mostly the clock's and the scheduler's noise. */
#define SHORT_S     1e-3
#define SHORT_CALLS 32

/* After one call that builds the kernel's primitives (the first time) and
 * brings its data into the caches, as in training's steady state: the
 * faster of two timings, each one call or, for a short kernel, the mean
 * of several.  The faster of two, because a timing that the scheduler
 * preempted (another process on the core, for a time slice of
 * milliseconds) says nothing of the kernel; a median over the passes
 * does not drop such a timing when most passes catch one. */
static double time_op(struct compute *k, const struct sc_layer_work *w, int op)
{
#ifdef SC_USE_CUDA
    if (k->cuda)
        return time_op_cuda(k, w, op);
#endif
    run(k, w, op);
    double t0 = now();
    run(k, w, op);
    double t = now() - t0;
    int calls = 1;
    if (t < SHORT_S)
        calls = t * SHORT_CALLS > SHORT_S ? (int)(SHORT_S / t) : SHORT_CALLS;
    double best = calls == 1 ? t : INFINITY;
    for (int timing = calls == 1; timing < 2; timing++) {
        t0 = now();
        for (int i = 0; i < calls; i++)
            run(k, w, op);
        t = (now() - t0) / calls;
        best = t < best ? t : best;
    }
    return best;
}

static int is_new(const struct compute *k, const struct sc_layer_work *w, const char *key)
{
    if (w->kind == SC_WORK_STREAM || !key[0] || sc_calib_find(k->c, key))
        return 0;
    for (int i = 0; i < k->n; i++)
        if (!strcmp(k->list[i].key, key))
            return 0;
    return 1;
}

static int add_pending(void *ctx, const struct sc_layer_work *w, const char *key)
{
    struct compute *k = ctx;
    if (!is_new(k, w, key))
        return 0;
    if (k->n == k->listcap) {
        int cap = k->listcap ? 2 * k->listcap : 64;
        struct pending *l = realloc(k->list, (size_t)cap * sizeof *l);
        if (!l)
            return sc_error(SC_ERR_NOMEM, "out of memory for the list of kernels");
        k->list = l, k->listcap = cap;
    }
    struct pending *e = &k->list[k->n];
    e->w = *w;
    snprintf(e->key, sizeof e->key, "%s", key);
    k->n++;
    return 0;
}

/* Progress of the kernels' passes, for a person waiting: what is timed,
 * n of m, and the time left.  On a terminal one line rewritten in place
 * after each kernel; in a file one line per pass.  The time left is the
 * time so far over the share of the work done, the work of a kernel
 * counted as its FLOPs (a pooling's as its input's size): the first
 * kernels' times set the pace of the rest. */
struct progress_line {
    FILE *f;
    int tty;
    double t0, total, done; /* work: total, and done so far */
    double *work;           /* per kernel */
};

static double kernel_work(const struct sc_layer_work *w)
{
    double f[3];
    sc_layer_work_flops(w, f);
    double size = w->kind == SC_WORK_POOL ? (double)w->pool.n * w->pool.c * w->pool.h * w->pool.w : 0;
    return f[0] + f[1] + f[2] + 10 * size + 1e4; /* + a call's fixed cost */
}

static void say_time(char *buf, size_t len, double s)
{
    if (s < 90)
        snprintf(buf, len, "%.0f s", s);
    else
        snprintf(buf, len, "%.0f min %02.0f s", floor(s / 60), fmod(s, 60));
}

static void progress_kernel(struct progress_line *pl, const struct compute *k, int pass, int i)
{
    pl->done += pl->work[i];
    if (!pl->f)
        return;
    double spent = now() - pl->t0, left = pl->done > 0 ? spent * (pl->total / pl->done - 1) : 0;
    char t[32];
    say_time(t, sizeof t, left);
    if (pl->tty)
        fprintf(pl->f, "\rcalibrate: pass %d/%d, kernel %d/%d (%.40s), about %s left\033[K", pass + 1, k->reps, i + 1,
                k->n, k->list[i].key, t);
    else if (i == k->n - 1)
        fprintf(pl->f, "calibrate: pass %d/%d over %d kernels done, about %s left for the kernels\n", pass + 1, k->reps,
                k->n, t);
    if (pl->tty && pass == k->reps - 1 && i == k->n - 1)
        fputc('\n', pl->f);
    fflush(pl->f);
}

/* Each pass times every kernel once, so that the machine's drift (a
 * shared machine's neighbours come and go over seconds) spreads over all
 * kernels alike instead of slowing the few timed while it lasts, which
 * timing each kernel reps times in a row would. */
static int time_passes(struct compute *k)
{
    int err = 0;
    struct progress_line pl = {.f = k->progress, .tty = k->progress && isatty(fileno(k->progress)), .t0 = now()};
    if (!(pl.work = malloc((size_t)k->n * sizeof *pl.work)))
        return sc_error(SC_ERR_NOMEM, "out of memory for the list of kernels");
    double flops = 0;
    for (int i = 0; i < k->n; i++) {
        double f[3];
        sc_layer_work_flops(&k->list[i].w, f);
        flops += f[0] + f[1] + f[2];
        pl.work[i] = kernel_work(&k->list[i].w);
        pl.total += pl.work[i] * k->reps;
    }
    if (pl.f) {
        fprintf(pl.f, "calibrate: %d kernels (%.2f GFLOP a pass) in %d passes; the time left follows\n", k->n,
                flops * 1e-9, k->reps);
        fflush(pl.f);
    }
    for (int p = 0; p < k->reps && !err; p++) {
        for (int i = 0; i < k->n && !err; i++) {
            struct pending *e = &k->list[i];
            double *t = k->times + ((size_t)i * k->reps + p) * 3;
            int nops;
            err = prepare(k, &e->w, &nops);
            for (int op = 0; op < nops && !err; op++)
                if ((t[op] = time_op(k, &e->w, op)) < 0)
                    err = sc_error(SC_ERR_RUNTIME, "calibrate: the kernel %s failed (see above)", e->key);
            if (!err)
                progress_kernel(&pl, k, p, i);
        }
    }
    if (err && pl.tty)
        fputc('\n', pl.f);
    free(pl.work);
    for (int i = 0; i < k->n && !err; i++) {
        double m[3];
        for (int op = 0; op < 3; op++) {
            for (int p = 0; p < k->reps; p++)
                k->t[p] = k->times[((size_t)i * k->reps + p) * 3 + op];
            m[op] = median(k->t, k->reps);
        }
        err = sc_calib_add_kernel(k->c, k->list[i].key, m[0], m[1], m[2]);
    }
    return err;
}

#ifndef SC_USE_CUDA
static int no_cuda(void)
{
    return sc_error(SC_ERR_ARG, "--device cuda: this starconv was built without CUDA (configure --with-cuda; "
                                "docs/gpu.md)");
}
#else
static int cuda_begin(struct compute *k)
{
    int err = sc_cuda_ctx_open(&k->ctx);
    if (!err && (sc_cuda_check(cudaEventCreate(&k->ev[0]), "calibrate") ||
                 sc_cuda_check(cudaEventCreate(&k->ev[1]), "calibrate")))
        err = sc_error(SC_ERR_RUNTIME, "calibrate: no CUDA events (see above)");
    if (!err && (err = sc_cuda_workspace_limit(&k->ws.bytes)) == 0 && k->ws.bytes &&
        cudaMalloc(&k->ws.ptr, k->ws.bytes) != cudaSuccess)
        err = sc_error(SC_ERR_NOMEM, "out of device memory for cuDNN's workspace (%zu bytes)", k->ws.bytes);
    return err;
}

static void cuda_end(struct compute *k)
{
    if (k->ctx.stream)
        cudaStreamSynchronize(k->ctx.stream);
    for (int i = 0; i < NBUF; i++)
        cudaFree(k->dev[i]);
    cudaFree(k->ws.ptr);
    for (int i = 0; i < 2; i++)
        if (k->ev[i])
            cudaEventDestroy(k->ev[i]);
    sc_cuda_ctx_close(&k->ctx);
}
#endif

int sc_calibrate_compute(struct sc_calib *c, const struct sc_net *net, const struct sc_plan_opts *o, int reps,
                         enum sc_calibrate_device device, FILE *progress)
{
    if (reps < 1)
        return sc_error(SC_ERR_ARG, "calibrate: %d repetitions; at least 1", reps);
#ifndef SC_USE_CUDA
    if (device == SC_CALIBRATE_CUDA)
        return no_cuda();
#endif
    struct compute k = {.c = c, .reps = reps, .progress = progress};
    int err = sc_plan_kernels(net, o, add_pending, &k);
    if (!err && k.n &&
        (!(k.t = malloc((size_t)reps * sizeof *k.t)) || !(k.times = calloc((size_t)k.n * reps * 3, sizeof *k.times)) ||
         !(k.kw = sc_kernel_worker_create())))
        err = sc_error(SC_ERR_NOMEM, "out of memory for the kernels' timing");
    if (err || !k.n)
        goto done;
#ifdef SC_USE_CUDA
    k.cuda = device == SC_CALIBRATE_CUDA;
    if (k.cuda && !(err = cuda_begin(&k)))
        err = time_passes(&k);
    if (k.cuda) {
        cuda_end(&k);
        goto destroy;
    }
#endif
    /* As a StarPU CPU worker runs them (codelets/cl_common.c): one thread
     * each, StarPU's workers being the parallelism.  OpenMP's count is the
     * calling thread's, OpenBLAS's the process's; both are put back. */
    int omp_threads = omp_get_max_threads();
    omp_set_num_threads(1);
#ifdef OPENBLAS_VERSION
    int blas_threads = openblas_get_num_threads();
    openblas_set_num_threads(1);
#endif
    err = time_passes(&k);
#ifdef OPENBLAS_VERSION
    openblas_set_num_threads(blas_threads);
#endif
    omp_set_num_threads(omp_threads);
#ifdef SC_USE_CUDA
destroy:
#endif
    /* On this thread: oneDNN's per-thread scratchpad is released by the
     * thread that took it (kernels/kernels.h). */
    sc_kernel_worker_destroy(k.kw);
done:
    for (int i = 0; i < NBUF; i++)
        free(k.buf[i]);
    free(k.times);
    free(k.list);
    free(k.t);
    return err;
}

int sc_calibrate_device_cuda(struct sc_calib *c)
{
#ifdef SC_USE_CUDA
    int dev = 0, count = 0;
    struct cudaDeviceProp p;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count < 1 || cudaGetDevice(&dev) != cudaSuccess ||
        cudaGetDeviceProperties(&p, dev) != cudaSuccess)
        return sc_error(SC_ERR_RUNTIME, "--device cuda: no CUDA device here");
    snprintf(c->machine, sizeof c->machine, "%.100s (CUDA device %d)", p.name, dev);
    c->cores = 0;
    /* stream: a device-to-device copy much larger than the L2 cache, bytes
     * read plus written, as a layer without a library kernel streams. */
    size_t bytes = (size_t)256 << 20;
    void *a = NULL, *b = NULL;
    cudaEvent_t ev[2] = {NULL, NULL};
    double t[STREAM_PASSES];
    int err = 0;
    if (cudaMalloc(&a, bytes) != cudaSuccess || cudaMalloc(&b, bytes) != cudaSuccess ||
        cudaMemset(a, 0, bytes) != cudaSuccess || cudaEventCreate(&ev[0]) != cudaSuccess ||
        cudaEventCreate(&ev[1]) != cudaSuccess)
        err = sc_error(SC_ERR_NOMEM, "--device cuda: no room on the device for the bandwidth test");
    for (int i = -1; i < STREAM_PASSES && !err; i++) { /* the first pass warms up */
        float ms = 0;
        cudaEventRecord(ev[0], 0);
        cudaMemcpyAsync(b, a, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(ev[1], 0);
        if (cudaEventSynchronize(ev[1]) != cudaSuccess || cudaEventElapsedTime(&ms, ev[0], ev[1]) != cudaSuccess)
            err = sc_error(SC_ERR_RUNTIME, "--device cuda: the bandwidth test failed");
        else if (i >= 0)
            t[i] = ms * 1e-3;
    }
    if (!err)
        c->stream = 2.0 * (double)bytes / median(t, STREAM_PASSES);
    for (int i = 0; i < 2; i++)
        if (ev[i])
            cudaEventDestroy(ev[i]);
    cudaFree(a);
    cudaFree(b);
    return err;
#else
    (void)c;
    return no_cuda();
#endif
}

/* ---- the data ---- */

int sc_calibrate_load(struct sc_calib *c, const struct sc_net *net, const struct sc_dataset *ds, int reps,
                      FILE *progress)
{
    if (reps < 1)
        return sc_error(SC_ERR_ARG, "calibrate: %d repetitions; at least 1", reps);
    /* The labels at the loss's resolution, as training loads them. */
    int oh, ow;
    sc_net_label_shape(net, &oh, &ow);
    struct sc_synth_args a = sc_dataset_synth_args(ds, (struct sc_box){0, ds->h, 0, ds->w}, 1);
    size_t per = (size_t)ds->c * ds->h * ds->w, nl = (size_t)oh * ow;
    int n = ds->n < 8 ? ds->n : 8, lh, lw;
    sc_data_file_label_shape(ds, &lh, &lw);
    float *x = malloc(per * n * sizeof *x);
    int32_t *labels = malloc(per * sizeof *labels); /* sc_synth_sample's per-pixel labels, the most */
    double *t = malloc((size_t)reps * sizeof *t);
    int err = x && labels && t && n > 0 && oh >= 1 && ow >= 1 && (!ds->synthetic || nl <= per)
                  ? 0
                  : sc_error(SC_ERR_NOMEM, "out of memory for the data set's timing");
    for (int r = -1; r < reps && !err; r++) { /* the first unmeasured: pages mapped */
        double t0 = now();
        for (int32_t i = 0; i < n; i++) {
            if (ds->file) { /* read from the file, as a load task does */
                struct sc_load_read req = {0, ds->c, 0, ds->h, 0, ds->w, 0, oh, 0, ow, lh ? oh * ow : 1, 1};
                sc_data_file_read(ds->file, &req, &i, x + (size_t)i * per, labels);
                continue;
            }
            if (ds->synthetic) {
                sc_synth_sample(&a, i, x + (size_t)i * per, labels);
                sc_synth_labels(&a, oh, ow, (struct sc_box){0, oh, 0, ow}, &i, labels);
                continue;
            }
            const uint8_t *src = ds->images + (size_t)i * per;
            for (size_t p = 0; p < per; p++) /* as sc_load_batch */
                x[(size_t)i * per + p] = src[p] / 255.0f;
            labels[0] = ds->labels[i];
        }
        if (r >= 0)
            t[r] = now() - t0;
    }
    if (!err) {
        c->load = median(t, reps) / ((double)n * per);
        if (progress)
            fprintf(progress, "calibrate: loading a sample (%zu values, its labels): %.3f ms\n", per,
                    c->load * per * 1e3);
    }
    free(x), free(labels), free(t);
    return err;
}
