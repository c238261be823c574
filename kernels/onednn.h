/* What the oneDNN kernels share (worker.c): the engine, a worker's
 * stream and scratch, and the plumbing between the callers' plain layouts
 * and the layouts the primitives prefer.  For kernel files only. */
#ifndef SC_KERNELS_ONEDNN_H
#define SC_KERNELS_ONEDNN_H

#include <dnnl.h>

#include "kernels.h"

/* One engine for every thread: oneDNN engines are thread safe, streams are
 * not, hence one stream per worker. */
dnnl_engine_t sc_dnnl_engine(void);
dnnl_stream_t sc_kernel_worker_stream(struct sc_kernel_worker *w); /* NULL without w */

/* A tensor argument of a primitive: the caller's plain buffer, and the
 * layout the primitive prefers when that differs (then a reorder goes
 * between them). */
struct sc_io {
    dnnl_memory_t user;
    dnnl_memory_t prim;       /* == user when no reorder is needed */
    dnnl_primitive_t reorder; /* user->prim for inputs, prim->user for outputs */
    size_t bytes;             /* of prim, when it is a separate copy */
};
int sc_io_init(struct sc_io *io, const dnnl_memory_desc_t *user_md, const dnnl_memory_desc_t *prim_md, int output);
void sc_io_destroy(struct sc_io *io);
/* Give the separate copies of n arguments their room in w's scratch.  A
 * worker runs one task at a time, so all its cached primitives share one
 * buffer instead of each keeping activation-sized copies. */
int sc_io_bind(struct sc_kernel_worker *w, struct sc_io *io, int n);
/* Point the user memory at ptr; for an input, run its reorder.  Returns the
 * memory to pass to the primitive, or NULL on failure. */
dnnl_memory_t sc_io_in(struct sc_io *io, const void *ptr, dnnl_stream_t s);
dnnl_memory_t sc_io_out(struct sc_io *io, void *ptr);
/* After the primitive: move an output into the user's buffer. */
int sc_io_out_done(struct sc_io *io, dnnl_stream_t s);

void sc_md_nchw(dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_format_tag_t tag);
void sc_md_nchw_typed(dnnl_memory_desc_t *md, int n, int c, int h, int w, dnnl_format_tag_t tag, dnnl_data_type_t type);
void sc_md_1d(dnnl_memory_desc_t *md, int n);
/* Run and wait; 0 or -1. */
int sc_exec(dnnl_primitive_t p, dnnl_stream_t s, int nargs, const dnnl_exec_arg_t *args);
/* Primitive from a primitive descriptor, which is consumed. */
dnnl_primitive_t sc_prim_from_pd(dnnl_primitive_desc_t pd);

#endif
