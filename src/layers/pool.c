/* [maxpool] and [avgpool]: 2-D pooling (PyTorch's floor mode; average pooling
 * counts the padding, as nn.AvgPool2d does by default). */
#include <stdio.h>
#include <stdlib.h>

#include "codelets/codelets.h"
#include "src/layers/layers.h"

struct pool {
    int size, stride, pad, max;
    char fwd[48], bwd[48];
};

static int pool_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s, int max)
{
    struct pool *p = calloc(1, sizeof(*p));
    if (!p)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    l->priv = p;
    p->max = max;
    int err;
    if ((err = sc_cfg_get_int(cfg, s, "size", 2, 1, 1024, &p->size)) ||
        (err = sc_cfg_get_int(cfg, s, "stride", p->size, 1, 1024, &p->stride)) ||
        (err = sc_cfg_get_int(cfg, s, "pad", 0, 0, 1024, &p->pad)))
        return err;
    if (2 * p->pad > p->size)
        return sc_error(SC_ERR_PARSE, "%s:%d: pad %d is more than half the pooling size %d", cfg->path, s->line, p->pad,
                        p->size);
    l->torch_modules = 1;
    return 0;
}

static int maxpool_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    return pool_parse(l, cfg, s, 1);
}

static int avgpool_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    return pool_parse(l, cfg, s, 0);
}

static struct sc_pool_args pool_args(const struct sc_layer *l, int n)
{
    const struct pool *p = l->priv;
    return (struct sc_pool_args){
        .n = n,
        .c = l->in.c,
        .h = l->in.h,
        .w = l->in.w,
        .kh = p->size,
        .kw = p->size,
        .sh = p->stride,
        .sw = p->stride,
        .ph = p->pad,
        .pw = p->pad,
        .oh = l->out.h,
        .ow = l->out.w,
        .max = p->max,
        .include_pad = 1,
    };
}

static int pool_shapes(struct sc_layer *l, int max_n)
{
    struct pool *p = l->priv;
    if (l->in.h + 2 * p->pad < p->size || l->in.w + 2 * p->pad < p->size)
        return sc_error(SC_ERR_SHAPE, "[%s] size %d does not fit input %dx%d", p->max ? "maxpool" : "avgpool", p->size,
                        l->in.h, l->in.w);
    l->out = (struct sc_shape){l->in.c, (l->in.h + 2 * p->pad - p->size) / p->stride + 1,
                               (l->in.w + 2 * p->pad - p->size) / p->stride + 1};
    struct sc_pool_args a = pool_args(l, max_n);
    l->scratch_bytes = sc_pool_workspace_bytes(&a);
    if (!l->scratch_bytes) /* average pooling: the codelet still takes a (1-byte) handle */
        l->scratch_bytes = 1;
    l->win_r = (struct sc_window){p->size, p->stride, p->pad, l->in.h, l->out.h};
    l->win_c = (struct sc_window){p->size, p->stride, p->pad, l->in.w, l->out.w};
    l->bwd_reads_x = p->max;
    l->layouts = p->max && !sc_pool_max_prefers_nchw(&a) ? SC_LAYOUTS_SAME : SC_LAYOUTS_NCHW;
    l->reads_dy_only = 1;
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    snprintf(p->bwd, sizeof(p->bwd), "%s.bwd", l->name);
    return 0;
}

static int pool_forward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct pool *p = l->priv;
    struct sc_pool_args a = pool_args(l, io->n);
    a.blk = io->y_blk;
    if (io->split) {
        struct sc_region_args t = {.op = SC_REGION_POOL_FWD, .pool = a};
        return sc_region_forward(l, io, &t, NULL, io->y, p->fwd);
    }
    return sc_insert_pool_fwd(io->task, &a, io->x, io->y, io->scratch, p->fwd);
}

static int pool_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct pool *p = l->priv;
    struct sc_pool_args a = pool_args(l, io->n);
    a.blk = io->y_blk;
    if (io->split && io->dx) {
        struct sc_region_args t = {.op = SC_REGION_POOL_BWD, .pool = a};
        return sc_region_backward_data(l, io, &t, NULL, io->dx, p->bwd);
    }
    return io->dx ? sc_insert_pool_bwd(io->task, &a, io->dy, io->scratch, io->dx, p->bwd) : 0;
}

static int pool_split(const struct sc_layer *l, struct sc_layer *local, int cin, int cout, int partial, int bias)
{
    (void)cout, (void)partial, (void)bias;
    return sc_layer_split_copy(l, local, cin, sizeof(struct pool));
}

static void pool_work(const struct sc_layer *l, int n, int cin, int cout, int ih, int iw, int oh, int ow,
                      struct sc_layer_work *w)
{
    (void)cout;
    w->kind = SC_WORK_POOL;
    w->pool = pool_args(l, n);
    w->pool.c = cin;
    w->pool.h = ih;
    w->pool.w = iw;
    w->pool.oh = oh;
    w->pool.ow = ow;
}

const struct sc_layer_ops sc_layer_maxpool_ops = {
    .section = "maxpool",
    .prefix = "pool",
    .parse = maxpool_parse,
    .shapes = pool_shapes,
    .forward = pool_forward,
    .backward = pool_backward,
    .split_channels = pool_split,
    .work = pool_work,
};

const struct sc_layer_ops sc_layer_avgpool_ops = {
    .section = "avgpool",
    .prefix = "pool",
    .parse = avgpool_parse,
    .shapes = pool_shapes,
    .forward = pool_forward,
    .backward = pool_backward,
    .split_channels = pool_split,
    .work = pool_work,
};
