/* The rules of the network's setup that the planner prices: the grid a
 * layer runs under and whether it can, the layouts of its tensors, over
 * which ranks its gradient is summed, how gradients are cut into buckets,
 * and which layers --fc-replicate replicates.  One function each, which
 * the network's setup (src/net/setup.c) applies and the planner
 * (src/planner/) prices, so that the two cannot disagree.  No StarPU, no
 * MPI: pure functions of the layers, grids and options. */
#ifndef SC_NET_RULES_H
#define SC_NET_RULES_H

#include "base/grid.h"
#include "base/layout.h"
#include "src/layers/layers.h"
#include "src/net/net.h"

/* ---- the grid of a layer ---- */

/* The grid layer l runs under on P ranks: its cfg's parallel= as given;
 * else parallel's (--parallel: NULL or "" for sample parallelism, one grid
 * for every layer, or a per-layer list, in which a layer it does not name
 * is sample parallel), with two adjustments: the first layer, whose
 * samples come whole with few channels, splits its filters instead of its
 * channels, and a layer that cannot split its channels (fully connected,
 * softmax) or needs whole samples takes sample parallelism.  SC_ERR_ARG
 * for a grid that does not parse, or a cfg's parallel= the layer cannot
 * take. */
int sc_rule_layer_grid(const struct sc_layer *l, const char *parallel, int P, struct sc_grid *g);

/* Whether layer l can run under g with a global batch of batch samples:
 * 0, or SC_ERR_ARG saying why, in two parts as the setup checks them (the
 * split of samples and rows x columns when it chooses the grids, the
 * channels when it splits them), and both at once. */
int sc_rule_grid_check_split(const struct sc_layer *l, const struct sc_grid *g, int batch);
int sc_rule_grid_check_channels(const struct sc_layer *l, const struct sc_grid *g, int batch);
int sc_rule_grid_check(const struct sc_layer *l, const struct sc_grid *g, int batch);

/* The layouts of layer l's input and output under g, in tiles per rank:
 * a layer that mixes channels (convolution) splits its input by C and its
 * output by C and F, the others both by C and F. */
struct sc_layout sc_rule_layout_in(const struct sc_layer *l, const struct sc_grid *g, int batch, int tiles);
struct sc_layout sc_rule_layout_out(const struct sc_layer *l, const struct sc_grid *g, int batch, int tiles);

/* ---- gradients ---- */

/* The grid dimensions over which a layer's gradient is summed: ranks that
 * differ only in samples and rows x columns hold the same share of its
 * weights (a layer not split by channels: all ranks). */
#define SC_RULE_GRAD_DIMS ((1u << SC_DIM_N) | (1u << SC_DIM_H) | (1u << SC_DIM_W))
/* How many ranks sum the gradient of a layer under g. */
int sc_rule_grad_group(const struct sc_grid *g);
/* Whether the gradients of layers under a and b are summed over the same
 * ranks on every rank: neither split by channels (all ranks), or both
 * split by the same grid. */
int sc_rule_same_grad_ranks(const struct sc_grid *a, const struct sc_grid *b);

/* Gradient buckets (--grad-comm).  The layers whose gradients are reduced
 * (those with parameters that --fc-replicate does not replicate) are
 * walked in backward order, and the next one starts a new bucket where
 * the bucket before it is closed (sc_rule_bucket_closed) or sums its
 * gradients over other ranks (sc_rule_same_grad_ranks).
 * sc_rule_buckets is that walk: the n layers' grids and bytes of gradient
 * (the rank's share), in backward order, into bucket[i], each layer's
 * bucket (0, 1, ... in the walk's order); returns how many buckets.
 * The setup makes its buckets so, the planner prices them so. */
int sc_rule_buckets(const struct sc_comm_opts *c, int n, const struct sc_grid *const *grid, const double *bytes,
                    int *bucket);
/* Closed, after walked layers of the walk (0: none yet) with bytes of
 * gradients in it: under layer every bucket, under end none, under
 * chunks:K the first after K layers, under bucket:MB one that holds MB
 * MiB or more. */
int sc_rule_bucket_closed(const struct sc_comm_opts *c, int walked, double bytes);
/* The bytes of bucket:MB: MB MiB. */
double sc_rule_bucket_bytes(double mb);

/* ---- --fc-replicate ---- */

/* Whether --fc-replicate can replicate layer l: one with a weight
 * gradient task of its own ([connected]). */
int sc_rule_replicable(const struct sc_layer *l);
/* The layers --fc-replicate F replicates: the first F replicable ones of
 * net, on more than one rank.  Sets rep[l] for each of net's layers;
 * returns how many. */
int sc_rule_replicated(const struct sc_net *net, int F, int P, int *rep);
/* Replication gathers the sample layout's tiles, so it needs every
 * layer under sample parallelism: 0 where g splits samples only, else
 * SC_ERR_ARG saying so. */
int sc_rule_replicate_grid(const struct sc_grid *g);

#endif
