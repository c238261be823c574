/* Element-wise and vector kernels (vector.c), on plain arrays of n
 * elements; the codelets of the same names (codelets/cl_<op>.c) run them
 * on their buffers, and the CUDA launchers of cuda/sc_cuda.h do the same
 * on the GPU. */
#ifndef SC_KERNELS_VECTOR_H
#define SC_KERNELS_VECTOR_H

#include <stddef.h>

/* dy[i] = y[i] > 0 ? dy[i] : 0: ReLU's backward where the ReLU was fused
 * into the forward kernel (y > 0 exactly where its input was). */
void sc_relu_bwd(float *restrict dy, const float *restrict y, int n);
/* y = x0 + x1, then max(0, .) when relu (the residual add). */
void sc_add(float *restrict y, const float *restrict x0, const float *restrict x1, int n, int relu);
/* dst = src, n floats (the buffers may overlap). */
void sc_copy(float *dst, const float *src, int n);
/* bytes zero bytes at p. */
void sc_zero(void *p, size_t bytes);

/* dst += src */
void sc_accumulate(float *restrict dst, const float *restrict src, size_t n);
/* dy += part over nx elements, then ReLU's backward of the first n
 * (dy[i] = y[i] > 0 ? dy[i] : 0, n <= nx): sc_accumulate then
 * sc_relu_bwd in one pass, the same bits (the last part of a gradient sum
 * and the activation's backward of the layer it is for). */
void sc_accumulate_relu_bwd(float *restrict dy, const float *restrict part, const float *restrict y, int n, size_t nx);
void sc_accumulate_f64(double *restrict dst, const double *restrict src, size_t n);
/* dst = ((src[0] + src[1]) + ...) + src[count-1] element by element, in
 * float, or double when f64; dst may be one of the sources. */
void sc_sum_ordered(int count, const void *const *src, void *dst, size_t n, int f64);

/* One step of torch.optim.SGD (dampening 0, no Nesterov):
 * v = momentum*v + (g + weight_decay*w); w -= lr*v. */
void sc_sgd_update(float *restrict w, float *restrict v, const float *restrict g, size_t n, float lr, float momentum,
                   float weight_decay);
/* 1 when every value of g is finite; integer tests of the exponent bits,
 * so that the loop vectorizes and stays exact whatever the FP flags. */
int sc_all_finite(const float *g, size_t n);
/* *count += 1 when some value of g is NaN or Inf. */
void sc_count_nonfinite(float *count, const float *g, size_t n);

/* Global average pooling over rows of hw values: y[r] = scale * sum of
 * x[r*hw .. r*hw + hw) (summed in double), r < rows; backward
 * dx[r*hw + p] = scale*dy[r].  blk > 0: x and dx hold the rows in groups
 * of blk, interleaved (a channel-blocked layout: row g*blk + k at
 * (g*hw + p)*blk + k), rows a multiple of blk. */
void sc_gap_fwd(float *y, const float *x, size_t rows, int hw, int blk, float scale);
void sc_gap_bwd(float *dx, const float *dy, size_t rows, int hw, int blk, float scale);

#endif
