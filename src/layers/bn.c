/* [batchnorm]: batch normalization (PyTorch's BatchNorm2d in training
 * mode, eps 1e-5, momentum 0.1), optionally followed by ReLU.
 *
 * Statistics span the rank's whole batch, not a tile: the tiles' sums are
 * added (in double), and with stats=sample (the default) also summed over
 * the ranks that hold the other blocks of the same samples, so that a
 * spatially split layer normalizes as one rank would.  stats=local keeps
 * each rank's own block statistics (cheaper, but a different model under
 * spatial splitting).  Evaluation uses the running statistics. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codelets/codelets.h"
#include "src/layers/layers.h"
#include "tasks/tensor.h"

/* Per tile: the sums of the batch statistics and those of backward (2
 * doubles a channel each; tile 0 then holds their totals), and the mean and
 * inverse deviation the forward pass saves; the running statistics (one
 * tile). */
struct bn_state {
    int relu, sample_stats;
    struct sc_tensor stats, dstats, saved, running;
    char stats_name[48], fwd[48], bwd[48], bwd_data[48], bwd_stats[48], param_grad[48], running_name[48];
};

static int bn_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    struct bn_state *p = calloc(1, sizeof(*p));
    if (!p)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    l->priv = p;
    const char *mode;
    int err;
    if ((err = sc_layer_parse_activation(cfg, s, &p->relu)) || (err = sc_cfg_get_str(cfg, s, "stats", "sample", &mode)))
        return err;
    if (strcmp(mode, "sample") && strcmp(mode, "local"))
        return sc_error(SC_ERR_PARSE,
                        "%s:%d: stats=%s in [batchnorm]: sample (over every block of the samples) "
                        "or local (this rank's block)",
                        cfg->path, s->line, mode);
    p->sample_stats = !strcmp(mode, "sample");
    l->torch_modules = p->relu ? 2 : 1;
    return 0;
}

static int bn_shapes(struct sc_layer *l, int max_n)
{
    struct bn_state *p = l->priv;
    (void)max_n;
    int c = l->in.c;
    l->out = l->in;
    l->reads_dy_only = !p->relu; /* with ReLU, its backward is in place on dy */
    l->nparams = 2 * (size_t)c;
    l->ntensors = 2;
    l->tensors[0] = (struct sc_param_tensor){"weight", 1, {c}, 0, (size_t)c};
    l->tensors[1] = (struct sc_param_tensor){"bias", 1, {c}, (size_t)c, (size_t)c};
    l->win_r = l->win_c = (struct sc_window){0, 1, 0, 0, 0}; /* pointwise */
    l->group_sum_len = p->sample_stats ? 2 * (size_t)c : 0;
    l->nbuffers = 2;
    l->layouts = SC_LAYOUTS_SAME;
    l->nbuffer_values = 2 * (size_t)c;
    l->buffers[0] = (struct sc_param_tensor){"running_mean", 1, {c}, 0, (size_t)c};
    l->buffers[1] = (struct sc_param_tensor){"running_var", 1, {c}, (size_t)c, (size_t)c};
    snprintf(p->stats_name, sizeof(p->stats_name), "%s.stats", l->name);
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    snprintf(p->bwd_data, sizeof(p->bwd_data), "%s.bwd_data", l->name);
    snprintf(p->bwd_stats, sizeof(p->bwd_stats), "%s.bwd_stats", l->name);
    snprintf(p->param_grad, sizeof(p->param_grad), "%s.param_grad", l->name);
    snprintf(p->bwd, sizeof(p->bwd), "%s.bwd", l->name);
    snprintf(p->running_name, sizeof(p->running_name), "%s.running", l->name);
    return 0;
}

static void bn_init(struct sc_layer *l, float *params, uint64_t seed)
{
    (void)seed;
    for (int i = 0; i < l->in.c; i++) {
        params[i] = 1.0f;
        params[l->in.c + i] = 0.0f;
    }
}

static int bn_setup(struct sc_layer *l, int ntiles)
{
    struct bn_state *p = l->priv;
    size_t c2 = 2 * (size_t)l->in.c;
    int err;
    if ((err = sc_tensor_alloc_vectors(&p->stats, ntiles, c2, sizeof(double))) ||
        (err = sc_tensor_alloc_vectors(&p->dstats, ntiles, c2, sizeof(double))) ||
        (err = sc_tensor_alloc_vectors(&p->saved, ntiles, c2, sizeof(float))) ||
        (err = sc_tensor_alloc_vectors(&p->running, 1, c2, sizeof(float))))
        return err;
    float *running = sc_tensor_buf(&p->running, 0);
    for (int i = 0; i < l->in.c; i++)
        running[l->in.c + i] = 1.0f; /* running_var starts at 1 */
    return 0;
}

static void bn_teardown(struct sc_layer *l)
{
    struct bn_state *p = l->priv;
    if (!p)
        return;
    sc_tensor_free(&p->stats);
    sc_tensor_free(&p->dstats);
    sc_tensor_free(&p->saved);
    sc_tensor_free(&p->running);
}

static long pixels(const struct sc_layer *l, const struct sc_tile_io *io)
{
    return io->split ? sc_box_area(io->split->in_box) : (long)l->in.h * l->in.w;
}

static struct sc_bn_args bn_args(const struct sc_layer *l, const struct sc_tile_io *io)
{
    const struct bn_state *p = l->priv;
    return (struct sc_bn_args){.n = io->n,
                               .c = l->in.c,
                               .hw = (int)pixels(l, io),
                               .eps = 1e-5f,
                               .momentum = 0.1f,
                               .relu = p->relu,
                               .blk = io->y_blk};
}

/* Elements per channel the statistics span: the rank's samples times the
 * whole image (sample) or the rank's block (local). */
static double stats_count(const struct sc_layer *l, const struct sc_tile_io *io, int ntiles)
{
    const struct bn_state *p = l->priv;
    double n = 0;
    for (int t = 0; t < ntiles; t++)
        n += io[t].n;
    return n * (p->sample_stats && io[0].group_sum ? (double)l->in.h * l->in.w : (double)pixels(l, &io[0]));
}

/* stats[0] = the sum over the tiles (and the sample's ranks) of stats[t] */
static int reduce(const struct sc_layer *l, const struct sc_tile_io *io, int ntiles, starpu_data_handle_t *h, int which)
{
    const struct bn_state *p = l->priv;
    int err;
    for (int t = 1; t < ntiles; t++)
        if (io[t].n && (err = sc_insert_accumulate_f64(io[t].task, h[0], h[t], p->stats_name)))
            return err;
    if (p->sample_stats && io[0].group_sum && (err = sc_group_sum_submit(io[0].group_sum[which], io[0].task, h[0])))
        return err;
    return 0;
}

/* 1 when the statistics are the tile's own: one tile, and no sums over the
 * ranks that hold the other blocks of its samples.  Each pass is then one
 * task (codelets/cl_bn_fused.c). */
static int whole_tile(const struct sc_layer *l, const struct sc_tile_io *io, int ntiles)
{
    const struct bn_state *p = l->priv;
    return ntiles == 1 && io[0].n && !(p->sample_stats && io[0].group_sum);
}

static int bn_forward_tiles(struct sc_layer *l, const struct sc_tile_io *io, int ntiles)
{
    struct bn_state *p = l->priv;
    int err;
    if (!io[0].train) {
        for (int t = 0; t < ntiles; t++) {
            struct sc_bn_args a = bn_args(l, &io[t]);
            if (io[t].n && (err = sc_insert_bn_fwd_eval(io[t].task, &a, io[t].x, sc_tensor_handle(&p->running, 0),
                                                        io[t].params, io[t].y, p->fwd)))
                return err;
        }
        return 0;
    }
    double count = stats_count(l, io, ntiles);
    /* under a gate, the running update waits for bn_update_buffers, once
     * the batch is known to be applied */
    starpu_data_handle_t running = io[0].gate ? NULL : sc_tensor_handle(&p->running, 0);
    if (whole_tile(l, io, ntiles)) {
        struct sc_bn_args a = bn_args(l, &io[0]);
        return sc_insert_bn_fwd_whole(io[0].task, &a, count, io[0].x, io[0].params, io[0].y,
                                      sc_tensor_handle(&p->stats, 0), sc_tensor_handle(&p->saved, 0), running, p->fwd);
    }
    for (int t = 0; t < ntiles; t++) {
        struct sc_bn_args a = bn_args(l, &io[t]);
        if (io[t].n &&
            (err = sc_insert_bn_stats(io[t].task, &a, io[t].x, sc_tensor_handle(&p->stats, t), p->stats_name)))
            return err;
    }
    if ((err = reduce(l, io, ntiles, sc_tensor_handles(&p->stats), 0)))
        return err;
    /* the running update rides with tile 0's forward, which reads the sums */
    for (int t = 0; t < ntiles; t++) {
        struct sc_bn_args a = bn_args(l, &io[t]);
        starpu_data_handle_t x = io[t].x, st = sc_tensor_handle(&p->stats, 0), sv = sc_tensor_handle(&p->saved, t);
        if (!io[t].n)
            continue;
        err = t == 0 && running
                  ? sc_insert_bn_fwd_running(io[t].task, &a, count, x, st, io[t].params, io[t].y, sv, running, p->fwd)
                  : sc_insert_bn_fwd(io[t].task, &a, count, x, st, io[t].params, io[t].y, sv, p->fwd);
        if (err)
            return err;
    }
    if (!running || io[0].n)
        return 0;
    struct sc_bn_args a = bn_args(l, &io[0]);
    return sc_insert_bn_running_update(io[0].task, &a, count, sc_tensor_handle(&p->stats, 0), running, NULL,
                                       p->running_name);
}

static int bn_update_buffers(struct sc_layer *l, const struct sc_tile_io *io, int ntiles)
{
    struct bn_state *p = l->priv;
    struct sc_bn_args a = bn_args(l, &io[0]);
    return sc_insert_bn_running_update(io[0].task, &a, stats_count(l, io, ntiles), sc_tensor_handle(&p->stats, 0),
                                       sc_tensor_handle(&p->running, 0), io[0].gate, p->running_name);
}

/* ReLU's backward (dy in place, as sc_insert_relu_bwd) is part of the
 * backward's first task: the layer is pointwise, so no halo of dy is
 * exchanged between the two. */
static int bn_backward_tiles(struct sc_layer *l, const struct sc_tile_io *io, int ntiles)
{
    struct bn_state *p = l->priv;
    int err;
    double count = stats_count(l, io, ntiles);
    if (whole_tile(l, io, ntiles) && io[0].dparams && io[0].dx) {
        struct sc_bn_args a = bn_args(l, &io[0]);
        return sc_insert_bn_bwd_whole(io[0].task, &a, count, io[0].x, io[0].dy, p->relu ? io[0].y : NULL, io[0].params,
                                      sc_tensor_handle(&p->saved, 0), sc_tensor_handle(&p->dstats, 0), io[0].dparams,
                                      io[0].dx, p->bwd);
    }
    for (int t = 0; t < ntiles; t++) {
        struct sc_bn_args a = bn_args(l, &io[t]);
        starpu_data_handle_t sv = sc_tensor_handle(&p->saved, t), ds = sc_tensor_handle(&p->dstats, t);
        if (!io[t].n)
            continue;
        err = p->relu ? sc_insert_bn_bwd_stats_relu(io[t].task, &a, io[t].x, io[t].dy, io[t].y, sv, ds, p->bwd_stats)
                      : sc_insert_bn_bwd_stats(io[t].task, &a, io[t].x, io[t].dy, sv, ds, p->bwd_stats);
        if (err)
            return err;
    }
    /* each tile's own parameter gradient, before the sums overwrite its
     * statistics; the network adds them over tiles and ranks */
    for (int t = 0; t < ntiles; t++)
        if (io[t].n && io[t].dparams &&
            (err = sc_insert_bn_param_grad(io[t].grad_task, l->in.c, sc_tensor_handle(&p->dstats, t), io[t].dparams,
                                           p->param_grad)))
            return err;
    if ((err = reduce(l, io, ntiles, sc_tensor_handles(&p->dstats), 1)))
        return err;
    for (int t = 0; t < ntiles; t++) {
        struct sc_bn_args a = bn_args(l, &io[t]);
        if (io[t].n && io[t].dx &&
            (err = sc_insert_bn_bwd_data(io[t].task, &a, count, io[t].x, io[t].dy, io[t].params,
                                         sc_tensor_handle(&p->saved, t), sc_tensor_handle(&p->dstats, 0), io[t].dx,
                                         p->bwd_data)))
            return err;
    }
    return 0;
}

static starpu_data_handle_t bn_buffer_handle(struct sc_layer *l)
{
    return sc_tensor_handle(&((struct bn_state *)l->priv)->running, 0);
}

/* Statistics and parameters are per channel: a share of the channels
 * normalizes as the whole layer would (its sums over the other blocks of
 * the same samples stay). */
static int bn_split(const struct sc_layer *l, struct sc_layer *local, int cin, int cout, int partial, int bias)
{
    (void)cout, (void)partial, (void)bias;
    return sc_layer_split_copy(l, local, cin, sizeof(struct bn_state));
}

/* [weight | bias] and [running_mean | running_var]: two per-channel vectors. */
static void bn_param_index(const struct sc_layer *l, const struct sc_layer *local, int in_ch0, int out_ch0,
                           size_t *index)
{
    (void)out_ch0;
    sc_layer_channel_index(l, local, 2, in_ch0, index);
}

const struct sc_layer_ops sc_layer_batchnorm_ops = {
    .section = "batchnorm",
    .prefix = "bn",
    .parse = bn_parse,
    .shapes = bn_shapes,
    .init = bn_init,
    .forward_tiles = bn_forward_tiles,
    .backward_tiles = bn_backward_tiles,
    .setup = bn_setup,
    .teardown = bn_teardown,
    .buffer_handle = bn_buffer_handle,
    .update_buffers = bn_update_buffers,
    .split_channels = bn_split,
    .param_index = bn_param_index,
};
