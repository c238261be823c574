/* Adam and AdamW (adam.h).  torch's order: step += 1; (Adam) grad = grad +
 * wd * param, or (AdamW) param *= 1 - lr * wd; exp_avg = exp_avg * beta1 +
 * (1 - beta1) * grad; exp_avg_sq = exp_avg_sq * beta2 + (1 - beta2) * grad
 * * grad; denom = sqrt(exp_avg_sq) / sqrt(bc2) + eps; param += -step_size
 * * exp_avg / denom, each op rounded to float. */
#include <math.h>

#include "kernels/adam.h"

void sc_adam_step_scalars(struct sc_adam_step *s, double lr, double beta1, double beta2, double eps,
                          double weight_decay, int decoupled, double t)
{
    double bc1 = 1.0 - pow(beta1, t), bc2 = 1.0 - pow(beta2, t);
    s->beta1 = (float)beta1;
    s->one_minus_beta1 = (float)(1.0 - beta1);
    s->beta2 = (float)beta2;
    s->one_minus_beta2 = (float)(1.0 - beta2);
    s->neg_step_size = (float)-(lr / bc1);
    s->bias_correction2_sqrt = (float)sqrt(bc2);
    s->eps = (float)eps;
    s->weight_decay = decoupled ? 0.0f : (float)weight_decay;
    s->decay = decoupled ? (float)(1.0 - lr * weight_decay) : 1.0f;
}

#define BLOCK 64

static inline void adam1(const struct sc_adam_step *s, float *w, float *m, float *v, float g)
{
    float p = *w * s->decay;
    float gp = g + s->weight_decay * p;
    float mm = *m * s->beta1;
    mm = mm + s->one_minus_beta1 * gp;
    float vv = *v * s->beta2;
    vv = vv + s->one_minus_beta2 * gp * gp;
    float denom = sqrtf(vv) / s->bias_correction2_sqrt + s->eps;
    *m = mm;
    *v = vv;
    *w = p + s->neg_step_size * mm / denom;
}

/* Blocks of restrict pointers vectorize at -O2, as sc_sgd_update. */
void sc_adam_update(float *restrict w, float *restrict m, float *restrict v, const float *restrict g, size_t n,
                    const struct sc_adam_step *s)
{
    const struct sc_adam_step c = *s;
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        float *wb = w + i, *mb = m + i, *vb = v + i;
        const float *gb = g + i;
        for (int j = 0; j < BLOCK; j++)
            adam1(&c, &wb[j], &mb[j], &vb[j], gb[j]);
    }
    for (; i < n; i++)
        adam1(&c, &w[i], &m[i], &v[i], g[i]);
}
