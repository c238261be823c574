/* The ring's insides, shared by its collectives (collectives.c) and the
 * optimizer plan over it (sgd_sync.c); nothing outside tasks/ sees them. */
#ifndef SC_TASKS_RING_PRIVATE_H
#define SC_TASKS_RING_PRIVATE_H

#include "tasks/tasks.h"

struct sc_ring {
    MPI_Comm comm;
    int rank, size;        /* within the group */
    int *group;            /* the group's ranks in comm (NULL: all of comm) */
    uint64_t sent;         /* bytes this rank has sent */
    uint64_t sent_partial; /* of which partial sums of reductions */
    int nseg;              /* segments per chunk */
    int64_t tag;           /* reduce-scatter: tag + piece; allgather: tag + P*K + piece */
    starpu_data_handle_t vec;
    starpu_data_handle_t *piece; /* P*K children of vec: chunk c, segment j is piece c*K + j */
    starpu_data_handle_t *recv;  /* reduce-scatter step s, segment j receives into recv[s*K + j] */
    void **recv_mem;
    int nrecv;
    /* --grad-dtype bf16: the partial sums travel as bf16 (recv then holds
     * bf16 too); step s, segment j packs what it sends into wire[s*K + j],
     * a buffer of its own so that no pack waits for an earlier send. */
    int bf16;
    starpu_data_handle_t *wire;
    void **wire_mem;
    int chain;                /* fewer elements than ranks: see chain_reduce */
    struct sc_direct *direct; /* its communicator for small vectors (NULL: none) */
    int use_direct;           /* the vector is small: every collective is one direct task */
    int window;               /* segments in flight per step (0: all; see wait_credit) */
    char name[64];
    char comm_name[80]; /* of its transfers, in traces */
    char acc_name[80];  /* of its accumulate tasks (StarPU keeps the pointer) */
};

static inline int sc_ring_mod(int a, int p)
{
    return ((a % p) + p) % p;
}

/* The ring's pieces of a vector as StarPU's partition plan. */
void sc_ring_partition_plan(starpu_data_handle_t vec, int parts, starpu_data_handle_t *children);
/* The steps of the ring over r->piece (partitioned): the reduce-scatter,
 * after which this rank's chunk holds the sum; the allgather of pieces. */
int sc_ring_reduce_scatter(struct sc_ring *r, const struct sc_task_opts *opts);
int sc_ring_allgather(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t *pieces);
/* Fewer elements than ranks: the sum to rank 0 along a chain, and target
 * from rank 0 to all. */
int sc_ring_chain_reduce(struct sc_ring *r, const struct sc_task_opts *opts);
int sc_ring_chain_broadcast(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t target);

#endif
