/* A distributed tensor (sc_tensor): how it lies over the grid (an
 * sc_layout) and this rank's tiles of it, each a buffer in main memory and
 * the StarPU handle registered over it, made and ended together so that
 * the two cannot part.  The same type holds the per-tile vectors that are
 * no activation (a tile's partial parameter gradient, its loss statistics,
 * its workspace): those have no layout. */
#ifndef SC_TENSOR_H
#define SC_TENSOR_H

#include <stddef.h>
#include <starpu.h>

#include "base/layout.h"

struct sc_tensor {
    struct sc_layout layout; /* sc_tensor_alloc's; all zero for per-tile vectors */
    int ntiles;
    size_t count, elem; /* per tile: elements and the bytes of one */
    /* Per tile: the buffer and its handle, both NULL for a tile not
     * allocated (sc_tensor_vectors' tiles until sc_tensor_alloc_tile).
     * handle is contiguous, for the calls that take every tile's handle. */
    void **buf;
    starpu_data_handle_t *handle;
    int view; /* sc_tensor_view's: the tiles are another tensor's */
};

/* This rank's tiles of a float tensor laid out by L: L->ntiles tiles, each
 * room for the largest tile's samples, with the rank's channels and block
 * of each, zeroed and registered. */
int sc_tensor_alloc(struct sc_tensor *t, const struct sc_layout *L, int rank);
/* ntiles tiles of count elements of elem bytes each (count 0: one), none
 * allocated yet; sc_tensor_alloc_tile allocates (zeroed) and registers one,
 * sc_tensor_alloc_vectors all of them. */
int sc_tensor_vectors(struct sc_tensor *t, int ntiles, size_t count, size_t elem);
int sc_tensor_alloc_tile(struct sc_tensor *t, int i);
int sc_tensor_alloc_vectors(struct sc_tensor *t, int ntiles, size_t count, size_t elem);
/* Unregisters and frees every allocated tile, and the tile arrays; t is
 * then as zeroed (freeing a zeroed tensor does nothing).  No task may still
 * use a tile.  A view is only forgotten. */
void sc_tensor_free(struct sc_tensor *t);
/* t becomes another name for src's tiles (a buffer that two layers share):
 * the same handles and buffers, which src keeps; t must not outlive it. */
void sc_tensor_view(struct sc_tensor *t, const struct sc_tensor *src);
/* The bytes of its allocated tiles (0 for a view: they are src's). */
size_t sc_tensor_bytes(const struct sc_tensor *t);

/* Whether t has tiles (allocated or to be): a zeroed tensor has none. */
static inline int sc_tensor_exists(const struct sc_tensor *t)
{
    return t->handle != NULL;
}

/* Tile i's handle and buffer; NULL for a tile not allocated or a tensor
 * that does not exist. */
static inline starpu_data_handle_t sc_tensor_handle(const struct sc_tensor *t, int i)
{
    return t->handle ? t->handle[i] : NULL;
}

static inline void *sc_tensor_buf(const struct sc_tensor *t, int i)
{
    return t->buf ? t->buf[i] : NULL;
}

/* Every tile's handle, in tile order (NULL when t does not exist): what
 * the fetches and collectives of tasks.h take. */
static inline starpu_data_handle_t *sc_tensor_handles(const struct sc_tensor *t)
{
    return t->handle;
}

/* One tile in pieces of whole samples, so that several tasks may write
 * it at once (StarPU's asynchronous partitioning): piece p holds the
 * tile's samples [s0[p], s0[p] + n[p]), each per_sample elements; the last
 * piece also covers the tile's room beyond its samples.  Between split and
 * join the pieces' handles are the ones to use; outside, the tile's. */
struct sc_tile_pieces {
    starpu_data_handle_t tile;
    int npieces;
    int *s0, *n;
    starpu_data_handle_t *piece;
};
/* Plan tile i of t (nsamples samples, within its room) in npieces pieces
 * (1 .. nsamples) as even as may be. */
int sc_tile_pieces_plan(struct sc_tile_pieces *p, const struct sc_tensor *t, int i, int nsamples, size_t per_sample,
                        int npieces);
/* Hand the tile over to its pieces, and back: both asynchronous, ordered
 * with the tasks submitted before and after as accesses of the tile. */
void sc_tile_pieces_split(struct sc_tile_pieces *p);
void sc_tile_pieces_join(struct sc_tile_pieces *p);
/* Forget the plan (the tile joined, no task on a piece in flight); p is
 * then zeroed.  Before the tile's tensor is freed. */
void sc_tile_pieces_destroy(struct sc_tile_pieces *p);

#endif
