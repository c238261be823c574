/* What the network files share (net_parse.c, net_plan.c, net_step.c,
 * net_state.c): this rank's share of a network, the plan that
 * sc_net_setup makes and the iterations use.  Not part of the API. */
#ifndef SC_NET_PRIVATE_H
#define SC_NET_PRIVATE_H

#include "src/net/net.h"
#include "tasks/tasks.h"
#include "tasks/tensor.h"

/* The layers whose gradients are reduced together (tasks.h, sc_bucket,
 * holds their vectors and collectives). */
struct bucket {
    int nlayers, *layer; /* in backward order */
    size_t n;
    struct sc_bucket *vectors;
    struct sc_task_opts task; /* its collective's */
    char name[64];
    /* A bucket reduced on this rank alone (sc_bucket_is_local) is updated
     * with a group of them, one task (setup.c, plan_update_groups): the
     * group's first bucket (-1: not in a group, updated on its own), and
     * on the last one, which submits it, the task's options and name. */
    int update_first, update_last;
    struct sc_task_opts update_task;
    char update_name[80];
};

/* This rank's tiles of a layer: the samples of each, its output and the
 * output's gradient (in the output's layout; none for the loss), its
 * scratch (per-tile vectors of the layer's scratch_bytes, when it has
 * any). */
struct layer_tiles {
    int *s0, *n, max; /* first sample (global index) and count per tile; the largest count */
    struct sc_tensor y, dy, scratch;
    int blk; /* the layout of y and dy: 0 NCHW, else channels in blocks of blk (blocked.c) */
};

/* A layer's parameters on this rank, and how the tasks that make their
 * gradient are submitted (plan_priorities). */
struct layer_params {
    float *w, *v, *g;            /* parameters, momentum, reduced gradient (in a bucket, or own) */
    starpu_data_handle_t hw, hg; /* the layer's slice of the bucket's, or its own */
    int bucket;                  /* -1: replicated or no parameters */
    size_t offset;               /* in the bucket */
    struct sc_tensor tile_g;     /* partial gradients of tiles 1.. (tile 0's is g) */
    /* Beside the critical path: the parameter gradient, its collective, and
     * (replicated) the gradient every rank computes alike. */
    struct sc_task_opts grad_task, comm_task, replica_task;
};

/* --fc-replicate: every rank's inputs and errors (tile q * ntiles + t:
 * rank q's tile t; none for this rank's own), the partial gradient of each
 * (rank, tile) but the first (whose is g), and the layer's own weights,
 * momentum and reduced gradient, whole on every rank (params.w, .v, .g
 * and their handles are theirs). */
struct layer_replica {
    int on;
    struct sc_tensor xr, dyr, pg, own_w, own_v, own_g;
    int64_t tag_x, tag_dy;
    char gather_x[48], gather_dy[48], sgd_name[48], acc_name[48];
};

/* How a layer's input and output are split (see layout.h) and what moves
 * between ranks for it. */
struct layer_exchanges {
    struct sc_layout lin, lout;
    struct sc_box in_box, out_box;        /* this rank's blocks */
    int in_ch0, in_nch, out_ch0, out_nch; /* and channels */
    struct sc_tile_split *split;          /* per tile; NULL: whole samples */
    /* input in another layout than the previous layer's output: its copy
     * in this layer's layout, the gradient too, and the two fetches */
    struct sc_tensor xin, dxin;
    struct sc_fetch *redist_fwd, *redist_bwd, *halo_x, *halo_dy;
    struct sc_group_sum *gsum[2]; /* sums over the ranks of the same samples */
    char redist_name[48], halo_x_name[48], halo_dy_name[48], assemble_name[48];
};

/* Layers whose output feeds several: dy is the sum of the readers'
 * gradients.  One reader writes dy itself (direct); the others' parts
 * (contrib: per-tile handles, in the output's layout; from: the layers
 * they come from) are added before the layer's backward.  A reader that
 * does not write dy itself writes dx_own (in its source's output layout).
 * A layer whose dy is one [shortcut]'s dy alone, and which only reads it,
 * takes that dy as its own (tiles.dy is a view of it) and sums nothing
 * (alias). */
struct layer_dy_sum {
    int direct, ncontrib, alias;
    starpu_data_handle_t **contrib;
    int *from;
    struct sc_tensor dx_own;
    char name[48];
};

/* A layer whose channels are split (c or f in its grid): this rank's share
 * of it (layers.h, split_channels), which the layer's tasks are submitted
 * through, and the global position of each of the share's parameters.
 * Under channel splitting (C > 1) a convolution's share writes partial
 * sums over its input channels (part, in lpart: the output's channels
 * split over F only, replicated over C), which reduce sums into the
 * output (a reduce-scatter over the ranks that differ in C); backward
 * gathers dy back into dpart (an allgather). */
struct layer_channels {
    struct sc_layer *local;
    size_t *index;
    int partial;
    struct sc_layout lpart;
    int part_ch0, part_nch;
    struct sc_tensor part, dpart;
    struct sc_fetch *reduce, *gather_dy;
    char reduce_name[48], gather_name[48], relu_name[48];
};

/* Everything this rank's plan holds for one layer. */
struct layer_data {
    struct layer_tiles tiles;
    struct layer_params params;
    struct layer_replica replica;
    struct layer_exchanges xch;
    struct layer_dy_sum dysum;
    struct layer_channels chan;
};

/* The network's input (input.c): one or two (nslots) slots of this rank's
 * input tiles (in the first layer's input layout) and of the loss's int32
 * labels, taking turns, so that the next batch is loaded while one
 * computes.  Each slot's tiles may be loaded in pieces of samples. */
#define SC_INPUT_SLOTS 2
struct net_input {
    struct sc_tensor x[SC_INPUT_SLOTS], labels[SC_INPUT_SLOTS];
    int nslots;                                    /* those made (sc_net_input_add_slots) */
    struct sc_tile_pieces *pieces[SC_INPUT_SLOTS]; /* per slot, per tile (npieces 0: one task) */
    int planned;                                   /* pieces planned (on the first load) */
    int cur;                                       /* the slot of the batch being computed */
    /* 1: the next slot holds (or is loading) batch ahead_idx of ahead_ds */
    int ahead;
    const struct sc_dataset *ahead_ds;
    int32_t *ahead_idx;
    /* the loads of the batch about to be computed (on the critical path)
     * and of the one after it (at the lowest priority) */
    struct sc_task_opts now, later;
    char name[16];
};

struct sc_net_dist {
    struct sc_runtime *rt;
    struct sc_comm_opts comm;
    int spatial;     /* some layer is not split like the batch over all ranks */
    int loss_pixels; /* per-pixel loss: pixels per sample; else 1 */
    int global_batch, local_batch, ntiles, tile_max;
    int *tile_n; /* samples per tile for a full batch */
    struct net_input in;
    /* per tile: 2 floats (loss and correct predictions), of the last batch
     * and summed over an evaluation; under comm.accumulate > 1, summed over
     * the micro-batches of the last iteration (step_stats) */
    struct sc_tensor stats, eval_acc, step_stats;
    /* The micro-batch being submitted (0 .. nmicro - 1) of an iteration of
     * nmicro (step.c): the first writes each layer's gradient, the others
     * add to it, the last reduces it. */
    int micro, nmicro;
    struct layer_data *ld;
    struct bucket *buckets;
    int nbuckets;
    struct sc_gate *gate;           /* comm.gate_updates: the batch's verdict */
    struct sc_nccl *nccl;           /* comm.nccl on more than one rank */
    enum sc_where replicated_where; /* the workers of replicated layers' gradients */
    struct sc_task_opts critical;   /* forward, backward-data, exchanges: the critical path */
    double link_bytes_per_s;        /* measured for --comm-segment auto (0: not measured) */
    char acc_name[24], step_stats_name[24], summary[224];
};

#define ALLOC_ARRAY(p, n)                                                                                              \
    do {                                                                                                               \
        if (!((p) = calloc((n) ? (n) : 1, sizeof(*(p)))))                                                              \
            return sc_error(SC_ERR_NOMEM, "out of memory");                                                            \
    } while (0)

/* input.c: the input slots, made by sc_net_setup (setup: the first slot,
 * which the exchanges' plans name; add_slots: the second, once the rank's
 * memory is known) and ended by sc_net_destroy; load: batch idx
 * (global_batch entries; -1: padding) becomes the current one, loaded now
 * unless it is the batch loaded ahead; load_ahead: batch next into the
 * other slot, at the lowest priority (nothing with one slot, or when a
 * batch is loaded ahead already). */
int sc_net_input_setup(struct sc_net *net);
int sc_net_input_add_slots(struct sc_net *net);
void sc_net_input_destroy(struct sc_net_dist *D);
int sc_net_input_load(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx);
int sc_net_input_load_ahead(struct sc_net *net, const struct sc_dataset *ds, const int32_t *next);

/* step.c: one iteration of nmicro micro-batches (idx: nmicro x
 * global_batch samples), as sc_net_train_batch; the diagnosis takes its
 * micro-batches one at a time. */
int sc_net_submit_step(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, int nmicro,
                       const int32_t *next, const struct sc_sgd_args *sgd);

/* The current batch's input and labels tiles. */
static inline const struct sc_tensor *input_x(const struct sc_net_dist *D)
{
    return &D->in.x[D->in.cur];
}
static inline const struct sc_tensor *input_labels(const struct sc_net_dist *D)
{
    return &D->in.labels[D->in.cur];
}

/* The layer whose ops submit layer l's tasks on this rank: its share when
 * its channels are split, else itself. */
static inline struct sc_layer *share_of(struct sc_net *net, int l)
{
    struct sc_layer *s = net->dist->ld[l].chan.local;
    return s ? s : &net->layers[l];
}

/* The tiles layer l reads as x and writes as dx. */
static inline starpu_data_handle_t *x_tiles(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    int s = net->layers[l].src[0];
    const struct sc_tensor *x = sc_tensor_exists(&D->ld[l].xch.xin) ? &D->ld[l].xch.xin
                                : s >= 0                            ? &D->ld[s].tiles.y
                                                                    : input_x(D);
    return sc_tensor_handles(x);
}

/* Where the gradient of layer l's input goes, in its source's layout. */
static inline starpu_data_handle_t *input_grad_tiles(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    int s = net->layers[l].src[0];
    if (s < 0)
        return NULL;
    return sc_tensor_handles(sc_tensor_exists(&D->ld[l].dysum.dx_own) ? &D->ld[l].dysum.dx_own : &D->ld[s].tiles.dy);
}

static inline starpu_data_handle_t *dx_tiles(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    return sc_tensor_exists(&D->ld[l].xch.dxin) ? sc_tensor_handles(&D->ld[l].xch.dxin) : input_grad_tiles(net, l);
}

/* exchanges.c: a layer's halo and redistribution fetches (sc_net_setup
 * calls it once per layer), and the box of input a rank's tiles need,
 * halo included (for the memory report). */
struct need_ctx {
    struct sc_net *net;
    int l;
};
int sc_net_plan_exchanges(struct sc_net *net, int l);
/* grad_sums.c: the gradient sums of outputs with several readers (see
 * layer_dy_sum), once every layer's tiles exist and before the fetches,
 * which take the tiles' handles. */
int sc_net_plan_gradient_sums(struct sc_net *net);
struct sc_box sc_net_need_x_box(struct need_ctx *c, int r);
/* blocked.c: the layout of every layer's output and its gradient
 * (layer_tiles.blk), once the exchanges are planned: the one rule of which
 * activations are channel-blocked.  sc_net_x_block: the layout of layer
 * l's input (and of the gradient it writes there). */
int sc_net_plan_blocks(struct sc_net *net);
int sc_net_x_block(const struct sc_net *net, int l);
/* load_file.c: the load tasks of a data set read by tile from a file
 * (ds->file) into the input tiles x and the loss's labels (one input
 * slot's), with opts, named name in traces. */
int sc_net_submit_file_load(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx,
                            const struct sc_tensor *x, const struct sc_tensor *labels, const struct sc_task_opts *opts,
                            const char *name);

#endif
