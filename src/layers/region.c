/* The region tasks of a spatially split convolution or pooling layer.
 * Each output (or, backward, input-gradient) block is cut into the part
 * whose windows stay within the rank's own block, which is submitted first
 * and runs while the halo is in flight, and up to four boundary strips,
 * each of which waits only for the halo pieces its window touches. */
#include "src/layers/layers.h"

enum { SRC_X, SRC_DY };

/* The blocks of x (SRC_X, input coordinates) or of dy (SRC_DY, output
 * coordinates) that intersect win: the tile's own and the halo pieces. */
static int add_sources(const struct sc_tile_io *io, int which, struct sc_box win, struct sc_region_args *a,
                       starpu_data_handle_t *h, int *count)
{
    const struct sc_tile_split *sp = io->split;
    const struct sc_fetch *halo = which == SRC_X ? sp->halo_x : sp->halo_dy;
    int used = a->na + a->nb, max = SC_REGION_MAX_SRC - used, n = 1;
    if (halo)
        n = sc_fetch_sources(halo, which == SRC_X ? sp->x_tiles : sp->dy_tiles, sp->tile, &win, a->src + used, h + used,
                             max);
    else if (max < 1)
        return sc_error(SC_ERR_SHAPE, "too many source blocks");
    else {
        a->src[used] = (struct sc_region_src){sp->s0, io->n, which == SRC_X ? sp->in_box : sp->out_box, 0, 0};
        h[used] = which == SRC_X ? io->x : io->dy;
    }
    if (n < 0)
        return n;
    *count += n;
    return 0;
}

/* Interior first, then the boundary strips. */
static int cut(struct sc_box block, struct sc_box interior, struct sc_box parts[5])
{
    int n = 0;
    if (!sc_box_empty(interior))
        parts[n++] = interior;
    return n + sc_box_minus(block, interior, parts + n);
}

int sc_region_forward(const struct sc_layer *l, const struct sc_tile_io *io, struct sc_region_args *t,
                      starpu_data_handle_t params, starpu_data_handle_t y, const char *name)
{
    const struct sc_tile_split *sp = io->split;
    struct sc_box in = sp->in_box, out = sp->out_box, inner, parts[5];
    sc_window_interior(&l->win_r, out.r0, out.r1, in.r0, in.r1, &inner.r0, &inner.r1);
    sc_window_interior(&l->win_c, out.c0, out.c1, in.c0, in.c1, &inner.c0, &inner.c1);
    int n = cut(out, inner, parts), err;
    for (int i = 0; i < n; i++) {
        starpu_data_handle_t h[SC_REGION_MAX_SRC];
        t->s0 = t->dst_s0 = sp->s0, t->n = t->dst_n = io->n, t->dst_box = out, t->region = parts[i];
        t->na = t->nb = 0;
        if ((err = add_sources(io, SRC_X, sc_windows_inputs(&l->win_r, &l->win_c, parts[i]), t, h, &t->na)) ||
            (err = sc_insert_region(io->task, t, h, params, y, name)))
            return err;
    }
    return 0;
}

int sc_region_backward_data(const struct sc_layer *l, const struct sc_tile_io *io, struct sc_region_args *t,
                            starpu_data_handle_t params, starpu_data_handle_t dx, const char *name)
{
    const struct sc_tile_split *sp = io->split;
    struct sc_box in = sp->in_box, out = sp->out_box, inner, parts[5];
    sc_window_interior_bwd(&l->win_r, in.r0, in.r1, out.r0, out.r1, &inner.r0, &inner.r1);
    sc_window_interior_bwd(&l->win_c, in.c0, in.c1, out.c0, out.c1, &inner.c0, &inner.c1);
    int n = cut(in, inner, parts), err;
    for (int i = 0; i < n; i++) {
        starpu_data_handle_t h[SC_REGION_MAX_SRC];
        struct sc_box o = sc_windows_outputs(&l->win_r, &l->win_c, parts[i]);
        t->s0 = t->dst_s0 = sp->s0, t->n = t->dst_n = io->n, t->dst_box = in, t->region = parts[i];
        t->na = t->nb = 0;
        /* no output touches the strip (a stride larger than the kernel):
         * the kernel only writes zeros, from the tile's own dy */
        if (sc_box_empty(o))
            o = out;
        if ((err = add_sources(io, SRC_DY, o, t, h, &t->na)))
            return err;
        if (l->bwd_reads_x && (err = add_sources(io, SRC_X, sc_windows_inputs(&l->win_r, &l->win_c, o), t, h, &t->nb)))
            return err;
        if ((err = sc_insert_region(io->task, t, h, params, dx, name)))
            return err;
    }
    return 0;
}

int sc_region_filter(const struct sc_layer *l, const struct sc_tile_io *io, struct sc_region_args *t,
                     starpu_data_handle_t dparams, const char *name)
{
    const struct sc_tile_split *sp = io->split;
    starpu_data_handle_t h[SC_REGION_MAX_SRC];
    int err;
    t->s0 = sp->s0, t->n = io->n, t->region = sp->out_box, t->na = t->nb = 0;
    if ((err = add_sources(io, SRC_X, sc_windows_inputs(&l->win_r, &l->win_c, sp->out_box), t, h, &t->na)) ||
        (err = add_sources(io, SRC_DY, sp->out_box, t, h, &t->nb)))
        return err;
    return sc_insert_region(io->grad_task, t, h, NULL, dparams, name);
}
