/* How an activation tensor is split over the ranks and the tiles of a rank,
 * and the geometry of sliding windows over such blocks.  Pure arithmetic
 * (no MPI, no StarPU), like sc_grid, so that every rank computes the same
 * plans from the same inputs. */
#ifndef SC_LAYOUT_H
#define SC_LAYOUT_H

#include "base/box.h"
#include "base/grid.h"

/* A tensor of batch x c x h x w split over a grid, each rank's samples
 * split further into ntiles tiles.  Ranks with the same N coordinate hold
 * the same samples (a "sample group"); their H and W coordinates pick a
 * block of every sample; the grid dimensions in cdims (C and F, a bit mask
 * of 1 << SC_DIM_*) split the channels, F's coordinate the major part of
 * the index (part = f * extent(C) + c when both split them).  A dimension
 * of extent > 1 that splits nothing replicates the tensor along it: every
 * rank along it holds the same block, either as copies of one value (a
 * layer's input under filter splitting) or as partial sums whose total is
 * the value (a convolution's output before the reduce-scatter of channel
 * splitting).  Which of the two is the reader's business (sc_fetch). */
struct sc_layout {
    struct sc_grid grid;
    int batch, h, w, ntiles;
    int c;
    unsigned cdims;
};

#define SC_CDIMS_C  (1u << SC_DIM_C)
#define SC_CDIMS_F  (1u << SC_DIM_F)
#define SC_CDIMS_CF (SC_CDIMS_C | SC_CDIMS_F)

/* The global samples [*first, *first + *count) of a rank, and of its tile. */
void sc_layout_rank_samples(const struct sc_layout *L, int rank, int *first, int *count);
void sc_layout_tile_samples(const struct sc_layout *L, int rank, int tile, int *first, int *count);
/* The block of every sample that rank holds (may be empty when the image
 * has fewer rows or columns than the grid has ranks along them). */
struct sc_box sc_layout_box(const struct sc_layout *L, int rank);
/* The channels [*ch0, *ch0 + *count) that rank holds. */
void sc_layout_channels(const struct sc_layout *L, int rank, int *ch0, int *count);
/* The channel parts: the product of the extents of cdims. */
int sc_layout_channel_parts(const struct sc_layout *L);
/* Its block and channels. */
struct sc_block sc_layout_block(const struct sc_layout *L, int rank);
/* The grid dimensions along which L is replicated (a bit mask). */
unsigned sc_layout_replicated(const struct sc_layout *L);
/* Same grid and sizes and channel split: the same blocks and tiles
 * everywhere. */
int sc_layout_equal(const struct sc_layout *a, const struct sc_layout *b);

/* A sliding window along one dimension: kernel k, stride s, padding p
 * before, over an input of n elements giving out elements. */
struct sc_window {
    int k, s, p, n, out;
};
/* The inputs output o reads: [o*s - p, o*s - p + k), not clipped. */
static inline int sc_window_lo(const struct sc_window *w, int o)
{
    return o * w->s - w->p;
}
static inline int sc_window_hi(const struct sc_window *w, int o)
{
    return o * w->s - w->p + w->k;
}
/* The outputs whose windows touch inputs [i0, i1): [*o0, *o1), clipped to
 * [0, out); may be empty when the stride skips those inputs. */
void sc_window_outputs(const struct sc_window *w, int i0, int i1, int *o0, int *o1);
/* The inputs that outputs [o0, o1) read, clipped to [0, n). */
void sc_window_inputs(const struct sc_window *w, int o0, int o1, int *i0, int *i1);
/* The outputs of [o0, o1) whose inputs (clipped) lie within [a0, a1):
 * [*i0, *i1), possibly empty.  The rest need data from elsewhere. */
void sc_window_interior(const struct sc_window *w, int o0, int o1, int a0, int a1, int *i0, int *i1);

/* The inputs of [a0, a1) all of whose touching outputs lie within
 * [o0, o1) (or that no output touches): [*i0, *i1), possibly empty. */
void sc_window_interior_bwd(const struct sc_window *w, int a0, int a1, int o0, int o1, int *i0, int *i1);
/* The same in two dimensions. */
struct sc_box sc_windows_inputs(const struct sc_window *wr, const struct sc_window *wc, struct sc_box out);
struct sc_box sc_windows_outputs(const struct sc_window *wr, const struct sc_window *wc, struct sc_box in);

/* The parts of box outside inner (inner within box): up to four boxes (top
 * and bottom strips over the whole width, then left and right between
 * them).  Returns their number.  inner empty: box itself. */
int sc_box_minus(struct sc_box box, struct sc_box inner, struct sc_box out[4]);

#endif
