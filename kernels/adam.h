/* One step of torch.optim.Adam and AdamW on plain arrays (adam.c), in the
 * order of operations of torch's _single_tensor_adam and
 * _single_tensor_adamw for float32 parameters, so that a replay in PyTorch
 * gives the same values to rounding. */
#ifndef SC_KERNELS_ADAM_H
#define SC_KERNELS_ADAM_H

#include <stddef.h>

/* The scalars of one step, as torch computes them in Python (double) and
 * then hands the tensor ops (float): sc_adam_step_scalars fills them from
 * the hyperparameters and the step count t (after its increment). */
struct sc_adam_step {
    float beta1, one_minus_beta1, beta2, one_minus_beta2;
    float neg_step_size;         /* -lr / (1 - beta1^t) */
    float bias_correction2_sqrt; /* sqrt(1 - beta2^t) */
    float eps;
    float weight_decay; /* coupled (Adam): g + weight_decay * w; 0: none */
    float decay;        /* decoupled (AdamW): w *= decay = 1 - lr * weight_decay; 1: none */
};
void sc_adam_step_scalars(struct sc_adam_step *s, double lr, double beta1, double beta2, double eps,
                          double weight_decay, int decoupled, double t);

/* m = beta1 m + (1 - beta1) g'; v = beta2 v + (1 - beta2) g' g';
 * w += -step_size m / (sqrt(v) / sqrt(bc2) + eps), with g' = g + wd w
 * (Adam) or w first scaled by decay (AdamW). */
void sc_adam_update(float *restrict w, float *restrict m, float *restrict v, const float *restrict g, size_t n,
                    const struct sc_adam_step *s);

#endif
