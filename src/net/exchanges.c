/* The fetch plans of a layer (sc_net_setup): its input's halo and its
 * error's, and the redistributions between layouts that differ, as
 * tasks/exchange.c's sc_fetch plans over this rank's tiles. */
#include <stdlib.h>
#include <string.h>

#include "src/net/net_private.h"

static struct sc_box box_union(struct sc_box a, struct sc_box b)
{
    if (sc_box_empty(a))
        return b;
    if (sc_box_empty(b))
        return a;
    return (struct sc_box){a.r0 < b.r0 ? a.r0 : b.r0, a.r1 > b.r1 ? a.r1 : b.r1, a.c0 < b.c0 ? a.c0 : b.c0,
                           a.c1 > b.c1 ? a.c1 : b.c1};
}

/* The channels rank r holds in layout L, with box b. */
static struct sc_block with_channels(const struct sc_layout *L, int r, struct sc_box b)
{
    struct sc_block k = sc_layout_block(L, r);
    k.box = b;
    return k;
}

/* What rank r's tiles of layer l read of x: the windows of its outputs,
 * and for max pooling those of the outputs its backward reads. */
struct sc_box sc_net_need_x_box(struct need_ctx *c, int r)
{
    struct sc_layer *L = &c->net->layers[c->l];
    struct layer_data *d = &c->net->dist->ld[c->l];
    struct sc_box b = sc_windows_inputs(&L->win_r, &L->win_c, sc_layout_box(&d->xch.lout, r));
    if (L->bwd_reads_x)
        b = box_union(b, sc_windows_inputs(&L->win_r, &L->win_c,
                                           sc_windows_outputs(&L->win_r, &L->win_c, sc_layout_box(&d->xch.lin, r))));
    return b;
}

static struct sc_block need_x(void *ctx, int r, int t)
{
    struct need_ctx *c = ctx;
    (void)t;
    return with_channels(&c->net->dist->ld[c->l].xch.lin, r, sc_net_need_x_box(c, r));
}

/* The layout dy is read in by backward: the output's, or a channel-split
 * convolution's partial one (all the filters of its F part). */
static const struct sc_layout *dy_layout(const struct layer_data *d)
{
    return d->chan.partial ? &d->chan.lpart : &d->xch.lout;
}

/* What rank r's backward of layer l reads of dy: the outputs touching its
 * input block. */
static struct sc_block need_dy(void *ctx, int r, int t)
{
    struct need_ctx *c = ctx;
    struct sc_layer *L = &c->net->layers[c->l];
    struct layer_data *d = &c->net->dist->ld[c->l];
    (void)t;
    return with_channels(dy_layout(d), r, sc_windows_outputs(&L->win_r, &L->win_c, sc_layout_box(&d->xch.lin, r)));
}

/* A redistribution's or collective's need: the consumer's whole block of
 * the layout it is fetched into (ctx: that layout). */
static struct sc_block need_block(void *ctx, int r, int t)
{
    (void)t;
    return sc_layout_block(ctx, r);
}

static int g_spatial(const struct sc_layout *L)
{
    return L->grid.extent[SC_DIM_H] * L->grid.extent[SC_DIM_W] > 1;
}

/* Redistribution into layer l when its input layout is not the previous
 * layer's output layout, and halo exchanges of split windowed layers. */
int sc_net_plan_exchanges(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    struct sc_layer *L = &net->layers[l];
    struct layer_data *d = &D->ld[l];
    struct need_ctx ctx = {net, l};
    int T = D->ntiles, me = D->rt->rank, err, s = L->src[0];
    if (L->alias)
        return 0;
    for (int k = 0; k < L->nsrc && (L->dx_is_dy || k > 0); k++)
        if (!sc_layout_equal(&D->ld[L->src[k]].xch.lout, &d->xch.lin))
            return sc_error(SC_ERR_ARG,
                            "%s adds the outputs of %s and %s, which must be split like it: give "
                            "the three the same parallel=",
                            L->name, net->layers[L->src[0]].name, net->layers[L->src[1]].name);
    if (s >= 0 && !sc_layout_equal(&D->ld[s].xch.lout, &d->xch.lin)) {
        if ((err = sc_tensor_alloc(&d->xch.xin, &d->xch.lin, me)) ||
            (err = sc_tensor_alloc(&d->xch.dxin, &d->xch.lin, me)))
            return err;
        snprintf(d->xch.redist_name, sizeof(d->xch.redist_name), "%s.redistribute", L->name);
        snprintf(d->xch.assemble_name, sizeof(d->xch.assemble_name), "%s.assemble", L->name);
        /* Under filter splitting every rank of an F group reads all of x
         * and makes a partial sum of dx: the redistribution back sums them
         * (a reduce-scatter). */
        enum sc_fetch_mode back =
            L->mixes_channels && d->xch.lin.grid.extent[SC_DIM_F] > 1 ? SC_FETCH_SUM : SC_FETCH_COPY;
        if ((err = sc_fetch_create(&d->xch.redist_fwd, &D->ld[s].xch.lout, &d->xch.lin, need_block, &d->xch.lin,
                                   SC_FETCH_COPY, me, D->rt->comm, d->xch.redist_name)) ||
            (err = sc_fetch_create(&d->xch.redist_bwd, &d->xch.lin, &D->ld[s].xch.lout, need_block, &D->ld[s].xch.lout,
                                   back, me, D->rt->comm, d->xch.redist_name)))
            return err;
    }
    if (d->chan.partial &&
        ((err = sc_fetch_create(&d->chan.reduce, &d->chan.lpart, &d->xch.lout, need_block, &d->xch.lout, SC_FETCH_SUM,
                                me, D->rt->comm, d->chan.reduce_name)) ||
         (err = sc_fetch_create(&d->chan.gather_dy, &d->xch.lout, &d->chan.lpart, need_block, &d->chan.lpart,
                                SC_FETCH_COPY, me, D->rt->comm, d->chan.gather_name))))
        return err;
    if (L->group_sum_len && g_spatial(&d->xch.lin)) {
        int members[D->rt->size];
        int n = sc_grid_segment(&d->xch.lin.grid, me, (1u << SC_DIM_H) | (1u << SC_DIM_W), members);
        for (int i = 0; i < 2; i++)
            if ((err = sc_group_sum_create(&d->xch.gsum[i], D->rt->comm, members, n, me, L->group_sum_len, L->name)))
                return err;
    }
    if (!d->xch.split)
        return 0;
    if (L->win_r.k > 0) { /* not pointwise */
        snprintf(d->xch.halo_x_name, sizeof(d->xch.halo_x_name), "%s.halo_x", L->name);
        snprintf(d->xch.halo_dy_name, sizeof(d->xch.halo_dy_name), "%s.halo_dy", L->name);
        if ((err = sc_fetch_create(&d->xch.halo_x, &d->xch.lin, &d->xch.lin, need_x, &ctx, SC_FETCH_COPY, me,
                                   D->rt->comm, d->xch.halo_x_name)) ||
            (s >= 0 && (err = sc_fetch_create(&d->xch.halo_dy, dy_layout(d), &d->xch.lin, need_dy, &ctx, SC_FETCH_COPY,
                                              me, D->rt->comm, d->xch.halo_dy_name))))
            return err;
    }
    for (int t = 0; t < T; t++)
        d->xch.split[t] = (struct sc_tile_split){t,
                                                 d->tiles.s0[t],
                                                 d->xch.in_box,
                                                 d->xch.out_box,
                                                 d->xch.halo_x,
                                                 d->xch.halo_dy,
                                                 x_tiles(net, l),
                                                 sc_tensor_handles(d->chan.partial ? &d->chan.dpart : &d->tiles.dy)};
    return 0;
}

/* A replicated layer keeps whole copies of everything on every rank, plus
 * room for the other ranks' inputs and errors and one partial gradient per
 * (rank, tile), summed in the same order everywhere so that every rank
 * computes the same bits. */
