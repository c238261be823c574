/* The overlap analysis of a trace (Lee et al., eq. 11) and its table.
 *
 * The report (sc_trace_print_report), times in milliseconds per iteration:
 *
 *   overlap report: MODEL, R ranks x W workers, iterations A..B, times in ms per iteration
 *   rank  compute_ms     work_ms     comm_ms  exposed_ms  overlap     idle_ms    images/s
 *   0         10.000      13.000      10.000       5.000    0.500      15.000   2133333.3
 *   ...
 *   mean      ...
 *
 *   overlap report: MODEL, PRECISION, R ranks x W workers, ... (--precision's
 *   "fp32" or "bf16", where the trace says it)
 *
 * ("MODEL, " is left out when the model is empty.)  Columns have fixed
 * widths and are separated by at least two spaces; a value that is not
 * defined (overlap without communication, images/s of an empty trace)
 * prints "n/a".  The mean row averages each column over the ranks where it
 * is defined. */
#include "src/report/report.h"
#include "base/error.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- analysis ----------------------------------------------------------- */

struct ival {
    int rank;
    int comm; /* 0: a worker's task, 1: a transfer */
    double s, e;
};

struct span {
    double s, e;
};

static int cmp_ival(const void *pa, const void *pb)
{
    const struct ival *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->comm != b->comm)
        return a->comm - b->comm;
    return (a->s > b->s) - (a->s < b->s);
}

/* The union of intervals sorted by start, as disjoint sorted spans. */
static size_t union_of(const struct ival *a, size_t n, struct span *u)
{
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && a[i].s <= u[m - 1].e) {
            if (a[i].e > u[m - 1].e)
                u[m - 1].e = a[i].e;
        } else {
            u[m++] = (struct span){a[i].s, a[i].e};
        }
    }
    return m;
}

static double measure(const struct span *u, size_t n)
{
    double m = 0;
    for (size_t i = 0; i < n; i++)
        m += u[i].e - u[i].s;
    return m;
}

static double intersection(const struct span *a, size_t na, const struct span *b, size_t nb)
{
    double m = 0;
    size_t i = 0, j = 0;
    while (i < na && j < nb) {
        double lo = fmax(a[i].s, b[j].s), hi = fmin(a[i].e, b[j].e);
        if (hi > lo)
            m += hi - lo;
        if (a[i].e < b[j].e)
            i++;
        else
            j++;
    }
    return m;
}

int sc_trace_analyze(const struct sc_trace *t, struct sc_overlap *out)
{
    int rc = sc_trace_check(t, "sc_trace_analyze");
    if (rc)
        return rc;
    size_t n = t->n;
    struct ival *iv = malloc((n ? n : 1) * sizeof *iv);
    struct span *cu = malloc((n ? n : 1) * sizeof *cu);
    struct span *mu = malloc((n ? n : 1) * sizeof *mu);
    if (!iv || !cu || !mu) {
        free(iv);
        free(cu);
        free(mu);
        return sc_error(SC_ERR_NOMEM, "sc_trace_analyze: out of memory for %zu events", n);
    }
    double t0 = INFINITY, t1 = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        iv[i] = (struct ival){e->rank, e->lane == SC_TRACE_LANE_COMM, e->start, e->end};
        t0 = fmin(t0, e->start);
        t1 = fmax(t1, e->end);
    }
    qsort(iv, n, sizeof *iv, cmp_ival);
    double window = n ? t1 - t0 : 0;
    double iters = sc_trace_iterations(t);
    double ips = window > 0 ? t->global_batch * iters / (window * 1e-6) : NAN;
    size_t i = 0;
    for (int r = 0; r < t->ranks; r++) {
        double work = 0;
        size_t a = i;
        for (; i < n && iv[i].rank == r && !iv[i].comm; i++)
            work += iv[i].e - iv[i].s;
        size_t b = i;
        while (i < n && iv[i].rank == r)
            i++;
        size_t nc = union_of(iv + a, b - a, cu);
        size_t nm = union_of(iv + b, i - b, mu);
        double compute = measure(cu, nc), comm = measure(mu, nm);
        double both = intersection(cu, nc, mu, nm);
        double exposed = comm - both;
        double idle = window - (compute + comm - both);
        out[r] = (struct sc_overlap){
            .window = window / iters,
            .compute = compute / iters,
            .work = work / iters,
            .comm = comm / iters,
            .exposed = exposed / iters,
            .idle = (idle > 0 ? idle : 0) / iters, /* not below 0 by rounding */
            .ratio = comm > 0 ? (comm - exposed) / comm : NAN,
            .images_per_s = ips,
        };
    }
    free(iv);
    free(cu);
    free(mu);
    return 0;
}

/* ---- report ------------------------------------------------------------- */

enum { COL_COMPUTE, COL_WORK, COL_COMM, COL_EXPOSED, COL_OVERLAP, COL_IDLE, COL_IPS, NCOL };

static const struct {
    const char *head;
    int width, prec;
} cols[NCOL] = {
    {"compute_ms", 10, 3}, {"work_ms", 10, 3}, {"comm_ms", 10, 3},  {"exposed_ms", 10, 3},
    {"overlap", 7, 3},     {"idle_ms", 10, 3}, {"images/s", 10, 1},
};

static void row_values(const struct sc_overlap *o, double v[NCOL])
{
    v[COL_COMPUTE] = o->compute / 1e3;
    v[COL_WORK] = o->work / 1e3;
    v[COL_COMM] = o->comm / 1e3;
    v[COL_EXPOSED] = o->exposed / 1e3;
    v[COL_OVERLAP] = o->ratio;
    v[COL_IDLE] = o->idle / 1e3;
    v[COL_IPS] = o->images_per_s;
}

static void print_row(FILE *f, const char *label, const double v[NCOL])
{
    fprintf(f, "%-4s", label);
    for (int c = 0; c < NCOL; c++) {
        if (isnan(v[c]))
            fprintf(f, "  %*s", cols[c].width, "n/a");
        else
            fprintf(f, "  %*.*f", cols[c].width, cols[c].prec, v[c]);
    }
    putc('\n', f);
}

void sc_trace_print_report(const struct sc_trace *t, const struct sc_overlap *o, FILE *f)
{
    fprintf(f,
            "overlap report: %s%s%s%s%d ranks x %d workers, iterations %" PRId64 "..%" PRId64
            "%s%s%s, times in ms per iteration\n",
            t->model, t->model[0] ? ", " : "", t->precision, t->precision[0] ? ", " : "", t->ranks, t->workers,
            t->first_iteration, t->last_iteration, t->grad_dtype[0] ? ", gradients " : "", t->grad_dtype,
            t->grad_dtype[0] ? " on the wire" : "");
    fprintf(f, "%-4s", "rank");
    for (int c = 0; c < NCOL; c++)
        fprintf(f, "  %*s", cols[c].width, cols[c].head);
    putc('\n', f);
    double sum[NCOL] = {0}, v[NCOL];
    int count[NCOL] = {0};
    char label[16];
    for (int r = 0; r < t->ranks; r++) {
        row_values(&o[r], v);
        snprintf(label, sizeof label, "%d", r);
        print_row(f, label, v);
        for (int c = 0; c < NCOL; c++)
            if (!isnan(v[c])) {
                sum[c] += v[c];
                count[c]++;
            }
    }
    for (int c = 0; c < NCOL; c++)
        v[c] = count[c] ? sum[c] / count[c] : NAN;
    print_row(f, "mean", v);
}

/* ---- the input's load ---------------------------------------------------- */

struct load_ival {
    int rank;
    int64_t iteration;
    double s, e;
};

static int cmp_load(const void *pa, const void *pb)
{
    const struct load_ival *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->iteration != b->iteration)
        return a->iteration < b->iteration ? -1 : 1;
    return (a->s > b->s) - (a->s < b->s);
}

static int is_load(const struct sc_trace_event *e)
{
    return e->lane != SC_TRACE_LANE_COMM && !strcmp(sc_trace_phase(e->name), "load");
}

int sc_trace_analyze_load(const struct sc_trace *t, struct sc_load_overlap *out)
{
    int rc = sc_trace_check(t, "sc_trace_analyze_load");
    if (rc)
        return rc;
    int64_t first = t->first_iteration, iters = t->last_iteration - first + 1;
    size_t n = t->n, cells = iters > 0 ? (size_t)t->ranks * (size_t)iters : 0;
    struct load_ival *lv = malloc((n ? n : 1) * sizeof *lv);
    double *end = malloc((cells ? cells : 1) * sizeof *end);
    if (!lv || !end) {
        free(lv);
        free(end);
        return sc_error(SC_ERR_NOMEM, "sc_trace_analyze_load: out of memory for %zu events", n);
    }
    for (size_t c = 0; c < cells; c++)
        end[c] = -INFINITY;
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->iteration < first || e->iteration - first >= iters)
            continue;
        size_t c = (size_t)e->rank * (size_t)iters + (size_t)(e->iteration - first);
        if (is_load(e))
            lv[nl++] = (struct load_ival){e->rank, e->iteration, e->start, e->end};
        else if (e->end > end[c])
            end[c] = e->end;
    }
    qsort(lv, nl, sizeof *lv, cmp_load);
    for (int r = 0; r < t->ranks; r++)
        out[r] = (struct sc_load_overlap){0, iters > 1 ? 0 : NAN};
    /* each (rank, iteration)'s loads as a union of spans, measured whole
     * and after the rank's previous iteration ended */
    for (size_t i = 0; i < nl;) {
        struct load_ival g = lv[i];
        int64_t k = g.iteration - first;
        double cut = k > 0 ? end[(size_t)g.rank * (size_t)iters + (size_t)(k - 1)] : INFINITY;
        double s = g.s, e = g.e, all = 0, after = 0;
        for (i++;; i++) {
            int more = i < nl && lv[i].rank == g.rank && lv[i].iteration == g.iteration;
            if (more && lv[i].s <= e) {
                e = fmax(e, lv[i].e);
                continue;
            }
            all += e - s;
            after += fmax(0, e - fmax(s, cut));
            if (!more)
                break;
            s = lv[i].s, e = lv[i].e;
        }
        struct sc_load_overlap *o = &out[g.rank];
        o->load += all / (double)iters;
        if (k > 0)
            o->exposed += after / (double)(iters - 1);
    }
    free(lv);
    free(end);
    return 0;
}

int sc_trace_print_load(const struct sc_trace *t, FILE *f)
{
    int rc = sc_trace_check(t, "sc_trace_print_load");
    struct sc_load_overlap *o = rc ? NULL : malloc((size_t)t->ranks * sizeof *o);
    if (!rc && !o)
        rc = sc_error(SC_ERR_NOMEM, "sc_trace_print_load: out of memory for %d ranks", t->ranks);
    if (rc || (rc = sc_trace_analyze_load(t, o))) {
        free(o);
        return rc;
    }
    double load = 0, exposed = 0;
    for (int r = 0; r < t->ranks; r++) {
        load += o[r].load / t->ranks;
        exposed += o[r].exposed / t->ranks;
    }
    free(o);
    if (!(load > 0))
        fprintf(f, "input load: none in the trace\n");
    else if (isnan(exposed))
        fprintf(f, "input load: %.3f ms per iteration, exposed n/a (one iteration traced)\n", load / 1e3);
    else
        fprintf(f,
                "input load: %.3f ms per iteration, %.3f ms exposed (after the rank's previous iteration ended; "
                "iterations %" PRId64 "..%" PRId64 ", mean of the ranks)\n",
                load / 1e3, exposed / 1e3, t->first_iteration + 1, t->last_iteration);
    return 0;
}

/* ---- tasks and FLOPs ---------------------------------------------------- */

struct kind {
    const char *phase;
    size_t count;
    double bytes;
};

static int cmp_kind(const void *pa, const void *pb)
{
    const struct kind *a = pa, *b = pb;
    if (a->count != b->count)
        return a->count > b->count ? -1 : 1;
    return strcmp(a->phase, b->phase);
}

int sc_trace_print_tasks(const struct sc_trace *t, FILE *f)
{
    int rc = sc_trace_check(t, "sc_trace_print_tasks");
    if (rc)
        return rc;
    struct kind *k = malloc((t->n ? t->n : 1) * sizeof *k);
    if (!k)
        return sc_error(SC_ERR_NOMEM, "sc_trace_print_tasks: out of memory for %zu events", t->n);
    size_t nk = 0, tasks = 0, transfers = 0;
    for (size_t i = 0; i < t->n; i++) {
        if (t->ev[i].lane == SC_TRACE_LANE_COMM) {
            transfers++;
            continue;
        }
        tasks++;
        const char *phase = sc_trace_phase(t->ev[i].name);
        size_t j = 0;
        while (j < nk && strcmp(k[j].phase, phase))
            j++;
        if (j == nk)
            k[nk++] = (struct kind){phase, 0, 0};
        k[j].count++;
    }
    qsort(k, nk, sizeof *k, cmp_kind);
    double it = sc_trace_iterations(t);
    fprintf(f, "tasks per iteration: %.1f", tasks / it);
    for (size_t j = 0; j < nk; j++)
        fprintf(f, "%s%s %.1f", j ? ", " : " (", k[j].phase, k[j].count / it);
    fprintf(f, "%s; transfers %.1f\n", nk ? ")" : "", transfers / it);
    /* The bytes sent, by the transfers' phases (traces that record them) */
    double total = 0;
    nk = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->lane != SC_TRACE_LANE_COMM || e->bytes <= 0)
            continue;
        const char *phase = sc_trace_phase(e->name);
        size_t j = 0;
        while (j < nk && strcmp(k[j].phase, phase))
            j++;
        if (j == nk)
            k[nk++] = (struct kind){phase, 0, 0};
        k[j].bytes += e->bytes;
        total += e->bytes;
    }
    if (total > 0) {
        fprintf(f, "bytes sent per iteration, all ranks: %.0f", total / it);
        for (size_t j = 0; j < nk; j++)
            fprintf(f, "%s%s %.0f", j ? ", " : " (", k[j].phase, k[j].bytes / it);
        fprintf(f, ")\n");
    }
    free(k);
    return 0;
}

void sc_report_print_compute(FILE *f, double flops, double window_us, double peak_gflops)
{
    double rate = window_us > 0 ? flops / (window_us * 1e-6) * 1e-9 : NAN;
    fprintf(f, "compute: %.3f GFLOP per iteration (convolutions and fully connected layers), %.1f GFLOP/s",
            flops * 1e-9, rate);
    if (peak_gflops > 0)
        fprintf(f, ", %.1f%% of the peak of %.1f GFLOP/s", 100 * rate / peak_gflops, peak_gflops);
    fputc('\n', f);
}
