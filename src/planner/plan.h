/* The planner: a performance model of one training iteration of a parsed
 * network on P ranks, from a calibration (src/planner/calib.h), and the search for
 * the least predicted time over per-layer distributions (base/spgraph.h's
 * elimination, then a local search on the iteration's timeline).
 *
 * Per layer and candidate grid the model counts (seconds per iteration):
 *  - compute: the calibrated kernels of forward and backward on the
 *    rank's block (a tile per worker), times the oversubscription of the
 *    machine's cores, plus the tasks' overhead;
 *  - halo: the exchange of x's and dy's borders, less the part hidden
 *    behind the interior's computation;
 *  - channels: a channel-split convolution's reduce-scatter of its partial
 *    sums and allgather of dy;
 *  - redistribute: moving the input from the previous layer's layout to
 *    this one's and its error back (an edge of the graph, exact volumes
 *    from base/layout.h, including filter splitting's allgather of x and
 *    reduce-scatter of dx);
 *  - allreduce: the segmented gradient allreduce over the ranks holding
 *    the same weights, less the part hidden behind the backward pass of
 *    the layers before it (or, under --grad-comm end, none hidden); for a
 *    layer --fc-replicate replicates, the allgathers of its inputs and
 *    errors instead, and the whole batch's weight gradient on every rank;
 *  - update: the SGD step over the rank's share of the parameters;
 *  - memory: activations, their gradients and parameter state per rank.
 * No MPI, no StarPU: every rank computes the same plan from the same
 * inputs. */
#ifndef SC_PLAN_H
#define SC_PLAN_H

#include <stdio.h>

#include "src/planner/calib.h"
#include "src/net/net.h"

struct sc_plan_opts {
    int ranks, batch;
    int workers;           /* CPU workers per rank; 0: the calibration's */
    double mem_limit;      /* bytes per rank; 0: none */
    const char *grid;      /* NULL: search; else predict this grid for every layer, as
                            * --parallel GRID applies it (whole-sample layers n<P>) */
    const char *grad_comm; /* NULL: the best of layer, bucket:25 and end; else layer,
                            * bucket:MB or end, as --grad-comm takes them */
    double mix_margin;     /* a search's plan that mixes distributions is kept only
                            * if it beats every uniform one by more than this
                            * fraction (SC_PLAN_MIX_MARGIN; 0: by anything) */
    int fc_replicate;      /* as --fc-replicate F: the first F [connected] layers
                            * gather their inputs and errors instead of reducing
                            * their gradient (sample parallelism only: with F > 0
                            * the plan is n<ranks>, not searched); 0: none; < 0:
                            * the search also tries n<ranks> with each F and keeps
                            * one that beats its plan by more than mix_margin */
    int segment_kb;        /* as --comm-segment KB: the ring's segments in training;
                            * 0: auto, what the runtime's rule gives the
                            * calibration's link (base/ring_segment.h) */
    int accumulate;        /* as --accumulate K: K micro-batches of batch per
                            * iteration, their gradients reduced once (0: 1) */
    int grad_bf16;         /* as --grad-dtype bf16: the gradient allreduce's reduce-scatter
                            * sends 2 bytes an element, its allgather 4 (plan_grad_allreduce) */
};

/* The margin starconv-plan and starconv-train give a mixed plan.  Its
 * extra cost is redistributions between layers, the part of the model
 * that misses most on shared cores (waits behind other threads): on this
 * machine a mix predicted 1% ahead of sample parallelism measured 17%
 * behind it (mesh128 on 4 ranks), while the mixes that paid were
 * predicted 25-40% ahead (docs/results.md, "Planner accuracy"). */
#define SC_PLAN_MIX_MARGIN 0.05

struct sc_plan_cost {
    double compute, halo, channels, redistribute, allreduce, update; /* seconds */
    double memory;                                                   /* bytes per rank */
};

struct sc_plan {
    int nlayers;
    char (*grid)[32];           /* each layer's grid ("" for a [route]) */
    struct sc_plan_cost *layer; /* each layer's share of the costs */
    struct sc_plan_cost total;
    double time;        /* predicted seconds per iteration */
    char grad_comm[32]; /* as --grad-comm takes it */
    double chain_time;  /* chains: Dryden's shortest path's optimum, which must equal
                         * the elimination's (a cross-check); < 0 otherwise */
    long candidates;    /* candidates considered, over all layers */
    int fc_replicate;   /* [connected] layers priced as --fc-replicate replicates them */
    int grad_bf16;      /* priced as --grad-dtype bf16 sends the gradients (sc_plan_opts) */
};

/* Plan (or, with o->grid, predict) net on o->ranks ranks.  SC_ERR_ARG for
 * impossible options (a batch that no grid splits, a memory limit nothing
 * fits); SC_ERR_PARSE "the calibration has no ...; make one with ..."
 * when c lacks a time the model needs. */
int sc_plan_make(const struct sc_net *net, const struct sc_calib *c, const struct sc_plan_opts *o,
                 struct sc_plan **out);
void sc_plan_free(struct sc_plan *p);

/* Every kernel work the model of net under o may look up in a
 * calibration (each distinct key once): what `starconv-plan calibrate`
 * times.  Stops at fn's first non-zero return, and returns it. */
int sc_plan_kernels(const struct sc_net *net, const struct sc_plan_opts *o,
                    int (*fn)(void *ctx, const struct sc_layer_work *w, const char *key), void *ctx);

/* The plan as --parallel takes it: "conv1=f4,conv2=c4,fc1=n4,...". */
void sc_plan_parallel_spec(const struct sc_net *net, const struct sc_plan *p, char *buf, size_t len);
/* Human-readable table (per layer: grid and cost breakdown; totals) and
 * JSON (the same, for machines). */
void sc_plan_print(FILE *fp, const struct sc_net *net, const struct sc_plan *p);
void sc_plan_print_json(FILE *fp, const struct sc_net *net, const struct sc_plan_opts *o, const struct sc_plan *p);

#endif
