/* Blocks, tiles and windows (see layout.h). */
#include "base/layout.h"

void sc_layout_rank_samples(const struct sc_layout *L, int rank, int *first, int *count)
{
    int coords[SC_NDIMS];
    sc_grid_coords(&L->grid, rank, coords);
    sc_block_range(L->batch, L->grid.extent[SC_DIM_N], coords[SC_DIM_N], first, count);
}

void sc_layout_tile_samples(const struct sc_layout *L, int rank, int tile, int *first, int *count)
{
    int f, n, tf;
    sc_layout_rank_samples(L, rank, &f, &n);
    sc_block_range(n, L->ntiles, tile, &tf, count);
    *first = f + tf;
}

struct sc_box sc_layout_box(const struct sc_layout *L, int rank)
{
    int coords[SC_NDIMS], r0, nr, c0, nc;
    sc_grid_coords(&L->grid, rank, coords);
    sc_block_range(L->h, L->grid.extent[SC_DIM_H], coords[SC_DIM_H], &r0, &nr);
    sc_block_range(L->w, L->grid.extent[SC_DIM_W], coords[SC_DIM_W], &c0, &nc);
    return (struct sc_box){r0, r0 + nr, c0, c0 + nc};
}

/* cdims without the dimensions of extent 1, which split nothing. */
static unsigned effective_cdims(const struct sc_layout *L)
{
    unsigned m = 0;
    for (int d = SC_DIM_C; d <= SC_DIM_F; d++)
        if ((L->cdims & (1u << d)) && L->grid.extent[d] > 1)
            m |= 1u << d;
    return m;
}

int sc_layout_channel_parts(const struct sc_layout *L)
{
    unsigned m = effective_cdims(L);
    return (m & SC_CDIMS_C ? L->grid.extent[SC_DIM_C] : 1) * (m & SC_CDIMS_F ? L->grid.extent[SC_DIM_F] : 1);
}

void sc_layout_channels(const struct sc_layout *L, int rank, int *ch0, int *count)
{
    int coords[SC_NDIMS], part = 0;
    unsigned m = effective_cdims(L);
    sc_grid_coords(&L->grid, rank, coords);
    if (m & SC_CDIMS_F)
        part = coords[SC_DIM_F];
    if (m & SC_CDIMS_C)
        part = part * L->grid.extent[SC_DIM_C] + coords[SC_DIM_C];
    sc_block_range(L->c, sc_layout_channel_parts(L), part, ch0, count);
}

struct sc_block sc_layout_block(const struct sc_layout *L, int rank)
{
    int ch0, nch;
    sc_layout_channels(L, rank, &ch0, &nch);
    return (struct sc_block){sc_layout_box(L, rank), ch0, ch0 + nch};
}

unsigned sc_layout_replicated(const struct sc_layout *L)
{
    unsigned m = 0, split = effective_cdims(L);
    for (int d = SC_DIM_C; d <= SC_DIM_F; d++)
        if (L->grid.extent[d] > 1 && !(split & (1u << d)))
            m |= 1u << d;
    return m;
}

int sc_layout_equal(const struct sc_layout *a, const struct sc_layout *b)
{
    for (int d = 0; d < SC_NDIMS; d++)
        if (a->grid.extent[d] != b->grid.extent[d])
            return 0;
    return a->batch == b->batch && a->h == b->h && a->w == b->w && a->ntiles == b->ntiles && a->c == b->c &&
           effective_cdims(a) == effective_cdims(b);
}

static int floor_div(int a, int b)
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

void sc_window_outputs(const struct sc_window *w, int i0, int i1, int *o0, int *o1)
{
    /* o touches [i0, i1) when o*s - p + k > i0 and o*s - p < i1 */
    int lo = floor_div(i0 + w->p - w->k, w->s) + 1, hi = floor_div(i1 - 1 + w->p, w->s) + 1;
    *o0 = lo < 0 ? 0 : lo;
    *o1 = hi > w->out ? w->out : hi;
    if (*o1 < *o0)
        *o1 = *o0;
}

void sc_window_inputs(const struct sc_window *w, int o0, int o1, int *i0, int *i1)
{
    if (o1 <= o0) {
        *i0 = *i1 = 0;
        return;
    }
    int lo = sc_window_lo(w, o0), hi = sc_window_hi(w, o1 - 1);
    *i0 = lo < 0 ? 0 : lo;
    *i1 = hi > w->n ? w->n : hi;
}

void sc_window_interior(const struct sc_window *w, int o0, int o1, int a0, int a1, int *i0, int *i1)
{
    /* The condition holds on an interval of o: the clipped window start
     * grows with o, and so does its end. */
    *i0 = *i1 = o0;
    int found = 0;
    for (int o = o0; o < o1; o++) {
        int lo, hi;
        sc_window_inputs(w, o, o + 1, &lo, &hi);
        if (lo >= a0 && hi <= a1) {
            if (!found)
                *i0 = o;
            found = 1;
            *i1 = o + 1;
        }
    }
}

void sc_window_interior_bwd(const struct sc_window *w, int a0, int a1, int o0, int o1, int *i0, int *i1)
{
    *i0 = *i1 = a0;
    int found = 0;
    for (int i = a0; i < a1; i++) {
        int lo, hi;
        sc_window_outputs(w, i, i + 1, &lo, &hi);
        if (hi <= lo || (lo >= o0 && hi <= o1)) {
            if (!found)
                *i0 = i;
            found = 1;
            *i1 = i + 1;
        }
    }
}

struct sc_box sc_windows_inputs(const struct sc_window *wr, const struct sc_window *wc, struct sc_box out)
{
    struct sc_box b;
    if (sc_box_empty(out))
        return (struct sc_box){0, 0, 0, 0};
    sc_window_inputs(wr, out.r0, out.r1, &b.r0, &b.r1);
    sc_window_inputs(wc, out.c0, out.c1, &b.c0, &b.c1);
    return b;
}

struct sc_box sc_windows_outputs(const struct sc_window *wr, const struct sc_window *wc, struct sc_box in)
{
    struct sc_box b;
    if (sc_box_empty(in))
        return (struct sc_box){0, 0, 0, 0};
    sc_window_outputs(wr, in.r0, in.r1, &b.r0, &b.r1);
    sc_window_outputs(wc, in.c0, in.c1, &b.c0, &b.c1);
    return b;
}

int sc_box_minus(struct sc_box box, struct sc_box inner, struct sc_box out[4])
{
    int n = 0;
    if (sc_box_empty(inner)) {
        if (!sc_box_empty(box))
            out[n++] = box;
        return n;
    }
    struct sc_box parts[4] = {
        {box.r0, inner.r0, box.c0, box.c1},
        {inner.r1, box.r1, box.c0, box.c1},
        {inner.r0, inner.r1, box.c0, inner.c0},
        {inner.r0, inner.r1, inner.c1, box.c1},
    };
    for (int i = 0; i < 4; i++)
        if (!sc_box_empty(parts[i]))
            out[n++] = parts[i];
    return n;
}
