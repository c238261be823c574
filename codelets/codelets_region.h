/* Region kernels: convolution and pooling on a region of a spatially split
 * tensor, whose input window is assembled from several source blocks (the
 * tile's own block and halo pieces received from the neighbours), and the
 * copies that pack, unpack and redistribute blocks.
 *
 * A source block holds samples [s0, s0 + n) x channels [ch0, ch0 + nch)
 * x box of a tensor, dense NCHW in its handle (nch 0: the channels the op
 * works on; the kernels other than COPY and SUM ignore ch0 and nch).  Coordinates are those of whole images
 * of the layer (input for x, output for y and dy).  A region kernel reads
 * only the sources' parts its window needs, so the caller passes only the
 * blocks that intersect it: a region that needs no halo does not wait for
 * one. */
#ifndef SC_CODELETS_REGION_H
#define SC_CODELETS_REGION_H

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
    int s0, n;                 /* samples computed (global indices) */
    struct sc_conv_args conv;  /* the layer on whole images (its n is ignored) */
    struct sc_pool_args pool;
    int c, dst_ch0;            /* COPY, SUM: the destination's channels [dst_ch0, dst_ch0 + c) */
    int relu;                  /* SUM: then ReLU */
    struct sc_box region;      /* output coordinates for forward and filter, input ones for
                                * backward data, the destination block for COPY */
    int dst_s0, dst_n;         /* the destination handle's block (not for BWD_FILTER) */
    struct sc_box dst_box;
    int na, nb;                /* sources: a first, then b */
    struct sc_region_src src[SC_REGION_MAX_SRC];
};

/* R srcs[0 .. na + nb), R params (conv only; NULL otherwise), dst: W for
 * COPY, SUM and BWD_FILTER, RW otherwise (the region is part of it).  Backward
 * data writes the whole region: zero where no output touches it. */
int sc_insert_region(const struct sc_task_opts *opts, const struct sc_region_args *a, starpu_data_handle_t *srcs,
                     starpu_data_handle_t params, starpu_data_handle_t dst, const char *name);

#endif
