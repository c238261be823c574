/* [convolutional]: 2-D convolution, with a bias unless bias=0 (as before
 * batch normalization, whose shift makes it redundant), optionally followed
 * by ReLU. */
#include <stdio.h>
#include <stdlib.h>

#include "codelets/codelets.h"
#include "src/layers/layers.h"

struct conv {
    int filters, size, stride, pad, relu, bias;
    char fwd[48], bwd_data[48], bwd_filter[48], relu_bwd[48], sum_relu_bwd[48];
};

static int conv_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    struct conv *p = calloc(1, sizeof(*p));
    if (!p)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    l->priv = p;
    int err;
    if ((err = sc_cfg_get_int(cfg, s, "filters", -1, 1, 1 << 16, &p->filters)) ||
        (err = sc_cfg_get_int(cfg, s, "size", -1, 1, 1024, &p->size)) ||
        (err = sc_cfg_get_int(cfg, s, "stride", 1, 1, 1024, &p->stride)) ||
        (err = sc_cfg_get_int(cfg, s, "pad", 0, 0, 1024, &p->pad)) ||
        (err = sc_cfg_get_int(cfg, s, "bias", 1, 0, 1, &p->bias)) ||
        (err = sc_layer_parse_activation(cfg, s, &p->relu)))
        return err;
    if (p->filters < 0 || p->size < 0)
        return sc_error(SC_ERR_PARSE, "%s:%d: [convolutional] needs 'filters' and 'size'", cfg->path, s->line);
    l->torch_modules = p->relu ? 2 : 1;
    return 0;
}

/* In NCHW (the planner's work); conv_io_args adds a tile's layouts. */
static struct sc_conv_args conv_args(const struct sc_layer *l, int n)
{
    const struct conv *p = l->priv;
    return (struct sc_conv_args){
        .n = n,
        .c = l->in.c,
        .h = l->in.h,
        .w = l->in.w,
        .f = p->filters,
        .kh = p->size,
        .kw = p->size,
        .sh = p->stride,
        .sw = p->stride,
        .ph = p->pad,
        .pw = p->pad,
        .oh = l->out.h,
        .ow = l->out.w,
        .relu = p->relu,
        .nobias = !p->bias,
    };
}

static struct sc_conv_args conv_io_args(const struct sc_layer *l, const struct sc_tile_io *io)
{
    struct sc_conv_args a = conv_args(l, io->n);
    a.xblk = io->x_blk;
    a.yblk = io->y_blk;
    a.precision = io->precision;
    return a;
}

static int conv_shapes(struct sc_layer *l, int max_n)
{
    struct conv *p = l->priv;
    (void)max_n;
    int oh = (l->in.h + 2 * p->pad - p->size) / p->stride + 1;
    int ow = (l->in.w + 2 * p->pad - p->size) / p->stride + 1;
    if (l->in.h + 2 * p->pad < p->size || l->in.w + 2 * p->pad < p->size)
        return sc_error(SC_ERR_SHAPE, "[convolutional] kernel %d does not fit input %dx%d with pad %d", p->size,
                        l->in.h, l->in.w, p->pad);
    /* filters * size^2 < 2^36, so only the product with the channels can
     * overflow; the bound is the one [connected] has. */
    uint64_t per_channel = (uint64_t)p->filters * p->size * p->size;
    if (per_channel > ((uint64_t)1 << 31) / (uint64_t)l->in.c)
        return sc_error(SC_ERR_SHAPE, "[convolutional] %d x %d x %d x %d weights are too many", p->filters, l->in.c,
                        p->size, p->size);
    l->out = (struct sc_shape){p->filters, oh, ow};
    l->reads_dy_only = !p->relu;
    size_t nw = (size_t)p->filters * l->in.c * p->size * p->size;
    l->nparams = nw + (p->bias ? p->filters : 0);
    l->ntensors = p->bias ? 2 : 1;
    l->mixes_channels = 1;
    l->layouts = sc_conv_few_channels(l->in.c) ? SC_LAYOUTS_NCHW : SC_LAYOUTS_ANY;
    l->tensors[0] = (struct sc_param_tensor){"weight", 4, {p->filters, l->in.c, p->size, p->size}, 0, nw};
    l->tensors[1] = (struct sc_param_tensor){"bias", 1, {p->filters}, nw, (size_t)p->filters};
    l->win_r = (struct sc_window){p->size, p->stride, p->pad, l->in.h, oh};
    l->win_c = (struct sc_window){p->size, p->stride, p->pad, l->in.w, ow};
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    snprintf(p->bwd_data, sizeof(p->bwd_data), "%s.bwd_data", l->name);
    snprintf(p->bwd_filter, sizeof(p->bwd_filter), "%s.bwd_filter", l->name);
    snprintf(p->relu_bwd, sizeof(p->relu_bwd), "%s.relu_bwd", l->name);
    snprintf(p->sum_relu_bwd, sizeof(p->sum_relu_bwd), "%s.sum_relu_bwd", l->name);
    return 0;
}

static void conv_init(struct sc_layer *l, float *params, uint64_t seed)
{
    const struct conv *p = l->priv;
    sc_layer_init_uniform(l, params, seed, (size_t)l->in.c * p->size * p->size);
}

static int conv_forward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct conv *p = l->priv;
    struct sc_conv_args a = conv_io_args(l, io);
    if (io->split) {
        struct sc_region_args t = {.op = SC_REGION_CONV_FWD, .conv = a};
        return sc_region_forward(l, io, &t, io->params, io->y, p->fwd);
    }
    return sc_insert_conv_fwd(io->task, &a, io->x, io->params, io->y, p->fwd);
}

static size_t act_elems(const struct sc_layer *l, const struct sc_tile_io *io)
{
    return (size_t)io->n * l->out.c * (io->split ? sc_box_area(io->split->out_box) : l->out.h * l->out.w);
}

static int conv_act_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct conv *p = l->priv;
    return p->relu ? sc_insert_relu_bwd(io->task, (int)act_elems(l, io), io->dy, io->y, p->relu_bwd) : 0;
}

static int conv_act_backward_sum(struct sc_layer *l, const struct sc_tile_io *io, starpu_data_handle_t part)
{
    struct conv *p = l->priv;
    return p->relu
               ? sc_insert_accumulate_relu_bwd(io->task, (int)act_elems(l, io), io->dy, part, io->y, p->sum_relu_bwd)
               : 1;
}

static int conv_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct conv *p = l->priv;
    struct sc_conv_args a = conv_io_args(l, io);
    int err = 0;
    struct sc_region_args t = {.conv = a};
    if (io->dx) {
        t.op = SC_REGION_CONV_BWD_DATA;
        err = io->split ? sc_region_backward_data(l, io, &t, io->params, io->dx, p->bwd_data)
                        : sc_insert_conv_bwd_data(io->task, &a, io->dy, io->params, io->dx, p->bwd_data);
    }
    if (!err && io->dparams) {
        t.op = SC_REGION_CONV_BWD_FILTER;
        err = io->split ? sc_region_filter(l, io, &t, io->dparams, p->bwd_filter)
                        : sc_insert_conv_bwd_filter(io->grad_task, &a, io->x, io->dy, io->dparams, p->bwd_filter);
    }
    return err;
}

static int conv_split(const struct sc_layer *l, struct sc_layer *local, int cin, int cout, int partial, int bias)
{
    int err = sc_layer_split_copy(l, local, l->in.c, sizeof(struct conv));
    if (err)
        return err;
    struct conv *p = local->priv;
    p->filters = cout;
    p->bias = p->bias && bias; /* a layer without a bias has none in any share */
    if (partial) {
        local->post_relu = p->relu;
        p->relu = 0;
    }
    local->in.c = cin;
    return conv_shapes(local, 0);
}

/* The share holds filters [out_ch0, +f) x input channels [in_ch0, +c) of
 * the weights, and those filters' biases when it has a bias. */
static void conv_param_index(const struct sc_layer *l, const struct sc_layer *local, int in_ch0, int out_ch0,
                             size_t *index)
{
    const struct conv *p = local->priv;
    size_t kk = (size_t)p->size * p->size, i = 0;
    for (int f = 0; f < p->filters; f++)
        for (int c = 0; c < local->in.c; c++)
            for (size_t k = 0; k < kk; k++)
                index[i++] = ((size_t)(out_ch0 + f) * l->in.c + in_ch0 + c) * kk + k;
    size_t nw = l->tensors[0].count;
    for (int f = 0; p->bias && f < p->filters; f++)
        index[i++] = nw + out_ch0 + f;
}

static void conv_work(const struct sc_layer *l, int n, int cin, int cout, int ih, int iw, int oh, int ow,
                      struct sc_layer_work *w)
{
    w->kind = SC_WORK_CONV;
    w->conv = conv_args(l, n);
    w->conv.c = cin;
    w->conv.f = cout;
    w->conv.h = ih;
    w->conv.w = iw;
    w->conv.oh = oh;
    w->conv.ow = ow;
}

const struct sc_layer_ops sc_layer_conv_ops = {
    .section = "convolutional",
    .prefix = "conv",
    .parse = conv_parse,
    .shapes = conv_shapes,
    .init = conv_init,
    .forward = conv_forward,
    .act_backward = conv_act_backward,
    .act_backward_sum = conv_act_backward_sum,
    .backward = conv_backward,
    .split_channels = conv_split,
    .param_index = conv_param_index,
    .work = conv_work,
};
