/* ckpt_compare --show FILE: list the tensors.
 * ckpt_compare A B [RTOL]: every F32 tensor of A against the same tensor of
 * B, relative error ||a - b|| / ||b|| per tensor; exit 0 when all are within
 * RTOL (default 1e-5), 1 otherwise, 2 when a file cannot be read.
 * ckpt_compare A B RTOL NAME=ATOL...: parameter NAME (e.g. 0.bias) and
 * its momentum buffer are held to an absolute error ||a - b|| <= ATOL * sqrt(size)
 * instead: for values that are rounding noise in exact arithmetic zero
 * (the gradient of a bias that batch normalization follows).
 * ckpt_compare A B RTOL momentum=MRTOL: the momentum buffers are held to the
 * relative MRTOL instead (they are gradients, whose relative rounding
 * differences are larger than the weights').
 * ckpt_compare A B RTOL ignore=NAME: tensor NAME is not compared (e.g.
 * optimizer.iteration, when a skipped batch counts as an iteration). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/starconv.h"

/* --show: one line per tensor, "name dtype [shape]" and " = value" for an I64 scalar. */
static int show(const char *path)
{
    struct sc_st_file *f;
    if (sc_st_read(path, &f)) {
        fprintf(stderr, "ckpt_compare: %s\n", sc_last_error());
        return 2;
    }
    for (int i = 0; i < f->ntensors; i++) {
        const struct sc_st_tensor *t = &f->tensors[i];
        printf("%s %s [", t->name, t->dtype);
        for (int d = 0; d < t->ndim; d++)
            printf("%s%lld", d ? ", " : "", (long long)t->shape[d]);
        printf("]");
        if (!strcmp(t->dtype, "I64") && t->nbytes == 8) {
            long long v;
            memcpy(&v, f->data + t->offset, 8);
            printf(" = %lld", v);
        }
        printf("\n");
    }
    sc_st_free(f);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--show"))
        return show(argv[2]);
    if (argc < 3) {
        fprintf(stderr, "usage: ckpt_compare A.safetensors B.safetensors [rtol [absolute-name...]]\n");
        return 2;
    }
    double rtol = argc >= 4 ? atof(argv[3]) : 1e-5;
    struct sc_st_file *a, *b;
    if (sc_st_read(argv[1], &a) || sc_st_read(argv[2], &b)) {
        fprintf(stderr, "ckpt_compare: %s\n", sc_last_error());
        return 2;
    }
    int bad = 0, compared = 0;
    double worst = 0, worst_momentum = -1;
    for (int i = 0; i < a->ntensors; i++) {
        const struct sc_st_tensor *ta = &a->tensors[i], *tb = sc_st_find(b, ta->name);
        int ignored = 0;
        for (int j = 4; j < argc; j++)
            ignored |= !strncmp(argv[j], "ignore=", 7) && !strcmp(argv[j] + 7, ta->name);
        if (ignored)
            continue;
        if (!tb || strcmp(ta->dtype, tb->dtype) || ta->nbytes != tb->nbytes) {
            printf("FAIL %s: missing or different in %s\n", ta->name, argv[2]);
            bad = 1;
            continue;
        }
        if (strcmp(ta->dtype, "F32")) {
            if (memcmp(a->data + ta->offset, b->data + tb->offset, ta->nbytes)) {
                printf("FAIL %s differs\n", ta->name);
                bad = 1;
            }
            continue;
        }
        const float *x = (const float *)(a->data + ta->offset), *y = (const float *)(b->data + tb->offset);
        double diff = 0, norm = 0;
        for (size_t k = 0; k < ta->nbytes / 4; k++) {
            diff += ((double)x[k] - y[k]) * ((double)x[k] - y[k]);
            norm += (double)y[k] * y[k];
        }
        double rel = sqrt(diff) / (sqrt(norm) > 1e-30 ? sqrt(norm) : 1.0), tol = rtol;
        for (int j = 4; j < argc; j++) {
            if (!strncmp(argv[j], "ignore=", 7))
                continue;
            if (!strncmp(argv[j], "momentum=", 9)) {
                if (strstr(ta->name, ".momentum_buffer"))
                    tol = atof(argv[j] + 9);
                continue;
            }
            char name[128];
            const char *eq = strchr(argv[j], '=');
            size_t len = eq ? (size_t)(eq - argv[j]) : strlen(argv[j]);
            snprintf(name, sizeof name, "%.*s", (int)(len < sizeof name ? len : sizeof name - 1), argv[j]);
            char momentum[160];
            snprintf(momentum, sizeof momentum, "optimizer.%s.momentum_buffer", name);
            if (!strcmp(ta->name, name) || !strcmp(ta->name, momentum)) {
                double atol = (eq ? atof(eq + 1) : rtol) * sqrt((double)(ta->nbytes / 4));
                if (!(sqrt(diff) <= atol)) {
                    printf("FAIL %s: absolute error %.3e > %.1e\n", ta->name, sqrt(diff), atol);
                    bad = 1;
                }
                rel = -1;
                break;
            }
        }
        if (rel < 0) {
            compared++;
            continue;
        }
        if (!(rel <= tol)) {
            printf("FAIL %s: relative error %.3e > %.1e\n", ta->name, rel, tol);
            bad = 1;
        }
        if (tol != rtol) {
            if (rel > worst_momentum)
                worst_momentum = rel;
        } else if (rel > worst)
            worst = rel;
        compared++;
    }
    printf("%s: %d tensors compared, worst relative error %.3e (tolerance %.1e)", bad ? "FAIL" : "ok", compared, worst,
           rtol);
    if (worst_momentum >= 0)
        printf(", momentum buffers %.3e", worst_momentum);
    printf("\n");
    sc_st_free(a);
    sc_st_free(b);
    return bad || compared == 0;
}
