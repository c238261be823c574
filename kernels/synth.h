/* Synthetic data sets generated on the fly (synth.c; their codelets in
 * codelets/codelets_synth.h).
 *
 * A sample's value at (channel, row, col) is a pure function of (seed,
 * sample index, channel, row, col), and so is a MESH label at (row, col):
 * a spatial block of a sample equals the same region of the whole sample
 * bit for bit, however the sample is split.
 *
 * IMAGE (--data synthetic:CxHxW:K): label = hash(seed, idx) mod classes;
 *   channel ch = sum of 3 sinusoids whose direction, wavelength (8 to
 *   max(8, min(h,w)) pixels), phase and amplitude depend on (seed, label,
 *   ch, k), each phase jittered per sample (+-0.5 rad), plus uniform noise
 *   in [-0.1, 0.1) from a counter hash of (seed, idx, ch, row, col).
 *   Values lie in [-1, 1].
 * MESH (--data synthetic-mesh:SIZE, 18 channels, 2 classes, per-pixel
 *   labels): field ch = sum of 4 sinusoids (direction, frequency,
 *   phase, amplitude from hash(seed, idx, ch, k)): two long ones
 *   (wavelength min(h,w)/2 to 2 min(h,w), at least 8 pixels; amplitudes
 *   summing to 0.6) and two short ones (wavelength 8 to 16; amplitudes
 *   summing to 0.4), so values lie in [-1, 1].  The long waves make the
 *   majority label of a 64x64 cell (the mesh models' output pixel)
 *   learnable; the short ones make the 2-pixel shifts below matter.
 *   Channel ch of x is field ch, and
 *     label(r,c) = [ f0(r-2,c) + f1(r+2,c) - f2(r,c-2) - f3(r,c+2) > 0 ]
 *   (summed left to right in float), the fields evaluated analytically at
 *   those positions, also outside the image.  A model that sees only the
 *   pixel's own values cannot predict it exactly: it needs a 5x5
 *   neighbourhood (two 3x3 convolutions).  With fewer than 4 channels the
 *   label still uses fields 0..3. */
#ifndef SC_KERNELS_SYNTH_H
#define SC_KERNELS_SYNTH_H

#include <stddef.h>
#include <stdint.h>

#include "base/box.h"

enum sc_synth_kind { SC_SYNTH_IMAGE, SC_SYNTH_MESH };

/* No padding (seed first, then 12 ints): the struct is hashed and copied
 * into task arguments as raw bytes. */
struct sc_synth_args {
    uint64_t seed;
    int kind;           /* enum sc_synth_kind */
    int c, h, w;        /* whole sample */
    int classes;        /* IMAGE: classes of the per-sample label; MESH: 2 */
    int r0, r1, c0, c1; /* the block to write: rows [r0,r1) x cols [c0,c1) */
    int n;              /* samples in the tile */
    int nan_sample;     /* 1 + the index of a sample whose value at (0, h/2, w/2) is NaN,
                         * a corrupt sample for the tests of --nonfinite; 0: none */
    int reserved;       /* 0 (keeps the struct free of padding) */
};

/* 0, or SC_ERR_SHAPE / SC_ERR_ARG naming op (base/error.h) when a is not
 * a valid block: c, h, w >= 1, 0 <= r0 < r1 <= h, 0 <= c0 < c1 <= w
 * (SC_ERR_SHAPE); kind, classes >= 2 (MESH: == 2) (SC_ERR_ARG). */
int sc_synth_check(const struct sc_synth_args *a, const char *op);

/* Elements of x and of labels for one sample of the block of a (0 when
 * the arguments are invalid; a->n is ignored). */
size_t sc_synth_x_count(const struct sc_synth_args *a);
size_t sc_synth_label_count(const struct sc_synth_args *a);

/* The a->n samples idx (each >= 0, or -1: padding, zeros and label -1)
 * of a tile: x (a->n * sc_synth_x_count floats, NCHW of the block) and,
 * unless NULL, labels (a->n * sc_synth_label_count int32).  The sample
 * a->nan_sample - 1 gets its NaN.  Out of memory for the workspace: the
 * failure recorded (sc_fail_record), x NaN and labels -1.  a must be
 * valid (sc_synth_check). */
void sc_synth_load(const struct sc_synth_args *a, const int32_t *idx, float *x, int32_t *labels);

/* One sample: fill x (c * (r1-r0) * (c1-c0) floats) and labels (IMAGE: 1,
 * MESH: (r1-r0) * (c1-c0) int32) for the block of sample idx; a->n is
 * ignored.  It records the failure (sc_fail_record) and leaves the
 * buffers alone on bad arguments, and fills x with NaN and labels with -1
 * when out of memory (recorded too). */
void sc_synth_sample(const struct sc_synth_args *a, int32_t idx, float *x, int32_t *labels);

/* The labels a loss at resolution oh x ow sees, for its tile's block box
 * (rows and columns at that resolution), of the a->n samples idx: IMAGE:
 * one label a sample; MESH: per pixel, the majority label over the input
 * cell the pixel stands for (8 x 8 points at most).  Index -1: padding,
 * label -1. */
void sc_synth_labels(const struct sc_synth_args *a, int oh, int ow, struct sc_box box, const int32_t *idx,
                     int32_t *labels);

#endif
