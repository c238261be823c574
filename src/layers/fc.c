/* [connected]: fully connected layer with bias, optionally followed by ReLU.
 * A 4-D input is flattened in NCHW order, as nn.Flatten does. */
#include <stdio.h>
#include <stdlib.h>

#include "codelets/codelets.h"
#include "src/layers/layers.h"

struct fc {
    int output, relu;
    char fwd[48], bwd_data[48], bwd_weights[48], relu_bwd[48];
};

static int fc_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    struct fc *p = calloc(1, sizeof(*p));
    if (!p)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    l->priv = p;
    int err;
    if ((err = sc_cfg_get_int(cfg, s, "output", -1, 1, 1 << 24, &p->output)) ||
        (err = sc_layer_parse_activation(cfg, s, &p->relu)))
        return err;
    if (p->output < 0)
        return sc_error(SC_ERR_PARSE, "%s:%d: [connected] needs 'output'", cfg->path, s->line);
    l->torch_modules = p->relu ? 2 : 1;
    l->flattens = 1;
    return 0;
}

static struct sc_fc_args fc_args(const struct sc_layer *l, int n)
{
    const struct fc *p = l->priv;
    return (struct sc_fc_args){.n = n, .in = (int)sc_shape_size(&l->in), .out = p->output, .relu = p->relu};
}

static struct sc_fc_args fc_io_args(const struct sc_layer *l, const struct sc_tile_io *io)
{
    struct sc_fc_args a = fc_args(l, io->n);
    a.precision = io->precision;
    return a;
}

static int fc_shapes(struct sc_layer *l, int max_n)
{
    struct fc *p = l->priv;
    (void)max_n;
    size_t in = sc_shape_size(&l->in);
    if (in * (size_t)p->output > (size_t)1 << 31)
        return sc_error(SC_ERR_SHAPE, "[connected] %zu x %d weights are too many", in, p->output);
    l->out = (struct sc_shape){p->output, 1, 1};
    l->whole_sample = 1;
    l->reads_dy_only = !p->relu;
    size_t nw = in * p->output;
    l->nparams = nw + p->output;
    l->ntensors = 2;
    l->tensors[0] = (struct sc_param_tensor){"weight", 2, {p->output, (int64_t)in}, 0, nw};
    l->tensors[1] = (struct sc_param_tensor){"bias", 1, {p->output}, nw, (size_t)p->output};
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    snprintf(p->bwd_data, sizeof(p->bwd_data), "%s.bwd_data", l->name);
    snprintf(p->bwd_weights, sizeof(p->bwd_weights), "%s.bwd_weights", l->name);
    snprintf(p->relu_bwd, sizeof(p->relu_bwd), "%s.relu_bwd", l->name);
    return 0;
}

static void fc_init(struct sc_layer *l, float *params, uint64_t seed)
{
    sc_layer_init_uniform(l, params, seed, sc_shape_size(&l->in));
}

static int fc_forward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct fc *p = l->priv;
    struct sc_fc_args a = fc_io_args(l, io);
    return sc_insert_fc_fwd(io->task, &a, io->x, io->params, io->y, p->fwd);
}

static int fc_param_grad(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct fc *p = l->priv;
    struct sc_fc_args a = fc_io_args(l, io);
    return sc_insert_fc_bwd_weights(io->grad_task, &a, io->x, io->dy, io->dparams, p->bwd_weights);
}

static int fc_act_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct fc *p = l->priv;
    return p->relu ? sc_insert_relu_bwd(io->task, io->n * p->output, io->dy, io->y, p->relu_bwd) : 0;
}

static int fc_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct fc *p = l->priv;
    struct sc_fc_args a = fc_io_args(l, io);
    int err = 0;
    if (io->dx)
        err = sc_insert_fc_bwd_data(io->task, &a, io->dy, io->params, io->dx, p->bwd_data);
    if (!err && io->dparams)
        err = fc_param_grad(l, io);
    return err;
}

static void fc_work(const struct sc_layer *l, int n, int cin, int cout, int ih, int iw, int oh, int ow,
                    struct sc_layer_work *w)
{
    (void)cin, (void)cout, (void)ih, (void)iw, (void)oh, (void)ow;
    w->kind = SC_WORK_FC;
    w->fc = fc_args(l, n);
}

const struct sc_layer_ops sc_layer_fc_ops = {
    .section = "connected",
    .prefix = "fc",
    .parse = fc_parse,
    .shapes = fc_shapes,
    .init = fc_init,
    .forward = fc_forward,
    .act_backward = fc_act_backward,
    .backward = fc_backward,
    .param_grad = fc_param_grad,
    .work = fc_work,
};
