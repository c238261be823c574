/* Synthetic data sets generated on the fly (synth.h).
 *
 * Every field is a sum of sinusoids A sin(kr r + kc c + ph), evaluated as
 * (A sin(kr r)) cos(kc c + ph) + (A cos(kr r)) sin(kc c + ph): per (field,
 * wave) a table over the block's rows and one over its columns (computed in
 * double, stored as float, each entry a pure function of its row or column
 * index), then a few float multiply-adds per value in a fixed order.  So a
 * value does not depend on where the block starts, and the per-value cost
 * is a handful of flops instead of sinf calls.  The tables reach MARGIN
 * rows and columns beyond the block for the MESH label's neighbours. */
#include "synth.h"
#include "fail.h"
#include "base/error.h"
#include "base/rng.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(struct sc_synth_args) == sizeof(uint64_t) + 12 * sizeof(int),
               "struct sc_synth_args must have no padding");

#define IMAGE_K      3 /* waves per IMAGE channel */
#define MESH_K       4 /* waves per MESH field */
#define LABEL_FIELDS 4
#define MARGIN       2 /* reach of the MESH label rule */
#define TWO_PI       6.283185307179586

enum { TAG_LABEL = 1, TAG_CLASS, TAG_JITTER, TAG_NOISE, TAG_MESH };

static uint64_t hash5(uint64_t seed, uint64_t tag, uint64_t a, uint64_t b, uint64_t c)
{
    uint64_t h = sc_splitmix64(seed ^ sc_splitmix64(tag));
    h = sc_splitmix64(h ^ a);
    h = sc_splitmix64(h ^ b);
    return sc_splitmix64(h ^ c);
}

/* The j-th uniform draw in [0, 1) of the stream h. */
static double unif(uint64_t h, int j)
{
    return (sc_splitmix64(h + 0x632be59bd9b4e019ull * (uint64_t)(j + 1)) >> 11) * 0x1p-53;
}

struct wave {
    double kr, kc, ph, amp;
};

/* ---- shape ---- */

int sc_synth_check(const struct sc_synth_args *a, const char *op)
{
    if (!a)
        return sc_error(SC_ERR_ARG, "%s: no arguments", op);
    if (a->kind != SC_SYNTH_IMAGE && a->kind != SC_SYNTH_MESH)
        return sc_error(SC_ERR_ARG, "%s: unknown kind %d", op, a->kind);
    if (a->c < 1 || a->h < 1 || a->w < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad sample shape %dx%dx%d", op, a->c, a->h, a->w);
    if (a->r0 < 0 || a->r0 >= a->r1 || a->r1 > a->h || a->c0 < 0 || a->c0 >= a->c1 || a->c1 > a->w)
        return sc_error(SC_ERR_SHAPE, "%s: block rows [%d,%d) x cols [%d,%d) is not inside %dx%d", op, a->r0, a->r1,
                        a->c0, a->c1, a->h, a->w);
    if (a->classes < 2)
        return sc_error(SC_ERR_ARG, "%s: %d classes (needs at least 2)", op, a->classes);
    if (a->kind == SC_SYNTH_MESH && a->classes != 2)
        return sc_error(SC_ERR_ARG, "%s: mesh data has 2 classes, not %d", op, a->classes);
    return 0;
}

static size_t x_count(const struct sc_synth_args *a)
{
    return (size_t)a->c * (size_t)(a->r1 - a->r0) * (size_t)(a->c1 - a->c0);
}

static size_t label_count(const struct sc_synth_args *a)
{
    return a->kind == SC_SYNTH_MESH ? (size_t)(a->r1 - a->r0) * (size_t)(a->c1 - a->c0) : 1;
}

size_t sc_synth_x_count(const struct sc_synth_args *a)
{
    return sc_synth_check(a, "synth") ? 0 : x_count(a);
}

size_t sc_synth_label_count(const struct sc_synth_args *a)
{
    return sc_synth_check(a, "synth") ? 0 : label_count(a);
}

/* ---- tables ---- */

struct tables {
    int k;      /* waves per field */
    int nr, nc; /* rows r0-MARGIN .. r1+MARGIN, cols c0-MARGIN .. c1+MARGIN */
    float *t;   /* per field, per wave: rs[nr], rc[nr], cs[nc], cc[nc] */
};

static size_t field_floats(const struct tables *tb)
{
    return (size_t)tb->k * 2 * ((size_t)tb->nr + (size_t)tb->nc);
}

static int fields_needed(const struct sc_synth_args *a)
{
    return a->kind == SC_SYNTH_MESH && a->c < LABEL_FIELDS ? LABEL_FIELDS : a->c;
}

/* Floats of workspace for one sample: the tables, and for MESH four rows
 * of shifted field values for the label. */
static size_t ws_floats(const struct sc_synth_args *a, struct tables *tb)
{
    tb->k = a->kind == SC_SYNTH_MESH ? MESH_K : IMAGE_K;
    tb->nr = a->r1 - a->r0 + 2 * MARGIN;
    tb->nc = a->c1 - a->c0 + 2 * MARGIN;
    size_t n = (size_t)fields_needed(a) * field_floats(tb);
    if (a->kind == SC_SYNTH_MESH)
        n += (size_t)LABEL_FIELDS * (size_t)(a->c1 - a->c0);
    return n;
}

static void fill_tables(const struct sc_synth_args *a, const struct tables *tb, int field, const struct wave *wv)
{
    float *t = tb->t + (size_t)field * field_floats(tb);
    for (int k = 0; k < tb->k; k++) {
        float *rs = t + (size_t)k * 2 * (tb->nr + tb->nc), *rc = rs + tb->nr, *cs = rc + tb->nr, *cc = cs + tb->nc;
        for (int i = 0; i < tb->nr; i++) {
            double r = (double)(a->r0 - MARGIN + i);
            rs[i] = (float)(wv[k].amp * sin(wv[k].kr * r));
            rc[i] = (float)(wv[k].amp * cos(wv[k].kr * r));
        }
        for (int j = 0; j < tb->nc; j++) {
            double c = (double)(a->c0 - MARGIN + j);
            cs[j] = (float)sin(wv[k].kc * c + wv[k].ph);
            cc[j] = (float)cos(wv[k].kc * c + wv[k].ph);
        }
    }
}

/* out[q] = field at table row i, table columns j0 .. j0+count-1; the waves
 * summed in order, the same code for every block. */
static inline __attribute__((always_inline)) void field_row_k(const struct tables *tb, int field, int K, int i, int j0,
                                                              int count, float *restrict out)
{
    const float *t = tb->t + (size_t)field * field_floats(tb);
    const size_t stride = 2 * ((size_t)tb->nr + (size_t)tb->nc);
    float a[MESH_K], b[MESH_K];
    const float *cc[MESH_K], *cs[MESH_K];
    for (int k = 0; k < K; k++) {
        const float *rs = t + k * stride, *rc = rs + tb->nr;
        a[k] = rs[i];
        b[k] = rc[i];
        cs[k] = rc + tb->nr + j0;
        cc[k] = cs[k] + tb->nc;
    }
    /* wave by wave over the row: each value's sum in the same order as
     * one value at a time, but the columns in SIMD lanes */
    for (int q = 0; q < count; q++)
        out[q] = 0.0f;
    for (int k = 0; k < K; k++) {
        const float *restrict ck = cc[k], *restrict sk = cs[k];
        float ak = a[k], bk = b[k];
#pragma omp simd
        for (int q = 0; q < count; q++)
            out[q] += ak * ck[q] + bk * sk[q];
    }
}

static void field_row(const struct tables *tb, int field, int i, int j0, int count, float *restrict out)
{
    if (tb->k == MESH_K)
        field_row_k(tb, field, MESH_K, i, j0, count, out);
    else
        field_row_k(tb, field, IMAGE_K, i, j0, count, out);
}

/* ---- the two kinds ---- */

static int image_label(const struct sc_synth_args *a, int32_t idx)
{
    return (int)(hash5(a->seed, TAG_LABEL, (uint32_t)idx, 0, 0) % (uint64_t)a->classes);
}

static void image_sample(const struct sc_synth_args *a, int32_t idx, float *x, int32_t *labels, const struct tables *tb)
{
    int label = image_label(a, idx);
    int bh = a->r1 - a->r0, bw = a->c1 - a->c0;
    int side = a->h < a->w ? a->h : a->w;
    double fmax = 1.0 / 8, fmin = 1.0 / (side > 8 ? side : 8);
    for (int ch = 0; ch < a->c; ch++) {
        struct wave wv[IMAGE_K];
        for (int k = 0; k < IMAGE_K; k++) {
            uint64_t hc = hash5(a->seed, TAG_CLASS, (uint64_t)label, (uint64_t)ch, (uint64_t)k);
            uint64_t hs = hash5(a->seed, TAG_JITTER, (uint32_t)idx, (uint64_t)ch, (uint64_t)k);
            double theta = TWO_PI * unif(hc, 0), f = fmin + (fmax - fmin) * unif(hc, 1);
            wv[k].kr = TWO_PI * f * cos(theta);
            wv[k].kc = TWO_PI * f * sin(theta);
            wv[k].ph = TWO_PI * unif(hc, 2) + (unif(hs, 0) - 0.5);
            wv[k].amp = 0.1 + 0.2 * unif(hc, 3);
        }
        fill_tables(a, tb, ch, wv);
        uint64_t base = hash5(a->seed, TAG_NOISE, (uint32_t)idx, (uint64_t)ch, 0);
        for (int r = a->r0; r < a->r1; r++) {
            float *row = x + ((size_t)ch * bh + (size_t)(r - a->r0)) * bw;
            field_row(tb, ch, r - a->r0 + MARGIN, MARGIN, bw, row);
            for (int c = a->c0; c < a->c1; c++) {
                uint64_t h = sc_splitmix64(base ^ ((uint64_t)(uint32_t)r << 32 | (uint32_t)c));
                row[c - a->c0] += ((float)(h >> 40) * 0x1p-24f - 0.5f) * 0.2f;
            }
        }
    }
    labels[0] = label;
}

/* Two scales: waves 0 and 1 long (wavelengths side/2 to 2*side, at least
 * 8), which carry most of the amplitude (0.6), so that the label of a
 * mesh model's output cell (1/64 of the side) is predictable from the
 * cell's neighbourhood; waves 2 and 3 short (wavelengths 8 to 16), so
 * that at pixel level the label's 2-pixel shifts matter (halos). */
static void mesh_waves(const struct sc_synth_args *a, int32_t idx, int field, struct wave *wv)
{
    int side = a->h < a->w ? a->h : a->w;
    double lmin = side / 2.0 > 8 ? side / 2.0 : 8, lmax = 2.0 * side > lmin ? 2.0 * side : lmin;
    double sum[2] = {0, 0};
    for (int k = 0; k < MESH_K; k++) {
        int lng = k < MESH_K / 2;
        double fmin = lng ? 1.0 / lmax : 1.0 / 16, fmax = lng ? 1.0 / lmin : 1.0 / 8;
        uint64_t h = hash5(a->seed, TAG_MESH, (uint32_t)idx, (uint64_t)field, (uint64_t)k);
        double theta = TWO_PI * unif(h, 0), f = fmin + (fmax - fmin) * unif(h, 1);
        wv[k].kr = TWO_PI * f * cos(theta);
        wv[k].kc = TWO_PI * f * sin(theta);
        wv[k].ph = TWO_PI * unif(h, 2);
        wv[k].amp = 0.5 + 0.5 * unif(h, 3);
        sum[lng] += wv[k].amp;
    }
    for (int k = 0; k < MESH_K; k++)
        wv[k].amp *= (k < MESH_K / 2 ? 0.6 : 0.4) / sum[k < MESH_K / 2];
}

/* The MESH labels of table row i (block row i - MARGIN), table columns
 * MARGIN .. MARGIN+bw-1, from the tables of fields 0-3 and 4 bw floats of
 * rows: label(r,c) = [f0(r-2,c) + f1(r+2,c) - f2(r,c-2) - f3(r,c+2) > 0]. */
static void mesh_label_row(const struct tables *tb, int i, int bw, float *rows, int32_t *lab)
{
    float *f0 = rows, *f1 = f0 + bw, *f2 = f1 + bw, *f3 = f2 + bw;
    field_row(tb, 0, i - 2, MARGIN, bw, f0);
    field_row(tb, 1, i + 2, MARGIN, bw, f1);
    field_row(tb, 2, i, MARGIN - 2, bw, f2);
    field_row(tb, 3, i, MARGIN + 2, bw, f3);
    for (int c = 0; c < bw; c++) {
        float s = f0[c] + f1[c];
        s -= f2[c];
        s -= f3[c];
        lab[c] = s > 0.0f;
    }
}

static void mesh_sample(const struct sc_synth_args *a, int32_t idx, float *x, int32_t *labels, const struct tables *tb,
                        float *rows)
{
    int bh = a->r1 - a->r0, bw = a->c1 - a->c0, nf = fields_needed(a);
    for (int f = 0; f < nf; f++) {
        struct wave wv[MESH_K];
        mesh_waves(a, idx, f, wv);
        fill_tables(a, tb, f, wv);
    }
    for (int ch = 0; ch < a->c; ch++)
        for (int r = 0; r < bh; r++)
            field_row(tb, ch, r + MARGIN, MARGIN, bw, x + ((size_t)ch * bh + r) * bw);
    for (int r = 0; r < bh; r++)
        mesh_label_row(tb, r + MARGIN, bw, rows, labels + (size_t)r * bw);
}

/* One sample's block, with a workspace of ws_floats() floats. */
static void synth_sample_ws(const struct sc_synth_args *a, int32_t idx, float *x, int32_t *labels, float *ws)
{
    struct tables tb;
    ws_floats(a, &tb);
    tb.t = ws;
    if (a->kind == SC_SYNTH_MESH)
        mesh_sample(a, idx, x, labels, &tb, ws + (size_t)fields_needed(a) * field_floats(&tb));
    else
        image_sample(a, idx, x, labels, &tb);
}

static void fill_failed(const struct sc_synth_args *a, float *x, int32_t *labels)
{
    size_t nx = x_count(a), nl = label_count(a);
    for (size_t i = 0; i < nx; i++)
        x[i] = NAN;
    for (size_t i = 0; i < nl; i++)
        labels[i] = -1;
}

void sc_synth_sample(const struct sc_synth_args *a, int32_t idx, float *x, int32_t *labels)
{
    if (sc_synth_check(a, "synth_sample") || !x || !labels) {
        const char *why = x && labels ? sc_last_error() : "no buffers", *own = "synth_sample: ";
        sc_fail_record("synth_sample", "%s", strncmp(why, own, strlen(own)) ? why : why + strlen(own));
        return;
    }
    struct tables tb;
    size_t n = ws_floats(a, &tb);
    float *ws = malloc(n * sizeof(float));
    if (!ws) {
        sc_fail_record("synth_sample", "cannot allocate %zu bytes", n * sizeof(float));
        fill_failed(a, x, labels);
        return;
    }
    synth_sample_ws(a, idx, x, labels, ws);
    free(ws);
}

/* ---- a tile of samples ---- */

void sc_synth_load(const struct sc_synth_args *a, const int32_t *idx, float *x, int32_t *labels)
{
    size_t nx = x_count(a), nl = label_count(a);
    /* without labels (the loss's tiles get theirs from sc_synth_labels),
     * one sample's labels go to a scratch array */
    int own = labels != NULL;
    if (!own)
        labels = malloc(nl * sizeof(int32_t));
    struct tables tb;
    size_t n = ws_floats(a, &tb);
    float *ws = malloc(n * sizeof(float));
    for (int s = 0; s < a->n; s++) {
        int32_t *lab = labels ? labels + (own ? s * nl : 0) : NULL;
        if (idx[s] < 0) { /* padding: zeros, and a label the loss ignores */
            memset(x + s * nx, 0, nx * sizeof(float));
            for (size_t i = 0; lab && i < nl; i++)
                lab[i] = -1;
        } else if (ws && lab) {
            synth_sample_ws(a, idx[s], x + s * nx, lab, ws);
            int r = a->h / 2, c = a->w / 2;
            if (idx[s] + 1 == a->nan_sample && r >= a->r0 && r < a->r1 && c >= a->c0 && c < a->c1)
                x[s * nx + (size_t)(r - a->r0) * (a->c1 - a->c0) + (c - a->c0)] = NAN;
        } else if (lab) {
            fill_failed(a, x + s * nx, lab);
        }
    }
    if (!ws || !labels)
        sc_fail_record("synth_load", "cannot allocate %zu bytes", (ws ? nl * sizeof(int32_t) : n * sizeof(float)));
    if (!own)
        free(labels);
    free(ws);
}

/* ---- labels at another resolution ---- */

struct labels_at {
    struct sc_synth_args a; /* the input's shape; n */
    int oh, ow;             /* the loss's resolution */
    struct sc_box box;      /* the loss tile's block */
};

/* Output pixel (r, c) stands for an fr x fc cell of the input; it takes
 * the majority of the labels at kr x kc points spread over the cell (the
 * label itself when the cell is one pixel), a smooth enough target for a
 * model whose output is 1/64 of its input.  The points of one output row
 * lie on kr input rows.  The tables of the four label fields are made once
 * for the block of cells (a value does not depend on the block: the
 * labels are those of mesh_sample), then only those rows are evaluated. */
struct cell_labels {
    struct sc_synth_args blk; /* the input block under the loss tile's cells, fields 0-3 */
    struct tables tb;
    size_t floats; /* workspace: the tables, then 4 rows */
    int fr, fc;    /* a cell's input rows and columns */
    int kr, kc;    /* its points' rows and columns */
};

static struct cell_labels cell_labels_shape(const struct labels_at *ta)
{
    int fr = ta->a.h / ta->oh, fc = ta->a.w / ta->ow;
    struct cell_labels cl = {.blk = ta->a, .fr = fr, .fc = fc, .kr = fr < 8 ? fr : 8, .kc = fc < 8 ? fc : 8};
    cl.blk.n = 1, cl.blk.c = LABEL_FIELDS;
    cl.blk.r0 = ta->box.r0 * fr, cl.blk.r1 = ta->box.r1 * fr;
    cl.blk.c0 = ta->box.c0 * fc, cl.blk.c1 = ta->box.c1 * fc;
    cl.floats = ws_floats(&cl.blk, &cl.tb);
    return cl;
}

static void mesh_cell_labels(const struct labels_at *ta, struct cell_labels *cl, int32_t idx, int32_t *labels,
                             int *ones, float *ws, int32_t *row)
{
    int fr = cl->fr, fc = cl->fc, kr = cl->kr, kc = cl->kc;
    int bw = ta->box.c1 - ta->box.c0, width = cl->blk.c1 - cl->blk.c0;
    cl->tb.t = ws;
    for (int f = 0; f < LABEL_FIELDS; f++) {
        struct wave wv[MESH_K];
        mesh_waves(&cl->blk, idx, f, wv);
        fill_tables(&cl->blk, &cl->tb, f, wv);
    }
    float *rows = ws + (size_t)LABEL_FIELDS * field_floats(&cl->tb);
    for (int r = ta->box.r0; r < ta->box.r1; r++) {
        for (int c = 0; c < bw; c++)
            ones[c] = 0;
        for (int u = 0; u < kr; u++) {
            int ir = r * fr + (2 * u + 1) * fr / (2 * kr);
            mesh_label_row(&cl->tb, ir - cl->blk.r0 + MARGIN, width, rows, row);
            for (int c = 0; c < bw; c++)
                for (int v = 0; v < kc; v++)
                    ones[c] += row[c * fc + (2 * v + 1) * fc / (2 * kc)];
        }
        for (int c = 0; c < bw; c++)
            *labels++ = 2 * ones[c] >= kr * kc;
    }
}

void sc_synth_labels(const struct sc_synth_args *a, int oh, int ow, struct sc_box box, const int32_t *idx,
                     int32_t *labels)
{
    struct labels_at ta = {.a = *a, .oh = oh, .ow = ow, .box = box};
    int mesh = a->kind == SC_SYNTH_MESH;
    size_t per = mesh ? (size_t)sc_box_area(box) : 1;
    struct cell_labels cl = mesh ? cell_labels_shape(&ta) : (struct cell_labels){0};
    size_t width = mesh ? (size_t)(cl.blk.c1 - cl.blk.c0) : 1;
    float *ws = malloc((mesh ? cl.floats : 1) * sizeof(float));
    int32_t *row = malloc(width * sizeof(int32_t));
    int *ones = malloc((size_t)(box.c1 - box.c0) * sizeof(int));
    for (int s = 0; s < a->n; s++) {
        int32_t *lab = labels + s * per;
        if (idx[s] < 0 || !ws || !row || !ones) {
            for (size_t i = 0; i < per; i++)
                lab[i] = -1;
        } else if (mesh) {
            mesh_cell_labels(&ta, &cl, idx[s], lab, ones, ws, row);
        } else {
            lab[0] = image_label(a, idx[s]); /* as image_sample */
        }
    }
    if (!ws || !row || !ones)
        sc_fail_record("synth_labels", "out of memory");
    free(ws);
    free(row);
    free(ones);
}
