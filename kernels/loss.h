/* Softmax cross-entropy losses (loss.c), with the log-sum-exp taken
 * around the maximum so that large logits neither overflow nor lose the
 * loss.  stats = {sum of -log p(label) (summed in double), number whose
 * first argmax equals the label}; dlogits = scale * (softmax - onehot),
 * not written when NULL (evaluation).  A label outside [0, classes) counts
 * neither loss nor accuracy (its gradient is scale*softmax) and is
 * recorded as the kernel's failure (sc_fail_record): the data sets' labels
 * are valid, such a label is not. */
#ifndef SC_KERNELS_LOSS_H
#define SC_KERNELS_LOSS_H

#include <stdint.h>

/* Per sample: logits[n*classes], labels[n].  A label of -1 is a padding
 * sample (evaluation's last batch): gradient 0, not reported. */
struct sc_xent_args {
    int n, classes;
    float scale; /* dlogits = scale * (softmax - onehot); 1/global batch */
};
void sc_xent(const struct sc_xent_args *a, const float *logits, const int32_t *labels, float *dlogits, float *stats);

/* Per pixel (segmentation-like outputs): logits[(i*classes + k)*hw + p],
 * labels[i*hw + p], dlogits as logits.  A label of -1 (a padding
 * sample's pixel) is not recorded. */
struct sc_pixel_xent_args {
    int n, classes, hw;
    float scale; /* dlogits = scale * (softmax - onehot) */
};
void sc_pixel_xent(const struct sc_pixel_xent_args *a, const float *logits, const int32_t *labels, float *dlogits,
                   float *stats);

#endif
