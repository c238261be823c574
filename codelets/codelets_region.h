/* Region kernels as tasks: convolution and pooling on a region of a
 * spatially split tensor, and the copies that pack, unpack and
 * redistribute blocks (the kernels, struct sc_region_args and its source
 * blocks: kernels/region.h).  Each source block is a handle holding it
 * dense, NCHW.  A region kernel reads only the sources' parts its window
 * needs, so the caller passes only the blocks that intersect it: a region
 * that needs no halo does not wait for one. */
#ifndef SC_CODELETS_REGION_H
#define SC_CODELETS_REGION_H

#include "kernels/region.h"

/* R srcs[0 .. na + nb), R params (conv only; NULL otherwise), dst: W for
 * COPY, SUM and BWD_FILTER, RW otherwise (the region is part of it).  Backward
 * data writes the whole region: zero where no output touches it. */
int sc_insert_region(const struct sc_task_opts *opts, const struct sc_region_args *a, starpu_data_handle_t *srcs,
                     starpu_data_handle_t params, starpu_data_handle_t dst, const char *name);

#endif
