/* The softmax cross-entropy losses (loss.h): per sample and per pixel. */
#include "loss.h"
#include "fail.h"

#include <math.h>
#include <stddef.h>

/* ---- per sample ---- */

/* Loss and accuracy of n rows into stats; dlogits too when not NULL. */
void sc_xent(const struct sc_xent_args *a, const float *logits, const int32_t *labels, float *dlogits, float *stats)
{
    double loss = 0.0;
    int correct = 0, bad = 0;
    for (int i = 0; i < a->n; i++) {
        const float *l = logits + (size_t)i * a->classes;
        if (labels[i] == -1) { /* a padding sample (see sc_insert_load_labels) */
            for (int k = 0; dlogits && k < a->classes; k++)
                dlogits[(size_t)i * a->classes + k] = 0.0f;
            continue;
        }
        int arg = 0;
        for (int k = 1; k < a->classes; k++)
            if (l[k] > l[arg])
                arg = k;
        double sum = 0.0;
        for (int k = 0; k < a->classes; k++)
            sum += exp((double)l[k] - l[arg]);
        int y = labels[i];
        if (y < 0 || y >= a->classes) {
            bad++;
            y = -1;
        } else {
            loss += log(sum) - ((double)l[y] - l[arg]);
            correct += arg == y;
        }
        if (dlogits) {
            float *d = dlogits + (size_t)i * a->classes;
            for (int k = 0; k < a->classes; k++)
                d[k] = a->scale * (float)(exp((double)l[k] - l[arg]) / sum - (k == y));
        }
    }
    if (bad) /* the data sets' labels are checked when read: these are not valid */
        sc_fail_record(dlogits ? "xent" : "xent_eval", "%d labels outside [0, %d)", bad, a->classes);
    stats[0] = (float)loss;
    stats[1] = (float)correct;
}

/* ---- per pixel ---- */

/* The classes of a pixel are hw apart, so pixels go in blocks of PIX: each
 * pass over the classes then reads PIX consecutive floats per class. */

#define PIX 64

void sc_pixel_xent(const struct sc_pixel_xent_args *a, const float *logits, const int32_t *labels, float *dlogits,
                   float *stats)
{
    double loss = 0.0;
    long correct = 0, bad = 0;
    size_t hw = (size_t)a->hw;
    for (int i = 0; i < a->n; i++) {
        const float *l = logits + (size_t)i * a->classes * hw;
        float *d = dlogits ? dlogits + (size_t)i * a->classes * hw : NULL;
        const int32_t *lab = labels + (size_t)i * hw;
        for (size_t p0 = 0; p0 < hw; p0 += PIX) {
            int np = hw - p0 < PIX ? (int)(hw - p0) : PIX;
            float mx[PIX];
            int arg[PIX];
            double sum[PIX];
            for (int q = 0; q < np; q++) {
                mx[q] = l[p0 + q];
                arg[q] = 0;
                sum[q] = 0.0;
            }
            for (int k = 1; k < a->classes; k++) {
                const float *lk = l + (size_t)k * hw + p0;
                for (int q = 0; q < np; q++)
                    if (lk[q] > mx[q]) { /* first maximum wins ties */
                        mx[q] = lk[q];
                        arg[q] = k;
                    }
            }
            for (int k = 0; k < a->classes; k++) {
                const float *lk = l + (size_t)k * hw + p0;
                for (int q = 0; q < np; q++)
                    sum[q] += exp((double)lk[q] - mx[q]);
            }
            for (int q = 0; q < np; q++) {
                int y = lab[p0 + q];
                if (y < 0 || y >= a->classes) {
                    bad += y != -1; /* -1: a padding sample's, ignored */
                    continue;
                }
                loss += log(sum[q]) - ((double)l[(size_t)y * hw + p0 + q] - mx[q]);
                correct += arg[q] == y;
            }
            if (!d)
                continue;
            for (int k = 0; k < a->classes; k++) {
                const float *lk = l + (size_t)k * hw + p0;
                float *dk = d + (size_t)k * hw + p0;
                const int32_t *lb = lab + p0;
                for (int q = 0; q < np; q++)
                    dk[q] = a->scale * (float)(exp((double)lk[q] - mx[q]) / sum[q] - (lb[q] == k));
            }
        }
    }
    if (bad) /* the data sets' labels are made valid: these are not */
        sc_fail_record(dlogits ? "pixel_xent" : "pixel_xent_eval", "%ld labels outside [0, %d)", bad, a->classes);
    stats[0] = (float)loss;
    stats[1] = (float)correct;
}
