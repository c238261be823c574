/* Ring collectives as StarPU-MPI task graphs over chunk handles. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "starconv.h"
#include "tasks.h"

int64_t sc_tags_reserve(int64_t count)
{
    static int64_t next = 1 << 16; /* below: left to tests and tools */
    int64_t first = next;
    next += count;
    return first;
}

struct sc_ring {
    MPI_Comm comm;
    int rank, size;
    int64_t tag;                   /* tags tag .. tag + 2*size - 1 */
    starpu_data_handle_t vec;
    starpu_data_handle_t *chunk;   /* size children of vec */
    starpu_data_handle_t *recv;    /* reduce-scatter step s receives into recv[s] */
    float **recv_mem;
    int chain;                     /* fewer elements than ranks: see chain_reduce */
    char name[64];
};

static int mod(int a, int p) { return ((a % p) + p) % p; }

static void partition_plan(starpu_data_handle_t vec, int parts, starpu_data_handle_t *children)
{
    struct starpu_data_filter f = {
        .filter_func = starpu_vector_filter_block,
        .nchildren = (unsigned)parts,
    };
    starpu_data_partition_plan(vec, &f, children);
}

int sc_ring_create(struct sc_ring **out, starpu_data_handle_t vec, MPI_Comm comm, const char *name)
{
    struct sc_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return sc_error(SC_ERR_NOMEM, "out of memory for a collective plan");
    r->comm = comm;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->size);
    r->vec = vec;
    snprintf(r->name, sizeof(r->name), "%s", name ? name : "vec");
    r->tag = sc_tags_reserve(2 * r->size);
    if (r->size == 1) {
        *out = r;
        return 0;
    }
    /* StarPU cannot split n < P elements into P chunks; such tiny vectors
     * take a chain instead of a ring. */
    r->chain = starpu_vector_get_nx(vec) < (size_t)r->size;
    r->chunk = calloc(r->size, sizeof(*r->chunk));
    r->recv = calloc(r->size - 1, sizeof(*r->recv));
    r->recv_mem = calloc(r->size - 1, sizeof(*r->recv_mem));
    if (!r->chunk || !r->recv || !r->recv_mem) {
        sc_ring_destroy(r);
        return sc_error(SC_ERR_NOMEM, "out of memory for a collective plan");
    }
    if (!r->chain)
        partition_plan(vec, r->size, r->chunk);
    for (int s = 0; s < (r->chain ? 1 : r->size - 1); s++) {
        size_t nx = r->chain ? starpu_vector_get_nx(vec) : starpu_vector_get_nx(r->chunk[mod(r->rank - s - 1, r->size)]);
        r->recv_mem[s] = malloc((nx ? nx : 1) * sizeof(float));
        if (!r->recv_mem[s]) {
            sc_ring_destroy(r);
            return sc_error(SC_ERR_NOMEM, "out of memory for a receive buffer");
        }
        starpu_vector_data_register(&r->recv[s], STARPU_MAIN_RAM, (uintptr_t)r->recv_mem[s], nx,
                                    sizeof(float));
    }
    *out = r;
    return 0;
}

void sc_ring_destroy(struct sc_ring *r)
{
    if (!r)
        return;
    if (r->chunk && r->chunk[0])
        starpu_data_partition_clean(r->vec, r->size, r->chunk);
    for (int s = 0; r->recv && s < (r->chain ? 1 : r->size - 1); s++) {
        if (r->recv[s])
            starpu_data_unregister(r->recv[s]);
        free(r->recv_mem[s]);
    }
    free(r->chunk);
    free(r->recv);
    free(r->recv_mem);
    free(r);
}

void sc_ring_owned_range(const struct sc_ring *r, size_t *first, size_t *count)
{
    /* starpu_vector_filter_block gives the first n % P chunks one more element. */
    size_t n = starpu_vector_get_nx(r->vec), p = r->size;
    if (r->chain) {
        *first = 0;
        *count = r->rank == 0 ? n : 0;
        return;
    }
    size_t c = r->size == 1 ? 0 : (size_t)mod(r->rank + 1, r->size);
    size_t base = n / p, extra = n % p;
    *count = base + (c < extra);
    *first = c * base + (c < extra ? c : extra);
}

/* StarPU-MPI 1.3's progress thread polls without sleeping while a receive
 * is posted, and a receive is posted as soon as its buffer is writable: at
 * submission, possibly an iteration ahead.  On a machine with as many
 * processes as cores, that polling takes the cores the workers need.  This
 * task (no kernel, dependencies only) holds the receive buffer until the
 * local data it will be combined with exists, which is when the peer's
 * message is due too, so the polling covers the transfer only. */
static struct starpu_codelet cl_recv_gate = {
    .where = STARPU_NOWHERE,
    .nbuffers = 2,
    .modes = {STARPU_W, STARPU_R},
    .name = "recv_gate",
};

static int gate_receive(starpu_data_handle_t recv_buffer, starpu_data_handle_t ready)
{
    int err = starpu_task_insert(&cl_recv_gate, STARPU_W, recv_buffer, STARPU_R, ready, 0);
    return err ? sc_error(SC_ERR_RUNTIME, "task submission failed (%d)", err) : 0;
}

static int transfer_failed(const char *what, int err)
{
    return sc_error(SC_ERR_RUNTIME, "StarPU-MPI refused a %s (error %d)", what, err);
}

/* Chunk c's tags: reduce-scatter and allgather transfers of one chunk never
 * share a tag, so messages of concurrent collectives cannot be confused. */
static int reduce_scatter(struct sc_ring *r)
{
    int p = r->size, me = r->rank, next = mod(me + 1, p), prev = mod(me - 1, p);
    char name[96];
    for (int s = 0; s < p - 1; s++) {
        int send_c = mod(me - s, p), recv_c = mod(me - s - 1, p);
        int err = starpu_mpi_isend_detached(r->chunk[send_c], next, r->tag + send_c, r->comm, NULL, NULL);
        if (err)
            return transfer_failed("send", err);
        if ((err = gate_receive(r->recv[s], r->chunk[recv_c])))
            return err;
        err = starpu_mpi_irecv_detached(r->recv[s], prev, r->tag + recv_c, r->comm, NULL, NULL);
        if (err)
            return transfer_failed("receive", err);
        snprintf(name, sizeof(name), "%s.reduce_scatter", r->name);
        if ((err = sc_insert_accumulate(r->chunk[recv_c], r->recv[s], name)))
            return err;
    }
    return 0;
}

/* Allgather of the chunks of 'chunks' (a partition of some vector like the
 * ring's), starting from each rank's owned chunk (r+1). */
static int allgather(struct sc_ring *r, starpu_data_handle_t *chunks)
{
    int p = r->size, me = r->rank, next = mod(me + 1, p), prev = mod(me - 1, p);
    for (int s = 0; s < p - 1; s++) {
        int send_c = mod(me + 1 - s, p), recv_c = mod(me - s, p);
        int err = starpu_mpi_isend_detached(chunks[send_c], next, r->tag + p + send_c, r->comm, NULL, NULL);
        if (err)
            return transfer_failed("send", err);
        err = starpu_mpi_irecv_detached(chunks[recv_c], prev, r->tag + p + recv_c, r->comm, NULL, NULL);
        if (err)
            return transfer_failed("receive", err);
    }
    return 0;
}

/* The chain for tiny vectors: a reduction from rank P-1 down to rank 0,
 * then a broadcast back up; rank 0 owns the whole vector. */
static int chain_reduce(struct sc_ring *r)
{
    int me = r->rank, err;
    char name[96];
    snprintf(name, sizeof(name), "%s.reduce", r->name);
    if (me < r->size - 1) {
        if ((err = gate_receive(r->recv[0], r->vec)))
            return err;
        if ((err = starpu_mpi_irecv_detached(r->recv[0], me + 1, r->tag, r->comm, NULL, NULL)))
            return transfer_failed("receive", err);
        if ((err = sc_insert_accumulate(r->vec, r->recv[0], name)))
            return err;
    }
    if (me > 0 && (err = starpu_mpi_isend_detached(r->vec, me - 1, r->tag, r->comm, NULL, NULL)))
        return transfer_failed("send", err);
    return 0;
}

static int chain_broadcast(struct sc_ring *r, starpu_data_handle_t target)
{
    int me = r->rank, err;
    if (me > 0 && (err = starpu_mpi_irecv_detached(target, me - 1, r->tag + 1, r->comm, NULL, NULL)))
        return transfer_failed("receive", err);
    if (me < r->size - 1 && (err = starpu_mpi_isend_detached(target, me + 1, r->tag + 1, r->comm, NULL, NULL)))
        return transfer_failed("send", err);
    return 0;
}

int sc_ring_allreduce_submit(struct sc_ring *r)
{
    if (r->size == 1)
        return 0;
    if (r->chain) {
        int err = chain_reduce(r);
        return err ? err : chain_broadcast(r, r->vec);
    }
    starpu_data_partition_submit(r->vec, r->size, r->chunk);
    int err = reduce_scatter(r);
    if (!err)
        err = allgather(r, r->chunk);
    starpu_data_unpartition_submit(r->vec, r->size, r->chunk, STARPU_MAIN_RAM);
    return err;
}

struct sc_sgd_sync {
    struct sc_ring *ring;
    starpu_data_handle_t weights, momentum;
    starpu_data_handle_t *wchunk, *vchunk;
    char name[80];
};

int sc_sgd_sync_create(struct sc_sgd_sync **out, struct sc_ring *ring, starpu_data_handle_t weights,
                       starpu_data_handle_t momentum)
{
    struct sc_sgd_sync *s = calloc(1, sizeof(*s));
    if (!s)
        return sc_error(SC_ERR_NOMEM, "out of memory for an optimizer plan");
    s->ring = ring;
    s->weights = weights;
    s->momentum = momentum;
    snprintf(s->name, sizeof(s->name), "%s.sgd", ring->name);
    if (ring->size > 1 && !ring->chain) {
        s->wchunk = calloc(ring->size, sizeof(*s->wchunk));
        s->vchunk = calloc(ring->size, sizeof(*s->vchunk));
        if (!s->wchunk || !s->vchunk) {
            sc_sgd_sync_destroy(s);
            return sc_error(SC_ERR_NOMEM, "out of memory for an optimizer plan");
        }
        partition_plan(weights, ring->size, s->wchunk);
        partition_plan(momentum, ring->size, s->vchunk);
    }
    *out = s;
    return 0;
}

void sc_sgd_sync_destroy(struct sc_sgd_sync *s)
{
    if (!s)
        return;
    if (s->wchunk && s->wchunk[0])
        starpu_data_partition_clean(s->weights, s->ring->size, s->wchunk);
    if (s->vchunk && s->vchunk[0])
        starpu_data_partition_clean(s->momentum, s->ring->size, s->vchunk);
    free(s->wchunk);
    free(s->vchunk);
    free(s);
}

int sc_sgd_sync_submit(struct sc_sgd_sync *s, const struct sc_sgd_args *sgd)
{
    struct sc_ring *r = s->ring;
    if (r->size == 1)
        return sc_insert_sgd(sgd, s->weights, s->momentum, r->vec, s->name);
    if (r->chain) {
        int err = chain_reduce(r);
        if (!err && r->rank == 0)
            err = sc_insert_sgd(sgd, s->weights, s->momentum, r->vec, s->name);
        return err ? err : chain_broadcast(r, s->weights);
    }
    int p = r->size, own = mod(r->rank + 1, p);
    starpu_data_partition_submit(r->vec, p, r->chunk);
    int err = reduce_scatter(r);
    starpu_data_partition_submit(s->weights, p, s->wchunk);
    starpu_data_partition_submit(s->momentum, p, s->vchunk);
    if (!err)
        err = sc_insert_sgd(sgd, s->wchunk[own], s->vchunk[own], r->chunk[own], s->name);
    if (!err)
        err = allgather(r, s->wchunk);
    starpu_data_unpartition_submit(s->momentum, p, s->vchunk, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(s->weights, p, s->wchunk, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(r->vec, p, r->chunk, STARPU_MAIN_RAM);
    return err;
}

void sc_tasks_throttle(unsigned n)
{
    starpu_task_wait_for_n_submitted(n);
}

void sc_tasks_wait_all(MPI_Comm comm)
{
    starpu_task_wait_for_all();
    starpu_mpi_wait_for_all(comm);
}
