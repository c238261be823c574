/* Ring collectives as StarPU-MPI task graphs over chunk handles. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/progress.h"
#include "base/ring_segment.h"
#include "tasks.h"

/* Atomic, so that two threads that reserve at once get disjoint ranges.
 * Ranks agree on a collective's tags only if they reserve in the same
 * order, which is the caller's part (the network is built the same way on
 * every rank). */
static _Atomic int64_t next_tag = 1 << 16; /* below: left to tests and tools */

int64_t sc_tags_reserve(int64_t count)
{
    return atomic_fetch_add(&next_tag, count);
}

/* Each rank's chunk is cut into K segments (K from the chunk size only, so
 * every rank agrees) so that the transfer of one segment overlaps the
 * accumulation of the previous one, and so that the window (wait_credit)
 * has something to hold back.  Each segment costs a StarPU-MPI message
 * (sc_ring_opts in tasks.h says what that trades). */
#define SEGMENT_BYTES_DEFAULT ((size_t)SC_RING_SEGMENT_KB_DEFAULT << 10)
#define MAX_SEGMENTS          8
/* Up to this many KiB a vector takes the direct path (sc_ring_opts): one
 * MPI collective instead of the ring's messages, each of which costs a
 * task and a request (docs/results.md, "allreduce against MPI"). */
#define DIRECT_KB_DEFAULT SC_RING_DIRECT_KB_DEFAULT

#define PROBE_BYTES SC_LINK_PROBE_BYTES
#define PROBE_REPS  5

static int link_probe(MPI_Comm comm, double *bytes_per_s)
{
    int rank, size;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    char *out = calloc(PROBE_BYTES, 1), *in = calloc(PROBE_BYTES, 1);
    int ok = out && in;
    MPI_Allreduce(MPI_IN_PLACE, &ok, 1, MPI_INT, MPI_MIN, comm);
    double best = 1e30;
    /* The first round is a warm-up (connections, pages). */
    for (int r = 0; ok && r <= PROBE_REPS; r++) {
        MPI_Barrier(comm);
        double t0 = MPI_Wtime();
        MPI_Sendrecv(out, (int)PROBE_BYTES, MPI_BYTE, (rank + 1) % size, 0, in, (int)PROBE_BYTES, MPI_BYTE,
                     (rank + size - 1) % size, 0, comm, MPI_STATUS_IGNORE);
        double t = MPI_Wtime() - t0;
        if (r > 0 && t < best)
            best = t;
    }
    free(out);
    free(in);
    if (!ok)
        return sc_error(SC_ERR_NOMEM, "out of memory for the link probe (%zu bytes)", 2 * PROBE_BYTES);
    MPI_Allreduce(MPI_IN_PLACE, &best, 1, MPI_DOUBLE, MPI_MAX, comm);
    *bytes_per_s = PROBE_BYTES / (best > 1e-9 ? best : 1e-9);
    return 0;
}

int sc_link_segment_kb(MPI_Comm comm, int *segment_kb, double *bytes_per_s)
{
    int size, err = 0;
    MPI_Comm_size(comm, &size);
    *bytes_per_s = 0;
    if (size > 1)
        err = link_probe(comm, bytes_per_s);
    *segment_kb = sc_ring_segment_kb_for(*bytes_per_s);
    return err;
}

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

static int mod(int a, int p)
{
    return ((a % p) + p) % p;
}

/* The rank in comm of the group's member i. */
static int peer(const struct sc_ring *r, int i)
{
    return r->group ? r->group[i] : i;
}

/* A send of the ring, counted. */
static int ring_send(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t h, int member,
                     int64_t tag)
{
    r->sent += (uint64_t)starpu_vector_get_nx(h) * starpu_vector_get_elemsize(h);
    return sc_send_piece(opts, h, peer(r, member), tag, r->comm, r->comm_name);
}

int sc_vector_new(starpu_data_handle_t *h, void **mem, size_t n, size_t elem)
{
    size_t bytes = (n ? n : 1) * elem;
    if (starpu_malloc_flags(mem, bytes, STARPU_MALLOC_PINNED)) {
        *mem = NULL;
        *h = NULL;
        return sc_error(SC_ERR_NOMEM, "out of memory (%zu bytes)", bytes);
    }
    memset(*mem, 0, bytes);
    starpu_vector_data_register(h, STARPU_MAIN_RAM, (uintptr_t)*mem, (uint32_t)(n ? n : 1), elem);
    return 0;
}

void sc_vector_free(starpu_data_handle_t h, void *mem)
{
    if (!h)
        return; /* sc_vector_new registers whatever it allocates */
    size_t bytes = (size_t)starpu_vector_get_nx(h) * starpu_vector_get_elemsize(h);
    starpu_data_unregister(h);
    starpu_free_flags(mem, bytes, STARPU_MALLOC_PINNED);
}

static void partition_plan(starpu_data_handle_t vec, int parts, starpu_data_handle_t *children)
{
    struct starpu_data_filter f = {
        .filter_func = starpu_vector_filter_block,
        .nchildren = (unsigned)parts,
    };
    starpu_data_partition_plan(vec, &f, children);
}

static int ring_alloc(struct sc_ring *r)
{
    int pieces = r->size * r->nseg;
    size_t elem = r->bf16 ? sizeof(uint16_t) : sizeof(float);
    r->nrecv = r->chain ? 1 : (r->size - 1) * r->nseg;
    r->piece = calloc(pieces, sizeof(*r->piece));
    r->recv = calloc(r->nrecv, sizeof(*r->recv));
    r->recv_mem = calloc(r->nrecv, sizeof(*r->recv_mem));
    r->wire = calloc(r->nrecv, sizeof(*r->wire));
    r->wire_mem = calloc(r->nrecv, sizeof(*r->wire_mem));
    if (!r->piece || !r->recv || !r->recv_mem || !r->wire || !r->wire_mem)
        return sc_error(SC_ERR_NOMEM, "out of memory for a collective plan");
    if (!r->chain)
        partition_plan(r->vec, pieces, r->piece);
    for (int i = 0; i < r->nrecv; i++) {
        /* Step s, segment j receives chunk (r-s-1), segment j, and sends
         * chunk (r-s), segment j. */
        int s = i / r->nseg, j = i % r->nseg, err;
        size_t nx = r->chain ? starpu_vector_get_nx(r->vec)
                             : starpu_vector_get_nx(r->piece[mod(r->rank - s - 1, r->size) * r->nseg + j]);
        size_t nx_sent = r->chain ? nx : starpu_vector_get_nx(r->piece[mod(r->rank - s, r->size) * r->nseg + j]);
        if ((err = sc_vector_new(&r->recv[i], &r->recv_mem[i], nx, elem)) ||
            (r->bf16 && (err = sc_vector_new(&r->wire[i], &r->wire_mem[i], nx_sent, elem))))
            return err;
    }
    return 0;
}

int sc_ring_create(struct sc_ring **out, starpu_data_handle_t vec, MPI_Comm comm, const struct sc_ring_opts *opts,
                   const char *name)
{
    struct sc_ring *r = calloc(1, sizeof(*r));
    if (!r)
        return sc_error(SC_ERR_NOMEM, "out of memory for a collective plan");
    r->comm = comm;
    MPI_Comm_rank(comm, &r->rank);
    MPI_Comm_size(comm, &r->size);
    if (opts && opts->group) {
        int me = -1;
        if (!(r->group = malloc((size_t)opts->group_size * sizeof(int)))) {
            free(r);
            return sc_error(SC_ERR_NOMEM, "out of memory for a collective plan");
        }
        for (int i = 0; i < opts->group_size; i++) {
            r->group[i] = opts->group[i];
            if (opts->group[i] == r->rank)
                me = i;
        }
        if (me < 0) {
            int rank = r->rank;
            free(r->group);
            free(r);
            return sc_error(SC_ERR_ARG, "%s: rank %d is not in the group of its collective", name ? name : "ring",
                            rank);
        }
        r->rank = me;
        r->size = opts->group_size;
    }
    r->vec = vec;
    r->bf16 = opts && opts->wire_bf16;
    snprintf(r->name, sizeof(r->name), "%s", name ? name : "vec");
    snprintf(r->comm_name, sizeof(r->comm_name), "%s.grad_allreduce", r->name);
    snprintf(r->acc_name, sizeof(r->acc_name), "%s.reduce_scatter", r->name);
    size_t n = starpu_vector_get_nx(vec);
    size_t chunk_bytes = n / r->size * sizeof(float);
    size_t segment_bytes = opts && opts->segment_bytes ? opts->segment_bytes : SEGMENT_BYTES_DEFAULT;
    r->window = opts && opts->window > 0 ? opts->window : 0;
    r->nseg = (int)(chunk_bytes / segment_bytes);
    r->nseg = r->nseg < 1 ? 1 : r->nseg > MAX_SEGMENTS ? MAX_SEGMENTS : r->nseg;
    r->tag = sc_tags_reserve(2 * (int64_t)r->size * r->nseg);
    int direct_kb = opts && opts->direct_kb ? opts->direct_kb : DIRECT_KB_DEFAULT, err;
    if (direct_kb > 0) { /* on every rank alike, whatever its group's vector */
        if ((err = sc_direct_create(&r->direct, comm, r->group ? r->group[0] : 0, r->rank, r->comm_name))) {
            sc_ring_destroy(r);
            return err;
        }
        r->use_direct = n * sizeof(float) <= (size_t)direct_kb << 10;
    }
    if (r->size == 1 || r->use_direct) {
        *out = r;
        return 0;
    }
    /* StarPU cannot split n < P elements into P chunks; such tiny vectors
     * take a chain instead of a ring. */
    r->chain = n < (size_t)r->size;
    err = ring_alloc(r);
    if (err) {
        sc_ring_destroy(r);
        return err;
    }
    *out = r;
    return 0;
}

void sc_ring_destroy(struct sc_ring *r)
{
    if (!r)
        return;
    if (r->piece && r->piece[0])
        starpu_data_partition_clean(r->vec, r->size * r->nseg, r->piece);
    for (int i = 0; r->recv && i < r->nrecv; i++)
        sc_vector_free(r->recv[i], r->recv_mem[i]);
    for (int i = 0; r->wire && i < r->nrecv; i++)
        sc_vector_free(r->wire[i], r->wire_mem[i]);
    free(r->piece);
    free(r->recv);
    free(r->recv_mem);
    free(r->wire);
    free(r->wire_mem);
    free(r->group);
    sc_direct_destroy(r->direct);
    free(r);
}

int sc_ring_is_direct(const struct sc_ring *r)
{
    return r->use_direct;
}

uint64_t sc_ring_bytes_sent(const struct sc_ring *r)
{
    return r->sent;
}

uint64_t sc_ring_partial_bytes_sent(const struct sc_ring *r)
{
    return r->sent_partial;
}

void sc_ring_owned_range(const struct sc_ring *r, size_t *first, size_t *count)
{
    size_t n = starpu_vector_get_nx(r->vec);
    if (r->size == 1 || r->chain || r->use_direct) {
        *first = 0;
        *count = r->rank == 0 ? n : 0;
        return;
    }
    /* starpu_vector_filter_block gives the first n % parts pieces one more
     * element; the owned chunk is pieces [(r+1)K, (r+2)K). */
    size_t parts = (size_t)r->size * r->nseg, base = n / parts, extra = n % parts;
    size_t p0 = (size_t)mod(r->rank + 1, r->size) * r->nseg, p1 = p0 + r->nseg;
    size_t start0 = p0 * base + (p0 < extra ? p0 : extra), start1 = p1 * base + (p1 < extra ? p1 : extra);
    *first = start0;
    *count = start1 - start0;
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

/* A task of one of the dependency-only codelets here (modes: the held
 * handle's, then R), so that what comes after it on 'held' waits for 'ready'. */
static int hold_until(struct starpu_codelet *cl, starpu_data_handle_t held, starpu_data_handle_t ready)
{
    int err = starpu_task_insert(cl, cl->modes[0], held, STARPU_R, ready, 0);
    return err ? sc_error(SC_ERR_RUNTIME, "task submission failed (%d)", err) : 0;
}

static int gate_receive(starpu_data_handle_t recv_buffer, starpu_data_handle_t ready)
{
    return hold_until(&cl_recv_gate, recv_buffer, ready);
}

/* Credits: segment j of a step is sent once segment j - WINDOW of the same
 * step has arrived from the peer (whose sends mirror ours), so that a
 * collective never has more than WINDOW segments queued in MPI and the
 * network.  Without it, a large vector's segments all enter the same FIFO
 * socket at once and a later, more urgent collective's small messages wait
 * behind all of them. */
static struct starpu_codelet cl_send_credit = {
    .where = STARPU_NOWHERE,
    .nbuffers = 2,
    .modes = {STARPU_RW, STARPU_R},
    .name = "send_credit",
};

static int wait_credit(const struct sc_ring *r, int j, starpu_data_handle_t to_send, starpu_data_handle_t *arrivals)
{
    int w = r->window;
    return w <= 0 || j < w ? 0 : hold_until(&cl_send_credit, to_send, arrivals[j - w]);
}

static void (*wake_hook)(void);

void sc_tasks_set_wake_hook(void (*fn)(void))
{
    wake_hook = fn;
    sc_direct_set_wake_hook(fn);
}

/* ---- transfers, with trace records while a trace is recorded ----
 *
 * A transfer's record spans from the moment StarPU-MPI can post it (its
 * buffer is ready: a no-op task on the buffer marks that moment) to its
 * completion callback. */

static struct starpu_codelet cl_ready_r = {
    .where = STARPU_NOWHERE, .nbuffers = 1, .modes = {STARPU_R}, .name = "transfer_ready"};
static struct starpu_codelet cl_ready_w = {
    .where = STARPU_NOWHERE, .nbuffers = 1, .modes = {STARPU_W}, .name = "transfer_ready"};

static void transfer_posted(void *arg)
{
    ((struct sc_trace_rec *)arg)->start = starpu_timing_now();
}

/* A transfer's callback argument: its trace record, or, while the stall
 * watchdog is on (from before the first transfer to the end), its entry
 * among what the rank waits for, which holds the record. */
static void *transfer_arg(struct sc_trace_rec *rec, int kind, const char *name, int peer, int64_t tag, MPI_Comm comm)
{
    if (!sc_progress_on)
        return rec;
    if (comm != MPI_COMM_WORLD) { /* the watchdog names the world's ranks */
        MPI_Group g, world;
        MPI_Comm_group(comm, &g);
        MPI_Comm_group(MPI_COMM_WORLD, &world);
        MPI_Group_translate_ranks(g, 1, &peer, world, &peer);
        MPI_Group_free(&g);
        MPI_Group_free(&world);
    }
    return sc_progress_add(kind, name, peer, tag, NULL, 0, rec);
}

static struct sc_trace_rec *transfer_done(void *arg)
{
    return sc_progress_on ? sc_progress_done(arg) : arg;
}

static void sent(void *arg)
{
    struct sc_trace_rec *rec = transfer_done(arg);
    if (rec)
        rec->end = starpu_timing_now();
}

static void received(void *arg)
{
    struct sc_trace_rec *rec = transfer_done(arg);
    if (rec)
        rec->end = starpu_timing_now();
    if (wake_hook)
        wake_hook();
}

static int transfer_failed(const char *what, int err)
{
    return sc_error(SC_ERR_RUNTIME, "StarPU-MPI refused a %s (error %d)", what, err);
}

static struct sc_trace_rec *transfer_record(struct starpu_codelet *ready, starpu_data_handle_t h, const char *name)
{
    struct sc_trace_rec *rec = sc_trace_new_rec(name, SC_REC_COMM);
    if (rec && starpu_task_insert(ready, ready->modes[0], h, STARPU_CALLBACK_WITH_ARG_NFREE, transfer_posted, rec, 0))
        rec->start = -1; /* no start: dropped when collected */
    return rec;
}

int sc_send_piece(const struct sc_task_opts *opts, starpu_data_handle_t h, int dest, int64_t tag, MPI_Comm comm,
                  const char *name)
{
    if (sc_stall_inject_send(name))
        return 0; /* tests/test_stall.sh: a message never posted */
    struct sc_trace_rec *rec = transfer_record(&cl_ready_r, h, name);
    if (rec)
        rec->bytes = (double)starpu_data_get_size(h);
    void *arg = transfer_arg(rec, SC_WAIT_SEND, name, dest, tag, comm);
    int err = starpu_mpi_isend_detached_prio(h, dest, tag, sc_task_opts_priority(opts), comm, sent, arg);
    return err ? transfer_failed("send", err) : 0;
}

int sc_recv_piece(starpu_data_handle_t h, int src, int64_t tag, MPI_Comm comm, const char *name)
{
    struct sc_trace_rec *rec = transfer_record(&cl_ready_w, h, name);
    void *arg = transfer_arg(rec, SC_WAIT_RECV, name, src, tag, comm);
    int err = starpu_mpi_irecv_detached(h, src, tag, comm, received, arg);
    return err ? transfer_failed("receive", err) : 0;
}

/* A partial sum to a peer: as it is, or packed into bf16 in wire (the
 * ring's --grad-dtype bf16). */
static int send_partial(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t h,
                        starpu_data_handle_t wire, int member, int64_t tag)
{
    int err;
    if (r->bf16 && (err = sc_insert_pack_bf16(opts, h, wire, r->acc_name)))
        return err;
    uint64_t before = r->sent;
    err = ring_send(r, opts, r->bf16 ? wire : h, member, tag);
    r->sent_partial += r->sent - before;
    return err;
}

/* sum += received, which is bf16 under --grad-dtype bf16: added in fp32. */
static int add_received(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t sum,
                        starpu_data_handle_t received)
{
    return r->bf16 ? sc_insert_accumulate_bf16(opts, sum, received, r->acc_name)
                   : sc_insert_accumulate(opts, sum, received, r->acc_name);
}

/* Each piece has its own tag in each phase, so messages of one collective
 * (and of concurrent ones, which have other tags) cannot be confused. */
static int reduce_scatter(struct sc_ring *r, const struct sc_task_opts *opts)
{
    int p = r->size, K = r->nseg, me = r->rank, next = mod(me + 1, p), prev = mod(me - 1, p), err;
    for (int s = 0; s < p - 1; s++)
        for (int j = 0; j < K; j++) {
            int to = mod(me - s, p) * K + j, from = mod(me - s - 1, p) * K + j;
            starpu_data_handle_t buf = r->recv[s * K + j];
            if ((err = wait_credit(r, j, r->piece[to], &r->recv[s * K])) ||
                (err = send_partial(r, opts, r->piece[to], r->wire[s * K + j], next, r->tag + to)) ||
                (err = gate_receive(buf, r->piece[from])) ||
                (err = sc_recv_piece(buf, peer(r, prev), r->tag + from, r->comm, r->comm_name)))
                return err;
            if ((err = add_received(r, opts, r->piece[from], buf)))
                return err;
        }
    return 0;
}

/* Allgather of the pieces of 'pieces' (a partition of some vector like the
 * ring's), starting from each rank's owned chunk (r+1), received straight
 * into place. */
static int allgather(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t *pieces)
{
    int p = r->size, K = r->nseg, me = r->rank, next = mod(me + 1, p), prev = mod(me - 1, p), err;
    int64_t tag = r->tag + (int64_t)p * K;
    for (int s = 0; s < p - 1; s++)
        for (int j = 0; j < K; j++) {
            int to = mod(me + 1 - s, p) * K + j, from = mod(me - s, p) * K + j, own = mod(me + 1, p) * K + j;
            /* Posted when our own chunk is final, as the peers' are then
             * due too (see gate_receive). */
            if ((err = wait_credit(r, j, pieces[to], &pieces[mod(me - s, p) * K])) ||
                (err = ring_send(r, opts, pieces[to], next, tag + to)) ||
                (err = gate_receive(pieces[from], pieces[own])) ||
                (err = sc_recv_piece(pieces[from], peer(r, prev), tag + from, r->comm, r->comm_name)))
                return err;
        }
    return 0;
}

/* The chain for tiny vectors: a reduction from rank P-1 down to rank 0,
 * then a broadcast back up; rank 0 owns the whole vector. */
static int chain_reduce(struct sc_ring *r, const struct sc_task_opts *opts)
{
    int me = r->rank, err;
    if (me < r->size - 1) {
        if ((err = gate_receive(r->recv[0], r->vec)))
            return err;
        if ((err = sc_recv_piece(r->recv[0], peer(r, me + 1), r->tag, r->comm, r->comm_name)))
            return err;
        if ((err = add_received(r, opts, r->vec, r->recv[0])))
            return err;
    }
    return me > 0 ? send_partial(r, opts, r->vec, r->wire[0], me - 1, r->tag) : 0;
}

static int chain_broadcast(struct sc_ring *r, const struct sc_task_opts *opts, starpu_data_handle_t target)
{
    int me = r->rank, err;
    if (me > 0 && (err = sc_recv_piece(target, peer(r, me - 1), r->tag + 1, r->comm, r->comm_name)))
        return err;
    return me < r->size - 1 ? ring_send(r, opts, target, me + 1, r->tag + 1) : 0;
}

int sc_ring_allreduce_submit(struct sc_ring *r, const struct sc_task_opts *opts)
{
    if (r->size == 1)
        return 0;
    if (r->use_direct) {
        r->sent += starpu_vector_get_nx(r->vec) * sizeof(float);
        r->sent_partial += starpu_vector_get_nx(r->vec) * sizeof(float);
        return sc_direct_allreduce_submit(r->direct, r->vec);
    }
    if (r->chain) {
        int err = chain_reduce(r, opts);
        return err ? err : chain_broadcast(r, opts, r->vec);
    }
    int pieces = r->size * r->nseg;
    starpu_data_partition_submit(r->vec, pieces, r->piece);
    int err = reduce_scatter(r, opts);
    if (!err)
        err = allgather(r, opts, r->piece);
    starpu_data_unpartition_submit(r->vec, pieces, r->piece, STARPU_MAIN_RAM);
    return err;
}

struct sc_sgd_sync {
    struct sc_ring *ring;
    starpu_data_handle_t weights, momentum;
    starpu_data_handle_t *wpiece, *vpiece;
    struct sc_nccl *nccl; /* NULL: the ring's tasks */
    char name[80];
};

void sc_sgd_sync_use_nccl(struct sc_sgd_sync *s, struct sc_nccl *n)
{
    s->nccl = n;
}

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
    if (ring->size > 1 && !ring->chain && !ring->use_direct) {
        int pieces = ring->size * ring->nseg;
        s->wpiece = calloc(pieces, sizeof(*s->wpiece));
        s->vpiece = calloc(pieces, sizeof(*s->vpiece));
        if (!s->wpiece || !s->vpiece) {
            sc_sgd_sync_destroy(s);
            return sc_error(SC_ERR_NOMEM, "out of memory for an optimizer plan");
        }
        partition_plan(weights, pieces, s->wpiece);
        partition_plan(momentum, pieces, s->vpiece);
    }
    *out = s;
    return 0;
}

void sc_sgd_sync_destroy(struct sc_sgd_sync *s)
{
    if (!s)
        return;
    int pieces = s->ring->size * s->ring->nseg;
    if (s->wpiece && s->wpiece[0])
        starpu_data_partition_clean(s->weights, pieces, s->wpiece);
    if (s->vpiece && s->vpiece[0])
        starpu_data_partition_clean(s->momentum, pieces, s->vpiece);
    free(s->wpiece);
    free(s->vpiece);
    free(s);
}

int sc_sgd_sync_reduce_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, struct sc_gate *gate)
{
    struct sc_ring *r = s->ring;
    int err = 0;
    if (r->size == 1)
        return gate ? sc_gate_check_submit(gate, opts, r->vec) : 0;
    if (s->nccl) {
        err = sc_nccl_allreduce_submit(s->nccl, opts, r->vec, r->comm_name);
        return !err && gate ? sc_gate_check_submit(gate, opts, r->vec) : err;
    }
    if (r->chain || r->use_direct) {
        r->sent += r->use_direct && r->rank ? starpu_vector_get_nx(r->vec) * sizeof(float) : 0;
        r->sent_partial += r->use_direct && r->rank ? starpu_vector_get_nx(r->vec) * sizeof(float) : 0;
        err = r->use_direct ? sc_direct_reduce_submit(r->direct, r->vec) : chain_reduce(r, opts);
        return !err && gate && r->rank == 0 ? sc_gate_check_submit(gate, opts, r->vec) : err;
    }
    int pieces = r->size * r->nseg, own = mod(r->rank + 1, r->size) * r->nseg;
    starpu_data_partition_submit(r->vec, pieces, r->piece);
    err = reduce_scatter(r, opts);
    for (int j = 0; j < r->nseg && gate && !err; j++)
        err = sc_gate_check_submit(gate, opts, r->piece[own + j]);
    return err;
}

int sc_sgd_sync_update_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd)
{
    struct sc_ring *r = s->ring;
    if (r->size == 1 || s->nccl)
        return sc_insert_sgd(opts, sgd, s->weights, s->momentum, r->vec, s->name);
    if (r->chain || r->use_direct) {
        int err = r->rank == 0 ? sc_insert_sgd(opts, sgd, s->weights, s->momentum, r->vec, s->name) : 0;
        r->sent += r->use_direct && !r->rank ? starpu_vector_get_nx(r->vec) * sizeof(float) : 0;
        return err             ? err
               : r->use_direct ? sc_direct_bcast_submit(r->direct, s->weights)
                               : chain_broadcast(r, opts, s->weights);
    }
    int pieces = r->size * r->nseg, own = mod(r->rank + 1, r->size) * r->nseg, err = 0;
    starpu_data_partition_submit(s->weights, pieces, s->wpiece);
    starpu_data_partition_submit(s->momentum, pieces, s->vpiece);
    /* the owned chunk's segments in one task */
    err = sc_insert_sgd_multi(opts, sgd, r->nseg, &s->wpiece[own], &s->vpiece[own], &r->piece[own], s->name);
    if (!err)
        err = allgather(r, opts, s->wpiece);
    starpu_data_unpartition_submit(s->momentum, pieces, s->vpiece, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(s->weights, pieces, s->wpiece, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(r->vec, pieces, r->piece, STARPU_MAIN_RAM);
    return err;
}

int sc_sgd_sync_is_local(const struct sc_sgd_sync *s)
{
    return s->ring->size == 1;
}

int sc_sgd_sync_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd)
{
    int err = sc_sgd_sync_reduce_submit(s, opts, NULL);
    return err ? err : sc_sgd_sync_update_submit(s, opts, sgd);
}

/* ---- the whole-batch verdict ---- */

struct sc_gate {
    float count;
    starpu_data_handle_t h;
    struct sc_ring *sum;
    struct sc_nccl *nccl; /* NULL: the ring's tasks */
    char zero_name[64], check_name[64];
};

int sc_gate_create(struct sc_gate **out, MPI_Comm comm, const char *name)
{
    struct sc_gate *g = calloc(1, sizeof(*g));
    if (!g)
        return sc_error(SC_ERR_NOMEM, "out of memory for a gate");
    snprintf(g->zero_name, sizeof(g->zero_name), "%s.open", name);
    snprintf(g->check_name, sizeof(g->check_name), "%s.check", name);
    starpu_vector_data_register(&g->h, STARPU_MAIN_RAM, (uintptr_t)&g->count, 1, sizeof(float));
    int err = sc_ring_create(&g->sum, g->h, comm, NULL, name);
    if (err) {
        sc_gate_destroy(g);
        return err;
    }
    *out = g;
    return 0;
}

void sc_gate_destroy(struct sc_gate *g)
{
    if (!g)
        return;
    sc_ring_destroy(g->sum);
    if (g->h)
        starpu_data_unregister(g->h);
    free(g);
}

int sc_gate_open_submit(struct sc_gate *g, const struct sc_task_opts *opts)
{
    return sc_insert_zero(opts, g->h, g->zero_name);
}

int sc_gate_check_submit(struct sc_gate *g, const struct sc_task_opts *opts, starpu_data_handle_t grad)
{
    return sc_insert_count_nonfinite(opts, g->h, grad, g->check_name);
}

void sc_gate_use_nccl(struct sc_gate *g, struct sc_nccl *n)
{
    g->nccl = n;
}

int sc_gate_close_submit(struct sc_gate *g, const struct sc_task_opts *opts)
{
    if (g->nccl)
        return sc_nccl_allreduce_submit(g->nccl, opts, g->h, g->sum->comm_name);
    return sc_ring_allreduce_submit(g->sum, opts);
}

starpu_data_handle_t sc_gate_handle(const struct sc_gate *g)
{
    return g->h;
}

int sc_tiles_allgather_submit(const struct sc_task_opts *opts, MPI_Comm comm, int ntiles, int64_t tag,
                              starpu_data_handle_t *local, starpu_data_handle_t *remote, const char *name)
{
    int me, p, err;
    MPI_Comm_rank(comm, &me);
    MPI_Comm_size(comm, &p);
    for (int t = 0; t < ntiles; t++)
        for (int k = 1; k < p; k++) {
            /* Rank me+k gets our tile first from rank me, and so on: the
             * pairs of a step are distinct, so no rank is sent to by all. */
            int to = mod(me + k, p), from = mod(me - k, p);
            starpu_data_handle_t buf = remote[from * ntiles + t];
            if ((err = sc_send_piece(opts, local[t], to, tag + (int64_t)me * ntiles + t, comm, name)) ||
                (err = gate_receive(buf, local[t])) ||
                (err = sc_recv_piece(buf, from, tag + (int64_t)from * ntiles + t, comm, name)))
                return err;
        }
    return 0;
}

void sc_tasks_throttle(unsigned n)
{
    starpu_task_wait_for_n_submitted(n);
}

void sc_tasks_wait_data(starpu_data_handle_t h)
{
    starpu_data_acquire(h, STARPU_R);
    starpu_data_release(h);
}

void sc_tasks_wait_all(MPI_Comm comm)
{
    starpu_task_wait_for_all();
    starpu_mpi_wait_for_all(comm);
}
