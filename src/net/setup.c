/* This rank's plan of a parsed network (sc_net_setup): how each layer is
 * split, its tiles and handles, the halo and redistribution fetches, the
 * gradient buckets, task priorities and the memory they take; and its
 * end. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "src/net/net_private.h"
#include "src/net/rules.h"

/* ---- how each layer is split ---- */

/* A layer's grid: its cfg's parallel=, else the command line's, else
 * sample parallelism (sc_rule_layer_grid), checked as far as it does not
 * depend on the channels (plan_channels checks those). */
static int choose_grid(struct sc_net *net, struct sc_layer *l, struct sc_grid *g)
{
    struct sc_net_dist *D = net->dist;
    int err = sc_rule_layer_grid(l, D->comm.parallel, D->rt->size, g);
    return err ? err : sc_rule_grid_check_split(l, g, D->global_batch);
}

/* A layer whose grid splits channels: the split must be even, and this
 * rank gets its share of the layer (and, for a convolution under C > 1,
 * the layout of its partial sums). */
static int plan_channels(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    struct sc_layer *L = &net->layers[l];
    struct layer_data *d = &D->ld[l];
    const struct sc_grid *g = &d->xch.lin.grid;
    int gc = g->extent[SC_DIM_C], gf = g->extent[SC_DIM_F], me = D->rt->rank, err;
    if (gc * gf == 1)
        return 0;
    if ((err = sc_rule_grid_check_channels(L, g, D->global_batch)))
        return err;
    int coords[SC_NDIMS], cout = d->xch.out_nch;
    sc_grid_coords(g, me, coords);
    struct layer_channels *c = &d->chan;
    c->partial = L->mixes_channels && gc > 1;
    c->part_ch0 = d->xch.out_ch0;
    if (c->partial) {
        c->lpart = d->xch.lout;
        c->lpart.cdims = SC_CDIMS_F;
        sc_layout_channels(&c->lpart, me, &c->part_ch0, &c->part_nch);
        cout = c->part_nch;
        snprintf(c->reduce_name, sizeof c->reduce_name, "%s.reduce_scatter", L->name);
        snprintf(c->gather_name, sizeof c->gather_name, "%s.dy_allgather", L->name);
        snprintf(c->relu_name, sizeof c->relu_name, "%s.relu_bwd", L->name);
    }
    ALLOC_ARRAY(c->local, 1);
    if ((err = L->ops->split_channels(L, c->local, d->xch.in_nch, cout, c->partial,
                                      !c->partial || coords[SC_DIM_C] == 0)))
        return err;
    if (c->local->nparams) {
        ALLOC_ARRAY(c->index, c->local->nparams);
        L->ops->param_index(L, c->local, d->xch.in_ch0, c->part_ch0, c->index);
    }
    return 0;
}

static int plan_layouts(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int T = D->rt->ncpu, me = D->rt->rank, err;
    struct sc_grid g[net->nlayers];
    for (int l = 0; l < net->nlayers; l++) {
        if (net->layers[l].alias)
            continue;
        if ((err = choose_grid(net, &net->layers[l], &g[l])))
            return err;
        int per_rank = D->global_batch / g[l].extent[SC_DIM_N];
        if (per_rank < T)
            T = per_rank;
        D->spatial |= g[l].extent[SC_DIM_N] != D->rt->size;
    }
    /* Tiles travel between ranks (halos, redistribution, replicated
     * layers), so every rank cuts its samples alike. */
    if (D->rt->size > 1)
        MPI_Allreduce(MPI_IN_PLACE, &T, 1, MPI_INT, MPI_MIN, D->rt->ctl);
    D->ntiles = T;
    for (int l = 0; l < net->nlayers; l++) {
        struct sc_layer *L = &net->layers[l];
        struct layer_data *d = &D->ld[l];
        if (L->alias)
            continue;
        d->xch.lin = sc_rule_layout_in(L, &g[l], D->global_batch, T);
        d->xch.lout = sc_rule_layout_out(L, &g[l], D->global_batch, T);
        d->xch.in_box = sc_layout_box(&d->xch.lin, me);
        d->xch.out_box = sc_layout_box(&d->xch.lout, me);
        sc_layout_channels(&d->xch.lin, me, &d->xch.in_ch0, &d->xch.in_nch);
        sc_layout_channels(&d->xch.lout, me, &d->xch.out_ch0, &d->xch.out_nch);
        if ((err = plan_channels(net, l)))
            return err;
        ALLOC_ARRAY(d->tiles.s0, T);
        ALLOC_ARRAY(d->tiles.n, T);
        d->tiles.max = 0;
        for (int t = 0; t < T; t++) {
            sc_layout_tile_samples(&d->xch.lout, me, t, &d->tiles.s0[t], &d->tiles.n[t]);
            if (d->tiles.n[t] > d->tiles.max)
                d->tiles.max = d->tiles.n[t];
        }
        if (g[l].extent[SC_DIM_H] * g[l].extent[SC_DIM_W] > 1)
            ALLOC_ARRAY(d->xch.split, T);
    }
    return 0;
}

/* NCCL kernels wait on the GPU for every rank to join, on the stream of the
 * worker that also runs compute tasks.  That is safe only when every
 * transfer between ranks is an NCCL call in the one order: a StarPU-MPI
 * transfer (a halo, a redistribution, a group sum) whose source task sits
 * behind an NCCL kernel on that stream can be what another rank needs to
 * reach the same NCCL call, and both wait for ever.  So NCCL takes only
 * grids that split samples alone. */
static int check_nccl_grids(const struct sc_net *net)
{
    const struct sc_net_dist *D = net->dist;
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_grid *g = &D->ld[l].xch.lin.grid;
        if (net->layers[l].alias || g->extent[SC_DIM_N] == D->rt->size)
            continue;
        char spec[64];
        sc_grid_format(g, spec, sizeof spec);
        return sc_error(SC_ERR_ARG,
                        "--collectives nccl: layer %s is split as %s; NCCL takes only sample "
                        "parallelism (n%d for every layer), as the halo exchanges and redistributions of other grids "
                        "are StarPU-MPI transfers that could wait behind an NCCL call on the GPU; use --collectives "
                        "tasks",
                        net->layers[l].name, spec, D->rt->size);
    }
    return 0;
}

static int setup_tiles(struct sc_net *net, struct sc_layer *l, struct layer_data *d)
{
    struct sc_net_dist *D = net->dist;
    int T = D->ntiles, err;
    d->params.bucket = -1;
    if (l->alias)
        return 0;
    snprintf(d->dysum.name, sizeof(d->dysum.name), "%s.grad_sum", l->name);
    if ((err = l->ops->shapes(l, d->tiles.max)))
        return err;
    int me = D->rt->rank;
    if (!l->is_loss &&
        ((err = sc_tensor_alloc(&d->tiles.y, &d->xch.lout, me)) ||
         (err = sc_tensor_alloc(&d->tiles.dy, &d->xch.lout, me)) ||
         (l->scratch_bytes && (err = sc_tensor_alloc_vectors(&d->tiles.scratch, T, l->scratch_bytes, 1)))))
        return err;
    struct layer_channels *c = &d->chan;
    if (c->partial &&
        ((err = sc_tensor_alloc(&c->part, &c->lpart, me)) || (err = sc_tensor_alloc(&c->dpart, &c->lpart, me))))
        return err;
    if (!l->nparams || d->replica.on)
        return 0;
    if ((err = sc_tensor_vectors(&d->params.tile_g, T, l->nparams, sizeof(float))))
        return err;
    /* tile 0's own only where later micro-batches add theirs to g */
    for (int t = net->dist->comm.accumulate > 1 ? 0 : 1; t < T; t++)
        if ((err = sc_tensor_alloc_tile(&d->params.tile_g, t)))
            return err;
    return 0;
}

static int setup_replicated(struct sc_net *net, struct sc_layer *l, struct layer_data *d, uint64_t seed)
{
    struct sc_net_dist *D = net->dist;
    struct layer_replica *r = &d->replica;
    int P = D->rt->size, T = D->ntiles, PT = P * T, err;
    size_t in = (size_t)D->tile_max * sc_shape_size(&l->in), out = (size_t)D->tile_max * sc_shape_size(&l->out);
    if ((err = sc_tensor_alloc_vectors(&r->own_w, 1, l->nparams, sizeof(float))) ||
        (err = sc_tensor_alloc_vectors(&r->own_v, 1,
                                       D->comm.optimizer == SC_OPT_SGD ? l->nparams : sc_adam_state_floats(l->nparams),
                                       sizeof(float))) ||
        (err = sc_tensor_alloc_vectors(&r->own_g, 1, l->nparams, sizeof(float))))
        return err;
    d->params.w = sc_tensor_buf(&r->own_w, 0);
    d->params.hw = sc_tensor_handle(&r->own_w, 0);
    d->params.v = D->comm.optimizer == SC_OPT_SGD ? sc_tensor_buf(&r->own_v, 0) : NULL;
    d->params.g = sc_tensor_buf(&r->own_g, 0);
    d->params.hg = sc_tensor_handle(&r->own_g, 0);
    l->ops->init(l, d->params.w, seed);
    if ((err = sc_tensor_vectors(&r->xr, PT, in, sizeof(float))) ||
        (err = sc_tensor_vectors(&r->dyr, PT, out, sizeof(float))) ||
        (err = sc_tensor_vectors(&r->pg, PT, l->nparams, sizeof(float))))
        return err;
    for (int i = 0; i < PT; i++) {
        if (i / T != D->rt->rank &&
            ((err = sc_tensor_alloc_tile(&r->xr, i)) || (err = sc_tensor_alloc_tile(&r->dyr, i))))
            return err;
        if ((i > 0 || D->comm.accumulate > 1) && (err = sc_tensor_alloc_tile(&r->pg, i)))
            return err;
    }
    d->replica.tag_x = sc_tags_reserve((int64_t)P * T);
    d->replica.tag_dy = sc_tags_reserve((int64_t)P * T);
    snprintf(d->replica.gather_x, sizeof(d->replica.gather_x), "%s.act_allgather", l->name);
    snprintf(d->replica.gather_dy, sizeof(d->replica.gather_dy), "%s.err_allgather", l->name);
    snprintf(d->replica.sgd_name, sizeof(d->replica.sgd_name), "%s.sgd", l->name);
    snprintf(d->replica.acc_name, sizeof(d->replica.acc_name), "%s.grad_sum", l->name);
    return 0;
}

/* The ranks layer l's gradient is reduced over: those that hold the same
 * share of a channel-split layer (they differ in N, H and W only), else
 * all. */
static int param_segment(struct sc_net *net, int l, int *members)
{
    struct sc_net_dist *D = net->dist;
    if (!D->ld[l].chan.local) {
        for (int r = 0; r < D->rt->size; r++)
            members[r] = r;
        return D->rt->size;
    }
    return sc_grid_segment(&D->ld[l].xch.lin.grid, D->rt->rank, SC_RULE_GRAD_DIMS, members);
}

/* Which layers share a collective: the layers with parameters (and no
 * replication) in backward order, cut into buckets by the policy and where
 * the ranks that reduce them change (channel splitting; sc_rule_buckets). */
static int plan_buckets(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int order[net->nlayers], bucket_of[net->nlayers], n = 0;
    const struct sc_grid *grid[net->nlayers];
    double bytes[net->nlayers];
    for (int l = net->nlayers - 1; l >= 0; l--)
        if (share_of(net, l)->nparams && !D->ld[l].replica.on) {
            grid[n] = &D->ld[l].xch.lin.grid;
            bytes[n] = (double)(share_of(net, l)->nparams * sizeof(float));
            order[n++] = l;
        }
    ALLOC_ARRAY(D->buckets, n);
    D->nbuckets = sc_rule_buckets(&D->comm, n, grid, bytes, bucket_of);
    for (int i = 0; i < n; i++) {
        struct bucket *b = &D->buckets[bucket_of[i]];
        if (!b->layer)
            ALLOC_ARRAY(b->layer, n);
        struct layer_data *d = &D->ld[order[i]];
        d->params.bucket = (int)(b - D->buckets);
        d->params.offset = b->n;
        b->layer[b->nlayers++] = order[i];
        b->n += share_of(net, order[i])->nparams;
    }
    return 0;
}

/* A layer's initial parameters, as one rank would make them (for a share,
 * its part of the whole layer's). */
static int init_params(struct sc_net *net, int l, float *w, uint64_t seed)
{
    struct sc_layer *L = &net->layers[l];
    const struct layer_channels *c = &net->dist->ld[l].chan;
    if (!c->local) {
        L->ops->init(L, w, seed);
        return 0;
    }
    float *all = malloc(L->nparams * sizeof(float));
    if (!all)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    L->ops->init(L, all, seed);
    for (size_t i = 0; i < c->local->nparams; i++)
        w[i] = all[c->index[i]];
    free(all);
    return 0;
}

static int setup_bucket(struct sc_net *net, struct bucket *b, uint64_t seed)
{
    struct sc_net_dist *D = net->dist;
    int err, members[D->rt->size];
    const struct sc_layer *lo = &net->layers[b->layer[b->nlayers - 1]], *hi = &net->layers[b->layer[0]];
    if (b->nlayers == 1)
        snprintf(b->name, sizeof(b->name), "%s", lo->name);
    else
        snprintf(b->name, sizeof(b->name), "%s-%s", lo->name, hi->name);
    size_t sizes[b->nlayers];
    for (int i = 0; i < b->nlayers; i++)
        sizes[i] = share_of(net, b->layer[i])->nparams;
    int nmembers = param_segment(net, b->layer[0], members);
    struct sc_ring_opts ring = {(size_t)D->comm.segment_kb << 10,
                                D->comm.window,
                                nmembers < D->rt->size ? members : NULL,
                                nmembers,
                                D->comm.direct_kb,
                                D->comm.grad_bf16};
    if ((err =
             sc_bucket_create(&b->vectors, b->nlayers, sizes, D->rt->comm, D->nccl, &ring, D->comm.optimizer, b->name)))
        return err;
    for (int i = 0; i < b->nlayers; i++) {
        struct layer_data *d = &D->ld[b->layer[i]];
        float *v = sc_bucket_momentum(b->vectors);
        d->params.w = sc_bucket_weights(b->vectors) + d->params.offset;
        d->params.v = v ? v + d->params.offset : NULL;
        d->params.g = sc_bucket_grads(b->vectors) + d->params.offset;
        d->params.hw = sc_bucket_weight_slice(b->vectors, i);
        d->params.hg = sc_bucket_grad_slice(b->vectors, i);
        if ((err = init_params(net, b->layer[i], d->params.w, seed)))
            return err;
    }
    return 0;
}

/* The local buckets' updates go in groups of consecutive ones, in the
 * order their gradients complete (bucket order), one task a group instead
 * of one a bucket.  A group's task waits for its last bucket's gradient,
 * which holds back the updates of its first ones and the next forward pass
 * of their layers, so that a group closes once it holds
 * UPDATE_GROUP_FLOATS parameters or SC_SGD_MULTI_MAX buckets.  Its task
 * takes the highest priority of its buckets' (that of the one the next
 * forward pass needs first). */
#define UPDATE_GROUP_FLOATS ((size_t)1 << 18)

static void close_update_group(struct sc_net *net, int first, int last)
{
    struct sc_net_dist *D = net->dist;
    struct bucket *b = &D->buckets[last];
    b->update_last = 1;
    b->update_task = b->task;
    for (int i = first; i < last; i++)
        if (D->buckets[i].update_first == first && D->buckets[i].task.priority > b->update_task.priority)
            b->update_task = D->buckets[i].task;
    if (first == last)
        snprintf(b->update_name, sizeof b->update_name, "%s.sgd", b->name);
    else
        snprintf(b->update_name, sizeof b->update_name, "%s-%s.sgd", net->layers[b->layer[b->nlayers - 1]].name,
                 net->layers[D->buckets[first].layer[0]].name);
}

static void plan_update_groups(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int first = -1, last = -1, count = 0;
    size_t floats = 0;
    for (int i = 0; i < D->nbuckets; i++) {
        struct bucket *b = &D->buckets[i];
        b->update_first = -1;
        if (!sc_bucket_is_local(b->vectors))
            continue;
        if (first < 0)
            first = i, count = 0, floats = 0;
        b->update_first = first;
        count++;
        floats += b->n;
        last = i;
        if (floats >= UPDATE_GROUP_FLOATS || count == SC_SGD_MULTI_MAX) {
            close_update_group(net, first, last);
            first = -1;
        }
    }
    if (first >= 0)
        close_update_group(net, first, last);
}

/* Level k of [0, levels] as a priority in the scheduler's range [lo, hi]:
 * k itself from 0 up when the range has room, else scaled into it. */
static int priority_level(int k, int levels, int lo, int hi)
{
    long long width = (long long)hi - lo;
    if (width >= levels)
        return (int)(lo > 0 ? lo + k : hi - levels < 0 ? hi - levels + k : k);
    return (int)(lo + ((long long)k * width + levels / 2) / (levels ? levels : 1));
}

/* Priorities, highest first:
 * 1. Each layer's parameter gradient, as soon as its inputs exist (as
 *    autograd does): its collective is the longest path that starts in the
 *    backward pass once the network is slow, and it can only start after
 *    the gradient.  Computing the gradients after the backward chain
 *    instead (this plan's order before issue 18) left the largest one,
 *    wide.cfg's fc1, for the end of backprop: at 1 Gbit/s its 100 ms
 *    reduction was all exposed (367 against 514 images/s; the README.md
 *    of commit 74a1107).
 * 2. The chain of forward and backward-data tasks, which every later task
 *    waits for.
 * 3. The collectives' own tasks (accumulations, SGD, the transfers' order in
 *    StarPU-MPI), a layer above the ones after it: the order in which the
 *    next iteration's forward pass needs the updated weights.
 * With one worker for all of them, 3 goes above 2: below it, a collective's
 * task waited until its rank's worker had no chain task left, and each
 * step of a ring needs that on every rank in turn, so the rings crept and
 * the next forward pass and the next gradients waited for them.  Measured
 * on 16 cores, 4 ranks of 1 worker, mesh128 n4 `layer`: 35 images/s with
 * the collectives below the chain, 126 above it, 154 with `end`; with 2
 * workers a rank, 222 below it.  The price, on 2 cores at 1 Gbit/s: wide
 * n2 `layer` 7% slower (the reductions now interrupt backprop). */
static void plan_priorities(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int nparam = 0, j = 0;
    for (int l = 0; l < net->nlayers; l++)
        nparam += net->layers[l].nparams > 0;
    int on = D->comm.priorities, lo = starpu_sched_get_min_priority(), hi = starpu_sched_get_max_priority();
    int levels = nparam + 1;
#define LEVEL(k) (on ? priority_level(k, levels, lo, hi) : 0)
    enum sc_where compute = D->rt->cuda_only ? SC_WHERE_CUDA : SC_WHERE_ANY;
    int one_worker = (D->rt->cuda_only ? D->rt->ncuda : D->rt->ncpu + D->rt->ncuda) == 1;
    D->critical = (struct sc_task_opts){LEVEL(one_worker ? 0 : nparam), compute};
    /* CPU-only codelets; the load ahead below every other task */
    D->in.now = (struct sc_task_opts){D->critical.priority, SC_WHERE_ANY};
    D->in.later = (struct sc_task_opts){on ? lo : 0, SC_WHERE_ANY};
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        if (!net->layers[l].nparams)
            continue;
        int comm = LEVEL(nparam - 1 - j + one_worker);
        d->params.grad_task = (struct sc_task_opts){LEVEL(levels), compute};
        d->params.comm_task = (struct sc_task_opts){comm, compute};
        d->params.replica_task = (struct sc_task_opts){comm, D->replicated_where};
        j++;
    }
#undef LEVEL
    if (D->rt->rank == 0)
        SC_LOG(2, "task priorities: scheduler range [%d, %d], %d levels used%s", lo, hi, levels + 1,
               !on          ? " (off)"
               : one_worker ? " (one worker: collectives above the chain)"
                            : "");
    for (int i = 0; i < D->nbuckets; i++) {
        struct bucket *b = &D->buckets[i];
        b->task = D->ld[b->layer[b->nlayers - 1]].params.comm_task;
    }
}

static void summarize(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    const struct sc_comm_opts *c = &D->comm;
    char policy[32];
    switch (c->grad_comm) {
    case SC_GRAD_LAYER:
        snprintf(policy, sizeof(policy), "layer");
        break;
    case SC_GRAD_END:
        snprintf(policy, sizeof(policy), "end");
        break;
    case SC_GRAD_CHUNKS:
        snprintf(policy, sizeof(policy), "chunks:%d", c->chunk_layers);
        break;
    case SC_GRAD_BUCKET:
        snprintf(policy, sizeof(policy), "bucket:%g", c->bucket_mb);
        break;
    }
    int nrep = 0;
    for (int l = 0; l < net->nlayers; l++)
        nrep += D->ld[l].replica.on;
    char link[48] = "";
    if (D->link_bytes_per_s > 0)
        snprintf(link, sizeof link, " (auto: link %.2f GB/s)", D->link_bytes_per_s * 1e-9);
    snprintf(D->summary, sizeof(D->summary),
             "grad-comm %s (%d collective%s per iteration%s), %d KiB segments%s, input in %d slot%s%s", policy,
             D->nbuckets, D->nbuckets == 1 ? "" : "s", c->grad_bf16 ? ", gradients bf16 on the wire" : "",
             c->segment_kb, link, D->in.nslots, D->in.nslots == 1 ? "" : "s", nrep ? ", replicated gradients:" : "");
    for (int l = 0; l < net->nlayers; l++)
        if (D->ld[l].replica.on) {
            size_t len = strlen(D->summary);
            snprintf(D->summary + len, sizeof(D->summary) - len, " %s", net->layers[l].name);
        }
}

void sc_net_memory(const struct sc_net *net, struct sc_mem_report *r)
{
    const struct sc_net_dist *D = net->dist;
    size_t F = sizeof(float), window = 0;
    *r = (struct sc_mem_report){0, 0, 0, 0};
    /* the tensors' own bytes; the fetches', the parameters' and the
     * workers' windows from the plan */
    for (int s = 0; s < D->in.nslots; s++)
        r->activations += sc_tensor_bytes(&D->in.x[s]) + sc_tensor_bytes(&D->in.labels[s]);
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_layer *L = share_of((struct sc_net *)net, l);
        const struct layer_data *d = &D->ld[l];
        if (L->alias)
            continue;
        size_t out = (size_t)d->tiles.max * d->xch.out_nch * sc_box_area(d->xch.out_box) * F;
        size_t in = (size_t)d->tiles.max * d->xch.in_nch * sc_box_area(d->xch.in_box) * F;
        const struct sc_tensor *acts[] = {&d->tiles.y, &d->tiles.dy, &d->chan.part,  &d->chan.dpart, &d->dysum.dx_own,
                                          &d->xch.xin, &d->xch.dxin, &d->replica.xr, &d->replica.dyr};
        for (size_t i = 0; i < sizeof acts / sizeof *acts; i++)
            r->activations += sc_tensor_bytes(acts[i]);
        r->activations += sc_fetch_bytes(d->chan.reduce) + sc_fetch_bytes(d->chan.gather_dy) +
                          sc_fetch_bytes(d->xch.redist_fwd) + sc_fetch_bytes(d->xch.redist_bwd) +
                          sc_fetch_bytes(d->xch.halo_x) + sc_fetch_bytes(d->xch.halo_dy);
        if (L->scratch_bytes > 1) /* not the 1-byte handle of average pooling */
            r->workspaces += sc_tensor_bytes(&d->tiles.scratch);
        size_t halo_in = in;
        if (d->xch.halo_x) { /* the window with its halo */
            struct need_ctx c = {(struct sc_net *)net, l};
            halo_in = (size_t)d->tiles.max * d->xch.in_nch * sc_box_area(sc_net_need_x_box(&c, D->rt->rank)) * F;
        }
        if (halo_in + out > window)
            window = halo_in + out;
        if (!L->nparams)
            continue;
        size_t p = L->nparams * F;
        /* weights, momentum (SGD), reduced gradient; the partial gradients */
        int sgd = D->comm.optimizer == SC_OPT_SGD;
        r->parameters += (sgd ? 3 : 2) * p + sc_tensor_bytes(&d->params.tile_g) + sc_tensor_bytes(&d->replica.pg);
        r->optimizer_state += sgd ? p : d->replica.on ? sc_tensor_bytes(&d->replica.own_v) : 0;
        if (!sgd && d->replica.on)
            r->parameters += sc_tensor_bytes(&d->replica.own_v);
    }
    /* Adam's state of the buckets: the range each rank updates */
    for (int i = 0; D->comm.optimizer != SC_OPT_SGD && i < D->nbuckets; i++) {
        float *mem;
        size_t first, count;
        if (sc_bucket_adam_state(D->buckets[i].vectors, &mem, &first, &count)) {
            r->optimizer_state += sc_adam_state_floats(count) * F;
            r->parameters += sc_adam_state_floats(count) * F;
        }
    }
    r->workspaces += (size_t)D->rt->ncpu * window;
}

enum sc_optimizer sc_net_optimizer(const struct sc_net *net)
{
    return net->dist ? net->dist->comm.optimizer : SC_OPT_SGD;
}

uint64_t sc_net_grad_bytes(const struct sc_net *net)
{
    uint64_t n = 0;
    for (int i = 0; i < net->dist->nbuckets; i++)
        n += sc_bucket_bytes_sent(net->dist->buckets[i].vectors);
    return n;
}

uint64_t sc_net_grad_partial_bytes(const struct sc_net *net)
{
    uint64_t n = 0;
    for (int i = 0; i < net->dist->nbuckets; i++)
        n += sc_bucket_partial_bytes_sent(net->dist->buckets[i].vectors);
    return n;
}

/* --comm-segment auto: segments sized to the link between the ranks, which
 * every rank measures alike (tasks.h, sc_link_segment_kb). */
static int size_segments(struct sc_net_dist *D)
{
    return D->comm.segment_kb ? 0 : sc_link_segment_kb(D->rt->ctl, &D->comm.segment_kb, &D->link_bytes_per_s);
}

const char *sc_net_comm_summary(const struct sc_net *net)
{
    return net->dist ? net->dist->summary : "";
}

/* --precision bf16 is the CPU workers' (oneDNN's bf16 primitives): the
 * CUDA kernels compute in fp32, so a rank with CUDA workers would train
 * in fp32 where the others do not.  Refused alike on every rank. */
static int check_precision(struct sc_net_dist *D)
{
    int cuda = D->rt->ncuda > 0;
    if (D->rt->size > 1)
        MPI_Allreduce(MPI_IN_PLACE, &cuda, 1, MPI_INT, MPI_MAX, D->rt->ctl);
    if (D->comm.precision == SC_PRECISION_BF16 && cuda)
        return sc_error(SC_ERR_ARG, "--precision bf16: CUDA workers compute in fp32 only (STARPU_NCUDA=0 runs on "
                                    "the CPU workers alone)");
    return 0;
}

/* comm.accumulate: in range, and not with a gate over layers whose buffers
 * the gate's verdict updates (batch normalization's running statistics):
 * that update would need every micro-batch's statistics kept until the
 * verdict, after the last. */
static int check_accumulate(const struct sc_net *net, const struct sc_net_dist *D)
{
    int k = D->comm.accumulate;
    if (k < 1 || k > SC_ACCUMULATE_MAX)
        return sc_error(SC_ERR_ARG, "--accumulate %d: not an integer in [1, %d]", k, SC_ACCUMULATE_MAX);
    for (int l = 0; l < net->nlayers && k > 1 && D->comm.gate_updates; l++)
        if (net->layers[l].ops->update_buffers)
            return sc_error(SC_ERR_ARG,
                            "--accumulate %d with --nonfinite skip: layer %s ([%s] at line %d) keeps running "
                            "statistics, which a skipped step would need from every micro-batch; use --nonfinite "
                            "stop or --accumulate 1",
                            k, net->layers[l].name, net->layers[l].ops->section, net->layers[l].line);
    return 0;
}

int sc_net_setup(struct sc_net *net, struct sc_runtime *rt, int global_batch, uint64_t seed,
                 const struct sc_comm_opts *comm)
{
    if (global_batch < 1)
        return sc_error(SC_ERR_ARG, "global batch %d: must be at least 1", global_batch);
    struct sc_net_dist *D = calloc(1, sizeof(*D));
    if (!D)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    net->dist = D;
    D->rt = rt;
    if (comm)
        D->comm = *comm;
    else
        sc_comm_opts_default(&D->comm);
    D->global_batch = global_batch;
    if (!D->comm.accumulate)
        D->comm.accumulate = 1;
    D->nmicro = 1;
    int err;
    if ((err = check_precision(D)) || (err = check_accumulate(net, D)))
        return err;
    if ((err = size_segments(D)))
        return err;
    ALLOC_ARRAY(D->ld, net->nlayers);
    if (D->comm.parallel && strchr(D->comm.parallel, '=') && (err = sc_parallel_list_check(net, D->comm.parallel)))
        return err;
    if ((err = plan_layouts(net)))
        return err;
    int rep[net->nlayers];
    sc_rule_replicated(net, D->comm.fc_replicate, rt->size, rep);
    for (int l = 0; l < net->nlayers && rt->size > 1 && D->comm.fc_replicate > 0; l++)
        if (!net->layers[l].alias && (err = sc_rule_replicate_grid(&D->ld[l].xch.lin.grid)))
            return err;
    int T = D->ntiles;
    struct layer_data *last = &D->ld[net->nlayers - 1];
    /* the sample layout's tiles, which replicated layers exchange */
    D->local_batch = global_batch / rt->size;
    D->tile_n = last->tiles.n;
    D->tile_max = last->tiles.max;
    int oh, ow;
    sc_net_label_shape(net, &oh, &ow);
    D->loss_pixels = oh * ow;
    if ((err = sc_net_input_setup(net)) || (err = sc_tensor_alloc_vectors(&D->stats, T, 2, sizeof(float))) ||
        (err = sc_tensor_alloc_vectors(&D->eval_acc, T, 2, sizeof(float))) ||
        (D->comm.accumulate > 1 && (err = sc_tensor_alloc_vectors(&D->step_stats, T, 2, sizeof(float)))))
        return err;
    for (int l = 0; l < net->nlayers; l++)
        D->ld[l].replica.on = rep[l];
    /* Counted on one rank too, so that a command line is refused alike
     * on any number of ranks. */
    int replicable = 0;
    for (int l = 0; l < net->nlayers; l++)
        replicable += sc_rule_replicable(&net->layers[l]);
    if (D->comm.fc_replicate > replicable)
        return sc_error(SC_ERR_ARG, "--fc-replicate %d: the model has %d [connected] layers with parameters",
                        D->comm.fc_replicate, replicable);
    /* Every rank computes a replicated layer's gradient for itself and must
     * get the same bits: on CUDA workers where every rank has one, else on
     * CPU workers, never some pieces on either. */
    if (rt->size > 1 && D->comm.fc_replicate) {
        int all_cuda = rt->ncuda > 0;
        MPI_Allreduce(MPI_IN_PLACE, &all_cuda, 1, MPI_INT, MPI_MIN, rt->ctl);
        D->replicated_where = all_cuda ? SC_WHERE_CUDA : SC_WHERE_CPU;
    }
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        struct sc_layer *L = share_of(net, l);
        if ((err = setup_tiles(net, L, d)) || (d->replica.on && (err = setup_replicated(net, L, d, seed))) ||
            (L->ops->setup && (err = L->ops->setup(L, T))))
            return err;
    }
    if ((err = sc_net_plan_gradient_sums(net)))
        return err;
    for (int l = 0; l < net->nlayers; l++)
        if ((err = sc_net_plan_exchanges(net, l)))
            return err;
    if ((err = sc_net_plan_blocks(net)))
        return err;
    if ((err = plan_buckets(net)))
        return err;
    /* On one rank there is nothing to sum, but the same command line is
     * refused as on several. */
    if (D->comm.nccl &&
        ((err = check_nccl_grids(net)) || (err = rt->size > 1 ? sc_nccl_create(&D->nccl, rt->comm) : sc_nccl_check())))
        return err;
    for (int i = 0; i < D->nbuckets; i++)
        if ((err = setup_bucket(net, &D->buckets[i], seed)))
            return err;
    if (D->comm.gate_updates && (err = sc_gate_create(&D->gate, rt->comm, "nonfinite")))
        return err;
    if (D->gate && D->nccl) /* D->nccl is made above */
        sc_gate_use_nccl(D->gate, D->nccl);
    /* the second input slot once every other tensor's bytes are known */
    if ((err = sc_net_input_add_slots(net)))
        return err;
    plan_priorities(net);
    plan_update_groups(net);
    summarize(net);
    snprintf(D->acc_name, sizeof(D->acc_name), "eval.accumulate");
    snprintf(D->step_stats_name, sizeof(D->step_stats_name), "loss.accumulate");
    return 0;
}

static void destroy_layer(struct layer_data *d)
{
    struct sc_tensor *tensors[] = {&d->tiles.y,       &d->tiles.dy,      &d->tiles.scratch, &d->params.tile_g,
                                   &d->replica.xr,    &d->replica.dyr,   &d->replica.pg,    &d->replica.own_w,
                                   &d->replica.own_v, &d->replica.own_g, &d->xch.xin,       &d->xch.dxin,
                                   &d->dysum.dx_own,  &d->chan.part,     &d->chan.dpart};
    for (size_t i = 0; i < sizeof tensors / sizeof *tensors; i++)
        sc_tensor_free(tensors[i]);
    free(d->dysum.contrib), free(d->dysum.from), free(d->chan.index);
    sc_fetch_destroy(d->chan.reduce);
    sc_fetch_destroy(d->chan.gather_dy);
    if (d->chan.local)
        free(d->chan.local->priv);
    free(d->chan.local);
    sc_fetch_destroy(d->xch.redist_fwd);
    sc_fetch_destroy(d->xch.redist_bwd);
    sc_fetch_destroy(d->xch.halo_x);
    sc_fetch_destroy(d->xch.halo_dy);
    sc_group_sum_destroy(d->xch.gsum[0]);
    sc_group_sum_destroy(d->xch.gsum[1]);
    free(d->xch.split);
    free(d->tiles.s0), free(d->tiles.n);
}

static void destroy_bucket(struct bucket *b)
{
    sc_bucket_destroy(b->vectors);
    free(b->layer);
}

void sc_net_destroy(struct sc_net *net)
{
    if (!net)
        return;
    struct sc_net_dist *D = net->dist;
    if (D) {
        sc_tasks_wait_all(D->rt->comm);
        for (int i = 0; D->ld && i < net->nlayers; i++) {
            if (net->layers[i].ops->teardown)
                net->layers[i].ops->teardown(share_of(net, i));
            destroy_layer(&D->ld[i]);
        }
        for (int i = 0; D->buckets && i < D->nbuckets; i++)
            destroy_bucket(&D->buckets[i]);
        sc_gate_destroy(D->gate);
        sc_nccl_destroy(D->nccl);
        sc_net_input_destroy(D);
        sc_tensor_free(&D->stats);
        sc_tensor_free(&D->eval_acc);
        sc_tensor_free(&D->step_stats);
        free(D->ld), free(D->buckets);
        free(D);
    }
    for (int i = 0; net->layers && i < net->nlayers; i++)
        free(net->layers[i].priv);
    free(net->layers);
    free(net);
}
