/* The network: layers built from a .cfg, their parameters, and the
 * activations of this rank's tiles.  Training submits whole iterations
 * without waiting; only the sc_net_* functions marked "sync point" wait. */
#ifndef SC_NET_H
#define SC_NET_H

#include "src/layers/layers.h"
#include "src/runtime/runtime.h"
#include "base/error.h"
#include "src/data/dataset.h"
#include "codelets/codelets.h"

struct sc_net_dist; /* this rank's share: tiles, handles, collective plans */

/* How gradients travel between the ranks (--grad-comm, --fc-replicate).
 * Every choice gives the same weights, up to float summation order. */
enum sc_grad_comm {
    SC_GRAD_LAYER,  /* one collective per layer, right after its gradient */
    SC_GRAD_CHUNKS, /* Lee et al.: the last K layers with parameters, then the rest */
    SC_GRAD_BUCKET, /* buckets of at least MB MiB filled in backward order (PyTorch DDP) */
    SC_GRAD_END,    /* one collective after the whole backward pass */
};
struct sc_comm_opts {
    enum sc_grad_comm grad_comm;
    int chunk_layers;            /* K of chunks:K */
    double bucket_mb;            /* MB of bucket:MB, in MiB (sc_rule_bucket_bytes) */
    int fc_replicate;            /* Lee et al.: the first F [connected] layers gather their
                                  * inputs and errors and compute the whole gradient */
    int priorities;              /* 1: task priorities (gradients, chain, collectives; plan_priorities) */
    int window;                  /* segments of a large collective in flight at once (0: all) */
    int segment_kb;              /* KiB per segment of a large collective (sc_ring_opts); 0: auto,
                                  * sized to the link by sc_net_setup (sc_link_segment_kb) */
    int direct_kb;               /* vectors up to this many KiB: one MPI nonblocking collective
                                  * in a task (sc_ring_opts: 0 default, -1 none) */
    const char *parallel;        /* --parallel: the grid of every layer without parallel= in
                                  * the cfg ("h2w2", "n2h2", ...; NULL: sample parallelism) */
    int nccl;                    /* 1 (--collectives nccl): the buckets' gradient sums are NCCL
                                  * allreduces in CUDA tasks (tasks/nccl.c) */
    int gate_updates;            /* 1 (--nonfinite skip): no update of a batch starts before all
                                  * its gradients are reduced and found finite on every rank, so
                                  * that a batch is skipped whole or not at all */
    int plain_layouts;           /* 1 (--layouts nchw): every activation NCHW, with oneDNN's
                                  * reorders around each convolution (blocked.c) */
    int grad_bf16;               /* 1 (--grad-dtype bf16): the buckets' reductions send their partial
                                  * sums as bf16 and add them in fp32 (sc_ring_opts.wire_bf16) */
    int input_slots;             /* --input-slots: input buffers in rotation, 1 or 2 (the next
                                  * batch loaded while one computes); 0: auto, two where the
                                  * second is a small share of the rank's memory */
    int accumulate;              /* --accumulate K: micro-batches of the global batch per
                                  * optimizer step, their gradients summed on each rank and
                                  * reduced once, after the K-th (1: every batch a step;
                                  * 0 in a hand-made struct means 1) */
    enum sc_optimizer optimizer; /* --optimizer: the state the setup allocates; under Adam and
                                  * AdamW no momentum, and each parameter's exp_avg and
                                  * exp_avg_sq only on the rank that updates it (the owner of
                                  * its chunk of a ring; tasks.h, sc_sgd_sync_state) */
    enum sc_precision precision; /* --precision: the convolutions' products on CPU workers
                                  * (kernels.h); the tensors, the exchanges and the update
                                  * stay fp32 either way */
};
/* --accumulate's largest K. */
#define SC_ACCUMULATE_MAX 4096
void sc_comm_opts_default(struct sc_comm_opts *o);
/* Parse a --grad-comm value: layer, chunks:K, bucket:MB, end. */
int sc_comm_opts_parse_grad(const char *s, struct sc_comm_opts *o);

struct sc_net {
    struct sc_shape input;
    int classes;
    struct sc_layer *layers;
    int nlayers;
    int64_t iteration;        /* optimizer steps taken */
    struct sc_net_dist *dist; /* NULL until sc_net_setup */
};

/* Parse a .cfg and check that the shapes fit (no StarPU needed).  Errors name
 * file:line. */
int sc_net_parse(const char *cfg_path, struct sc_net **out);
size_t sc_net_nparams(const struct sc_net *net);
/* The FLOPs of one training iteration on batch samples (the whole
 * network, all ranks together): forward, backward data and backward
 * filter of its convolutions and fully connected layers
 * (sc_layer_work_flops), without the backward data of layers that read
 * only the network's input, which no one needs. */
double sc_net_flops(const struct sc_net *net, int batch);
/* The oneDNN implementation of the forward pass of net's largest
 * convolution (by multiply-adds) at batch samples, into buf (the ISA the
 * convolutions run in on this CPU): 0, or -1 when net has no convolution
 * or oneDNN none for it.  precision: the convolutions' (--precision). */
int sc_net_conv_impl(const struct sc_net *net, int batch, enum sc_precision precision, char *buf, size_t n);
/* --parallel as a per-layer list, "conv1=f2,conv2=c2,fc1=n4" (what
 * starconv-plan prints; a layer it does not name is sample parallel):
 * check: SC_ERR_ARG naming an entry that is malformed or names no layer of
 * net, or a layer twice; find: layer name's grid into buf, 0 if unnamed. */
int sc_parallel_list_check(const struct sc_net *net, const char *list);
int sc_parallel_list_find(const char *list, const char *name, char *buf, size_t len);

/* Split the global batch over the ranks of rt (it must divide evenly) and
 * the local batch into one tile per CPU worker; allocate and register the
 * tiles, initialize the parameters from seed, plan the gradient
 * communication (comm: NULL for the defaults). */
int sc_net_setup(struct sc_net *net, struct sc_runtime *rt, int global_batch, uint64_t seed,
                 const struct sc_comm_opts *comm);
/* "layer", "chunks:2 (2 collectives)", ...: what the plan turned out to be. */
const char *sc_net_comm_summary(const struct sc_net *net);
void sc_net_destroy(struct sc_net *net);

/* What this rank's plan allocates, by kind: activations (every layer's
 * output and its gradient per tile, input tiles, halo and redistribution
 * buffers), parameters (weights, momentum, gradients and per-tile partial
 * gradients), workspaces (pooling workspaces, and an estimate of the
 * per-worker kernel buffers: one input window and one output block of the
 * largest layer per worker).  Everything is allocated at setup, so this is
 * starconv's peak; oneDNN's and StarPU's own overheads are not counted. */
struct sc_mem_report {
    size_t activations, parameters, workspaces;
    size_t optimizer_state; /* of the parameters: the momentum, or Adam's state on this rank */
};
void sc_net_memory(const struct sc_net *net, struct sc_mem_report *r);
/* Bytes this rank has sent for the gradient reductions of its buckets
 * since setup (not counting replicated layers' gathers). */
uint64_t sc_net_grad_bytes(const struct sc_net *net);
/* Of those, the reductions' partial sums, which --grad-dtype bf16 sends
 * as bf16 (the rest: the weights sent back after the updates). */
uint64_t sc_net_grad_partial_bytes(const struct sc_net *net);

/* The optimizer whose state the setup allocated (comm.optimizer). */
enum sc_optimizer sc_net_optimizer(const struct sc_net *net);

/* The resolution of the loss's labels: 1 x 1 for a label per sample, the
 * loss's input for per-pixel labels. */
void sc_net_label_shape(const struct sc_net *net, int *oh, int *ow);

/* The generator's arguments for n samples of the synthetic data set ds,
 * block box of each (codelets/codelets_synth.h). */
struct sc_synth_args sc_dataset_synth_args(const struct sc_dataset *ds, struct sc_box box, int n);

/* Submit one training iteration (one optimizer step) on idx[0 .. K x
 * global_batch) of ds, K the setup's comm.accumulate: for each of the K
 * micro-batches of global_batch samples in turn, load, forward, loss and
 * backward, the parameter gradients summed on this rank; after the last
 * one, the gradient reduction and SGD, as one step on the K x global_batch
 * samples (the loss scaled by 1 / (K x global_batch)).  Non-blocking.
 * next (NULL: none): the samples the next call's idx will start with,
 * global_batch of them, loaded while this one computes; a next call with
 * other samples loads its own (the load ahead is lost, never wrong). */
int sc_net_train_batch(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, const int32_t *next,
                       const struct sc_sgd_args *sgd);

/* Sync point: the mean loss over the samples of the last submitted
 * iteration, all K micro-batches of it (every rank gets it). */
double sc_net_last_loss(struct sc_net *net);

/* Sync point: accuracy (0..1) and mean loss over the whole of ds. */
int sc_net_evaluate(struct sc_net *net, const struct sc_dataset *ds, double *accuracy, double *loss);

/* Sync point: wait until every submitted iteration is done. */
void sc_net_wait(struct sc_net *net);

/* Sync point, collective, for a diagnosis: compute the iteration idx (as
 * sc_net_train_batch takes it: forward, loss, backward, no update), one
 * micro-batch at a time until one has a value that is not finite, and name
 * in where the first such value, in the order of computation: "the output of layer 3 (conv2,
 * [convolutional] at line 12)", "the loss", "the error (gradient) at the
 * output of layer ...", "the weight gradient of layer ...". */
int sc_net_find_nonfinite(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, char *where,
                          size_t size);

/* Sync points for checkpoints.  read: the full parameters of layer l into
 * w[l] on every rank, and the momentum into v[l] on rank 0 only (it is spread
 * over the ranks that own its chunks); under Adam (comm.optimizer) v[l] is
 * the exp_avg, sq[l] the exp_avg_sq and step[l] the step count, gathered
 * the same way (sq and step unused under SGD).  write: set them on every
 * rank (each keeps the range it updates). */
int sc_net_read_state(struct sc_net *net, float **w, float **v, float **sq, float *step);
int sc_net_write_state(struct sc_net *net, float *const *w, float *const *v, float *const *sq, const float *step);
/* Sync points: the layers' buffers (b[l]: nbuffer_values floats; each
 * rank its own, which under sample parallelism may differ: checkpoints
 * keep rank 0's, as PyTorch's DDP broadcasts rank 0's). */
int sc_net_read_buffers(struct sc_net *net, float **b);
int sc_net_write_buffers(struct sc_net *net, float *const *b);

#endif
