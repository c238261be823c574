/* What the planner's files share (src/planner/plan.h is the API):
 *   comm.c     messages between ranks: point-to-point times, a tensor's
 *              redistribution between two layouts, waits behind busy workers;
 *   cost.c     the candidates (grids) of a layer and one candidate's cost:
 *              kernels, halo, channel collectives, gradient, update, memory;
 *              and the kernels a calibration must hold (sc_plan_kernels);
 *   graph.c    the network as a graph: a node per layer with its candidates,
 *              an edge per input with the redistributions' costs;
 *   timeline.c one iteration's timeline under a gradient-communication
 *              policy, and the predicted time of an assignment;
 *   search.c   the search: elimination, the memory price, the local search
 *              on the timeline, replication;
 *   plan.c     sc_plan_make: the options, the model, the phases, the plan;
 *   output.c   the plan as text and JSON.
 * Not part of the API. */
#ifndef SC_PLAN_PRIVATE_H
#define SC_PLAN_PRIVATE_H

#include <stddef.h>

#include "base/layout.h"
#include "src/net/rules.h"
#include "src/planner/plan.h"

/* ---- the model of one layer under one grid ---- */

struct cand {
    struct sc_grid g;
    double fwd, bwd; /* compute, with halo and channel collectives */
    double msgs_b;   /* of bwd: the halo and channel collectives */
    int rounds;      /* exchanges of messages between ranks it makes (halo,
                      * statistics, channel collectives; forward and back) */
    double compute, halo, channels;
    double ar_time, ar_bytes; /* the gradient allreduce, unhidden */
    double task_f, task_b;    /* a tile's forward task and its longer backward
                               * one (data or filter gradient): what a message
                               * may wait behind (m->busy) */
    int group;                /* ranks it runs over */
    double update, memory;
    double filter; /* of bwd: the weight gradient's kernels (--fc-replicate
                    * has every rank compute them for every rank's samples) */
};

struct model {
    const struct sc_net *net;
    const struct sc_calib *c;
    int P, B, W;
    double oversub; /* ranks x workers over cores */
    int steal;      /* more workers than cores: collectives take turns with them */
    int copying;    /* messages are copies made by the cores (shared memory), and
                     * every core has a worker: a collective cannot hide */
    double busy;    /* every core has a worker: the longest a message waits
                     * for the workers' tasks (the calibration's busy; 0
                     * unknown or cores to spare) */
    int one_link;   /* every message of every rank crosses one wire (one
                     * level, not copies in memory): gradient collectives
                     * and the exchanges between layers share it */
    const char *missing_layer;
    int replicate;        /* --fc-replicate: the first this many [connected] layers */
    int rpn;              /* ranks per node: > 0, two levels (the calibration's node record);
                           * 0, one level */
    int policy;           /* the --grad-comm priced (enum policy); -1: the best of them */
    double bucket_mb;     /* of bucket:MB */
    double segment_bytes; /* of the ring's segments, as the runtime sizes them */
    int K;                /* --accumulate: micro-batches of B per iteration, the
                           * gradients reduced once, after the last */
    int grad_bf16;        /* --grad-dtype bf16 (sc_plan_opts) */
};

static inline int ext(const struct sc_grid *g, enum sc_dim d)
{
    return g->extent[d];
}

/* The network's first layer reads the input: it computes no dx, and so
 * has no dy halo (src/net/setup.c). */
static inline int first_layer(const struct sc_layer *l)
{
    return l->src[0] < 0;
}

/* ---- comm.c: messages ---- */

struct exch {
    double seconds; /* the slowest rank's */
    double bytes;   /* the busiest rank's */
};

/* A gradient allreduce of bytes (as fp32) over group, from the
 * calibration's ring; under --grad-dtype bf16 its reduce-scatter at half
 * the bytes, except a vector the direct path takes (fp32 whole). -1 where
 * the calibration has no allreduce over group. */
double plan_grad_allreduce(const struct model *m, int group, double bytes);
double plan_p2p(const struct model *m, int msgs, double bytes);
double plan_p2p_levels(const struct model *m, int in_msgs, double in_bytes, int out_msgs, double out_bytes);
int plan_same_node(const struct model *m, int r, int q);
#define MAXREPS 5
int plan_representatives(const struct sc_grid *g, int rpn, int out[MAXREPS]);
int plan_overlap(int a0, int an, int b0, int bn);
struct exch plan_exchange(const struct model *m, const struct sc_layout *src, const struct sc_layout *dst, int copy);
double plan_behind(const struct model *m, double task);

/* ---- cost.c: candidates ---- */

int plan_all_grids(int P, struct sc_grid *out, int cap);
int plan_candidate(struct model *m, const struct sc_layer *l, const struct sc_grid *g, struct cand *c);

/* ---- graph.c: the network as a graph ---- */

struct node {
    int layer;
    int ncand;
    struct cand *cand;
    double hide; /* backward compute before this layer's gradient is needed:
                  * what its allreduce can hide behind */
};

struct edge {
    int u, v;
    double *cost;      /* K_u x K_v: redistribution forward and back */
    double *fwd, *bwd; /* K_u x K_v each, in cost's allocation: its parts */
    int *rounds;       /* K_u x K_v: exchanges with messages (edge_cost) */
};

struct graph {
    int n;
    struct node *node;
    int *node_of; /* layer -> node, -1 for aliases */
    struct edge *edge;
    int nedges;
    int K; /* the model's micro-batches per iteration: the compute and the
            * redistributions count K times, the reductions once */
};

/* Every layer's candidates (o->grid's, or every valid grid) and every
 * edge's cost matrix. */
int plan_graph_build(struct model *m, const struct sc_plan_opts *o, struct graph *G);
void plan_graph_free(struct graph *G);

/* ---- timeline.c: the iteration's timeline ---- */

enum policy { POL_LAYER, POL_BUCKET, POL_END };
/* pol as --grad-comm takes it. */
void plan_policy_name(const struct model *m, int pol, char *buf, size_t len);

int plan_replicated(const struct model *m, const struct graph *G, int *rep);
double plan_gather_time(const struct model *m, const struct sc_layer *l, int group, double *bytes);
size_t plan_edge_at(const struct graph *G, const struct edge *e, const int *choice);
int plan_edges_of(const struct graph *G, const int *choice, double *efwd, double *ebwd);
double plan_predict(const struct model *m, const struct graph *G, const int *choice, int *pol);

/* ---- search.c: the search's phases, in the order sc_plan_make runs them ---- */

int plan_solve(const struct model *m, struct graph *G, int *choice, double *chain_time);
int plan_fit_memory(const struct graph *G, double mem_limit, int *choice, double *chain_time);
void plan_improve(const struct model *m, const struct graph *G, const struct sc_plan_opts *o, int *choice);
void plan_try_replication(struct model *m, const struct graph *G, const struct sc_plan_opts *o, int *choice);

#endif
