/* Kernels of the layers of deeper networks: batch normalization, residual
 * add, copy, global average pooling, per-pixel softmax cross-entropy, and
 * the ordered sum of the group reductions.  Included at the end of
 * codelets.h; the same conventions hold (StarPU vectors, float unless said
 * otherwise, NCHW tiles, handles that may be larger than the args say,
 * wrappers that return 0 or a negative SC_ERR_*).
 *
 * "hw" is h*w of the tile; a tile may be a spatial block of a larger image,
 * which the kernels do not care about.  Sums of statistics are taken in
 * double. */
#ifndef SC_CODELETS_LAYERS_H
#define SC_CODELETS_LAYERS_H

#include "kernels/bn.h"
#include "kernels/loss.h"

/* ---- batch normalization ----
 *
 * Training goes through per-channel sums so that the statistics of a batch
 * split over tiles and ranks can be added up between the phases:
 *   sc_insert_bn_stats on each tile -> add the stats up (accumulate_f64, the
 *   collectives) -> sc_insert_bn_fwd on each tile with the total count;
 * and backward:
 *   sc_insert_bn_bwd_stats on each tile -> add up -> sc_insert_bn_bwd_data
 *   on each tile, sc_insert_bn_param_grad once.
 * Where nothing needs adding up (one tile, no ranks to sum over), the
 * fused tasks below do each pass in one task.
 * stats and dstats are double vectors of 2c: [sum over the channel | sum of
 * squares] (stats) or [sum dy | sum dy*xhat] (dstats).  params is the
 * layer's float vector [gamma[c] | beta[c]].  struct sc_bn_args:
 * kernels/bn.h. */
/* R x[n*c*hw], W stats (double, 2c): stats[ch] = sum of x over n and hw,
 * stats[c+ch] = sum of x^2.  Overwritten. */
int sc_insert_bn_stats(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                       starpu_data_handle_t stats, const char *name);
/* RW dst += R src, double vectors of equal length (from the handles). */
int sc_insert_accumulate_f64(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                             const char *name);
/* Training forward.  R x, R stats (sums over count elements per channel,
 * possibly over several tiles and ranks), R params, W y[n*c*hw],
 * W saved (float, 2c: [mean | invstd]) where var = sumsq/count - mean^2
 * (biased, as PyTorch normalizes with) and invstd = 1/sqrt(var + eps).
 * y = gamma*(x - mean)*invstd + beta, then max(0, .) when a->relu. */
int sc_insert_bn_fwd(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count, starpu_data_handle_t x,
                     starpu_data_handle_t stats, starpu_data_handle_t params, starpu_data_handle_t y,
                     starpu_data_handle_t saved, const char *name);
/* Evaluation forward.  R x, R running (float, 2c: [running_mean |
 * running_var]), R params, W y = gamma*(x - rm)/sqrt(rv + eps) + beta
 * (then ReLU when a->relu). */
int sc_insert_bn_fwd_eval(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                          starpu_data_handle_t running, starpu_data_handle_t params, starpu_data_handle_t y,
                          const char *name);
/* R stats (over count elements), RW running, PyTorch's rule:
 * rm = (1-momentum)*rm + momentum*mean,
 * rv = (1-momentum)*rv + momentum*var*count/(count-1) (var itself when
 * count is 1).  Only a->c and a->momentum are used.  A channel whose
 * statistics are not finite keeps its running ones.  gate: NULL, or R one
 * float: when it is not 0 (a skipped batch), nothing changes. */
int sc_insert_bn_running_update(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                                starpu_data_handle_t stats, starpu_data_handle_t running, starpu_data_handle_t gate,
                                const char *name);
/* Backward, phase 1.  R x, R dy (w.r.t. the BN output, already through
 * ReLU's backward when there is one), R saved (from bn_fwd), W dstats
 * (double, 2c): dstats[ch] = sum dy, dstats[c+ch] = sum dy*xhat with
 * xhat = (x - mean)*invstd.  Overwritten. */
int sc_insert_bn_bwd_stats(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                           starpu_data_handle_t dy, starpu_data_handle_t saved, starpu_data_handle_t dstats,
                           const char *name);
/* R dstats (double, 2c, summed over the whole batch), W dparams (float,
 * 2c): dgamma[ch] = dstats[c+ch], dbeta[ch] = dstats[ch]. */
int sc_insert_bn_param_grad(const struct sc_task_opts *opts, int c, starpu_data_handle_t dstats,
                            starpu_data_handle_t dparams, const char *name);
/* Backward, phase 2.  R x, R dy, R params, R saved, R dstats (summed over
 * the count elements of each channel), W dx:
 * dx = gamma*invstd*(dy - dstats_sum/count - xhat*dstats_xhat/count). */
int sc_insert_bn_bwd_data(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                          starpu_data_handle_t x, starpu_data_handle_t dy, starpu_data_handle_t params,
                          starpu_data_handle_t saved, starpu_data_handle_t dstats, starpu_data_handle_t dx,
                          const char *name);

/* The fused tasks (cl_bn_fused.c): the kernels of the tasks above, in
 * their order, in one task, with the same results bit for bit.
 * bn_fwd_whole, where the statistics need no sum over tiles or ranks
 * (count: the tile's own n*hw): bn_stats into W stats, then bn_fwd, then,
 * when running is not NULL, the (ungated) running update of RW running
 * from stats; a NULL running leaves stats for a later
 * sc_insert_bn_running_update. */
int sc_insert_bn_fwd_whole(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                           starpu_data_handle_t x, starpu_data_handle_t params, starpu_data_handle_t y,
                           starpu_data_handle_t stats, starpu_data_handle_t saved, starpu_data_handle_t running,
                           const char *name);
/* bn_fwd with R stats already summed, then the running update of RW
 * running (not NULL) from them: the forward of one tile of several. */
int sc_insert_bn_fwd_running(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                             starpu_data_handle_t x, starpu_data_handle_t stats, starpu_data_handle_t params,
                             starpu_data_handle_t y, starpu_data_handle_t saved, starpu_data_handle_t running,
                             const char *name);
/* a->relu = 1: ReLU's backward of RW dy with R y (sc_insert_relu_bwd: dy
 * is 0 where y is not positive, in place), then bn_bwd_stats. */
int sc_insert_bn_bwd_stats_relu(const struct sc_task_opts *opts, const struct sc_bn_args *a, starpu_data_handle_t x,
                                starpu_data_handle_t dy, starpu_data_handle_t y, starpu_data_handle_t saved,
                                starpu_data_handle_t dstats, const char *name);
/* The whole backward where the statistics need no sum: with a->relu,
 * ReLU's backward of RW dy with R y (y: NULL exactly when a->relu is 0,
 * and dy is then R); bn_bwd_stats into W dstats; bn_param_grad into W
 * dparams; bn_bwd_data into W dx. */
int sc_insert_bn_bwd_whole(const struct sc_task_opts *opts, const struct sc_bn_args *a, double count,
                           starpu_data_handle_t x, starpu_data_handle_t dy, starpu_data_handle_t y,
                           starpu_data_handle_t params, starpu_data_handle_t saved, starpu_data_handle_t dstats,
                           starpu_data_handle_t dparams, starpu_data_handle_t dx, const char *name);

/* ---- residual add: R a, R b, W y: y[i] = a[i] + b[i] for i < n, then
 * max(0, .) when relu ---- */
int sc_insert_add(const struct sc_task_opts *opts, int n, int relu, starpu_data_handle_t a, starpu_data_handle_t b,
                  starpu_data_handle_t y, const char *name);

/* ---- copy: R src, W dst, the first n floats ---- */
int sc_insert_copy(const struct sc_task_opts *opts, int n, starpu_data_handle_t src, starpu_data_handle_t dst,
                   const char *name);

/* ---- global average pooling over a (possibly partial) block ----
 * The caller passes scale = 1/(H*W of the whole image) and adds up the
 * results of the blocks of an image itself. */
/* R x[n*c*hw], W y[n*c]: y[i*c+ch] = scale * sum over hw of x (in double);
 * blk: x's layout, 0 NCHW, else channels in blocks of blk (c a multiple
 * of it; CPU workers only).  y is one value per channel either way. */
int sc_insert_gap_fwd(const struct sc_task_opts *opts, int n, int c, int hw, int blk, float scale,
                      starpu_data_handle_t x, starpu_data_handle_t y, const char *name);
/* R dy[n*c], W dx[n*c*hw]: dx[(i*c+ch)*hw + p] = scale*dy[i*c+ch] (dx in
 * the layout blk, as for the forward's x). */
int sc_insert_gap_bwd(const struct sc_task_opts *opts, int n, int c, int hw, int blk, float scale,
                      starpu_data_handle_t dy, starpu_data_handle_t dx, const char *name);

/* ---- per-pixel softmax cross-entropy (segmentation-like outputs;
 * struct sc_pixel_xent_args in kernels/loss.h) ---- */
/* R logits[n*classes*hw] (logits[(i*classes+k)*hw + p]), R labels (int32,
 * n*hw: labels[i*hw + p] in [0, classes)), W dlogits (as logits),
 * W stats (float, 2: {sum over the pixels of -log p(label) (summed in
 * double), number of pixels whose argmax equals the label}).  The softmax
 * is taken around the maximum of each pixel.  A label out of range counts
 * neither loss nor accuracy (its gradient is scale*softmax) and is
 * recorded as the kernel's failure (kernels/fail.h); -1 (a padding
 * sample's) is not. */
int sc_insert_pixel_xent(const struct sc_task_opts *opts, const struct sc_pixel_xent_args *a,
                         starpu_data_handle_t logits, starpu_data_handle_t labels, starpu_data_handle_t dlogits,
                         starpu_data_handle_t stats, const char *name);
/* Evaluation only: R logits, R labels, W stats (as above). */
int sc_insert_pixel_xent_eval(const struct sc_task_opts *opts, const struct sc_pixel_xent_args *a,
                              starpu_data_handle_t logits, starpu_data_handle_t labels, starpu_data_handle_t stats,
                              const char *name);

/* ---- ordered sum of the group reductions ----
 * R src[0..count), W dst: dst = ((src[0] + src[1]) + ...) + src[count-1],
 * element by element, in the element type (so a float result is the same
 * bits as a chain of sc_insert_accumulate in that order, whatever order the
 * parts arrived in).  All handles: vectors of one length and one elemsize,
 * sizeof(float) or sizeof(double); 1 <= count <= SC_SUM_ORDERED_MAX.  dst
 * may be one of the sources. */
#define SC_SUM_ORDERED_MAX 64
int sc_insert_sum_ordered(const struct sc_task_opts *opts, int count, starpu_data_handle_t *src,
                          starpu_data_handle_t dst, const char *name);

#endif
