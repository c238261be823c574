/* The setup's rules that the planner prices (rules.h). */
#include <string.h>

#include "src/net/rules.h"

/* ---- the grid of a layer ---- */

/* g as --parallel writes it, for a message. */
static const char *grid_name(const struct sc_grid *g, char *buf, size_t len)
{
    sc_grid_format(g, buf, len);
    return buf;
}

int sc_rule_layer_grid(const struct sc_layer *l, const char *parallel, int P, struct sc_grid *g)
{
    char listed[32];
    const char *spec = l->parallel[0] ? l->parallel : parallel ? parallel : "";
    if (!l->parallel[0] && strchr(spec, '='))
        spec = sc_parallel_list_find(spec, l->name, listed, sizeof listed) ? listed : "";
    int err = sc_grid_parse(spec, P, g);
    if (err)
        return sc_error(err, "%s: %s", l->name, sc_last_error());
    if (!l->parallel[0] && l->src[0] < 0 && l->mixes_channels && g->extent[SC_DIM_C] > 1) {
        /* The samples come whole, with few channels: the first layer
         * splits its filters instead. */
        g->extent[SC_DIM_F] *= g->extent[SC_DIM_C];
        g->extent[SC_DIM_C] = 1;
    }
    if (g->extent[SC_DIM_C] * g->extent[SC_DIM_F] > 1 && !l->ops->split_channels) {
        if (l->parallel[0])
            return sc_error(SC_ERR_ARG, "%s: parallel=%s: a [%s] layer cannot split its channels (c, f); use n%d",
                            l->name, l->parallel, l->ops->section, P);
        return sc_grid_parse("", P, g); /* fully connected, softmax: whole samples */
    }
    if (g->extent[SC_DIM_H] * g->extent[SC_DIM_W] > 1 && l->whole_sample) {
        if (l->parallel[0])
            return sc_error(SC_ERR_ARG, "%s: parallel=%s: a [%s] layer needs whole samples (use n%d)", l->name,
                            l->parallel, l->ops->section, P);
        return sc_grid_parse("", P, g);
    }
    return 0;
}

int sc_rule_grid_check_split(const struct sc_layer *l, const struct sc_grid *g, int batch)
{
    int gn = g->extent[SC_DIM_N], gh = g->extent[SC_DIM_H], gw = g->extent[SC_DIM_W];
    char spec[64];
    if (g->extent[SC_DIM_C] * g->extent[SC_DIM_F] > 1 && !l->ops->split_channels)
        return sc_error(SC_ERR_ARG, "%s: a [%s] layer cannot split its channels (parallel %s)", l->name,
                        l->ops->section, grid_name(g, spec, sizeof spec));
    if (gh * gw > 1 && l->whole_sample)
        return sc_error(SC_ERR_ARG, "%s: a [%s] layer needs whole samples (parallel %s)", l->name, l->ops->section,
                        grid_name(g, spec, sizeof spec));
    if (batch % gn)
        return sc_error(SC_ERR_ARG,
                        "global batch %d does not split evenly over %d ranks (use a multiple of "
                        "%d; layer %s is split n%d)",
                        batch, gn, gn, l->name, gn);
    if (gh * gw > 1 && (l->out.h < gh || l->out.w < gw || l->in.h < gh || l->in.w < gw))
        return sc_error(SC_ERR_ARG,
                        "%s: %dx%d input, %dx%d output cannot be split over h%d w%d (every rank "
                        "needs a row and a column); give it parallel= with fewer spatial ranks",
                        l->name, l->in.h, l->in.w, l->out.h, l->out.w, gh, gw);
    return 0;
}

int sc_rule_grid_check_channels(const struct sc_layer *l, const struct sc_grid *g, int batch)
{
    if (g->extent[SC_DIM_C] * g->extent[SC_DIM_F] == 1)
        return 0;
    char spec[64];
    struct sc_layout in = sc_rule_layout_in(l, g, batch, 1), out = sc_rule_layout_out(l, g, batch, 1);
    int pin = sc_layout_channel_parts(&in), pout = sc_layout_channel_parts(&out);
    if (l->src[0] < 0 && pin > 1)
        return sc_error(SC_ERR_ARG,
                        "%s: the first layer cannot split its input channels (parallel %s): the "
                        "samples are loaded whole; use f",
                        l->name, grid_name(g, spec, sizeof spec));
    if (l->in.c % pin)
        return sc_error(SC_ERR_ARG, "%s: its %d input channels do not split evenly into %d parts (parallel %s)",
                        l->name, l->in.c, pin, grid_name(g, spec, sizeof spec));
    if (l->out.c % pout)
        return sc_error(SC_ERR_ARG, "%s: its %d output channels do not split evenly into %d parts (parallel %s)",
                        l->name, l->out.c, pout, grid_name(g, spec, sizeof spec));
    return 0;
}

int sc_rule_grid_check(const struct sc_layer *l, const struct sc_grid *g, int batch)
{
    int err = sc_rule_grid_check_split(l, g, batch);
    return err ? err : sc_rule_grid_check_channels(l, g, batch);
}

struct sc_layout sc_rule_layout_in(const struct sc_layer *l, const struct sc_grid *g, int batch, int tiles)
{
    return (struct sc_layout){
        *g, batch, l->in.h, l->in.w, tiles, l->in.c, l->mixes_channels ? SC_CDIMS_C : SC_CDIMS_CF};
}

struct sc_layout sc_rule_layout_out(const struct sc_layer *l, const struct sc_grid *g, int batch, int tiles)
{
    return (struct sc_layout){*g, batch, l->out.h, l->out.w, tiles, l->out.c, SC_CDIMS_CF};
}

/* ---- gradients ---- */

int sc_rule_grad_group(const struct sc_grid *g)
{
    return g->extent[SC_DIM_N] * g->extent[SC_DIM_H] * g->extent[SC_DIM_W];
}

int sc_rule_same_grad_ranks(const struct sc_grid *a, const struct sc_grid *b)
{
    int split_a = a->extent[SC_DIM_C] * a->extent[SC_DIM_F] > 1,
        split_b = b->extent[SC_DIM_C] * b->extent[SC_DIM_F] > 1;
    if (!split_a || !split_b)
        return !split_a && !split_b;
    return !memcmp(a->extent, b->extent, sizeof a->extent);
}

double sc_rule_bucket_bytes(double mb)
{
    return (double)(size_t)(mb * (1 << 20));
}

int sc_rule_bucket_closed(const struct sc_comm_opts *c, int walked, double bytes)
{
    switch (c->grad_comm) {
    case SC_GRAD_LAYER:
        return 1;
    case SC_GRAD_END:
        return 0;
    case SC_GRAD_CHUNKS:
        return walked == c->chunk_layers;
    case SC_GRAD_BUCKET:
        return bytes >= sc_rule_bucket_bytes(c->bucket_mb);
    }
    return 1;
}

int sc_rule_buckets(const struct sc_comm_opts *c, int n, const struct sc_grid *const *grid, const double *bytes,
                    int *bucket)
{
    int nb = 0, first = 0;
    double filled = 0;
    for (int i = 0; i < n; i++) {
        if (!i || sc_rule_bucket_closed(c, i, filled) || !sc_rule_same_grad_ranks(grid[first], grid[i]))
            nb++, first = i, filled = 0;
        bucket[i] = nb - 1;
        filled += bytes[i];
    }
    return nb;
}

/* ---- --fc-replicate ---- */

int sc_rule_replicable(const struct sc_layer *l)
{
    return l->ops->param_grad && l->nparams > 0;
}

int sc_rule_replicated(const struct sc_net *net, int F, int P, int *rep)
{
    int left = P > 1 && F > 0 ? F : 0, n = 0;
    for (int l = 0; l < net->nlayers; l++) {
        rep[l] = left > 0 && sc_rule_replicable(&net->layers[l]);
        left -= rep[l];
        n += rep[l];
    }
    return n;
}

int sc_rule_replicate_grid(const struct sc_grid *g)
{
    if (g->extent[SC_DIM_N] == g->size)
        return 0;
    return sc_error(SC_ERR_ARG, "--fc-replicate works with sample parallelism only (not with --parallel or "
                                "parallel=)");
}
