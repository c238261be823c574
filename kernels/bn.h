/* Batch normalization over the tiles of a batch (bn.c): per-channel sums
 * of the forward and backward passes, in double, so that they can be added
 * up over tiles and ranks before use, and the element-wise passes that use
 * them (codelets/codelets_layers.h says how the phases chain).  A tile is
 * x[n*c*hw], NCHW or channel-blocked (blk); stats and dstats are double vectors of 2c, params and
 * saved float vectors of 2c. */
#ifndef SC_KERNELS_BN_H
#define SC_KERNELS_BN_H

struct sc_bn_args {
    int n, c, hw;   /* the tile: x[n*c*hw] */
    float eps;      /* added to the variance */
    float momentum; /* of the running statistics, as PyTorch's (0.1) */
    int relu;       /* 1: y = max(0, bn(x)) */
    int blk;        /* the layout of x, y, dy, dx: 0 NCHW, else channels in blocks of
                     * blk (nChw8c: 8), c a multiple of it (kernels.h, sc_conv_act_block) */
};

/* stats = [sum x | sum x^2] per channel, over n and hw (overwritten). */
void sc_bn_stats(const struct sc_bn_args *a, const float *x, double *stats);
/* Training forward from stats summed over count elements per channel:
 * saved = [mean | invstd], y = gamma*(x - mean)*invstd + beta (then ReLU);
 * params = [gamma | beta]. */
void sc_bn_fwd(const struct sc_bn_args *a, double count, const float *x, const double *stats, const float *params,
               float *y, float *saved);
/* Evaluation forward with running = [mean | var]. */
void sc_bn_fwd_eval(const struct sc_bn_args *a, const float *x, const float *running, const float *params, float *y);
/* PyTorch's update of running from stats over count elements, except
 * that a channel whose statistics are not finite keeps its own; gate:
 * NULL, or one float that, when not 0, leaves running alone. */
void sc_bn_running_update(const struct sc_bn_args *a, double count, const double *stats, float *running,
                          const float *gate);
/* Backward, phase 1: dstats = [sum dy | sum dy*xhat] (overwritten). */
void sc_bn_bwd_stats(const struct sc_bn_args *a, const float *x, const float *dy, const float *saved, double *dstats);
/* dparams = [dgamma | dbeta] = [dstats[c..2c) | dstats[0..c)]. */
void sc_bn_param_grad(int c, const double *dstats, float *dparams);
/* Backward, phase 2: dx from dstats summed over count elements. */
void sc_bn_bwd_data(const struct sc_bn_args *a, double count, const float *x, const float *dy, const float *params,
                    const float *saved, const double *dstats, float *dx);

#endif
