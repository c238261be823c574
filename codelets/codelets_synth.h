/* Synthetic data sets generated on the fly, as tasks (included by
 * codelets.h; the generator and what it makes: kernels/synth.h). */
#ifndef SC_CODELETS_SYNTH_H
#define SC_CODELETS_SYNTH_H

#include <starpu.h>
#include <stdint.h>

#include "base/box.h"
#include "kernels/synth.h"

/* W x: n * c * (r1-r0) * (c1-c0) floats, NCHW of the block.
 * W labels (int32): IMAGE: n labels; MESH: n * (r1-r0) * (c1-c0) per-pixel
 * labels (sample-major, then row, then col).
 * idx: the n global sample indices (each >= 0); they are copied into the
 * task's arguments, so the caller may reuse the array at once.
 * Checks: c, h, w >= 1, 0 <= r0 < r1 <= h, 0 <= c0 < c1 <= w, n >= 1 and
 * the handle sizes (SC_ERR_SHAPE); kind, classes >= 2 (MESH: == 2), idx
 * (SC_ERR_ARG). */
int sc_insert_synth_load(const struct sc_task_opts *opts, const struct sc_synth_args *a, const int32_t *idx,
                         starpu_data_handle_t x, starpu_data_handle_t labels, const char *name);

/* The labels a loss at resolution oh x ow sees, for its tile's block
 * (rows and columns at that resolution): IMAGE: n labels; MESH: per pixel,
 * the majority label over the input cell the pixel stands for (8 x 8 points
 * at most).  Index
 * -1: padding, label -1.  W labels (int32). */
int sc_insert_synth_labels(const struct sc_task_opts *opts, const struct sc_synth_args *a, int oh, int ow,
                           struct sc_box box, const int32_t *idx, starpu_data_handle_t labels, const char *name);

#endif
