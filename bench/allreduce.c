/* sc-allreduce-bench [--trace FILE] [--segment KB] [--direct KB] [FLOATS] [REPS]: the cost of starconv's
 * allreduce task graph (the ring of tasks/collectives.c, with the windows of
 * training) against MPI_Allreduce on the same vector, in four columns from
 * one run (rank 0 prints the medians):
 *   1. MPI_Allreduce before StarPU starts (MPI started as starconv starts it);
 *   2. MPI_Allreduce once StarPU and StarPU-MPI run in the same processes,
 *      with nothing submitted (their idle threads perturb MPI's timing);
 *   3. the same, interleaved with 4. (so is what the task graph leaves);
 *   4. the task graph: submission to the moment the vector can be read (a
 *      vector of at most 64 KiB: the direct path's one nonblocking
 *      collective, as in training; --direct 0: the ring whatever the size).
 * --trace FILE writes the timeline of the task graph's repetitions (tasks and
 * transfers, as starconv-train --trace) to FILE.  --segment KB: the ring's
 * segment size (starconv-train --comm-segment; default, as there, auto:
 * sized to the link, sc_link_segment_kb).
 * sc-allreduce-bench --mpi-only [FLOATS] [REPS]: column 1 alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/runtime/runtime.h"
#include "src/starconv.h"
#include "src/net/net.h"
#include "src/runtime/trace_run.h"
#include "tasks/tasks.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *t, int n)
{
    qsort(t, n, sizeof(double), cmp);
    return t[n / 2];
}

#define WARM 5

/* Before every repetition, in every column, the vector is written again,
 * as training's backward writes a gradient before its collective: the
 * same values each time, and the vector in the cache as a gradient just
 * computed would be.  Without it the columns differed by what the others
 * left in the cache: a 4 MiB MPI_Allreduce took 0.38-0.53 ms on a vector
 * it had just reduced, 0.72-1.06 ms after 64 MiB of other writes. */
static void fill(float *x, size_t n)
{
    for (size_t i = 0; i < n; i++)
        x[i] = 1.0f;
}

/* Median seconds of MPI_Allreduce over m (n floats) on comm. */
static double time_mpi(float *m, size_t n, int reps, MPI_Comm comm)
{
    double *t = malloc(reps * sizeof(double));
    for (int r = -WARM; r < reps; r++) {
        fill(m, n);
        MPI_Barrier(comm);
        double t0 = now();
        MPI_Allreduce(MPI_IN_PLACE, m, (int)n, MPI_FLOAT, MPI_SUM, comm);
        if (r >= 0)
            t[r] = now() - t0;
    }
    double med = median(t, reps);
    free(t);
    return med;
}

static int usage(void)
{
    fprintf(stderr, "usage: sc-allreduce-bench [--trace FILE] [--segment KB|auto] [--direct KB] [FLOATS>0] [REPS>0]\n"
                    "       sc-allreduce-bench --mpi-only [FLOATS>0] [REPS>0]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *trace = NULL;
    int mpi_only = 0;
    struct sc_comm_opts defaults;
    sc_comm_opts_default(&defaults);
    long segment_kb = defaults.segment_kb, direct_kb = 64;
    char *end;
    if (argc > 1 && !strcmp(argv[1], "--mpi-only")) {
        mpi_only = 1;
        argv++, argc--;
    }
    while (!mpi_only && argc > 2 &&
           (!strcmp(argv[1], "--trace") || !strcmp(argv[1], "--segment") || !strcmp(argv[1], "--direct"))) {
        if (!strcmp(argv[1], "--trace"))
            trace = argv[2];
        else if (!strcmp(argv[1], "--direct")) {
            if ((direct_kb = strtol(argv[2], &end, 10)) < 0 || direct_kb > 1 << 20 || *end)
                return usage();
        } else if (!strcmp(argv[2], "auto"))
            segment_kb = 0;
        else if ((segment_kb = strtol(argv[2], &end, 10)) < 4 || *end)
            return usage();
        argv += 2, argc -= 2;
    }
    size_t n = argc > 1 ? strtoul(argv[1], &end, 10) : (size_t)1 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 50;
    if (n < 1 || n > (1u << 30) || reps < 1 || argc > 3 || (argc > 1 && *end))
        return usage();
    if (sc_runtime_mpi_init(&argc, &argv)) {
        fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
        return 1;
    }
    float *m = malloc(n * sizeof(float));
    double alone = time_mpi(m, n, reps, MPI_COMM_WORLD);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    if (mpi_only) {
        if (rank == 0)
            printf("allreduce %zu floats (%.3f MiB) on %d ranks, median of %d: MPI_Allreduce without StarPU "
                   "%.3f ms\n",
                   n, n * 4.0 / (1 << 20), size, reps, alone * 1e3);
        free(m);
        MPI_Finalize();
        return 0;
    }

    struct sc_runtime rt;
    if (sc_runtime_init(&argc, &argv, NULL, &rt)) {
        fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
        return 1;
    }
    float *v = malloc(n * sizeof(float));
    fill(v, n);
    double *t_mpi = malloc(reps * sizeof(double)), *t_sc = malloc(reps * sizeof(double));
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)v, n, sizeof(float));
    struct sc_ring *ring;
    double link = 0; /* bytes/s, where measured */
    int auto_kb;
    if (!segment_kb) {
        if (sc_link_segment_kb(rt.ctl, &auto_kb, &link)) {
            fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
            return 1;
        }
        segment_kb = auto_kb;
    }
    /* As starconv-train's buckets have it. */
    struct sc_ring_opts ro = {(size_t)segment_kb << 10, defaults.window, NULL, 0, direct_kb ? (int)direct_kb : -1, 0};
    if (sc_ring_create(&ring, h, rt.comm, &ro, "bench")) {
        fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
        return 1;
    }
    double idle = time_mpi(m, n, reps, rt.ctl);
    /* Interleaved, so that both see the same machine state. */
    for (int r = -WARM; r < reps; r++) {
        fill(m, n);
        MPI_Barrier(rt.ctl);
        double t0 = now();
        MPI_Allreduce(MPI_IN_PLACE, m, (int)n, MPI_FLOAT, MPI_SUM, rt.ctl);
        double t1 = now();
        starpu_data_acquire(h, STARPU_W);
        fill(v, n);
        starpu_data_release(h);
        MPI_Barrier(rt.ctl);
        if (trace && r == 0)
            sc_trace_run_start(&rt, 1);
        if (trace && r >= 0)
            sc_trace_run_iteration(r + 1);
        double t2 = now();
        sc_ring_allreduce_submit(ring, NULL);
        sc_tasks_wait_data(h);
        double t3 = now();
        if (r >= 0) {
            t_mpi[r] = t1 - t0;
            t_sc[r] = t3 - t2;
        }
    }
    if (trace) {
        sc_tasks_wait_all(rt.comm);
        struct sc_trace t;
        if (!sc_trace_run_stop(&rt, &t) && rt.rank == 0) {
            t.first_iteration = 1;
            t.last_iteration = reps;
            snprintf(t.model, sizeof(t.model), "sc-allreduce-bench %zu floats", n);
            if (sc_trace_write_json(&t, trace))
                fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
        }
        sc_trace_free(&t);
    }
    double mm = median(t_mpi, reps), ms = median(t_sc, reps);
    char path[96];
    if (sc_ring_is_direct(ring))
        snprintf(path, sizeof path, "direct: one MPI_Iallreduce");
    else if (link > 0)
        snprintf(path, sizeof path, "%ld KiB segments, auto: link %.2f GB/s", segment_kb, link * 1e-9);
    else
        snprintf(path, sizeof path, "%ld KiB segments", segment_kb);
    if (rt.rank == 0)
        printf(
            "allreduce %zu floats (%.3f MiB) on %d ranks, median of %d: MPI_Allreduce without StarPU %.3f ms, "
            "with StarPU idle %.3f ms, with StarPU running %.3f ms, starconv task graph (%s) %.3f ms; task graph / MPI "
            "without StarPU %.2f, / MPI with StarPU %.2f\n",
            n, n * 4.0 / (1 << 20), rt.size, reps, alone * 1e3, idle * 1e3, mm * 1e3, path, ms * 1e3, ms / alone,
            ms / mm);
    sc_tasks_wait_all(rt.comm);
    sc_ring_destroy(ring);
    starpu_data_unregister(h);
    free(v), free(m), free(t_mpi), free(t_sc);
    sc_runtime_shutdown(&rt);
    return 0;
}
