/* Where a rank's CPU workers run: the cores a rank may use, read with hwloc
 * from the binding its launcher gave it and agreed among the ranks of its
 * node, and one core per worker within them.
 *
 * mpirun binds each rank to one core when it starts at most 2 ranks, and to
 * a package above that.  A rank alone on its node, ranks bound to
 * overlapping cores, or bindings that leave cores of the node unused would
 * stack the workers of a rank on too few cores; in those cases the node's
 * cores are split among its ranks instead (SC_CPU_BIND, below).
 *
 * SC_CPU_BIND (environment):
 *   auto      (default) as above; each worker bound to a core of its own
 *   launcher  the launcher's binding as it is; each worker on a core of it
 *   none      no binding by starconv: workers float over the launcher's set */
#ifndef SC_CPUBIND_H
#define SC_CPUBIND_H

#include <mpi.h>

/* ---- the choice, pure (tested in tests/test_cpubind.c) ---- */

enum sc_cpubind_how {
    SC_CPUBIND_KEPT,    /* the launcher's binding (disjoint, covering the node) */
    SC_CPUBIND_ALONE,   /* one rank on the node: all of its cores */
    SC_CPUBIND_OVERLAP, /* bindings overlap: the node's cores split among its ranks */
    SC_CPUBIND_UNUSED,  /* bindings leave cores unused: the node's cores split among its ranks */
    SC_CPUBIND_SHARED,  /* more ranks than cores: every rank on all cores, workers unbound */
};

/* The cores (indexes 0..ncores-1) that rank `me` of the nranks ranks of a
 * node uses, given the cores each rank is bound to (bound[r]: a list such
 * as "0-3,8"; an empty list means unbound, as does one covering every
 * core).  first and count describe the result, a range of cores, except for
 * SC_CPUBIND_KEPT, whose cores are bound[me].  Returns how it was chosen. */
enum sc_cpubind_how sc_cpubind_choose(int ncores, const char *const *bound, int nranks, int me, int *first, int *count);

/* ---- the rank's placement (hwloc) ---- */

struct sc_cpubind;

/* Collective over the ranks of a node (node: from MPI_Comm_split_type):
 * reads the topology and this rank's binding, chooses the rank's cores and
 * binds the process to them (so that StarPU-MPI's progress thread and the
 * main thread run beside the workers).  Returns 0 or SC_ERR_*; *out is NULL
 * where there is nothing to place (SC_CPU_BIND=none, or no hwloc). */
int sc_cpubind_setup(MPI_Comm node, struct sc_cpubind **out);
/* Cores for this rank's workers (>= 1): those of its set, or its share of
 * them where more ranks than cores share the node. */
int sc_cpubind_cores(const struct sc_cpubind *b);
/* Places nworkers workers: one core each where there are enough, round
 * robin otherwise, none under SC_CPUBIND_SHARED.  Then describe() gives the
 * placement line, e.g. "2 CPU workers on cores 0-1 (bound by the launcher
 * to core 0; alone on its node: all of its cores)". */
int sc_cpubind_place(struct sc_cpubind *b, int nworkers);
const char *sc_cpubind_describe(const struct sc_cpubind *b);
/* The rank's cores and the launcher's binding in words, for messages:
 * "core 0, as bound by the launcher", "cores 0-1; bound by the launcher to
 * core 0". */
const char *sc_cpubind_where(const struct sc_cpubind *b);
/* 1 where the rank's cores are what the launcher bound it to (so a wider
 * binding gives it more), 0 where starconv chose them from the node's. */
int sc_cpubind_launcher_limits(const struct sc_cpubind *b);
/* Binds the calling thread to worker w's core (nothing where unplaced). */
void sc_cpubind_worker(const struct sc_cpubind *b, int w);
void sc_cpubind_free(struct sc_cpubind *b);

#endif
