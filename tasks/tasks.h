/* Task graphs: collectives, exchanges of split tensors and the optimizer
 * step, as StarPU tasks and StarPU-MPI transfers.  Nothing here knows of
 * files or flags.  (The layers in src/ still submit their own tasks through
 * codelets/' sc_insert_* wrappers: docs/ARCHITECTURE.md.) */
#ifndef SC_TASKS_H
#define SC_TASKS_H

#include <mpi.h>
#include <starpu.h>
#include <starpu_mpi.h>
#include "codelets/codelets.h"
#include "base/layout.h"
#include "base/ring_segment.h"

/* Tags of StarPU-MPI transfers.  Every rank reserves them in the same order
 * (plans are built in the same order everywhere), so the numbers agree. */
int64_t sc_tags_reserve(int64_t count);

/* A ring collective over one vector of floats replicated on every rank of
 * comm, split into one chunk per rank.  The vector is partitioned with
 * StarPU's asynchronous partitioning, so that tasks on the chunks and tasks
 * on the whole vector are ordered by StarPU, not by waits.
 *
 * Reduce-scatter: P-1 steps; at step s a rank sends chunk (r-s) to r+1 and
 * accumulates chunk (r-s-1) received from r-1 (StarPU-MPI moves the chunk).
 * Afterwards rank r holds the sum of chunk (r+1) mod P, its "owned" chunk.
 * Allgather: P-1 steps in which each rank forwards the chunk it last got,
 * received straight into the destination chunk (no copy).  Chunks of more
 * than one segment (below) travel as segments, so transfers and
 * accumulations pipeline; a vector shorter than the rank count takes a
 * chain instead (reduce to rank 0, which owns it all, then broadcast). */
struct sc_ring;

/* segment_bytes: chunks are sent as segments of about this size (at most 8
 * per chunk; 0: SC_RING_SEGMENT_KB_DEFAULT KiB, base/ring_segment.h;
 * training sizes them to the link with sc_link_segment_kb below).  Every
 * segment is a StarPU-MPI message, which costs a task and a request
 * beyond MPI's own time, so that large segments are cheaper on shared
 * memory, but small segments let urgent collectives pass a large one on a
 * slow link.  window: at most this many segments of each step in flight
 * (0: all at once): segment j is sent once segment j - window has
 * arrived, so that a large vector cannot fill the network's queues ahead
 * of a later, more urgent collective's messages (which pass it by their
 * priority). */
struct sc_ring_opts {
    size_t segment_bytes;
    int window;
    /* The ring runs among these ranks of comm only, in this order, this
     * rank among them (NULL: all of comm): a segment of the grid, the ranks
     * that hold the same share of a channel-split layer's weights. */
    const int *group;
    int group_size;
    /* Vectors of at most direct_kb KiB (0: 64; -1: none) take one MPI
     * nonblocking collective in a task instead of the ring (sc_direct
     * below): the ring's messages each cost a task and a request.  Every rank
     * of comm creates its rings in the same order, with the same
     * direct_kb (each ring then makes a communicator of its own). */
    int direct_kb;
    /* 1 (--grad-dtype bf16): the reduction's partial sums travel as bf16
     * (rounded to nearest even when sent, added in fp32 when received:
     * kernels/bf16.h): the reduce-scatter's and the chain's reduction.
     * What goes back out stays fp32, so that every rank holds the same
     * bits: the weights of sc_sgd_sync's allgather or broadcast, the sums
     * of sc_ring_allreduce_submit's allgather.  The direct path (direct_kb)
     * stays fp32: MPI has no bf16 type to sum in fp32, and its vectors are
     * small. */
    int wire_bf16;
};
/* Segments sized to the link (--comm-segment auto): sc_link_segment_kb
 * measures the bandwidth one rank gets to its ring neighbour while every
 * rank sends (SC_LINK_PROBE_BYTES over plain MPI on comm, collective, the
 * slowest rank's, the same on every rank; 0 on one rank, which sends
 * nothing) and gives the segment base/ring_segment.h's rule
 * (sc_ring_segment_kb_for) gives for it. */
int sc_link_segment_kb(MPI_Comm comm, int *segment_kb, double *bytes_per_s);
/* vec: the vector (n floats) to reduce, registered in main memory; opts:
 * NULL for the defaults. */
int sc_ring_create(struct sc_ring **out, starpu_data_handle_t vec, MPI_Comm comm, const struct sc_ring_opts *opts,
                   const char *name);
void sc_ring_destroy(struct sc_ring *ring);
/* Bytes this rank has sent for the ring's collectives so far (a direct
 * collective counts the vector once on each rank that sends it in a tree:
 * the non-roots of a reduce, the root of a broadcast, every rank of an
 * allreduce: MPI's algorithm is its own). */
uint64_t sc_ring_bytes_sent(const struct sc_ring *ring);
/* Of those, the bytes of the reductions' partial sums (the reduce-scatter,
 * the chain's and the direct path's reduction, a direct allreduce whole):
 * what sc_ring_opts.wire_bf16 halves outside the direct path. */
uint64_t sc_ring_partial_bytes_sent(const struct sc_ring *ring);
/* 1 when the ring's collectives take the direct path (direct_kb). */
int sc_ring_is_direct(const struct sc_ring *ring);
/* Range [*first, *first + *count) of the vector owned by this rank. */
void sc_ring_owned_range(const struct sc_ring *ring, size_t *first, size_t *count);

/* vec = sum over the ranks of vec.  Non-blocking: submits tasks and transfers. */
int sc_ring_allreduce_submit(struct sc_ring *ring, const struct sc_task_opts *opts);

/* A small vector's collectives as one MPI nonblocking collective each
 * (tasks/direct.c), on a communicator of the plan's own (split from comm
 * by color, ordered by key): posted as soon as the vector is ready (an
 * asynchronous acquisition, ordered with the vector's tasks), released to
 * the tasks after it when the collective completes; no worker is held
 * while the data travel.
 * The vector: floats in main memory, written in place (reduce: on the
 * new communicator's rank 0; bcast: from it). */
struct sc_direct;
int sc_direct_create(struct sc_direct **out, MPI_Comm comm, int color, int key, const char *name);
void sc_direct_destroy(struct sc_direct *d);
int sc_direct_allreduce_submit(struct sc_direct *d, starpu_data_handle_t v);
int sc_direct_reduce_submit(struct sc_direct *d, starpu_data_handle_t v);
int sc_direct_bcast_submit(struct sc_direct *d, starpu_data_handle_t v);
/* Called (from our thread) whenever a direct collective completes
 * (sc_tasks_set_wake_hook sets it too). */
void sc_direct_set_wake_hook(void (*fn)(void));

/* The optimizer step of data-parallel training for one layer: reduce-scatter
 * of the gradient, SGD of the owned chunk of the weights and momentum on its
 * owner, allgather of the updated weights.  grad is ring's vector; weights and
 * momentum have the same length.  The momentum outside the owned chunk is not
 * kept up to date (sc_ring_owned_range says which part is). Non-blocking. */
struct sc_sgd_sync;
int sc_sgd_sync_create(struct sc_sgd_sync **out, struct sc_ring *grad_ring, starpu_data_handle_t weights,
                       starpu_data_handle_t momentum);
void sc_sgd_sync_destroy(struct sc_sgd_sync *s);
int sc_sgd_sync_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd);

/* A whole-batch verdict on the gradients, before any update (--nonfinite
 * skip): the number of gradient pieces that hold a NaN or Inf, summed over
 * the ranks of comm.  Per batch: open (count = 0), check every reduced
 * gradient piece that this rank updates, close (the sum over the ranks);
 * the updates then read sc_gate_handle through sc_sgd_args.gate, so that
 * every rank skips the whole batch or none of it.  The price: no update
 * starts before the last gradient of the batch is reduced. */
struct sc_gate;
int sc_gate_create(struct sc_gate **out, MPI_Comm comm, const char *name);
void sc_gate_destroy(struct sc_gate *g);
int sc_gate_open_submit(struct sc_gate *g, const struct sc_task_opts *opts);
int sc_gate_check_submit(struct sc_gate *g, const struct sc_task_opts *opts, starpu_data_handle_t grad);
int sc_gate_close_submit(struct sc_gate *g, const struct sc_task_opts *opts);
starpu_data_handle_t sc_gate_handle(const struct sc_gate *g);
/* From now on g sums its count with an NCCL allreduce instead of its ring
 * (--collectives nccl), so that it takes its place in the one order of the
 * rank's NCCL calls, the same on every rank. */
struct sc_nccl;
void sc_gate_use_nccl(struct sc_gate *g, struct sc_nccl *n);

/* NCCL collectives (--collectives nccl; tasks/nccl.c): one communicator
 * per rank over comm, driven by this rank's first CUDA worker.  create is
 * collective; without NCCL built in, or without a CUDA worker, it fails
 * with SC_ERR_ARG; NCCL needs one GPU per rank (SC_ERR_RUNTIME when ranks
 * share one).  allreduce: vec = its sum over the ranks, as one
 * ncclAllReduce in a CUDA task; all NCCL tasks of a rank run in
 * submission order, so that every rank issues them in the same order. */
struct sc_nccl;
int sc_nccl_create(struct sc_nccl **out, MPI_Comm comm);
/* What create checks first, with its errors, for one rank, which makes no
 * communicator (nothing to sum): NCCL built in and a CUDA worker here. */
int sc_nccl_check(void);
void sc_nccl_destroy(struct sc_nccl *n);
int sc_nccl_allreduce_submit(struct sc_nccl *n, const struct sc_task_opts *opts, starpu_data_handle_t vec,
                             const char *name);
/* sc_tiles_allgather_submit over NCCL (no tags): rank q's tile t lands in
 * remote[q * ntiles + t] (this rank's own entries are not used), as one
 * CUDA task that reads the tiles, writes the peers' buffers, and issues
 * one group of ncclSend/ncclRecv.  Tiles and buffers: vectors of floats,
 * all of one tile's size. */
int sc_nccl_tiles_allgather_submit(struct sc_nccl *n, const struct sc_task_opts *opts, int ntiles,
                                   starpu_data_handle_t *local, starpu_data_handle_t *remote, const char *name);
/* From now on s reduces its gradient with an NCCL allreduce and every rank
 * updates the whole of its weights and momentum (no allgather). */
void sc_sgd_sync_use_nccl(struct sc_sgd_sync *s, struct sc_nccl *n);

/* sc_sgd_sync_submit in two halves, for a gate between them: the
 * reduce-scatter (and the check of the owned chunk by gate, unless NULL),
 * then the update and the allgather.  Between the two the gradient vector
 * stays partitioned into the collective's pieces. */
int sc_sgd_sync_reduce_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, struct sc_gate *gate);
int sc_sgd_sync_update_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd);
/* 1 when s reduces over one rank only: nothing travels, and its update is
 * the SGD of the whole vectors on this rank. */
int sc_sgd_sync_is_local(const struct sc_sgd_sync *s);

/* A gradient bucket: the parameters, momentum and gradients of the layers
 * whose gradients are reduced together, in one vector each, so that one
 * collective covers them without copies.  The bucket owns both partitions
 * of these vectors: between collectives they are split into the layers'
 * slices (StarPU's asynchronous partitioning), which the layers' tasks
 * use; reduce_submit switches the gradients and weights to the ring's
 * pieces, update_submit (the SGD of the owned chunk and the allgather of
 * the weights) switches them back.  A gate, when given, checks the reduced
 * gradient between the two halves.  sizes: the nslices slices' lengths in
 * floats, in order; the vectors start zeroed.  With nccl, the reduction is
 * an NCCL allreduce and every rank updates the whole vectors.  ring: the
 * ring's segments and window (NULL: defaults). */
struct sc_bucket;
int sc_bucket_create(struct sc_bucket **out, int nslices, const size_t *sizes, MPI_Comm comm, struct sc_nccl *nccl,
                     const struct sc_ring_opts *ring, const char *name);
void sc_bucket_destroy(struct sc_bucket *b);
/* Bytes this rank has sent for the bucket's reductions so far (its ring's;
 * 0 under NCCL). */
uint64_t sc_bucket_bytes_sent(const struct sc_bucket *b);
/* Of those, the partial sums' (sc_ring_partial_bytes_sent). */
uint64_t sc_bucket_partial_bytes_sent(const struct sc_bucket *b);
/* The vectors in main memory (initial values, checkpoints: acquire the
 * handles around their use once tasks have run). */
float *sc_bucket_weights(const struct sc_bucket *b);
float *sc_bucket_momentum(const struct sc_bucket *b);
float *sc_bucket_grads(const struct sc_bucket *b);
starpu_data_handle_t sc_bucket_momentum_handle(const struct sc_bucket *b);
starpu_data_handle_t sc_bucket_weight_slice(const struct sc_bucket *b, int i);
starpu_data_handle_t sc_bucket_grad_slice(const struct sc_bucket *b, int i);
/* The range of the vectors whose momentum this rank keeps up to date. */
void sc_bucket_owned_range(const struct sc_bucket *b, size_t *first, size_t *count);
int sc_bucket_reduce_submit(struct sc_bucket *b, const struct sc_task_opts *opts, struct sc_gate *gate);
int sc_bucket_update_submit(struct sc_bucket *b, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd);
/* Buckets whose reduction involves one rank only (sc_sgd_sync_is_local),
 * so that their updates are SGD of whole vectors with no allgather: the
 * updates of count such buckets, each reduced (reduce_submit) and not yet
 * updated, as one task (sc_insert_sgd_multi, at most SC_SGD_MULTI_MAX),
 * then each back to its slices, as update_submit does one by one. */
int sc_bucket_is_local(const struct sc_bucket *b);
int sc_buckets_update_submit(struct sc_bucket *const *b, int count, const struct sc_task_opts *opts,
                             const struct sc_sgd_args *sgd, const char *name);

/* Allgather of per-tile buffers over comm: every rank sends its ntiles
 * tiles local[t] to every other rank, and rank q's tile t arrives in
 * remote[q * ntiles + t] (this rank's own entries are not used).  All
 * buffers have the same size on every rank.  Uses tags [tag, tag + P *
 * ntiles).  Each receive is posted once local[t] is ready, since the
 * peers' tiles are due then too.  Non-blocking. */
int sc_tiles_allgather_submit(const struct sc_task_opts *opts, MPI_Comm comm, int ntiles, int64_t tag,
                              starpu_data_handle_t *local, starpu_data_handle_t *remote, const char *name);

/* A vector handle of n elements of elem bytes (n 0: one) over zeroed host
 * memory, and its end.  The memory is pinned where this rank has CUDA
 * workers (starpu_malloc_flags decides), so that StarPU's copies to and
 * from the GPUs are asynchronous DMA overlapping the kernels; plain
 * aligned memory otherwise.  sc_vector_free(NULL, ...) does nothing. */
int sc_vector_new(starpu_data_handle_t *h, void **mem, size_t n, size_t elem);
void sc_vector_free(starpu_data_handle_t h, void *mem);

/* A whole handle to or from one peer, with a trace record under name while
 * a trace is recorded: the building block of the collectives and
 * exchanges.  A send goes at opts' priority; StarPU-MPI gives receives
 * none. */
int sc_send_piece(const struct sc_task_opts *opts, starpu_data_handle_t h, int dest, int64_t tag, MPI_Comm comm,
                  const char *name);
int sc_recv_piece(starpu_data_handle_t h, int src, int64_t tag, MPI_Comm comm, const char *name);

/* ---- exchanges of spatially split tensors ----
 *
 * A consumer (a layer, or the next layer's layout) needs, for each of its
 * tiles, the tile's samples x a box of a tensor that is split by another
 * (or the same) layout.  A fetch plan lists the pieces: parts held by this
 * rank are read in place from the source tiles; parts held by other ranks
 * are packed there (a copy task), sent, and received here into buffers of
 * their own, so that a task that needs only some pieces waits only for
 * them.  Halo exchange (same layout, boxes grown by a kernel's reach) and
 * redistribution (different layouts) are both fetches. */
struct sc_layout;
struct sc_fetch;
/* need: the block (box and channels) of the consumer's tile (rank, tile) in
 * the source tensor's coordinates, samples being the tile's own (under
 * dst).  Where src is replicated (sc_layout_replicated), COPY takes each
 * block from the holder with the consumer's coordinates along the
 * replicated dimensions (copies of one value), SUM takes it from every
 * holder, to be summed (partial sums: a channel-split convolution's
 * outputs, the input gradients of a filter-split one). */
enum sc_fetch_mode { SC_FETCH_COPY, SC_FETCH_SUM };
typedef struct sc_block (*sc_need_fn)(void *ctx, int rank, int tile);
int sc_fetch_create(struct sc_fetch **out, const struct sc_layout *src, const struct sc_layout *dst, sc_need_fn need,
                    void *ctx, enum sc_fetch_mode mode, int rank, MPI_Comm comm, const char *name);
/* Whether the sources of a consumer tile are to be summed (SC_FETCH_SUM). */
int sc_fetch_sums(const struct sc_fetch *f);
void sc_fetch_destroy(struct sc_fetch *f);
/* Pack, send and receive the pieces; src_tiles: this rank's tiles of the
 * source tensor.  Non-blocking. */
int sc_fetch_submit(struct sc_fetch *f, const struct sc_task_opts *opts, starpu_data_handle_t *src_tiles);
/* The sources of consumer tile t that intersect win (all of them: win
 * NULL), for a region kernel: at most max; returns their number or
 * SC_ERR_SHAPE when there are more. */
int sc_fetch_sources(const struct sc_fetch *f, starpu_data_handle_t *src_tiles, int t, const struct sc_box *win,
                     struct sc_region_src *desc, starpu_data_handle_t *h, int max);
/* Bytes of the buffers the plan allocated (packs and receives). */
size_t sc_fetch_bytes(const struct sc_fetch *f);

/* In-place sum of a vector of doubles over a group of ranks (the ranks
 * holding the blocks of the same samples): every member sends its vector
 * to every other, then adds all of them in rank order, so that every
 * member gets the same bits.  members: the group's ranks in comm, in
 * increasing order, this rank among them; len: doubles per vector.  Uses
 * nmembers tags.  Non-blocking. */
struct sc_group_sum;
int sc_group_sum_create(struct sc_group_sum **out, MPI_Comm comm, const int *members, int nmembers, int rank,
                        size_t len, const char *name);
void sc_group_sum_destroy(struct sc_group_sum *g);
int sc_group_sum_submit(struct sc_group_sum *g, const struct sc_task_opts *opts, starpu_data_handle_t h);

/* fn is called (from StarPU-MPI's thread) whenever a receive of a
 * collective completes, i.e. when tasks waiting for it may become ready:
 * the runtime uses it to wake idle workers.  NULL: none. */
void sc_tasks_set_wake_hook(void (*fn)(void));

/* Bounded lookahead: block while more than n tasks are submitted and not done. */
void sc_tasks_throttle(unsigned n);
/* Wait until the tasks and receives that write h are done (not the sends
 * that read it): what a blocking collective's return means locally. */
void sc_tasks_wait_data(starpu_data_handle_t h);
/* Wait for every submitted task and transfer of this rank (outside iterations);
 * StarPU-MPI's version of this ends with barriers among the ranks. */
void sc_tasks_wait_all(MPI_Comm comm);

#endif
