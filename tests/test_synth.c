/* The synthetic data generators: determinism, blocks equal to the same
 * region of the whole sample bit for bit, sample and seed dependence, the
 * IMAGE labels and the learnability of the images, the MESH label balance
 * and its dependence on the neighbourhood, the load codelet against direct
 * calls, and the submit wrapper's argument checks. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check.h"
#include "codelets/codelets.h"
#include "src/starconv.h"

#define GUARD    8
#define SENTINEL 1234.5f

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "out of memory\n");
        exit(2);
    }
    return p;
}

static struct sc_synth_args mk_args(int kind, uint64_t seed, int c, int h, int w, int classes)
{
    struct sc_synth_args a;
    memset(&a, 0, sizeof a);
    a.seed = seed;
    a.kind = kind;
    a.c = c;
    a.h = h;
    a.w = w;
    a.classes = classes;
    a.r0 = 0;
    a.r1 = h;
    a.c0 = 0;
    a.c1 = w;
    a.n = 1;
    return a;
}

static struct sc_synth_args block(struct sc_synth_args a, int r0, int r1, int c0, int c1)
{
    a.r0 = r0;
    a.r1 = r1;
    a.c0 = c0;
    a.c1 = c1;
    return a;
}

/* One sample's block, freshly allocated. */
struct sample {
    float *x;
    int32_t *lab;
    size_t nx, nl;
};

static struct sample gen(const struct sc_synth_args *a, int32_t idx)
{
    struct sample s;
    s.nx = sc_synth_x_count(a);
    s.nl = sc_synth_label_count(a);
    s.x = xmalloc(s.nx * sizeof(float));
    s.lab = xmalloc(s.nl * sizeof(int32_t));
    for (size_t i = 0; i < s.nx; i++)
        s.x[i] = NAN;
    for (size_t i = 0; i < s.nl; i++)
        s.lab[i] = -7;
    sc_synth_sample(a, idx, s.x, s.lab);
    return s;
}

static void drop(struct sample *s)
{
    free(s->x);
    free(s->lab);
}

static int same_sample(const struct sample *p, const struct sample *q)
{
    return p->nx == q->nx && p->nl == q->nl && !memcmp(p->x, q->x, p->nx * sizeof(float)) &&
           !memcmp(p->lab, q->lab, p->nl * sizeof(int32_t));
}

/* Does block b (of the whole sample w, same args but the block) equal the
 * region of w bit for bit?  per_pixel: labels are per pixel. */
static int block_matches(const struct sc_synth_args *a, const struct sample *whole, const float *x, const int32_t *lab,
                         int per_pixel)
{
    int bh = a->r1 - a->r0, bw = a->c1 - a->c0;
    for (int ch = 0; ch < a->c; ch++)
        for (int r = 0; r < bh; r++)
            if (memcmp(x + ((size_t)ch * bh + r) * bw, whole->x + ((size_t)ch * a->h + a->r0 + r) * a->w + a->c0,
                       bw * sizeof(float)))
                return 0;
    if (!per_pixel)
        return lab[0] == whole->lab[0];
    for (int r = 0; r < bh; r++)
        if (memcmp(lab + (size_t)r * bw, whole->lab + (size_t)(a->r0 + r) * a->w + a->c0, bw * sizeof(int32_t)))
            return 0;
    return 1;
}

static size_t count_diff(const float *p, const float *q, size_t n)
{
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        d += p[i] != q[i];
    return d;
}

static int all_finite_in(const float *x, size_t n, float lo, float hi)
{
    for (size_t i = 0; i < n; i++)
        if (!(x[i] >= lo && x[i] <= hi))
            return 0;
    return 1;
}

/* ---- least squares: the best linear classifier y ~ sign(w . f + b) ---- */

#define MAXF 20

struct lsq {
    int nf;
    double ata[MAXF + 1][MAXF + 1], aty[MAXF + 1];
};

static void lsq_add(struct lsq *L, const double *f, double y)
{
    double v[MAXF + 1];
    memcpy(v, f, L->nf * sizeof(double));
    v[L->nf] = 1.0;
    for (int i = 0; i <= L->nf; i++) {
        for (int j = 0; j <= L->nf; j++)
            L->ata[i][j] += v[i] * v[j];
        L->aty[i] += v[i] * y;
    }
}

/* Solve (A^T A + tiny I) w = A^T y by Gaussian elimination with pivoting. */
static void lsq_solve(const struct lsq *L, double *w)
{
    int n = L->nf + 1;
    double m[MAXF + 1][MAXF + 2];
    for (int i = 0; i < n; i++) {
        for (int j = 0; j < n; j++)
            m[i][j] = L->ata[i][j] + (i == j ? 1e-9 : 0.0);
        m[i][n] = L->aty[i];
    }
    for (int col = 0; col < n; col++) {
        int p = col;
        for (int i = col + 1; i < n; i++)
            if (fabs(m[i][col]) > fabs(m[p][col]))
                p = i;
        for (int j = 0; j <= n; j++) {
            double t = m[col][j];
            m[col][j] = m[p][j];
            m[p][j] = t;
        }
        for (int i = 0; i < n; i++) {
            if (i == col || m[col][col] == 0.0)
                continue;
            double f = m[i][col] / m[col][col];
            for (int j = col; j <= n; j++)
                m[i][j] -= f * m[col][j];
        }
    }
    for (int i = 0; i < n; i++)
        w[i] = m[i][i] != 0.0 ? m[i][n] / m[i][i] : 0.0;
}

static int lsq_predict(const double *w, int nf, const double *f)
{
    double s = w[nf];
    for (int i = 0; i < nf; i++)
        s += w[i] * f[i];
    return s > 0;
}

/* ---- IMAGE ---- */

static void test_image(void)
{
    struct sc_synth_args a = mk_args(SC_SYNTH_IMAGE, 42, 3, 40, 36, 10);
    struct sample s1 = gen(&a, 5), s2 = gen(&a, 5);
    check(s1.nx == 3 * 40 * 36 && s1.nl == 1, "image: counts %zu x, %zu labels", s1.nx, s1.nl);
    check(same_sample(&s1, &s2), "image: two runs give the same sample bit for bit");
    check(all_finite_in(s1.x, s1.nx, -1.0f, 1.0f), "image: values finite and in [-1, 1]");
    check(s1.lab[0] >= 0 && s1.lab[0] < 10, "image: label %d in [0, 10)", (int)s1.lab[0]);

    /* blocks, uneven ones included */
    static const int blocks[][4] = {{0, 40, 0, 36}, {0, 13, 0, 36},   {13, 40, 0, 36}, {0, 40, 0, 7},
                                    {7, 8, 29, 36}, {39, 40, 35, 36}, {11, 27, 5, 31}};
    int ok = 1;
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        struct sc_synth_args ab = block(a, blocks[b][0], blocks[b][1], blocks[b][2], blocks[b][3]);
        struct sample sb = gen(&ab, 5);
        if (!block_matches(&ab, &s1, sb.x, sb.lab, 0)) {
            ok = 0;
            printf("  block rows [%d,%d) cols [%d,%d) differs\n", ab.r0, ab.r1, ab.c0, ab.c1);
        }
        drop(&sb);
    }
    check(ok, "image: every block equals the region of the whole sample bit for bit");

    /* different indices and seeds differ, also within a class */
    struct sample s3 = gen(&a, 6);
    check(count_diff(s1.x, s3.x, s1.nx) > s1.nx * 9 / 10, "image: samples 5 and 6 differ (%zu of %zu)",
          count_diff(s1.x, s3.x, s1.nx), s1.nx);
    int other = -1;
    for (int i = 0; i < 1000 && other < 0; i++) {
        struct sample t = gen(&a, 100 + i);
        if (t.lab[0] == s1.lab[0])
            other = 100 + i;
        drop(&t);
    }
    struct sample s4 = gen(&a, other);
    check(other >= 0 && count_diff(s1.x, s4.x, s1.nx) > s1.nx * 9 / 10,
          "image: samples 5 and %d of the same class differ", other);
    struct sc_synth_args a2 = a;
    a2.seed = 43;
    struct sample s5 = gen(&a2, 5);
    check(count_diff(s1.x, s5.x, s1.nx) > s1.nx * 9 / 10, "image: seeds 42 and 43 give different samples");
    drop(&s3);
    drop(&s4);
    drop(&s5);

    /* labels: in range, every class appears (1000 classes, 1x1 images) */
    struct sc_synth_args al = mk_args(SC_SYNTH_IMAGE, 7, 1, 1, 1, 1000);
    int *seen = calloc(1000, sizeof(int));
    int in_range = 1, nseen = 0;
    for (int i = 0; i < 20000; i++) {
        float x;
        int32_t l = -1;
        sc_synth_sample(&al, i, &x, &l);
        if (l < 0 || l >= 1000) {
            in_range = 0;
            continue;
        }
        nseen += !seen[l]++;
    }
    int maxc = 0;
    for (int k = 0; k < 1000; k++)
        maxc = seen[k] > maxc ? seen[k] : maxc;
    check(in_range, "image: 20000 labels in [0, 1000)");
    check(nseen == 1000, "image: all 1000 classes appear over 20000 samples (%d)", nseen);
    check(maxc < 60, "image: no class is much too frequent (max %d, expected 20)", maxc);
    free(seen);

    /* learnable: a sample correlates better with another of its class
     * than with one of another class */
    struct sc_synth_args ac = mk_args(SC_SYNTH_IMAGE, 1, 3, 32, 32, 4);
    enum { NS = 40 };
    struct sample ss[NS];
    for (int i = 0; i < NS; i++)
        ss[i] = gen(&ac, i);
    double same = 0, diff = 0;
    int nsame = 0, ndiff = 0;
    for (int i = 0; i < NS; i++)
        for (int j = i + 1; j < NS; j++) {
            double d = 0, ni = 0, nj = 0;
            for (size_t p = 0; p < ss[i].nx; p++) {
                d += (double)ss[i].x[p] * ss[j].x[p];
                ni += (double)ss[i].x[p] * ss[i].x[p];
                nj += (double)ss[j].x[p] * ss[j].x[p];
            }
            double corr = d / sqrt(ni * nj);
            if (ss[i].lab[0] == ss[j].lab[0]) {
                same += corr;
                nsame++;
            } else {
                diff += corr;
                ndiff++;
            }
        }
    same /= nsame ? nsame : 1;
    diff /= ndiff ? ndiff : 1;
    check(nsame > 0 && ndiff > 0 && same > 0.5 && fabs(diff) < 0.2,
          "image: mean correlation within a class %.3f, across classes %.3f", same, diff);
    for (int i = 0; i < NS; i++)
        drop(&ss[i]);
    drop(&s1);
    drop(&s2);
}

/* ---- MESH ---- */

static float at(const struct sample *s, const struct sc_synth_args *a, int ch, int r, int c)
{
    return s->x[((size_t)ch * a->h + r) * a->w + c];
}

static void test_mesh(void)
{
    struct sc_synth_args a = mk_args(SC_SYNTH_MESH, 9, 18, 64, 64, 2);
    struct sample s1 = gen(&a, 3), s2 = gen(&a, 3);
    check(s1.nx == 18 * 64 * 64 && s1.nl == 64 * 64, "mesh: counts %zu x, %zu labels", s1.nx, s1.nl);
    check(same_sample(&s1, &s2), "mesh: two runs give the same sample bit for bit");
    check(all_finite_in(s1.x, s1.nx, -1.0001f, 1.0001f), "mesh: values finite and in [-1, 1]");
    int labels_ok = 1;
    for (size_t i = 0; i < s1.nl; i++)
        labels_ok &= s1.lab[i] == 0 || s1.lab[i] == 1;
    check(labels_ok, "mesh: labels are 0 or 1");
    double var = 0;
    for (size_t i = 0; i < s1.nx; i++)
        var += (double)s1.x[i] * s1.x[i];
    var /= s1.nx;
    check(var > 0.03 && var < 0.5, "mesh: mean square %.3f (fields are not flat)", var);

    /* smooth: neighbouring values are close compared with the spread */
    double dsq = 0;
    for (int ch = 0; ch < 18; ch++)
        for (int r = 0; r < 64; r++)
            for (int c = 0; c + 1 < 64; c++) {
                double d = at(&s1, &a, ch, r, c + 1) - at(&s1, &a, ch, r, c);
                dsq += d * d;
            }
    dsq /= 18.0 * 64 * 63;
    check(dsq < var * 0.5, "mesh: fields are smooth (mean square step %.4f vs %.4f)", dsq, var);

    static const int blocks[][4] = {{0, 64, 0, 64}, {0, 21, 0, 64},   {21, 64, 0, 64}, {0, 64, 0, 1},
                                    {0, 64, 1, 64}, {30, 31, 17, 18}, {63, 64, 0, 64}, {5, 44, 9, 63},
                                    {0, 2, 62, 64}, {32, 64, 32, 64}};
    int ok = 1;
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        struct sc_synth_args ab = block(a, blocks[b][0], blocks[b][1], blocks[b][2], blocks[b][3]);
        struct sample sb = gen(&ab, 3);
        if (!block_matches(&ab, &s1, sb.x, sb.lab, 1)) {
            ok = 0;
            printf("  block rows [%d,%d) cols [%d,%d) differs\n", ab.r0, ab.r1, ab.c0, ab.c1);
        }
        drop(&sb);
    }
    check(ok, "mesh: every block equals the region of the whole sample bit for bit (x and labels)");

    /* a non-square sample with fewer than 4 channels (label fields beyond x) */
    struct sc_synth_args an = mk_args(SC_SYNTH_MESH, 9, 2, 37, 53, 2);
    struct sample sn = gen(&an, 11);
    ok = 1;
    for (int r0 = 0; r0 < 37; r0 += 12)
        for (int c0 = 0; c0 < 53; c0 += 17) {
            struct sc_synth_args ab = block(an, r0, r0 + 12 < 37 ? r0 + 12 : 37, c0, c0 + 17 < 53 ? c0 + 17 : 53);
            struct sample sb = gen(&ab, 11);
            ok &= block_matches(&ab, &sn, sb.x, sb.lab, 1);
            drop(&sb);
        }
    check(ok, "mesh: 2x37x53 split into 12x17 blocks equals the whole sample");
    drop(&sn);

    struct sample s3 = gen(&a, 4);
    check(count_diff(s1.x, s3.x, s1.nx) > s1.nx * 9 / 10, "mesh: samples 3 and 4 differ (%zu of %zu)",
          count_diff(s1.x, s3.x, s1.nx), s1.nx);
    size_t ldiff = 0;
    for (size_t i = 0; i < s1.nl; i++)
        ldiff += s1.lab[i] != s3.lab[i];
    check(ldiff > s1.nl / 5, "mesh: labels of samples 3 and 4 differ at %zu of %zu pixels", ldiff, s1.nl);
    struct sc_synth_args a2 = a;
    a2.seed = 10;
    struct sample s4 = gen(&a2, 3);
    check(count_diff(s1.x, s4.x, s1.nx) > s1.nx * 9 / 10, "mesh: seeds 9 and 10 give different samples");
    /* the channels are different fields */
    check(count_diff(s1.x, s1.x + 64 * 64, 64 * 64) > 64 * 64 * 9 / 10, "mesh: channels 0 and 1 differ");
    drop(&s3);
    drop(&s4);

    /* balance over a few samples of size 64 */
    ok = 1;
    double lo = 1, hi = 0;
    for (int i = 0; i < 12; i++) {
        struct sample t = gen(&a, 1000 + i);
        size_t ones = 0;
        for (size_t p = 0; p < t.nl; p++)
            ones += t.lab[p] == 1;
        double f = (double)ones / t.nl;
        lo = f < lo ? f : lo;
        hi = f > hi ? f : hi;
        ok &= f >= 0.3 && f <= 0.7;
        drop(&t);
    }
    check(ok, "mesh: fraction of ones in [0.3, 0.7] for 12 samples of 64x64 (%.3f .. %.3f)", lo, hi);

    /* The label is the neighbourhood rule, read back from x itself:
     * [x0(r-2,c) + x1(r+2,c) - x2(r,c-2) - x3(r,c+2) > 0] on interior pixels. */
    size_t agree = 0, total = 0, local_agree = 0;
    for (int r = 2; r < 62; r++)
        for (int c = 2; c < 62; c++) {
            float s = at(&s1, &a, 0, r - 2, c) + at(&s1, &a, 1, r + 2, c);
            s -= at(&s1, &a, 2, r, c - 2);
            s -= at(&s1, &a, 3, r, c + 2);
            int lab = s1.lab[(size_t)r * 64 + c];
            agree += (s > 0.0f) == lab || fabsf(s) < 1e-6f;
            float sl = at(&s1, &a, 0, r, c) + at(&s1, &a, 1, r, c);
            sl -= at(&s1, &a, 2, r, c);
            sl -= at(&s1, &a, 3, r, c);
            local_agree += (sl > 0.0f) == lab;
            total++;
        }
    check(agree == total, "mesh: label = [x0(r-2,c) + x1(r+2,c) - x2(r,c-2) - x3(r,c+2) > 0] at %zu of %zu pixels",
          agree, total);
    check(local_agree < total * 0.9, "mesh: the same rule on the pixel's own values agrees at only %zu of %zu",
          local_agree, total);

    /* No linear function of the 18 values at a pixel predicts its label
     * well, while one of the 4 neighbour values does (which shows the fit
     * works): least squares over 8 samples, scored on 4 others. */
    struct lsq *loc = calloc(1, sizeof *loc), *nb = calloc(1, sizeof *nb);
    loc->nf = 18;
    nb->nf = 4;
    double wl[MAXF + 1], wn[MAXF + 1];
    size_t loc_ok = 0, nb_ok = 0, tested = 0;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) {
            lsq_solve(loc, wl);
            lsq_solve(nb, wn);
        }
        for (int i = 0; i < (pass ? 4 : 8); i++) {
            struct sample t = gen(&a, (pass ? 500 : 200) + i);
            for (int r = 2; r < 62; r++)
                for (int c = 2; c < 62; c++) {
                    double fl[18], fn[4];
                    for (int ch = 0; ch < 18; ch++)
                        fl[ch] = at(&t, &a, ch, r, c);
                    fn[0] = at(&t, &a, 0, r - 2, c);
                    fn[1] = at(&t, &a, 1, r + 2, c);
                    fn[2] = at(&t, &a, 2, r, c - 2);
                    fn[3] = at(&t, &a, 3, r, c + 2);
                    int lab = t.lab[(size_t)r * 64 + c];
                    if (pass == 0) {
                        lsq_add(loc, fl, lab ? 1.0 : -1.0);
                        lsq_add(nb, fn, lab ? 1.0 : -1.0);
                    } else {
                        loc_ok += lsq_predict(wl, 18, fl) == lab;
                        nb_ok += lsq_predict(wn, 4, fn) == lab;
                        tested++;
                    }
                }
            drop(&t);
        }
    }
    check(nb_ok > tested * 0.97, "mesh: a linear fit on the 4 neighbour values predicts %.3f of labels",
          (double)nb_ok / tested);
    check(loc_ok < tested * 0.9, "mesh: a linear fit on the pixel's own 18 values predicts only %.3f",
          (double)loc_ok / tested);
    free(loc);
    free(nb);
    drop(&s1);
    drop(&s2);

    /* cost at full size */
    struct sc_synth_args big = mk_args(SC_SYNTH_MESH, 1, 18, 1024, 1024, 2);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct sample sb = gen(&big, 0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
    size_t ones = 0;
    for (size_t p = 0; p < sb.nl; p++)
        ones += sb.lab[p] == 1;
    check(all_finite_in(sb.x, sb.nx, -1.0001f, 1.0001f) && ones > 0 && ones < sb.nl,
          "mesh: 18x1024x1024 sample in %.3f s (%.3f ones)", secs, (double)ones / sb.nl);
    drop(&sb);
}

/* ---- the codelet ---- */

struct hbuf {
    void *p;
    starpu_data_handle_t h;
};

/* float vectors (NaN, then SENTINEL past count), or of other elements
 * (bytes 0xa5) */
static struct hbuf mk_buf(size_t count, size_t elemsize, size_t extra, int is_float)
{
    struct hbuf b = {xmalloc((count + extra) * elemsize), NULL};
    if (is_float) {
        float *f = b.p;
        for (size_t i = 0; i < count + extra; i++)
            f[i] = i < count ? NAN : SENTINEL;
    } else {
        memset(b.p, 0xa5, (count + extra) * elemsize);
    }
    starpu_vector_data_register(&b.h, STARPU_MAIN_RAM, (uintptr_t)b.p, count + extra, elemsize);
    return b;
}

static struct hbuf mk_handle(size_t count, size_t elemsize, size_t extra)
{
    return mk_buf(count, elemsize, extra, 0);
}

static struct hbuf mk_fhandle(size_t count, size_t extra)
{
    return mk_buf(count, sizeof(float), extra, 1);
}

static void rm_handle(struct hbuf *b)
{
    if (b->h)
        starpu_data_unregister(b->h);
    free(b->p);
}

static int guard_intact(const struct hbuf *x, size_t nx, const struct hbuf *l, size_t nl)
{
    const float *f = x->p;
    const unsigned char *u = (const unsigned char *)l->p;
    for (size_t i = 0; i < GUARD; i++)
        if (f[nx + i] != SENTINEL)
            return 0;
    for (size_t i = 0; i < GUARD * sizeof(int32_t); i++)
        if (u[nl * sizeof(int32_t) + i] != 0xa5)
            return 0;
    return 1;
}

/* Submit tiles of n samples for each block of a grid split, compare each
 * with direct calls on the whole sample. */
static void test_codelet_split(struct sc_synth_args a, const int *rows, int nrb, const int *cols, int ncb,
                               const char *what)
{
    enum { N = 3 };
    int32_t idx[N] = {17, 0, 123456};
    struct sample whole[N];
    for (int s = 0; s < N; s++)
        whole[s] = gen(&a, idx[s]);
    int per_pixel = a.kind == SC_SYNTH_MESH;
    int ok = 1, submitted = 1, guards = 1;
    for (int bi = 0; bi < nrb; bi++)
        for (int bj = 0; bj < ncb; bj++) {
            struct sc_synth_args ab = block(a, rows[bi], rows[bi + 1], cols[bj], cols[bj + 1]);
            ab.n = N;
            size_t nx = sc_synth_x_count(&ab), nl = sc_synth_label_count(&ab);
            struct hbuf x = mk_fhandle(N * nx, GUARD), l = mk_handle(N * nl, sizeof(int32_t), GUARD);
            int32_t idx_copy[N];
            memcpy(idx_copy, idx, sizeof idx);
            int ret = sc_insert_synth_load(NULL, &ab, idx_copy, x.h, l.h, "synth_test");
            memset(idx_copy, 0xff, sizeof idx_copy); /* the task must hold its own copy */
            submitted &= ret == 0;
            if (ret)
                printf("  insert: %s\n", sc_last_error());
            starpu_task_wait_for_all();
            starpu_data_unregister(x.h);
            starpu_data_unregister(l.h);
            x.h = l.h = NULL;
            for (int s = 0; s < N; s++)
                ok &= block_matches(&ab, &whole[s], (float *)x.p + s * nx, (int32_t *)l.p + s * nl, per_pixel);
            guards &= guard_intact(&x, N * nx, &l, N * nl);
            rm_handle(&x);
            rm_handle(&l);
        }
    check(submitted, "codelet %s: every tile submitted", what);
    check(ok, "codelet %s: every tile equals the blocks of sc_synth_sample's whole samples", what);
    check(guards, "codelet %s: nothing written past the tiles", what);
    for (int s = 0; s < N; s++)
        drop(&whole[s]);
}

/* ---- wrapper errors ---- */

static void expect_err(const struct sc_synth_args *a, const int32_t *idx, starpu_data_handle_t x,
                       starpu_data_handle_t l, int want, const char *what)
{
    int ret = sc_insert_synth_load(NULL, a, idx, x, l, "synth_err");
    int named = strstr(sc_last_error(), "synth_load") != NULL;
    check(ret == want && named, "wrapper rejects %s with %s (%d: %s)", what, sc_strerror(want), ret,
          ret ? sc_last_error() : "accepted");
}

static void test_errors(void)
{
    struct sc_synth_args a = mk_args(SC_SYNTH_MESH, 1, 18, 16, 16, 2);
    a.n = 2;
    int32_t idx[3] = {0, 1, 2}; /* 3 for the n = 3 case */
    size_t nx = 2 * sc_synth_x_count(&a), nl = 2 * sc_synth_label_count(&a);
    struct hbuf x = mk_fhandle(nx, 0), l = mk_handle(nl, sizeof(int32_t), 0);
    struct hbuf xs = mk_fhandle(nx - 1, 0), ls = mk_handle(nl - 1, sizeof(int32_t), 0);
    struct hbuf lb = mk_handle(nl, 1, 0);
    starpu_data_handle_t mat;
    static float mbuf[16 * 16 * 18 * 2];
    starpu_matrix_data_register(&mat, STARPU_MAIN_RAM, (uintptr_t)mbuf, 16 * 18 * 2, 16 * 18 * 2, 16, sizeof(float));

    struct sc_synth_args b;
#define BAD(field, value, want, what)                                                                                  \
    do {                                                                                                               \
        b = a;                                                                                                         \
        b.field = value;                                                                                               \
        expect_err(&b, idx, x.h, l.h, want, what);                                                                     \
    } while (0)
    BAD(kind, 7, SC_ERR_ARG, "kind 7");
    BAD(c, 0, SC_ERR_SHAPE, "c = 0");
    BAD(h, 0, SC_ERR_SHAPE, "h = 0");
    BAD(w, -3, SC_ERR_SHAPE, "w = -3");
    BAD(classes, 1, SC_ERR_ARG, "classes = 1");
    BAD(classes, 3, SC_ERR_ARG, "mesh with 3 classes");
    BAD(r0, -1, SC_ERR_SHAPE, "r0 = -1");
    BAD(r0, 16, SC_ERR_SHAPE, "r0 = r1");
    BAD(r1, 17, SC_ERR_SHAPE, "r1 > h");
    BAD(c0, -2, SC_ERR_SHAPE, "c0 = -2");
    BAD(c0, 16, SC_ERR_SHAPE, "c0 = c1");
    BAD(c1, 17, SC_ERR_SHAPE, "c1 > w");
    BAD(n, 0, SC_ERR_SHAPE, "n = 0");
    BAD(n, 3, SC_ERR_SHAPE, "n = 3 with tiles sized for 2");
#undef BAD
    expect_err(NULL, idx, x.h, l.h, SC_ERR_ARG, "no args");
    expect_err(&a, NULL, x.h, l.h, SC_ERR_ARG, "no indices");
    int32_t neg[2] = {0, -5};
    expect_err(&a, neg, x.h, l.h, SC_ERR_ARG, "a negative index");
    expect_err(&a, idx, xs.h, l.h, SC_ERR_SHAPE, "x one float short");
    expect_err(&a, idx, x.h, ls.h, SC_ERR_SHAPE, "labels one int short");
    expect_err(&a, idx, x.h, lb.h, SC_ERR_SHAPE, "uint8 labels");
    expect_err(&a, idx, l.h, x.h, SC_ERR_SHAPE, "x and labels swapped (labels too small)");
    expect_err(&a, idx, NULL, l.h, SC_ERR_SHAPE, "no x handle");
    expect_err(&a, idx, mat, l.h, SC_ERR_SHAPE, "a matrix handle for x");
    struct sc_synth_args im = mk_args(SC_SYNTH_IMAGE, 1, 18, 16, 16, 10);
    im.n = 2;
    struct hbuf l1 = mk_handle(1, sizeof(int32_t), 0);
    expect_err(&im, idx, x.h, l1.h, SC_ERR_SHAPE, "1 label for an image tile of 2");

    /* and the valid calls pass with exactly sized handles */
    int ret = sc_insert_synth_load(NULL, &a, idx, x.h, l.h, "synth_ok");
    check(ret == 0, "wrapper accepts exactly sized mesh tiles (%d)", ret);
    struct hbuf li = mk_handle(2, sizeof(int32_t), 0);
    ret = sc_insert_synth_load(NULL, &im, idx, x.h, li.h, "synth_ok");
    check(ret == 0, "wrapper accepts an image tile with 2 labels (%d)", ret);
    starpu_task_wait_for_all();
    starpu_data_unregister(mat);
    rm_handle(&x);
    rm_handle(&l);
    rm_handle(&xs);
    rm_handle(&ls);
    rm_handle(&lb);
    rm_handle(&li);
    rm_handle(&l1);
}

/* synth_labels at a lower resolution: a block of the output equals the
 * same region of the whole output, each pixel is the majority of the
 * labels at the points of its cell (brute force, one pixel at a time), and
 * padding samples get -1. */
static void test_labels(void)
{
    struct sc_synth_args a = mk_args(SC_SYNTH_MESH, 9, 18, 128, 128, 2);
    enum { OH = 8, OW = 8, F = 16, K = 8 };
    int32_t idx[2] = {3, -1};
    a.n = 2;
    struct sc_box whole = {0, OH, 0, OW}, part = {3, 7, 2, 5};
    int32_t *lw = xmalloc(2 * OH * OW * sizeof(int32_t)), *lp = xmalloc(2 * 4 * 3 * sizeof(int32_t));
    starpu_data_handle_t hw, hp;
    starpu_vector_data_register(&hw, STARPU_MAIN_RAM, (uintptr_t)lw, 2 * OH * OW, sizeof(int32_t));
    starpu_vector_data_register(&hp, STARPU_MAIN_RAM, (uintptr_t)lp, 2 * 4 * 3, sizeof(int32_t));
    int err = sc_insert_synth_labels(NULL, &a, OH, OW, whole, idx, hw, "labels") ||
              sc_insert_synth_labels(NULL, &a, OH, OW, part, idx, hp, "labels");
    starpu_task_wait_for_all();
    starpu_data_unregister(hw);
    starpu_data_unregister(hp);
    check(!err, "synth_labels: tasks submitted");
    int brute_ok = 1, block_ok = 1, pad_ok = 1, ones = 0;
    struct sc_synth_args one = mk_args(SC_SYNTH_MESH, 9, 18, 128, 128, 2);
    float x[18];
    for (int r = 0; r < OH; r++)
        for (int c = 0; c < OW; c++) {
            int n1 = 0;
            for (int u = 0; u < K; u++)
                for (int v = 0; v < K; v++) {
                    int32_t lab;
                    struct sc_synth_args p =
                        block(one, r * F + (2 * u + 1) * F / (2 * K), r * F + (2 * u + 1) * F / (2 * K) + 1,
                              c * F + (2 * v + 1) * F / (2 * K), c * F + (2 * v + 1) * F / (2 * K) + 1);
                    sc_synth_sample(&p, 3, x, &lab);
                    n1 += lab;
                }
            int want = 2 * n1 >= K * K;
            ones += want;
            brute_ok &= lw[r * OW + c] == want;
            pad_ok &= lw[OH * OW + r * OW + c] == -1;
            if (r >= part.r0 && r < part.r1 && c >= part.c0 && c < part.c1)
                block_ok &= lp[(r - part.r0) * 3 + (c - part.c0)] == want;
        }
    check(brute_ok, "synth_labels: the majority of each cell's points (%d ones of %d)", ones, OH * OW);
    check(block_ok, "synth_labels: a block equals the same region of the whole");
    check(pad_ok, "synth_labels: padding samples get -1");
    check(ones > 0 && ones < OH * OW, "synth_labels: both classes appear");
    free(lw);
    free(lp);
    /* image data: one label per sample, the one synth_sample gives it */
    struct sc_synth_args ai = mk_args(SC_SYNTH_IMAGE, 5, 3, 32, 32, 10);
    int32_t ii[4] = {0, 7, 123456, -1}, li[4], want[3];
    float *xi = xmalloc(3 * 32 * 32 * sizeof(float));
    for (int s = 0; s < 3; s++)
        sc_synth_sample(&ai, ii[s], xi, &want[s]);
    ai.n = 4;
    sc_synth_labels(&ai, 1, 1, (struct sc_box){0, 1, 0, 1}, ii, li);
    check(li[0] == want[0] && li[1] == want[1] && li[2] == want[2] && li[3] == -1,
          "synth_labels: image labels are synth_sample's (%d %d %d), padding -1 (%d)", li[0], li[1], li[2], li[3]);
    free(xi);
}

int main(void)
{
    test_image();
    test_mesh();

    if (starpu_init(NULL) != 0) {
        fprintf(stderr, "starpu_init failed\n");
        return 77;
    }
    sc_codelets_init();
    static const int mrows[] = {0, 21, 64}, mcols[] = {0, 10, 40, 64};
    test_codelet_split(mk_args(SC_SYNTH_MESH, 5, 18, 64, 64, 2), mrows, 2, mcols, 3, "mesh 2x3 split");
    static const int whole_r[] = {0, 64}, whole_c[] = {0, 64};
    test_codelet_split(mk_args(SC_SYNTH_MESH, 5, 18, 64, 64, 2), whole_r, 1, whole_c, 1, "mesh whole");
    static const int irows[] = {0, 7, 30, 33}, icols[] = {0, 16, 33};
    test_codelet_split(mk_args(SC_SYNTH_IMAGE, 5, 3, 33, 33, 1000), irows, 3, icols, 2, "image 3x2 split");
    test_errors();
    test_labels();
    sc_codelets_shutdown();
    starpu_shutdown();

    printf("%d passed, %d failed\n", passes, failures);
    return failures != 0;
}
