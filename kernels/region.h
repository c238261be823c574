/* Region kernels (region.c): convolution and pooling on a region of a
 * spatially split tensor, whose input window is assembled from several
 * source blocks (the tile's own block and halo pieces received from the
 * neighbours), and the copies that pack, unpack and redistribute blocks.
 *
 * A source block holds samples [s0, s0 + n) x channels [ch0, ch0 + nch)
 * x box of a tensor, dense NCHW (nch 0: the channels the op works on; the
 * kernels other than COPY and SUM ignore ch0 and nch).  Coordinates are
 * those of whole images of the layer (input for x, output for y and dy).
 * A region kernel reads only the sources' parts its window needs. */
#ifndef SC_KERNELS_REGION_H
#define SC_KERNELS_REGION_H

#include "kernels.h"
#include "base/box.h"

#define SC_REGION_MAX_SRC 32

struct sc_region_src {
    int s0, n;
    struct sc_box box;
    int ch0, nch;
};

enum sc_region_op {
    SC_REGION_COPY,            /* dst = its whole block, from the a sources */
    SC_REGION_CONV_FWD,        /* y[region] from x (a), params */
    SC_REGION_CONV_BWD_DATA,   /* dx[region] from dy (a), params */
    SC_REGION_CONV_BWD_FILTER, /* dparams (overwritten) from x (a) and dy (b) over output region */
    SC_REGION_POOL_FWD,        /* y[region] from x (a) */
    SC_REGION_POOL_BWD,        /* dx[region] from dy (a) and, for max pooling, x (b) */
    SC_REGION_SUM,             /* dst = the sum of the a sources over its whole block (CPU only) */
};

struct sc_region_args {
    int op;
    int s0, n;                /* samples computed (global indices) */
    struct sc_conv_args conv; /* the layer on whole images (its n is ignored) */
    struct sc_pool_args pool;
    int c, dst_ch0;       /* COPY, SUM: the destination's channels [dst_ch0, dst_ch0 + c) */
    int relu;             /* SUM: then ReLU */
    struct sc_box region; /* output coordinates for forward and filter, input ones for
                           * backward data, the destination block for COPY */
    int dst_s0, dst_n;    /* the destination handle's block (not for BWD_FILTER) */
    struct sc_box dst_box;
    int na, nb; /* sources: a first, then b */
    struct sc_region_src src[SC_REGION_MAX_SRC];
};

/* The region kernel of a on the CPU (oneDNN, memcpy), with w's state
 * and buffers.  buf: the buffers' pointers in the task's order: the
 * na + nb sources, params (conv forward and backward data only), the
 * destination (dparams for BWD_FILTER).  ws: cuDNN's workspace (unused
 * here).  Backward data writes the whole region: zero where no output
 * touches it.  Out of memory for a window: the failure recorded
 * (sc_fail_record). */
void sc_region_compute(struct sc_kernel_worker *w, const struct sc_region_args *a, float *const *buf,
                       const struct sc_workspace *ws);

#endif
