/* Layers that make a network more than a chain, and global pooling:
 *
 *   [route] layers=-k      its output is layer -k's output: the next layer
 *                          reads that instead of the previous one (no task,
 *                          no copy; the network resolves it when it plans).
 *   [shortcut] from=-k     residual add: y = act(x + output of layer -k),
 *                          where x is the previous layer's output; both
 *                          must have the same shape.
 *   [global_avgpool]       mean over each channel's pixels (C x 1 x 1),
 *                          nn.AdaptiveAvgPool2d(1).
 *
 * Indices as in darknet: negative is relative to this layer, otherwise
 * absolute (the layers count from 0 after [net]).  A layer whose output
 * feeds several others gets the sum of their gradients: the network plans
 * that, and a shortcut's gradient for both its inputs is its own dy (after
 * the activation's backward, which takes the last part of the sum of its
 * own dy along), so its backward has nothing to do. */
#include <stdio.h>
#include <stdlib.h>

#include "codelets/codelets.h"
#include "layers.h"

struct graph_layer {
    int relu;
    char fwd[48], bwd[48], sum_bwd[48];
};

static int parse_index(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s, const char *key,
                       int *out)
{
    int v, err;
    if ((err = sc_cfg_get_int(cfg, s, key, 1 << 30, -(1 << 20), 1 << 20, &v)))
        return err;
    if (v == 1 << 30)
        return sc_error(SC_ERR_PARSE, "%s:%d: [%s] needs '%s' (e.g. %s=-3)", cfg->path, s->line, s->name, key, key);
    int abs = v < 0 ? l->index + v : v;
    if (abs < 0 || abs >= l->index)
        return sc_error(SC_ERR_PARSE,
                        "%s:%d: %s=%d in [%s] (layer %d) must name an earlier layer (%d..-1 or "
                        "0..%d)",
                        cfg->path, s->line, key, v, s->name, l->index, -l->index, l->index - 1);
    *out = abs;
    return 0;
}

static int alloc_priv(struct sc_layer *l)
{
    if (!(l->priv = calloc(1, sizeof(struct graph_layer))))
        return sc_error(SC_ERR_NOMEM, "out of memory");
    return 0;
}

static int route_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    int err;
    if ((err = alloc_priv(l)) || (err = parse_index(l, cfg, s, "layers", &l->src[0])))
        return err;
    l->nsrc = 1;
    l->alias = 1;
    return 0;
}

static int route_shapes(struct sc_layer *l, int max_n)
{
    (void)max_n;
    l->out = l->in;
    return 0;
}

static int shortcut_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    int err;
    if ((err = alloc_priv(l)) || (err = parse_index(l, cfg, s, "from", &l->src[1])))
        return err;
    struct graph_layer *p = l->priv;
    if ((err = sc_layer_parse_activation(cfg, s, &p->relu)))
        return err;
    l->nsrc = 2;
    return 0;
}

static int shortcut_shapes(struct sc_layer *l, int max_n)
{
    struct graph_layer *p = l->priv;
    (void)max_n;
    if (l->in.c != l->in2.c || l->in.h != l->in2.h || l->in.w != l->in2.w)
        return sc_error(SC_ERR_SHAPE,
                        "[shortcut] adds %dx%dx%d to %dx%dx%d: the shapes must be equal (project "
                        "with a 1x1 [convolutional] after a [route])",
                        l->in2.c, l->in2.h, l->in2.w, l->in.c, l->in.h, l->in.w);
    l->out = l->in;
    l->dx_is_dy = 1;
    l->reads_dy_only = !p->relu;
    l->layouts = SC_LAYOUTS_SAME;                            /* adds element by element */
    l->win_r = l->win_c = (struct sc_window){0, 1, 0, 0, 0}; /* pointwise */
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    snprintf(p->bwd, sizeof(p->bwd), "%s.relu_bwd", l->name);
    snprintf(p->sum_bwd, sizeof(p->sum_bwd), "%s.sum_relu_bwd", l->name);
    return 0;
}

static long pixels(const struct sc_layer *l, const struct sc_tile_io *io)
{
    return io->split ? sc_box_area(io->split->out_box) : (long)l->out.h * l->out.w;
}

static int shortcut_forward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct graph_layer *p = l->priv;
    long n = (long)io->n * l->out.c * pixels(l, io);
    return sc_insert_add(io->task, (int)n, p->relu, io->x, io->x2, io->y, p->fwd);
}

static int shortcut_act_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct graph_layer *p = l->priv;
    long n = (long)io->n * l->out.c * pixels(l, io);
    return p->relu ? sc_insert_relu_bwd(io->task, (int)n, io->dy, io->y, p->bwd) : 0;
}

static int shortcut_act_backward_sum(struct sc_layer *l, const struct sc_tile_io *io, starpu_data_handle_t part)
{
    struct graph_layer *p = l->priv;
    long n = (long)io->n * l->out.c * pixels(l, io);
    return p->relu ? sc_insert_accumulate_relu_bwd(io->task, (int)n, io->dy, part, io->y, p->sum_bwd) : 1;
}

static int gap_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    (void)cfg, (void)s;
    l->torch_modules = 1;
    return alloc_priv(l);
}

static int gap_shapes(struct sc_layer *l, int max_n)
{
    struct graph_layer *p = l->priv;
    (void)max_n;
    l->out = (struct sc_shape){l->in.c, 1, 1};
    /* The mean spans the whole image: the network gives this layer whole
     * samples (redistributing a spatially split input). */
    l->whole_sample = 1;
    l->reads_dy_only = 1;
    l->layouts = SC_LAYOUTS_IN;
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    snprintf(p->bwd, sizeof(p->bwd), "%s.bwd", l->name);
    return 0;
}

static int gap_forward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct graph_layer *p = l->priv;
    int hw = l->in.h * l->in.w;
    return sc_insert_gap_fwd(io->task, io->n, l->in.c, hw, io->x_blk, 1.0f / (float)hw, io->x, io->y, p->fwd);
}

static int gap_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct graph_layer *p = l->priv;
    int hw = l->in.h * l->in.w;
    return io->dx ? sc_insert_gap_bwd(io->task, io->n, l->in.c, hw, io->x_blk, 1.0f / (float)hw, io->dy, io->dx, p->bwd)
                  : 0;
}

static int graph_split(const struct sc_layer *l, struct sc_layer *local, int cin, int cout, int partial, int bias)
{
    (void)cout, (void)partial, (void)bias;
    return sc_layer_split_copy(l, local, cin, sizeof(struct graph_layer));
}

const struct sc_layer_ops sc_layer_route_ops = {
    .section = "route",
    .prefix = "route",
    .parse = route_parse,
    .shapes = route_shapes,
};

const struct sc_layer_ops sc_layer_shortcut_ops = {
    .section = "shortcut",
    .prefix = "shortcut",
    .parse = shortcut_parse,
    .shapes = shortcut_shapes,
    .forward = shortcut_forward,
    .act_backward = shortcut_act_backward,
    .act_backward_sum = shortcut_act_backward_sum,
    .split_channels = graph_split,
};

const struct sc_layer_ops sc_layer_gap_ops = {
    .section = "global_avgpool",
    .prefix = "gap",
    .parse = gap_parse,
    .shapes = gap_shapes,
    .forward = gap_forward,
    .backward = gap_backward,
    .split_channels = graph_split,
};
