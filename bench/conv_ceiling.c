/* sc-conv-ceiling: what oneDNN's convolutions alone reach on one core of
 * this machine, for the convolutions of a model: the ceiling of any
 * fraction of peak that starconv (or PyTorch, which calls the same kind
 * of kernels) can reach on a CPU, since every other task of an iteration
 * only adds time.
 *
 *   sc-conv-ceiling [--model wide|lenet|resnet50] [--batch N] [--reps R]
 *                   [--peak GFLOPS] [--precision fp32|bf16]
 *                   [--shape N,C,H,W,F,K,S,P]...
 *
 * For each convolution (the model's, at N samples: the batch one rank or
 * one worker computes; or each --shape: N samples of C x H x W, F filters
 * of K x K, stride S, padding P), forward, backward data and backward
 * weights (no backward data for a model's first layer, as in training)
 * are created with oneDNN's preferred layouts (format "any": the
 * reorders into and out of them are not timed, as if the layouts were
 * kept end to end), run once to warm up, then R times (default 5); the
 * median time of each is printed with its GFLOP/s and, with --peak (one
 * core's fp32 FMA peak, from sc-peak), the fraction of it.  The last line
 * sums the model: its multiply-adds x 2 x 3 over the summed medians.
 * --precision bf16 times what starconv-train --precision bf16 runs: each
 * direction's inputs in bf16, its output in fp32 (the --peak fraction is
 * then still of the fp32 peak).
 * Run it on one core (OMP_NUM_THREADS=1; taskset) as starconv's workers
 * run oneDNN.  Exit status 0, 1 when oneDNN refuses a primitive, 2 on bad
 * arguments. */
#include <dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct shape {
    int n, c, h, w, f, k, s, p;
    int first; /* reads the network's input: no backward data in training */
};

#define MAX_SHAPES 64

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void usage(void)
{
    fprintf(stderr, "usage: sc-conv-ceiling [--model wide|lenet|resnet50] [--batch N] [--reps R] [--peak GFLOPS] "
                    "[--precision fp32|bf16] "
                    "[--shape N,C,H,W,F,K,S,P]...\n");
    exit(2);
}

static int add(struct shape *v, int *n, struct shape s)
{
    if (*n == MAX_SHAPES)
        return -1;
    v[(*n)++] = s;
    return 0;
}

/* The convolutions of models/M.cfg at batch samples, one per distinct
 * shape would hide how often each runs, so every convolution is listed. */
static int model_shapes(const char *m, int batch, struct shape *v, int *n)
{
    if (!strcmp(m, "wide")) {
        add(v, n, (struct shape){batch, 1, 28, 28, 64, 3, 1, 1, 1});
        add(v, n, (struct shape){batch, 64, 28, 28, 64, 3, 1, 1, 0});
        add(v, n, (struct shape){batch, 64, 14, 14, 128, 3, 1, 1, 0});
        add(v, n, (struct shape){batch, 128, 14, 14, 128, 3, 1, 1, 0});
        return 0;
    }
    if (!strcmp(m, "lenet")) {
        add(v, n, (struct shape){batch, 1, 28, 28, 32, 3, 1, 1, 1});
        add(v, n, (struct shape){batch, 32, 14, 14, 64, 3, 1, 1, 0});
        return 0;
    }
    if (!strcmp(m, "resnet50")) { /* torchvision's resnet50(), 224 x 224 */
        add(v, n, (struct shape){batch, 3, 224, 224, 64, 7, 2, 3, 1});
        const int blocks[4] = {3, 4, 6, 3}, width[4] = {64, 128, 256, 512};
        int c = 64, hw = 56;
        for (int st = 0; st < 4; st++)
            for (int b = 0; b < blocks[st]; b++) {
                int wd = width[st], s = (b == 0 && st > 0) ? 2 : 1, out = 4 * wd;
                int hw_out = hw / s;
                add(v, n, (struct shape){batch, c, hw, hw, wd, 1, 1, 0, 0});
                /* torchvision strides the 3x3 convolution */
                add(v, n, (struct shape){batch, wd, hw, hw, wd, 3, s, 1, 0});
                add(v, n, (struct shape){batch, wd, hw_out, hw_out, out, 1, 1, 0, 0});
                if (b == 0)
                    add(v, n, (struct shape){batch, c, hw, hw, out, 1, s, 0, 0});
                c = out;
                hw = hw_out;
            }
        return 0;
    }
    return -1;
}

static int out_size(const struct shape *s, int x)
{
    return (x + 2 * s->p - s->k) / s->s + 1;
}

static double macs(const struct shape *s)
{
    return (double)s->n * s->f * out_size(s, s->h) * out_size(s, s->w) * s->c * s->k * s->k;
}

/* A memory for md, filled with small normal floats (never denormals,
 * which would slow some cores down). */
static dnnl_memory_t mem(dnnl_engine_t eng, const dnnl_memory_desc_t *md)
{
    dnnl_memory_t m;
    if (dnnl_memory_create(&m, md, eng, DNNL_MEMORY_ALLOCATE) != dnnl_success)
        return NULL;
    float *p;
    dnnl_memory_get_data_handle(m, (void **)&p);
    int bf16 = md->data_type == dnnl_bf16;
    size_t n = dnnl_memory_desc_get_size(md) / (bf16 ? 2 : sizeof(float));
    unsigned r = 12345;
    for (size_t i = 0; i < n; i++) {
        r = r * 1103515245u + 12345u;
        float v = 0.01f + (float)(r >> 16) / 65536.0f * 0.1f;
        if (bf16) { /* the float's upper half: a bf16 of about the same value */
            unsigned u;
            memcpy(&u, &v, sizeof u);
            ((unsigned short *)p)[i] = (unsigned short)(u >> 16);
        } else
            p[i] = v;
    }
    return m;
}

static const dnnl_memory_desc_t *q(const_dnnl_primitive_desc_t pd, dnnl_query_t what)
{
    return dnnl_primitive_desc_query_md(pd, what, 0);
}

/* Median seconds of reps runs of prim, after one warm-up run. */
static double run(dnnl_primitive_t prim, dnnl_stream_t st, int nargs, const dnnl_exec_arg_t *args, int reps)
{
    double t[64];
    dnnl_primitive_execute(prim, st, nargs, args);
    dnnl_stream_wait(st);
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        dnnl_primitive_execute(prim, st, nargs, args);
        dnnl_stream_wait(st);
        t[r] = now() - t0;
    }
    qsort(t, reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

/* The three directions of s: their median seconds in t[0..2]; the name of
 * the forward implementation in impl.  0, or -1 when oneDNN refuses. */
static int time_shape(dnnl_engine_t eng, dnnl_stream_t st, const struct shape *s, int reps, int bf16, double t[3],
                      const char **impl)
{
    dnnl_memory_desc_t x, w, b, y, xi, wi, yi; /* xi, wi, yi: as inputs (bf16 under bf16) */
    int oh = out_size(s, s->h), ow = out_size(s, s->w);
    dnnl_dims_t xd = {s->n, s->c, s->h, s->w}, wdm = {s->f, s->c, s->k, s->k}, bd = {s->f}, yd = {s->n, s->f, oh, ow};
    dnnl_dims_t str = {s->s, s->s}, pad = {s->p, s->p};
    dnnl_memory_desc_init_by_tag(&x, 4, xd, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&w, 4, wdm, dnnl_f32, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&b, 1, bd, dnnl_f32, dnnl_x);
    dnnl_memory_desc_init_by_tag(&y, 4, yd, dnnl_f32, dnnl_format_tag_any);
    dnnl_data_type_t in = bf16 ? dnnl_bf16 : dnnl_f32;
    dnnl_memory_desc_init_by_tag(&xi, 4, xd, in, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&wi, 4, wdm, in, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&yi, 4, yd, in, dnnl_format_tag_any);
    dnnl_convolution_desc_t fd, dd, wd;
    dnnl_primitive_desc_t fpd, dpd, wpd;
    if (dnnl_convolution_forward_desc_init(&fd, dnnl_forward_training, dnnl_convolution_direct, &xi, &wi, &b, &y, str,
                                           pad, pad) != dnnl_success ||
        dnnl_primitive_desc_create(&fpd, &fd, NULL, eng, NULL) != dnnl_success)
        return -1;
    if (dnnl_convolution_backward_data_desc_init(&dd, dnnl_convolution_direct, &x, &wi, &yi, str, pad, pad) !=
            dnnl_success ||
        dnnl_primitive_desc_create(&dpd, &dd, NULL, eng, fpd) != dnnl_success)
        return -1;
    if (dnnl_convolution_backward_weights_desc_init(&wd, dnnl_convolution_direct, &xi, &w, &b, &yi, str, pad, pad) !=
            dnnl_success ||
        dnnl_primitive_desc_create(&wpd, &wd, NULL, eng, fpd) != dnnl_success)
        return -1;
    dnnl_primitive_desc_query(fpd, dnnl_query_impl_info_str, 0, impl);

    dnnl_memory_t mx = mem(eng, q(fpd, dnnl_query_src_md)), mw = mem(eng, q(fpd, dnnl_query_weights_md)),
                  mb = mem(eng, &b), my = mem(eng, q(fpd, dnnl_query_dst_md));
    dnnl_memory_t mdx = mem(eng, q(dpd, dnnl_query_diff_src_md)), mdy = mem(eng, q(dpd, dnnl_query_diff_dst_md));
    dnnl_memory_t mdyw = mem(eng, q(wpd, dnnl_query_diff_dst_md)), mxw = mem(eng, q(wpd, dnnl_query_src_md));
    dnnl_memory_t mdw = mem(eng, q(wpd, dnnl_query_diff_weights_md)), mdb = mem(eng, &b);
    dnnl_memory_t mwd = mem(eng, q(dpd, dnnl_query_weights_md));
    if (!mx || !mw || !mb || !my || !mdx || !mdy || !mdyw || !mxw || !mdw || !mdb || !mwd)
        return -1;
    dnnl_primitive_t pf, pd, pw;
    if (dnnl_primitive_create(&pf, fpd) != dnnl_success || dnnl_primitive_create(&pd, dpd) != dnnl_success ||
        dnnl_primitive_create(&pw, wpd) != dnnl_success)
        return -1;
    dnnl_exec_arg_t af[] = {{DNNL_ARG_SRC, mx}, {DNNL_ARG_WEIGHTS, mw}, {DNNL_ARG_BIAS, mb}, {DNNL_ARG_DST, my}};
    dnnl_exec_arg_t ad[] = {{DNNL_ARG_DIFF_DST, mdy}, {DNNL_ARG_WEIGHTS, mwd}, {DNNL_ARG_DIFF_SRC, mdx}};
    dnnl_exec_arg_t aw[] = {
        {DNNL_ARG_SRC, mxw}, {DNNL_ARG_DIFF_DST, mdyw}, {DNNL_ARG_DIFF_WEIGHTS, mdw}, {DNNL_ARG_DIFF_BIAS, mdb}};
    t[0] = run(pf, st, 4, af, reps);
    t[1] = s->first ? 0 : run(pd, st, 3, ad, reps);
    t[2] = run(pw, st, 4, aw, reps);
    dnnl_primitive_destroy(pf);
    dnnl_primitive_destroy(pd);
    dnnl_primitive_destroy(pw);
    dnnl_memory_t all[] = {mx, mw, mb, my, mdx, mdy, mdyw, mxw, mdw, mdb, mwd};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        dnnl_memory_destroy(all[i]);
    dnnl_primitive_desc_destroy(fpd);
    dnnl_primitive_desc_destroy(dpd);
    dnnl_primitive_desc_destroy(wpd);
    return 0;
}

int main(int argc, char **argv)
{
    struct shape v[MAX_SHAPES];
    int n = 0, batch = 32, reps = 5, bf16 = 0;
    double peak = 0;
    const char *model = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (!val)
            usage();
        if (!strcmp(a, "--model"))
            model = val;
        else if (!strcmp(a, "--batch"))
            batch = atoi(val);
        else if (!strcmp(a, "--reps"))
            reps = atoi(val);
        else if (!strcmp(a, "--peak"))
            peak = atof(val);
        else if (!strcmp(a, "--precision") && (!strcmp(val, "fp32") || !strcmp(val, "bf16")))
            bf16 = !strcmp(val, "bf16");
        else if (!strcmp(a, "--shape")) {
            struct shape s = {0};
            char end;
            if (sscanf(val, "%d,%d,%d,%d,%d,%d,%d,%d%c", &s.n, &s.c, &s.h, &s.w, &s.f, &s.k, &s.s, &s.p, &end) != 8 ||
                s.n < 1 || s.c < 1 || s.h < 1 || s.w < 1 || s.f < 1 || s.k < 1 || s.s < 1 || s.p < 0 ||
                s.k > s.h + 2 * s.p || s.k > s.w + 2 * s.p) {
                fprintf(stderr, "sc-conv-ceiling: --shape %s: want N,C,H,W,F,K,S,P (a valid convolution)\n", val);
                return 2;
            }
            if (add(v, &n, s)) {
                fprintf(stderr, "sc-conv-ceiling: more than %d shapes\n", MAX_SHAPES);
                return 2;
            }
        } else
            usage();
        i++;
    }
    if (batch < 1 || reps < 1 || reps > 64 || peak < 0) {
        fprintf(stderr, "sc-conv-ceiling: --batch >= 1, --reps 1..64, --peak >= 0\n");
        return 2;
    }
    if (!model && !n)
        model = "wide";
    if (model && model_shapes(model, batch, v, &n)) {
        fprintf(stderr, "sc-conv-ceiling: --model %s: wide, lenet or resnet50\n", model);
        return 2;
    }
    dnnl_engine_t eng;
    dnnl_stream_t st;
    if (dnnl_engine_create(&eng, dnnl_cpu, 0) != dnnl_success ||
        dnnl_stream_create(&st, eng, dnnl_stream_default_flags) != dnnl_success) {
        fprintf(stderr, "sc-conv-ceiling: no oneDNN CPU engine\n");
        return 1;
    }
    printf("%-26s %9s %9s %9s %8s %8s %8s%s  %s\n", "N,C,H,W,F,K,S,P", "fwd_ms", "bwd_d_ms", "bwd_w_ms", "fwd_GF",
           "bwd_d_GF", "bwd_w_GF", peak > 0 ? "  of_peak" : "", "implementation");
    double total_flop = 0, total_s = 0;
    for (int i = 0; i < n; i++) {
        double t[3];
        const char *impl = "?";
        if (time_shape(eng, st, &v[i], reps, bf16, t, &impl)) {
            fprintf(stderr, "sc-conv-ceiling: oneDNN refused the convolution %d,%d,%d,%d,%d,%d,%d,%d\n", v[i].n, v[i].c,
                    v[i].h, v[i].w, v[i].f, v[i].k, v[i].s, v[i].p);
            return 1;
        }
        double flop = 2 * macs(&v[i]), s = t[0] + t[1] + t[2];
        int dirs = t[1] > 0 ? 3 : 2;
        char name[64];
        snprintf(name, sizeof name, "%d,%d,%d,%d,%d,%d,%d,%d", v[i].n, v[i].c, v[i].h, v[i].w, v[i].f, v[i].k, v[i].s,
                 v[i].p);
        printf("%-26s %9.3f %9.3f %9.3f %8.1f %8.1f %8.1f", name, t[0] * 1e3, t[1] * 1e3, t[2] * 1e3,
               flop / t[0] * 1e-9, t[1] > 0 ? flop / t[1] * 1e-9 : 0.0, flop / t[2] * 1e-9);
        if (peak > 0)
            printf("  %6.1f%%", 100 * dirs * flop / s * 1e-9 / peak);
        printf("  %s\n", impl);
        total_flop += dirs * flop;
        total_s += s;
    }
    printf("all: %.3f GFLOP in %.3f ms: %.1f GFLOP/s", total_flop * 1e-9, total_s * 1e3, total_flop / total_s * 1e-9);
    if (peak > 0)
        printf(", %.1f%% of %.1f", 100 * total_flop / total_s * 1e-9 / peak, peak);
    printf("\n");
    dnnl_stream_destroy(st);
    dnnl_engine_destroy(eng);
    return 0;
}
