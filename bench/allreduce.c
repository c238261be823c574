/* sc-allreduce-bench [FLOATS] [REPS]: the ring allreduce task graph against
 * MPI_Allreduce on the same vector, on the same ranks, side by side
 * (interleaved, in the same processes).  Prints the median time of each and
 * the ratio (rank 0).
 * sc-allreduce-bench --mpi-only [FLOATS] [REPS]: MPI_Allreduce alone, in
 * processes where StarPU never started (its threads perturb MPI's timing). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/runtime.h"
#include "src/starconv.h"
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

static int mpi_only(int argc, char **argv)
{
    int provided, rank, size;
    MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t n = argc > 2 ? strtoul(argv[2], NULL, 10) : (size_t)1 << 20;
    int reps = argc > 3 ? atoi(argv[3]) : 50;
    if (n < 1 || reps < 1) {
        MPI_Finalize();
        return 2;
    }
    float *m = calloc(n, sizeof(float));
    double *t = malloc(reps * sizeof(double));
    for (int r = -5; r < reps; r++) {
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = now();
        MPI_Allreduce(MPI_IN_PLACE, m, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
        if (r >= 0)
            t[r] = now() - t0;
    }
    qsort(t, reps, sizeof(double), cmp);
    if (rank == 0)
        printf("allreduce %zu floats (%.2f MiB) on %d ranks, median of %d: MPI_Allreduce alone %.3f ms\n", n,
               n * 4.0 / (1 << 20), size, reps, t[reps / 2] * 1e3);
    free(m);
    free(t);
    MPI_Finalize();
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "--mpi-only"))
        return mpi_only(argc, argv);
    struct sc_runtime rt;
    if (sc_runtime_init(&argc, &argv, NULL, &rt)) {
        fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
        return 1;
    }
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : (size_t)1 << 20;
    int reps = argc > 2 ? atoi(argv[2]) : 50, warm = 5;
    if (n < 1 || reps < 1) {
        if (rt.rank == 0)
            fprintf(stderr, "usage: sc-allreduce-bench [FLOATS>0] [REPS>0]\n");
        sc_runtime_shutdown(&rt);
        return 2;
    }
    float *v = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        v[i] = 1.0f;
    double *t_mpi = malloc(reps * sizeof(double)), *t_sc = malloc(reps * sizeof(double));
    starpu_data_handle_t h;
    starpu_vector_data_register(&h, STARPU_MAIN_RAM, (uintptr_t)v, n, sizeof(float));
    struct sc_ring *ring;
    if (sc_ring_create(&ring, h, rt.comm, "bench")) {
        fprintf(stderr, "sc-allreduce-bench: %s\n", sc_last_error());
        return 1;
    }
    float *m = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; i++)
        m[i] = 1.0f;
    /* Interleaved, so that both see the same machine state. */
    for (int r = -warm; r < reps; r++) {
        MPI_Barrier(rt.ctl);
        double t0 = now();
        MPI_Allreduce(MPI_IN_PLACE, m, (int)n, MPI_FLOAT, MPI_SUM, rt.ctl);
        double t1 = now();
        MPI_Barrier(rt.ctl);
        double t2 = now();
        sc_ring_allreduce_submit(ring, NULL);
        sc_tasks_wait_data(h);
        double t3 = now();
        if (r >= 0) {
            t_mpi[r] = t1 - t0;
            t_sc[r] = t3 - t2;
        }
    }
    qsort(t_mpi, reps, sizeof(double), cmp);
    qsort(t_sc, reps, sizeof(double), cmp);
    double mm = t_mpi[reps / 2], ms = t_sc[reps / 2];
    if (rt.rank == 0)
        printf("allreduce %zu floats (%.2f MiB) on %d ranks, median of %d: MPI_Allreduce %.3f ms, "
               "starconv ring %.3f ms, ratio %.2f\n",
               n, n * 4.0 / (1 << 20), rt.size, reps, mm * 1e3, ms * 1e3, ms / mm);
    sc_tasks_wait_all(rt.comm);
    sc_ring_destroy(ring);
    starpu_data_unregister(h);
    free(v), free(m), free(t_mpi), free(t_sc);
    sc_runtime_shutdown(&rt);
    return 0;
}
