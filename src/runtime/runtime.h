/* The runtime context: MPI, StarPU and StarPU-MPI of one process. */
#ifndef SC_RUNTIME_H
#define SC_RUNTIME_H

#include <mpi.h>

#define SC_PLACEMENT_LEN 512

struct sc_runtime {
    int rank, size;
    int ncpu;  /* CPU workers of this rank */
    int ncuda; /* CUDA workers of this rank */
    /* SC_CUDA_ONLY=1 (experimental) on a rank with CUDA workers: every task
     * that has a CUDA version is kept to them, instead of letting the
     * scheduler put some on the CPU workers, which then do the data
     * loading (CPU only) alone. */
    int cuda_only;
    MPI_Comm comm; /* StarPU-MPI transfers */
    MPI_Comm ctl;  /* the main thread's own collectives (logging, checkpoints) */
    /* Where this rank's CPU workers run, e.g. "2 CPU workers on cores 0-1
     * (bound by the launcher to core 0; ...)" (src/runtime/cpubind.h). */
    char placement[SC_PLACEMENT_LEN];
    char (*placements)[SC_PLACEMENT_LEN]; /* rank 0: every rank's, in rank order; others: NULL */
    struct sc_runtime_state *state;       /* the driver threads and the rest (runtime.c) */
};

/* Denormal floats in the CPU workers' arithmetic: kept, as IEEE 754 and
 * PyTorch compute them, or flushed to zero (FTZ and DAZ), which some CPUs
 * compute far faster where values become tiny. */
enum sc_denormals { SC_DENORMALS_KEEP, SC_DENORMALS_FLUSH };

struct sc_runtime_opts {
    const char *sched; /* StarPU scheduling policy; NULL: STARPU_SCHED or StarPU's default */
    /* Seconds after which a rank that has not been heard from (killed,
     * stopped, node lost) stops the job with a message naming it
     * (src/runtime/watchdog.h).  0: no watchdog; < 0: the default, the
     * environment variable SC_PEER_TIMEOUT if set, else 20.  Rank 0's value
     * applies to all ranks. */
    double peer_timeout;
    /* Seconds without any task, transfer or collective completing, while
     * training with some pending, after which the job stops saying what
     * each rank waits for (src/runtime/stall.h).  0: no stall watchdog;
     * < 0: the default (a multiple of the slowest iteration, at least 60). */
    double stall_timeout;
    enum sc_denormals denormals;
};
void sc_runtime_opts_default(struct sc_runtime_opts *o);

/* Valid StarPU policy names, separated by spaces (for messages). */
const char *sc_runtime_policies(void);
/* 1 if name is a StarPU scheduling policy. */
int sc_runtime_policy_valid(const char *name);

/* MPI (thread-multiple, since the main thread and StarPU-MPI's thread both
 * call MPI), then StarPU, then StarPU-MPI; opts NULL: the defaults. */
int sc_runtime_init(int *argc, char ***argv, const struct sc_runtime_opts *opts, struct sc_runtime *rt);
/* MPI alone, as sc_runtime_init starts it (which then uses it as it is):
 * for measuring MPI before StarPU runs (bench/sc-allreduce-bench). */
int sc_runtime_mpi_init(int *argc, char ***argv);
void sc_runtime_shutdown(struct sc_runtime *rt);

/* All ranks agree on an error: returns the first non-zero err of any rank. */
int sc_runtime_agree(struct sc_runtime *rt, int err);

#endif
