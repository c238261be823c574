/* [softmax]: softmax cross-entropy loss, mean over the global batch.  Its
 * forward task also writes the gradient of the logits, so it has no backward. */
#include <stdio.h>
#include <stdlib.h>

#include "codelets/codelets.h"
#include "src/layers/layers.h"

struct softmax {
    int per_pixel;
    char fwd[48];
};

static int softmax_parse(struct sc_layer *l, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    struct softmax *p = calloc(1, sizeof(*p));
    if (!p)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    l->priv = p;
    int err = sc_cfg_get_int(cfg, s, "per_pixel", 0, 0, 1, &p->per_pixel);
    if (err)
        return err;
    l->is_loss = 1;
    l->torch_modules = 0;
    return 0;
}

static int softmax_shapes(struct sc_layer *l, int max_n)
{
    struct softmax *p = l->priv;
    (void)max_n;
    l->out = l->in;
    /* per pixel: a pointwise layer, which may be split like the others */
    l->whole_sample = !p->per_pixel;
    snprintf(p->fwd, sizeof(p->fwd), "%s.fwd", l->name);
    return 0;
}

static int softmax_forward(struct sc_layer *l, const struct sc_tile_io *io)
{
    struct softmax *p = l->priv;
    if (p->per_pixel) {
        int hw = l->in.h * l->in.w;
        struct sc_pixel_xent_args a = {.n = io->n,
                                       .classes = l->in.c,
                                       .hw = io->split ? (int)sc_box_area(io->split->in_box) : hw,
                                       .scale = io->loss_scale / (float)hw};
        if (!io->train)
            return sc_insert_pixel_xent_eval(io->task, &a, io->x, io->labels, io->stats, p->fwd);
        return sc_insert_pixel_xent(io->task, &a, io->x, io->labels, io->dx, io->stats, p->fwd);
    }
    struct sc_xent_args a = {.n = io->n, .classes = (int)sc_shape_size(&l->in), .scale = io->loss_scale};
    if (!io->train)
        return sc_insert_xent_eval(io->task, &a, io->x, io->labels, io->stats, p->fwd);
    return sc_insert_xent(io->task, &a, io->x, io->labels, io->dx, io->stats, p->fwd);
}

static int softmax_backward(struct sc_layer *l, const struct sc_tile_io *io)
{
    (void)l;
    (void)io;
    return 0;
}

const struct sc_layer_ops sc_layer_softmax_ops = {
    .section = "softmax",
    .prefix = "loss",
    .parse = softmax_parse,
    .shapes = softmax_shapes,
    .forward = softmax_forward,
    .backward = softmax_backward,
};
