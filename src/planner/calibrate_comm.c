/* The runtime's part of `starconv-plan calibrate` (calibrate.h,
 * sc_calibrate_comm): a task's overhead, point-to-point messages, a
 * message behind busy workers, and the ring allreduce as training runs it. */
#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "codelets/codelets.h"
#include "src/net/net.h"
#include "src/planner/calibrate.h"
#include "src/planner/calibrate_private.h"
#include "tasks/tasks.h"

#define WARM       3   /* unmeasured repetitions before each timing */
#define TASK_CHAIN 200 /* tasks per timed chain */
#define P2P_SMALL  8   /* bytes: the latency */
#define P2P_LARGE  (4 << 20)

/* Seconds per task of a chain of TASK_CHAIN zeroings of one small vector
 * (each waits for the one before: what the chain of a layer's tasks
 * pays), the median of reps chains, averaged over the ranks. */
static int time_tasks(struct sc_runtime *rt, int reps, double *t, double *out)
{
    starpu_data_handle_t h = NULL;
    float *mem = NULL;
    int err = sc_vector_new(&h, (void **)&mem, 16, sizeof(float));
    for (int r = -WARM; r < reps && !err; r++) {
        double t0 = now();
        for (int i = 0; i < TASK_CHAIN && !err; i++)
            err = sc_insert_zero(NULL, h, "calibrate.task");
        sc_tasks_wait_data(h);
        if (r >= 0)
            t[r] = (now() - t0) / TASK_CHAIN;
    }
    sc_vector_free(h, mem);
    double mine = err ? 0 : median(t, reps);
    MPI_Allreduce(&mine, out, 1, MPI_DOUBLE, MPI_SUM, rt->ctl);
    *out /= rt->size;
    return sc_runtime_agree(rt, err);
}

/* hs to the next rank, hr from the previous one, through StarPU-MPI;
 * nonzero when an exchange failed. */
static int shift_once(struct sc_runtime *rt, starpu_data_handle_t hs, starpu_data_handle_t hr, int64_t tag)
{
    int P = rt->size, next = (rt->rank + 1) % P, prev = (rt->rank + P - 1) % P;
    starpu_mpi_req sreq, rreq;
    return starpu_mpi_irecv(hr, &rreq, prev, tag, rt->comm) || starpu_mpi_isend(hs, &sreq, next, tag, rt->comm) ||
           starpu_mpi_wait(&rreq, MPI_STATUS_IGNORE) || starpu_mpi_wait(&sreq, MPI_STATUS_IGNORE);
}

/* Every rank sends a vector of bytes to the next rank and receives one
 * from the previous, all at once, through StarPU-MPI: the slowest rank's
 * time, the median of reps, on every rank.  All at once, because that is
 * how halo exchanges and redistributions move data: on a network the
 * ranks share (a throttled loopback, a node's link, memory) each flow gets
 * its share, and that share is what the model's cost per byte must be. */
static int time_shift(struct sc_runtime *rt, size_t bytes, int reps, double *t, double *out)
{
    starpu_data_handle_t hs = NULL, hr = NULL;
    float *ms = NULL, *mr = NULL;
    int64_t tag = sc_tags_reserve(1); /* every rank alike, as plans reserve theirs */
    int err = sc_vector_new(&hs, (void **)&ms, bytes / sizeof(float), sizeof(float));
    if (!err)
        err = sc_vector_new(&hr, (void **)&mr, bytes / sizeof(float), sizeof(float));
    err = sc_runtime_agree(rt, err);
    for (int r = -WARM; r < reps && !err; r++) {
        MPI_Barrier(rt->ctl);
        double t0 = now();
        err = shift_once(rt, hs, hr, tag);
        if (r >= 0)
            t[r] = now() - t0;
    }
    if (err)
        err = sc_error(SC_ERR_RUNTIME, "calibrate: a StarPU-MPI exchange of %zu bytes failed", bytes);
    if ((err = sc_runtime_agree(rt, err)) == 0) {
        MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, rt->ctl);
        *out = median(t, reps);
    }
    sc_vector_free(hs, ms);
    sc_vector_free(hr, mr);
    return err;
}

/* Every rank sends BUSY_BYTES to the next rank, as time_shift, while its
 * workers run long tasks (zeroings of BUSY_FLOATS floats, a few ms each,
 * BUSY_TASKS per worker queued before the message): the slowest rank's
 * time, the median of reps.  Where the workers fill the cores, StarPU-MPI's
 * thread waits for them, for about as long as the tasks they run, which
 * the planner must know (docs/planner-model.md, "What the rules rest on"). */
#define BUSY_BYTES          (1 << 20)
#define BUSY_FLOATS         ((size_t)8 << 20)
#define BUSY_TASKS          12
#define SC_MAX_WORKERS_BUSY 64
static int time_busy(struct sc_runtime *rt, int reps, double *t, double *out)
{
    starpu_data_handle_t hs = NULL, hr = NULL, hb[SC_MAX_WORKERS_BUSY] = {NULL};
    float *ms = NULL, *mr = NULL, *mb[SC_MAX_WORKERS_BUSY] = {NULL};
    int64_t tag = sc_tags_reserve(1);
    int nw = (int)starpu_cpu_worker_get_count();
    if (nw > SC_MAX_WORKERS_BUSY)
        nw = SC_MAX_WORKERS_BUSY;
    int err = sc_vector_new(&hs, (void **)&ms, BUSY_BYTES / sizeof(float), sizeof(float));
    if (!err)
        err = sc_vector_new(&hr, (void **)&mr, BUSY_BYTES / sizeof(float), sizeof(float));
    for (int w = 0; w < nw && !err; w++) /* one vector per worker: their tasks run side by side */
        err = sc_vector_new(&hb[w], (void **)&mb[w], BUSY_FLOATS, sizeof(float));
    err = sc_runtime_agree(rt, err);
    for (int r = -WARM; r < reps && !err; r++) {
        MPI_Barrier(rt->ctl);
        for (int i = 0; i < BUSY_TASKS && !err; i++)
            for (int w = 0; w < nw && !err; w++)
                err = sc_insert_zero(NULL, hb[w], "calibrate.busy");
        double t0 = now();
        err = err || shift_once(rt, hs, hr, tag);
        if (r >= 0)
            t[r] = now() - t0;
        for (int w = 0; w < nw; w++)
            sc_tasks_wait_data(hb[w]);
    }
    if (err)
        err = sc_error(SC_ERR_RUNTIME, "calibrate: a StarPU-MPI exchange behind busy workers failed");
    if ((err = sc_runtime_agree(rt, err)) == 0) {
        MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, rt->ctl);
        *out = median(t, reps);
    }
    sc_vector_free(hs, ms);
    sc_vector_free(hr, mr);
    for (int w = 0; w < nw; w++)
        sc_vector_free(hb[w], mb[w]);
    return err;
}

/* The ring allreduce of a vector of bytes over the groups of g consecutive
 * ranks, all at once, with the options training gives its buckets
 * (src/net/setup.c): submission to the moment the vector can be read, the
 * slowest rank's, the median of reps. */
static int time_allreduce(struct sc_runtime *rt, int g, size_t bytes, int segment_kb, int reps, double *t, double *out)
{
    struct sc_comm_opts co;
    sc_comm_opts_default(&co);
    co.segment_kb = segment_kb;
    int members[g];
    for (int i = 0; i < g; i++)
        members[i] = rt->rank / g * g + i;
    struct sc_ring_opts ro = {
        (size_t)co.segment_kb << 10, co.window, g < rt->size ? members : NULL, g, co.direct_kb, 0};
    starpu_data_handle_t h = NULL;
    float *mem = NULL; /* zeros, which their sums keep finite however many repetitions */
    struct sc_ring *ring = NULL;
    int err = sc_runtime_agree(rt, sc_vector_new(&h, (void **)&mem, bytes / sizeof(float), sizeof(float)));
    if (err) {
        sc_vector_free(h, mem);
        return err;
    }
    if (!(err = sc_runtime_agree(rt, sc_ring_create(&ring, h, rt->comm, &ro, "calibrate")))) {
        for (int r = -WARM; r < reps && !err; r++) {
            /* Together, as the ranks of a training step reach their
             * gradients' collectives; two steps, as bench/allreduce.c has
             * them: straight after one (the agreement), the ranks' threads
             * have not settled, and a small allreduce times several times
             * too slow. */
            if ((err = sc_runtime_agree(rt, err)))
                break;
            MPI_Barrier(rt->ctl);
            double t0 = now();
            err = sc_ring_allreduce_submit(ring, NULL);
            sc_tasks_wait_data(h);
            if (r >= 0)
                t[r] = now() - t0;
        }
        sc_tasks_wait_all(rt->comm);
    }
    if ((err = sc_runtime_agree(rt, err)) == 0) {
        MPI_Allreduce(MPI_IN_PLACE, t, reps, MPI_DOUBLE, MPI_MAX, rt->ctl);
        *out = median(t, reps);
    }
    if (ring)
        sc_ring_destroy(ring);
    sc_vector_free(h, mem);
    return err;
}

static void say(FILE *progress, const struct sc_runtime *rt, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void say(FILE *progress, const struct sc_runtime *rt, const char *fmt, ...)
{
    if (!progress || rt->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("calibrate: ", progress);
    vfprintf(progress, fmt, ap);
    fputc('\n', progress);
    va_end(ap);
    fflush(progress);
}

static int comm_p2p(struct sc_calib *c, struct sc_runtime *rt, int reps, double *t, FILE *progress)
{
    double small, large;
    int err = time_shift(rt, P2P_SMALL, reps, t, &small);
    if (!err)
        err = time_shift(rt, P2P_LARGE, reps, t, &large);
    if (err)
        return err;
    c->p2p_alpha = small;
    /* Noise can make the large message look no slower than the small one;
     * a negative cost per byte would mean nothing. */
    c->p2p_beta = large > small ? (large - small) / (P2P_LARGE - P2P_SMALL) : 0;
    say(progress, rt, "p2p %.1f us + %.3f ns/byte (%.2f GB/s)", c->p2p_alpha * 1e6, c->p2p_beta * 1e9,
        c->p2p_beta > 0 ? 1e-9 / c->p2p_beta : 0.0);
    return 0;
}

int sc_calibrate_comm(struct sc_calib *c, struct sc_runtime *rt, int reps, FILE *progress)
{
    static const size_t sizes[] = {4 << 10, 64 << 10, 1 << 20, 8 << 20};
    if (reps < 1)
        return sc_error(SC_ERR_ARG, "calibrate: %d repetitions; at least 1", reps);
    double *t = malloc((size_t)reps * sizeof *t);
    int err = sc_runtime_agree(rt, t ? 0 : sc_error(SC_ERR_NOMEM, "out of memory"));
    if (!err && !(err = time_tasks(rt, reps, t, &c->task)))
        say(progress, rt, "task overhead %.1f us", c->task * 1e6);
    if (!err && rt->size > 1)
        err = comm_p2p(c, rt, reps, t, progress);
    if (!err && rt->size > 1 && !(err = time_busy(rt, reps, t, &c->busy)))
        say(progress, rt, "a 1 MiB message behind busy workers: %.3f ms", c->busy * 1e3);
    /* Segments as training sizes them (--comm-segment auto). */
    int segment_kb;
    double link;
    if (!err && !(err = sc_link_segment_kb(rt->ctl, &segment_kb, &link)) && link > 0)
        say(progress, rt, "link %.2f GB/s: collectives in %d KiB segments", link * 1e-9, segment_kb);
    for (int g = 2; g <= rt->size && !err; g++) {
        if (rt->size % g)
            continue;
        for (size_t i = 0; i < sizeof sizes / sizeof *sizes && !err; i++) {
            double s;
            if (!(err = time_allreduce(rt, g, sizes[i], segment_kb, reps, t, &s)))
                err = sc_runtime_agree(rt, sc_calib_add_allreduce(c, g, (double)sizes[i], s));
            if (!err)
                say(progress, rt, "allreduce over %d ranks, %zu KiB: %.3f ms", g, sizes[i] >> 10, s * 1e3);
        }
    }
    free(t);
    return err;
}
