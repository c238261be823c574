/* sc_grid: a processor grid over the MPI ranks with named dimensions N
 * (samples), H, W (spatial), C (channels) and F (filters), and the block
 * distribution of a tensor dimension over one grid dimension.  Pure
 * arithmetic: no MPI, no StarPU; the layers that split tensors build on it. */
#ifndef SC_GRID_H
#define SC_GRID_H

#include <stddef.h>

enum sc_dim { SC_DIM_N, SC_DIM_C, SC_DIM_F, SC_DIM_H, SC_DIM_W, SC_NDIMS };

struct sc_grid {
    int extent[SC_NDIMS]; /* ranks along each dimension, >= 1 */
    int size;             /* their product */
};

/* "n2h2", "h2w2", "n4", "w2" ... (letters n c f h w, any case, each at most
 * once, extents >= 1); the product must be nranks.  "" or NULL: sample
 * parallelism, n = nranks.  SC_ERR_ARG names what is wrong. */
int sc_grid_parse(const char *spec, int nranks, struct sc_grid *g);
/* The spec back, in canonical order, e.g. "n2h2" ("n1" for one rank). */
void sc_grid_format(const struct sc_grid *g, char *buf, size_t len);

/* Ranks are laid out with W fastest, then H, F, C and N slowest, so that
 * spatial neighbours are adjacent ranks (on one node when they fit). */
void sc_grid_coords(const struct sc_grid *g, int rank, int coords[SC_NDIMS]);
int sc_grid_rank(const struct sc_grid *g, const int coords[SC_NDIMS]);
/* The rank one step along dim from rank (step -1 or +1), or -1 past the
 * grid's edge (no wrap-around: halos stop at the image border). */
int sc_grid_neighbor(const struct sc_grid *g, int rank, enum sc_dim dim, int step);
/* The ranks that differ from rank only along the dimensions in dims (a bit
 * mask of 1 << SC_DIM_*), in rank order: the group a segmented collective
 * runs in.  Returns their number; ranks must hold g->size entries. */
int sc_grid_segment(const struct sc_grid *g, int rank, unsigned dims, int *ranks);

/* Block distribution, load-balanced: part i of parts gets *count elements
 * of n starting at *first; the first n % parts parts get one more. */
void sc_block_range(int n, int parts, int i, int *first, int *count);

#endif
