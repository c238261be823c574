/* The submission of whole iterations: the layers' tasks, the exchanges
 * between them, the sums of gradients, the buckets' collectives and the
 * updates; evaluation and the sync points. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "src/net/net_private.h"

/* Assemble each of this rank's tiles of a tensor (the samples of dst_d's
 * tiles, block dst) from the fetch's sources: copied, or summed (a
 * reduction) and then, with relu, through ReLU. */
static int submit_assemble(const struct sc_task_opts *opts, struct sc_fetch *f, starpu_data_handle_t *src_tiles,
                           const struct layer_data *dst_d, struct sc_block dst, int relu,
                           starpu_data_handle_t *dst_tiles, const char *name)
{
    int err;
    if ((err = sc_fetch_submit(f, opts, src_tiles)))
        return err;
    for (int t = 0; t < dst_d->xch.lin.ntiles; t++) {
        struct sc_region_args a = {.op = sc_fetch_sums(f) ? SC_REGION_SUM : SC_REGION_COPY,
                                   .c = dst.ch1 - dst.ch0,
                                   .dst_ch0 = dst.ch0,
                                   .relu = relu};
        a.s0 = a.dst_s0 = dst_d->tiles.s0[t];
        a.n = a.dst_n = dst_d->tiles.n[t];
        a.region = a.dst_box = dst.box;
        starpu_data_handle_t h[SC_REGION_MAX_SRC];
        int ns = sc_fetch_sources(f, src_tiles, t, NULL, a.src, h, SC_REGION_MAX_SRC);
        if (ns < 0)
            return ns;
        a.na = ns;
        if (a.n > 0 && (err = sc_insert_region(opts, &a, h, NULL, dst_tiles[t], name)))
            return err;
    }
    return 0;
}

/* ---- iterations ---- */

/* This rank's blocks of layer l's input and output, with their channels. */
static struct sc_block in_block(const struct layer_data *d)
{
    return (struct sc_block){d->xch.in_box, d->xch.in_ch0, d->xch.in_ch0 + d->xch.in_nch};
}
static struct sc_block out_block(const struct layer_data *d)
{
    return (struct sc_block){d->xch.out_box, d->xch.out_ch0, d->xch.out_ch0 + d->xch.out_nch};
}

static struct sc_tile_io tile_io(struct sc_net *net, int l, int t, int train)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    /* the first layer's x moves from input slot to slot */
    if (d->xch.split)
        d->xch.split[t].x_tiles = x_tiles(net, l);
    struct sc_tile_io io = {
        .n = d->tiles.n[t],
        .x = x_tiles(net, l)[t],
        .x2 = net->layers[l].nsrc > 1 ? sc_tensor_handle(&D->ld[net->layers[l].src[1]].tiles.y, t) : NULL,
        /* a channel-split convolution writes its partial sums, and reads
         * all the dy of its filters */
        .y = sc_tensor_handle(d->chan.partial ? &d->chan.part : &d->tiles.y, t),
        .dx = dx_tiles(net, l) ? dx_tiles(net, l)[t] : NULL,
        .dy = sc_tensor_handle(d->chan.partial ? &d->chan.dpart : &d->tiles.dy, t),
        .scratch = sc_tensor_handle(&d->tiles.scratch, t),
        .params = d->params.hw,
        /* tile 0 of the iteration's first micro-batch writes the gradient
         * itself; every other part is added to it */
        .dparams = d->replica.on   ? NULL
                   : t || D->micro ? sc_tensor_handle(&d->params.tile_g, t)
                                   : d->params.hg,
        .labels = sc_tensor_handle(input_labels(D), t),
        .stats = sc_tensor_handle(&D->stats, t),
        /* the mean over all the micro-batches of the iteration */
        .loss_scale = 1.0f / (float)((int64_t)D->global_batch * D->comm.accumulate),
        .train = train,
        .task = &D->critical,
        .grad_task = &d->params.grad_task,
        .split = d->xch.split ? &d->xch.split[t] : NULL,
        .group_sum = d->xch.gsum[0] ? d->xch.gsum : NULL,
        .gate = train && D->gate ? sc_gate_handle(D->gate) : NULL,
        .x_blk = sc_net_x_block(net, l),
        .y_blk = d->tiles.blk,
        .precision = D->comm.precision,
    };
    return io;
}

/* dy of layer l = the sum of its readers' parts, in a fixed order.  The
 * last part's addition takes the layer's activation backward along where
 * the layer can (act_backward_sum): *fused then says that the activation's
 * backward is done. */
static int submit_gradient_sum(struct sc_net *net, int l, int *fused)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    struct sc_layer *L = share_of(net, l);
    int n = (int)((size_t)d->tiles.max * d->xch.out_nch * sc_box_area(d->xch.out_box)), err;
    int last = d->dysum.ncontrib - 1;
    /* a channel-split convolution's activation follows the sum of its
     * partial outputs instead (submit_partial_dy) */
    int fuse = L->ops->act_backward_sum && !d->chan.partial && last >= (d->dysum.direct ? 0 : 1);
    for (int i = 0; i < d->dysum.ncontrib; i++)
        for (int t = 0; t < D->ntiles; t++) {
            if (!d->tiles.n[t])
                continue;
            starpu_data_handle_t dy = sc_tensor_handle(&d->tiles.dy, t), part = d->dysum.contrib[i][t];
            if (i == last && fuse) {
                struct sc_tile_io io = tile_io(net, l, t, 1);
                if ((err = L->ops->act_backward_sum(L, &io, part)) != 1) {
                    if (err)
                        return err;
                    continue;
                }
                fuse = 0; /* no activation: a plain sum */
            }
            err = i == 0 && !d->dysum.direct ? sc_insert_copy(&D->critical, n, part, dy, d->dysum.name)
                                             : sc_insert_accumulate(&D->critical, dy, part, d->dysum.name);
            if (err)
                return err;
        }
    *fused = fuse;
    return 0;
}

void sc_net_label_shape(const struct sc_net *net, int *oh, int *ow)
{
    const struct sc_layer *loss = &net->layers[net->nlayers - 1];
    *oh = loss->whole_sample ? 1 : loss->in.h;
    *ow = loss->whole_sample ? 1 : loss->in.w;
}

struct sc_synth_args sc_dataset_synth_args(const struct sc_dataset *ds, struct sc_box box, int n)
{
    return (struct sc_synth_args){.seed = ds->seed,
                                  .kind = ds->synthetic - 1,
                                  .c = ds->c,
                                  .h = ds->h,
                                  .w = ds->w,
                                  .classes = ds->classes,
                                  .r0 = box.r0,
                                  .r1 = box.r1,
                                  .c0 = box.c0,
                                  .c1 = box.c1,
                                  .n = n,
                                  .nan_sample = ds->nan_sample};
}

/* Make batch idx (B entries; -1: padding) the current input, then run
 * the forward pass (and the loss) of every tile, with the
 * redistributions and halo exchanges between layers. */
static int submit_forward(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, int train)
{
    struct sc_net_dist *D = net->dist;
    int err;
    const struct sc_task_opts *crit = &D->critical;
    if ((err = sc_net_input_load(net, ds, idx)))
        return err;
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        struct sc_layer *L = share_of(net, l);
        if (L->alias)
            continue;
        if (d->xch.redist_fwd &&
            (err = submit_assemble(&D->critical, d->xch.redist_fwd, sc_tensor_handles(&D->ld[L->src[0]].tiles.y), d,
                                   in_block(d), 0, sc_tensor_handles(&d->xch.xin), d->xch.assemble_name)))
            return err;
        if (d->xch.halo_x && (err = sc_fetch_submit(d->xch.halo_x, crit, x_tiles(net, l))))
            return err;
        if (L->ops->forward_tiles) {
            struct sc_tile_io io[D->ntiles];
            for (int t = 0; t < D->ntiles; t++)
                io[t] = tile_io(net, l, t, train);
            if ((err = L->ops->forward_tiles(L, io, D->ntiles)))
                return err;
        }
        for (int t = 0; t < D->ntiles && !L->ops->forward_tiles; t++) {
            struct sc_tile_io io = tile_io(net, l, t, train);
            if (io.n && (err = L->ops->forward(L, &io)))
                return err;
        }
        /* the partial sums' reduce-scatter, and the activation after it */
        if (d->chan.partial &&
            (err = submit_assemble(&D->critical, d->chan.reduce, sc_tensor_handles(&d->chan.part), d, out_block(d),
                                   L->post_relu, sc_tensor_handles(&d->tiles.y), d->chan.reduce_name)))
            return err;
        if (train && d->replica.on) {
            err = D->nccl ? sc_nccl_tiles_allgather_submit(D->nccl, &d->params.comm_task, D->ntiles, x_tiles(net, l),
                                                           sc_tensor_handles(&d->replica.xr), d->replica.gather_x)
                          : sc_tiles_allgather_submit(&d->params.comm_task, D->rt->comm, D->ntiles, d->replica.tag_x,
                                                      x_tiles(net, l), sc_tensor_handles(&d->replica.xr),
                                                      d->replica.gather_x);
            if (err)
                return err;
        }
    }
    return 0;
}

/* Whether the micro-batch being submitted is its iteration's last: the one
 * whose gradients are reduced and applied. */
static int last_micro(const struct sc_net_dist *D)
{
    return D->micro == D->nmicro - 1;
}

/* The whole gradient of a replicated layer from every rank's inputs and
 * errors, all local, added to the iteration's; then, after the last
 * micro-batch, its update, unless a gate defers it. */
static int submit_replicated_grad(struct sc_net *net, int l, const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    struct sc_layer *layer = &net->layers[l];
    struct layer_data *d = &D->ld[l];
    int P = D->rt->size, T = D->ntiles, me = D->rt->rank, err;
    starpu_data_handle_t *dy = sc_tensor_handles(&d->tiles.dy), *dyr = sc_tensor_handles(&d->replica.dyr);
    err = D->nccl ? sc_nccl_tiles_allgather_submit(D->nccl, &d->params.comm_task, T, dy, dyr, d->replica.gather_dy)
                  : sc_tiles_allgather_submit(&d->params.comm_task, D->rt->comm, T, d->replica.tag_dy, dy, dyr,
                                              d->replica.gather_dy);
    if (err)
        return err;
    for (int q = 0; q < P && !err; q++)
        for (int t = 0; t < T && !err; t++) {
            struct sc_tile_io io = tile_io(net, l, t, 1);
            if (q != me) {
                io.x = sc_tensor_handle(&d->replica.xr, q * T + t);
                io.dy = sc_tensor_handle(&d->replica.dyr, q * T + t);
            }
            io.dparams = q * T + t || D->micro ? sc_tensor_handle(&d->replica.pg, q * T + t) : d->params.hg;
            /* on the workers that give every rank the same bits */
            io.task = io.grad_task = &d->params.replica_task;
            err = layer->ops->param_grad(layer, &io);
        }
    if (err)
        return err;
    for (int i = D->micro ? 0 : 1; i < P * T; i++)
        if ((err = sc_insert_accumulate(&d->params.grad_task, d->params.hg, sc_tensor_handle(&d->replica.pg, i),
                                        d->replica.acc_name)))
            return err;
    if (!last_micro(D))
        return 0;
    if (D->gate)
        return sc_gate_check_submit(D->gate, &d->params.grad_task, d->params.hg);
    return sc_insert_sgd(&d->params.grad_task, sgd, d->params.hw, sc_tensor_handle(&d->replica.own_v, 0), d->params.hg,
                         d->replica.sgd_name);
}

/* The collective of a bucket, once the gradients of all its layers are
 * submitted; a gate puts its verdict between the two halves. */
static int submit_bucket_reduce(struct bucket *b, struct sc_gate *gate)
{
    return sc_bucket_reduce_submit(b->vectors, &b->task, gate);
}

/* A reduced bucket's update: at once, or with the group of local buckets
 * it closes (plan_update_groups); a local bucket that does not close its
 * group waits for the one that does. */
static int submit_bucket_update(struct sc_net *net, int i, const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    struct bucket *b = &D->buckets[i];
    if (b->update_first < 0)
        return sc_bucket_update_submit(b->vectors, &b->task, sgd);
    if (!b->update_last)
        return 0;
    struct sc_bucket *group[SC_SGD_MULTI_MAX];
    int n = 0;
    for (int j = b->update_first; j <= i && n < SC_SGD_MULTI_MAX; j++)
        if (D->buckets[j].update_first == b->update_first)
            group[n++] = D->buckets[j].vectors;
    return sc_buckets_update_submit(group, n, &b->update_task, sgd, b->update_name);
}

/* With a gate: the verdict over the whole batch, then every update, in
 * the order the gradients came (backward). */
static int submit_gated_updates(struct sc_net *net, const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    struct sc_sgd_args gated = *sgd;
    gated.gate = sc_gate_handle(D->gate);
    int err = sc_gate_close_submit(D->gate, &D->critical);
    for (int l = 0; l < net->nlayers && !err; l++) {
        struct sc_layer *layer = share_of(net, l);
        if (layer->alias || !layer->ops->update_buffers)
            continue;
        struct sc_tile_io io[D->ntiles];
        for (int t = 0; t < D->ntiles; t++)
            io[t] = tile_io(net, l, t, 1);
        err = layer->ops->update_buffers(layer, io, D->ntiles);
    }
    for (int l = net->nlayers - 1; l >= 0 && !err; l--) {
        struct layer_data *d = &D->ld[l];
        if (net->layers[l].alias || !net->layers[l].nparams)
            continue;
        if (d->replica.on) {
            err = sc_insert_sgd(&d->params.grad_task, &gated, d->params.hw, sc_tensor_handle(&d->replica.own_v, 0),
                                d->params.hg, d->replica.sgd_name);
        } else {
            struct bucket *b = &D->buckets[d->params.bucket];
            if (b->layer[b->nlayers - 1] == l)
                err = submit_bucket_update(net, d->params.bucket, &gated);
        }
    }
    return err;
}

/* A channel-split convolution's dy: through the activation it applied
 * after the sum, then gathered over the ranks of its C group (the
 * allgather that is the reduce-scatter's backward). */
static int submit_partial_dy(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    int err;
    size_t per_sample = (size_t)d->xch.out_nch * sc_box_area(d->xch.out_box);
    for (int t = 0; t < D->ntiles && share_of(net, l)->post_relu; t++)
        if (d->tiles.n[t] && (err = sc_insert_relu_bwd(&D->critical, (int)(d->tiles.n[t] * per_sample),
                                                       sc_tensor_handle(&d->tiles.dy, t),
                                                       sc_tensor_handle(&d->tiles.y, t), d->chan.relu_name)))
            return err;
    struct sc_block part = {d->xch.out_box, d->chan.part_ch0, d->chan.part_ch0 + d->chan.part_nch};
    return submit_assemble(&D->critical, d->chan.gather_dy, sc_tensor_handles(&d->tiles.dy), d, part, 0,
                           sc_tensor_handles(&d->chan.dpart), d->chan.gather_name);
}

/* The loss's statistics of this micro-batch, added to the iteration's
 * (where it has several). */
static int submit_step_stats(struct sc_net_dist *D)
{
    int err = 0;
    for (int t = 0; t < D->ntiles && !err && sc_tensor_exists(&D->step_stats); t++) {
        starpu_data_handle_t sum = sc_tensor_handle(&D->step_stats, t), part = sc_tensor_handle(&D->stats, t);
        err = D->micro ? sc_insert_accumulate(&D->critical, sum, part, D->step_stats_name)
                       : sc_insert_copy(&D->critical, 2, part, sum, D->step_stats_name);
    }
    return err;
}

/* Micro-batch D->micro of an iteration: the gate opened by the first, the
 * parameter gradients added up, and after the last the buckets'
 * collectives and updates. */
static int submit_micro_batch(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, const int32_t *next,
                              const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    int err;
    if ((D->gate && !D->micro && (err = sc_gate_open_submit(D->gate, &D->critical))) ||
        (err = submit_forward(net, ds, idx, 1)) || (err = submit_step_stats(D)))
        return err;
    /* Submitted before the backward pass, so that a worker with no task of
     * it ready loads the next batch meanwhile. */
    if (next && (err = sc_net_input_load_ahead(net, ds, next)))
        return err;
    for (int l = net->nlayers - 1; l >= 0; l--) {
        struct sc_layer *layer = share_of(net, l);
        struct layer_data *d = &D->ld[l];
        if (layer->alias)
            continue;
        int fused;
        if ((err = submit_gradient_sum(net, l, &fused)))
            return err;
        for (int t = 0; t < D->ntiles && layer->ops->act_backward && !fused; t++) {
            struct sc_tile_io io = tile_io(net, l, t, 1);
            if (io.n && (err = layer->ops->act_backward(layer, &io)))
                return err;
        }
        if (d->chan.partial && (err = submit_partial_dy(net, l)))
            return err;
        if (d->xch.halo_dy &&
            (err = sc_fetch_submit(d->xch.halo_dy, &D->critical,
                                   sc_tensor_handles(d->chan.partial ? &d->chan.dpart : &d->tiles.dy))))
            return err;
        if (layer->ops->backward_tiles) {
            struct sc_tile_io io[D->ntiles];
            for (int t = 0; t < D->ntiles; t++)
                io[t] = tile_io(net, l, t, 1);
            if ((err = layer->ops->backward_tiles(layer, io, D->ntiles)))
                return err;
        }
        for (int t = 0; t < D->ntiles && layer->ops->backward; t++) {
            struct sc_tile_io io = tile_io(net, l, t, 1);
            if (io.n && (err = layer->ops->backward(layer, &io)))
                return err;
        }
        if (d->xch.redist_bwd &&
            (err = submit_assemble(&D->critical, d->xch.redist_bwd, sc_tensor_handles(&d->xch.dxin),
                                   &D->ld[layer->src[0]], out_block(&D->ld[layer->src[0]]), 0, input_grad_tiles(net, l),
                                   d->xch.assemble_name)))
            return err;
        if (!layer->nparams)
            continue;
        if (d->replica.on) {
            if ((err = submit_replicated_grad(net, l, sgd)))
                return err;
            continue;
        }
        for (int t = D->micro ? 0 : 1; t < D->ntiles; t++)
            if ((err = sc_insert_accumulate(&d->params.grad_task, d->params.hg, sc_tensor_handle(&d->params.tile_g, t),
                                            layer->name)))
                return err;
        /* A bucket's collective right after the gradient of its last layer
         * in the iteration's last micro-batch, so that it overlaps the
         * backward pass of the layers below. */
        struct bucket *b = &D->buckets[d->params.bucket];
        if (b->layer[b->nlayers - 1] != l || !last_micro(D))
            continue;
        if ((err = submit_bucket_reduce(b, D->gate)) ||
            (!D->gate && (err = submit_bucket_update(net, d->params.bucket, sgd))))
            return err;
    }
    if (D->gate && last_micro(D) && (err = submit_gated_updates(net, sgd)))
        return err;
    /* Bounded lookahead: tasks are small, but an epoch of them is not. */
    sc_tasks_throttle(4096);
    return 0;
}

int sc_net_submit_step(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, int nmicro,
                       const int32_t *next, const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    int B = D->global_batch, err = 0;
    D->nmicro = nmicro;
    for (D->micro = 0; D->micro < nmicro && !err; D->micro++)
        err = submit_micro_batch(net, ds, idx + (size_t)D->micro * B,
                                 D->micro + 1 < nmicro ? idx + (size_t)(D->micro + 1) * B : next, sgd);
    D->micro = 0;
    if (!err)
        net->iteration++;
    return err;
}

int sc_net_train_batch(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, const int32_t *next,
                       const struct sc_sgd_args *sgd)
{
    return sc_net_submit_step(net, ds, idx, net->dist->comm.accumulate, next, sgd);
}

static void sum_stats(struct sc_net *net, const struct sc_tensor *stats, double out[2])
{
    struct sc_net_dist *D = net->dist;
    double local[2] = {0, 0};
    for (int t = 0; t < D->ntiles; t++) {
        const float *mem = sc_tensor_buf(stats, t);
        starpu_data_acquire(sc_tensor_handle(stats, t), STARPU_R);
        local[0] += mem[0];
        local[1] += mem[1];
        starpu_data_release(sc_tensor_handle(stats, t));
    }
    MPI_Allreduce(local, out, 2, MPI_DOUBLE, MPI_SUM, D->rt->ctl);
}

double sc_net_last_loss(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    double s[2];
    sum_stats(net, sc_tensor_exists(&D->step_stats) ? &D->step_stats : &D->stats, s);
    return s[0] / ((double)D->global_batch * (sc_tensor_exists(&D->step_stats) ? D->nmicro : 1)) / D->loss_pixels;
}

int sc_net_evaluate(struct sc_net *net, const struct sc_dataset *ds, double *accuracy, double *loss)
{
    struct sc_net_dist *D = net->dist;
    int B = D->global_batch, err;
    for (int t = 0; t < D->ntiles; t++) {
        float *acc = sc_tensor_buf(&D->eval_acc, t);
        starpu_data_acquire(sc_tensor_handle(&D->eval_acc, t), STARPU_W);
        acc[0] = acc[1] = 0;
        starpu_data_release(sc_tensor_handle(&D->eval_acc, t));
    }
    /* Whole batches only, so that every tile and exchange keeps its shape:
     * the last one is padded with samples the loss ignores. */
    int32_t *idx = malloc((size_t)B * sizeof(*idx));
    if (!idx)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    struct layer_data *last = &D->ld[net->nlayers - 1];
    for (int start = 0; start < ds->n; start += B) {
        for (int i = 0; i < B; i++)
            idx[i] = start + i < ds->n ? start + i : -1;
        if ((err = submit_forward(net, ds, idx, 0))) {
            free(idx);
            return err;
        }
        for (int t = 0; t < D->ntiles; t++)
            if (last->tiles.n[t] && (err = sc_insert_accumulate(&D->critical, sc_tensor_handle(&D->eval_acc, t),
                                                                sc_tensor_handle(&D->stats, t), D->acc_name))) {
                free(idx);
                return err;
            }
        sc_tasks_throttle(4096);
    }
    free(idx);
    double s[2];
    sum_stats(net, &D->eval_acc, s);
    *loss = s[0] / ds->n / D->loss_pixels;
    *accuracy = s[1] / ds->n / D->loss_pixels;
    return 0;
}

void sc_net_wait(struct sc_net *net)
{
    sc_tasks_wait_all(net->dist->rt->comm);
}
