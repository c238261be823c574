/* A trace as a Gantt picture: one row per lane, colours by phase. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "src/report/report.h"
#include "base/atomic_file.h"
#include "base/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- SVG ---------------------------------------------------------------- */

#define SVG_WIDTH      1600
#define SVG_LEFT       100 /* room for the lane labels */
#define SVG_RIGHT      20
#define SVG_TOP        56 /* title and axis labels */
#define SVG_ROW        16
#define SVG_LEGEND_COL 170

/* Colours of the common phases, chosen so that the phases that follow each
 * other in an iteration contrast; other phases get one of the fallback
 * colours by a hash of their name, so a phase keeps its colour from one
 * picture to the next. */
static const char *phase_colour(const char *phase)
{
    static const struct {
        const char *phase, *colour;
    } known[] = {
        {"fwd", "#4e79a7"},
        {"bwd_data", "#f28e2b"},
        {"bwd_filter", "#e15759"},
        {"bwd_weights", "#e15759"}, /* the same thing */
        {"relu_bwd", "#ff9da7"},
        {"load", "#bab0ac"},
        {"xent", "#9c755f"},
        {"reduce_scatter", "#59a14f"},
        {"grad_allreduce", "#17becf"},
        {"allgather", "#b6e880"},
        {"sgd", "#b07aa1"},
        {"accumulate", "#edc948"},
        {"gather", "#2f6f6a"},
    };
    static const char *const fallback[] = {
        "#8c564b", "#bcbd22", "#7f7f7f", "#9467bd", "#d62728", "#2ca02c",
        "#1f77b4", "#ff7f0e", "#e377c2", "#aec7e8", "#ffbb78", "#98df8a",
    };
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(known[i].phase, phase) == 0)
            return known[i].colour;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)phase; *p; p++)
        h = (h ^ *p) * 16777619u;
    return fallback[h % (sizeof fallback / sizeof fallback[0])];
}

/* Control characters are not allowed in XML 1.0 even as references. */
static void xml_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        case '\'':
            fputs("&apos;", f);
            break;
        default:
            putc(ch < 0x20 ? '?' : ch, f);
        }
    }
}

struct svg {
    const struct sc_trace_packed *p;
    const int *row0; /* first row of each rank */
    int rows;
    const char **phases; /* distinct, sorted */
    size_t nphases;
    double t0, span; /* the time range drawn, microseconds; span > 0 */
};

static double svg_x(const struct svg *g, double t)
{
    return SVG_LEFT + (t - g->t0) / g->span * (SVG_WIDTH - SVG_LEFT - SVG_RIGHT);
}

static void svg_rect(FILE *f, const struct svg *g, int row, const char *name, int64_t iteration, double start,
                     double end, int transfers)
{
    double x = svg_x(g, start), w = svg_x(g, end) - x;
    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x,
            SVG_TOP + row * SVG_ROW + 2, w > 0.5 ? w : 0.5, SVG_ROW - 4, phase_colour(sc_trace_phase(name)));
    xml_str(f, name);
    fprintf(f, ", iteration %" PRId64 ": start %.3f ms, duration %.3f ms", iteration, start / 1e3, (end - start) / 1e3);
    if (transfers > 1)
        fprintf(f, ", %d transfers", transfers);
    fputs("</title></rect>\n", f);
}

static int svg_body(FILE *f, const void *ctx)
{
    const struct svg *g = ctx;
    const struct sc_trace *t = g->p->t;
    int plot_bottom = SVG_TOP + g->rows * SVG_ROW;
    int per_line = (SVG_WIDTH - SVG_LEFT) / SVG_LEGEND_COL;
    int legend_lines = ((int)g->nphases + per_line - 1) / per_line;
    int height = plot_bottom + 30 + legend_lines * 18 + 10;

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_WIDTH, height, SVG_WIDTH, height);
    fputs("<text x=\"10\" y=\"18\" font-size=\"14\">", f);
    xml_str(f, t->model[0] ? t->model : "trace");
    fprintf(f, ": %d ranks x %d workers, iterations %" PRId64 "..%" PRId64 "</text>\n", t->ranks, t->workers,
            t->first_iteration, t->last_iteration);

    /* rows: stripes and labels */
    for (int r = 0; r < t->ranks; r++) {
        int lanes = g->row0[r + 1] - g->row0[r];
        for (int l = 0; l < lanes; l++) {
            int row = g->row0[r] + l, y = SVG_TOP + row * SVG_ROW;
            if (row % 2)
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f2f2f2\"/>\n", SVG_LEFT, y,
                        SVG_WIDTH - SVG_LEFT - SVG_RIGHT, SVG_ROW);
            fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", SVG_LEFT - 6, y + SVG_ROW - 4);
            if (l < t->workers - t->cuda_workers)
                fprintf(f, "r%d cpu%d</text>\n", r, l);
            else if (l < t->workers)
                fprintf(f, "r%d cuda%d</text>\n", r, l - (t->workers - t->cuda_workers));
            else if (l == t->workers)
                fprintf(f, "r%d comm</text>\n", r);
            else
                fprintf(f, "r%d comm%d</text>\n", r, l - t->workers + 1);
        }
        if (r > 0)
            fprintf(f, "<line x1=\"0\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n", SVG_WIDTH - SVG_RIGHT,
                    SVG_TOP + g->row0[r] * SVG_ROW, SVG_TOP + g->row0[r] * SVG_ROW);
    }

    /* time axis: about ten ticks at 1, 2 or 5 times a power of ten ms */
    double raw = g->span / 1e3 / 10, t1_ms = (g->t0 + g->span) / 1e3;
    double mag = pow(10, floor(log10(raw))), step = mag;
    if (raw / mag > 5)
        step = 10 * mag;
    else if (raw / mag > 2)
        step = 5 * mag;
    else if (raw / mag > 1)
        step = 2 * mag;
    double first_ms = ceil(g->t0 / 1e3 / step) * step;
    for (int i = 0; i <= 20; i++) {
        double ms = first_ms + i * step;
        if (ms > t1_ms + step * 1e-9)
            break;
        double x = svg_x(g, ms * 1e3);
        fprintf(f, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%d\" stroke=\"#ccc\"/>\n", x, x, SVG_TOP - 4,
                plot_bottom);
        fprintf(f, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, SVG_TOP - 8, ms);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">ms</text>\n", SVG_LEFT - 6, SVG_TOP - 8);

    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->lane != SC_TRACE_LANE_COMM)
            svg_rect(f, g, g->row0[e->rank] + e->lane, e->name, e->iteration, e->start, e->end, 0);
    }
    for (size_t i = 0; i < g->p->nc; i++) {
        const struct sc_trace_comm *c = &g->p->c[i];
        svg_rect(f, g, g->row0[c->rank] + t->workers + c->lane, c->name, c->iteration, c->start, c->end, c->transfers);
    }

    for (size_t i = 0; i < g->nphases; i++) {
        int x = SVG_LEFT + (int)(i % (size_t)per_line) * SVG_LEGEND_COL;
        int y = plot_bottom + 20 + (int)(i / (size_t)per_line) * 18;
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/>", x, y,
                phase_colour(g->phases[i]));
        fprintf(f, "<text x=\"%d\" y=\"%d\">", x + 16, y + 10);
        xml_str(f, g->phases[i]);
        fputs("</text>\n", f);
    }
    fputs("</svg>\n", f);
    return 0; /* write errors: ferror, in sc_write_atomic */
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

int sc_trace_write_svg(const struct sc_trace *t, const char *path)
{
    int rc = sc_trace_check(t, path);
    if (rc)
        return rc;
    struct sc_trace_packed p = {t, NULL, 0, NULL};
    struct sc_trace_comm *c;
    int *lanes;
    if ((rc = sc_trace_pack_comm(t, &c, &p.nc, &lanes)))
        return rc;
    p.c = c;
    p.lanes = lanes;
    int *row0 = malloc(((size_t)t->ranks + 1) * sizeof *row0);
    const char **phases = malloc((t->n ? t->n : 1) * sizeof *phases);
    if (!row0 || !phases) {
        rc = sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    struct svg g = {&p, row0, 0, phases, 0, 0, 0};
    row0[0] = 0;
    for (int r = 0; r < t->ranks; r++)
        row0[r + 1] = row0[r] + t->workers + lanes[r];
    g.rows = row0[t->ranks];
    for (size_t i = 0; i < t->n; i++)
        phases[i] = sc_trace_phase(t->ev[i].name);
    qsort(phases, t->n, sizeof *phases, cmp_str);
    for (size_t i = 0; i < t->n; i++)
        if (g.nphases == 0 || strcmp(phases[g.nphases - 1], phases[i]) != 0)
            phases[g.nphases++] = phases[i];
    double t1 = -INFINITY;
    g.t0 = t->n ? INFINITY : 0;
    for (size_t i = 0; i < t->n; i++) {
        g.t0 = fmin(g.t0, t->ev[i].start);
        t1 = fmax(t1, t->ev[i].end);
    }
    /* an empty trace or a single instant still gets an axis */
    g.span = t1 - g.t0 > 0 ? t1 - g.t0 : 1;
    rc = sc_write_atomic(path, svg_body, &g);
out:
    free(row0);
    free(phases);
    free(c);
    free(lanes);
    return rc;
}
