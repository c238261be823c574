/* A machine description in its text file, turned into a calibration for
 * the planner, and the sweep over rank counts (machine.h). */
#include "src/planner/machine.h"

#include "base/records.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "src/planner/plan.h"

/* A description is a dozen lines: anything this large is the wrong file. */
#define MACHINE_MAX_BYTES (1024 * 1024)
#define MACHINE_MAGIC     "starconv-machine"
#define MACHINE_VERSION   1

void sc_machine_free(struct sc_machine *m)
{
    if (!m)
        return;
    sc_calib_free(m->calib);
    free(m);
}

/* ---- the file ---- */

enum rec { R_MAGIC, R_NAME, R_RPN, R_INTRA, R_INTER, R_TASK, R_CALIB, R_ROOF, R_MEMORY, R_DEVMEM, R_COUNT };
static const char *const rec_names[R_COUNT] = {MACHINE_MAGIC, "name",         "ranks-per-node", "intra-node",
                                               "inter-node",  "task",         "calibration",    "roofline",
                                               "memory",      "device-memory"};

struct parser {
    const char *path;
    int line;
    struct sc_machine *m;
    int seen[R_COUNT]; /* the line of each record */
};

__attribute__((format(printf, 2, 3))) static int bad(const struct parser *ps, const char *fmt, ...)
{
    char what[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sc_error(SC_ERR_PARSE, "%s:%d: %s", ps->path, ps->line, what);
}

/* The rest of the line without the blanks around it, in place. */
static char *trimmed(char *p)
{
    while (sc_records_blank(*p))
        p++;
    size_t n = strlen(p);
    while (n && sc_records_blank(p[n - 1]))
        p[--n] = '\0';
    return p;
}

/* Exactly n numbers of record rec: finite and >= 0. */
static int numbers(const struct parser *ps, char *p, const char *rec, const char *what, int n, double *v)
{
    for (int i = 0; i < n; i++) {
        char *f = sc_records_field(&p), *end;
        if (!f)
            return bad(ps, "'%s' takes %s", rec, what);
        errno = 0;
        v[i] = strtod(f, &end);
        if (*end || end == f)
            return bad(ps, "'%s': '%s' is not a number (%s)", rec, f, what);
        if (!isfinite(v[i]) || v[i] < 0 || signbit(v[i]))
            return bad(ps, "'%s': '%s' must be finite and >= 0", rec, f);
    }
    char *extra = sc_records_field(&p);
    if (extra)
        return bad(ps, "'%s' takes %s; '%s' is one field too many", rec, what, extra);
    return 0;
}

static int positive(const struct parser *ps, const char *rec, const char *what, double v)
{
    return v > 0 ? 0 : bad(ps, "'%s': the %s must be > 0", rec, what);
}

/* The calibration record: FILE relative to the machine file's folder. */
static int parse_calibration(struct parser *ps, char *p)
{
    struct sc_machine *m = ps->m;
    char *file = trimmed(p);
    if (!*file)
        return bad(ps, "'calibration' takes a file name");
    const char *slash = strrchr(ps->path, '/');
    int n;
    if (file[0] == '/' || !slash)
        n = snprintf(m->calib_path, sizeof m->calib_path, "%s", file);
    else
        n = snprintf(m->calib_path, sizeof m->calib_path, "%.*s/%s", (int)(slash - ps->path), ps->path, file);
    if (n < 0 || (size_t)n >= sizeof m->calib_path)
        return bad(ps, "calibration file name too long");
    m->calib_line = ps->line;
    if (sc_calib_load(m->calib_path, &m->calib)) {
        char why[512];
        snprintf(why, sizeof why, "%s", sc_last_error());
        return bad(ps, "calibration %s: %s", file, why);
    }
    return 0;
}

static int parse_line(struct parser *ps, char *p)
{
    struct sc_machine *m = ps->m;
    char *rec = sc_records_field(&p);
    double v[3];
    int err;
    if (!rec)
        return 0;
    if (!ps->seen[R_MAGIC]) {
        if (strcmp(rec, MACHINE_MAGIC))
            return bad(ps, "not a starconv machine description: '%s %d' must come first, not '%s'", MACHINE_MAGIC,
                       MACHINE_VERSION, rec);
        char *ver = sc_records_field(&p), *extra = sc_records_field(&p);
        if (!ver || extra)
            return bad(ps, "'%s' takes a version number", MACHINE_MAGIC);
        if (strcmp(ver, "1"))
            return bad(ps, "machine description version '%s'; this starconv reads version %d", ver, MACHINE_VERSION);
        ps->seen[R_MAGIC] = ps->line;
        return 0;
    }
    int r = 0;
    while (r < R_COUNT && strcmp(rec, rec_names[r]))
        r++;
    if (r == R_COUNT)
        return bad(ps,
                   "unknown record '%s' (name, ranks-per-node, intra-node, inter-node, task, calibration, "
                   "roofline, memory, device-memory)",
                   rec);
    if (ps->seen[r])
        return bad(ps, "a second '%s' record (the first is on line %d)", rec, ps->seen[r]);
    ps->seen[r] = ps->line;
    switch (r) {
    case R_MAGIC:
        return 0;
    case R_NAME: {
        char *text = trimmed(p);
        if (strlen(text) >= sizeof m->name)
            return bad(ps, "name of %zu characters (at most %zu)", strlen(text), sizeof m->name - 1);
        snprintf(m->name, sizeof m->name, "%s", text);
        return 0;
    }
    case R_RPN: {
        char *f = sc_records_field(&p), *end, *extra = f ? sc_records_field(&p) : NULL;
        errno = 0;
        long x = f ? strtol(f, &end, 10) : 0;
        if (!f || extra || *end || errno || x < 1 || x > 1024)
            return bad(ps, "'ranks-per-node' takes a whole number from 1 to 1024");
        m->ranks_per_node = (int)x;
        return 0;
    }
    case R_INTRA:
    case R_INTER:
        if ((err = numbers(ps, p, rec, "a latency (s) and a bandwidth (bytes/s)", 2, v)) ||
            (err = positive(ps, rec, "bandwidth", v[1])))
            return err;
        *(r == R_INTRA ? &m->intra_latency : &m->inter_latency) = v[0];
        *(r == R_INTRA ? &m->intra_bandwidth : &m->inter_bandwidth) = v[1];
        return 0;
    case R_TASK:
        if ((err = numbers(ps, p, rec, "1 number (s)", 1, v)))
            return err;
        m->task = v[0];
        return 0;
    case R_MEMORY:
    case R_DEVMEM:
        if ((err = numbers(ps, p, rec, r == R_MEMORY ? "1 number (bytes/s)" : "1 number (bytes)", 1, v)) ||
            (err = positive(ps, rec, r == R_MEMORY ? "bandwidth" : "size", v[0])))
            return err;
        *(r == R_MEMORY ? &m->memory : &m->device_memory) = v[0];
        return 0;
    case R_ROOF:
        if ((err = numbers(ps, p, rec, "a peak (FLOP/s), a memory bandwidth (bytes/s) and an efficiency", 3, v)) ||
            (err = positive(ps, rec, "peak", v[0])) || (err = positive(ps, rec, "memory bandwidth", v[1])))
            return err;
        if (!(v[2] > 0 && v[2] <= 1))
            return bad(ps, "'roofline': the efficiency must be > 0 and <= 1, not %g", v[2]);
        m->roofline = 1;
        m->peak = v[0];
        m->mem_bw = v[1];
        m->efficiency = v[2];
        return 0;
    case R_CALIB:
        return parse_calibration(ps, p);
    }
    return 0;
}

static int on_line(void *ctx, int number, char *text)
{
    struct parser *ps = ctx;
    ps->line = number;
    return parse_line(ps, text);
}

/* After the last line: what is missing. */
static int check_complete(struct parser *ps)
{
    /* What is missing is reported at the end of the file. */
    if (!ps->line)
        ps->line = 1;
    struct sc_machine *m = ps->m;
    if (!ps->seen[R_MAGIC])
        return bad(ps, "not a starconv machine description: no '%s %d' line", MACHINE_MAGIC, MACHINE_VERSION);
    if (!ps->seen[R_RPN])
        return bad(ps, "no 'ranks-per-node' record");
    if (!ps->seen[R_INTRA] && m->ranks_per_node > 1)
        return bad(ps, "no 'intra-node <latency s> <bytes/s>' record (needed with %d ranks per node)",
                   m->ranks_per_node);
    if (!ps->seen[R_INTER])
        return bad(ps, "no 'inter-node <latency s> <bytes/s>' record");
    if (!ps->seen[R_TASK])
        return bad(ps, "no 'task <s>' record");
    if (!ps->seen[R_CALIB] && !ps->seen[R_ROOF])
        return bad(ps, "no compute times: a 'calibration FILE' or a 'roofline <peak> <bytes/s> <efficiency>' record");
    if (!m->memory)
        m->memory = m->roofline ? m->mem_bw : m->calib ? m->calib->stream : 0;
    if (!(m->memory > 0))
        return bad(ps, "no memory bandwidth: add 'memory <bytes/s>' (the calibration has no stream record)");
    return 0;
}

int sc_machine_load(const char *path, struct sc_machine **out)
{
    if (!out || !path)
        return sc_error(SC_ERR_ARG, "sc_machine_load: %s is NULL", out ? "path" : "out");
    *out = NULL;
    char *buf = NULL;
    size_t n = 0;
    int err = sc_records_read(path, "machine description", MACHINE_MAX_BYTES, &buf, &n);
    if (err)
        return err;
    struct sc_machine *m = calloc(1, sizeof *m);
    if (!m) {
        free(buf);
        return sc_error(SC_ERR_NOMEM, "out of memory for a machine description");
    }
    struct parser ps = {.path = path, .m = m};
    int lines;
    if (!(err = sc_records_lines(buf, n, path, on_line, &ps, &lines))) {
        ps.line = lines;
        err = check_complete(&ps);
    }
    free(buf);
    if (err) {
        sc_machine_free(m);
        return err;
    }
    snprintf(m->path, sizeof m->path, "%s", path);
    if (!m->name[0])
        snprintf(m->name, sizeof m->name, "%s", path);
    *out = m;
    return 0;
}

/* ---- the model ---- */

int sc_machine_nodes(const struct sc_machine *m, int ranks)
{
    return (ranks + m->ranks_per_node - 1) / m->ranks_per_node;
}

/* The ring allreduce of n bytes over a group of g ranks (Thakur,
 * Rabenseifner and Gropp, "Optimization of collective communication
 * operations in MPICH", IJHPCA 19(1), 2005: a reduce-scatter then an
 * allgather around the ring, 2(p-1) alpha + 2 (p-1)/p n beta +
 * (p-1)/p n gamma; bandwidth-optimal, Patarasuk and Yuan, JPDC 69(2),
 * 2009), made hierarchical when the group spans nodes, as NCCL and the
 * "hierarchical allreduce" of Jia et al. (arXiv:1807.11205, 2018) do:
 *
 *   the group: l ranks on each of k nodes (g = l k);
 *   1. reduce-scatter within each node:  (l-1) a_i + (l-1)/l n / B_i
 *   2. the l ranks of a node each run a ring allreduce of their n/l bytes
 *      with their peers of the other nodes; the l rings share the node's
 *      link B_e, so together they move 2 (k-1)/k n bytes through it:
 *                                        2 (k-1) a_e + 2 (k-1)/k n / B_e
 *   3. allgather within each node:       (l-1) a_i + (l-1)/l n / B_i
 *   plus the sums, 3 bytes streamed per byte reduced, (g-1)/g n of them
 *   per rank over the three steps:      3 (g-1)/g n / memory
 *
 *   T(g, n) = 2(l-1) a_i + 2(l-1)/l n/B_i + 2(k-1) a_e + 2(k-1)/k n/B_e
 *             + 3 (g-1)/g n/memory
 *
 * (k = 1: the flat ring within a node; l = 1: the flat ring between
 * nodes.)  Which ranks form a group depends on the grid (base/grid.h
 * lays N out slowest, W fastest), and a calibration keys allreduce times
 * by group size only; so a group is taken to be spread over as many of
 * the P ranks' nodes as it can reach, evenly: k = min(g, nodes),
 * l = g / k.  That is the worst placement: exact for a sample-parallel
 * group of all P ranks and for groups of one rank per node (channels
 * split within a node, samples across, as in SC'19), pessimistic for a
 * group that a grid keeps within fewer nodes.  (Point-to-point messages,
 * below, know their ranks and take the link between them.) */
double sc_machine_allreduce(const struct sc_machine *m, int ranks, int group, double bytes)
{
    if (group <= 1)
        return 0;
    int nodes = sc_machine_nodes(m, ranks);
    double k = ranks <= m->ranks_per_node ? 1 : (group < nodes ? group : nodes);
    double l = group / k, g = group;
    double t = 2 * (l - 1) * m->intra_latency + 2 * (k - 1) * m->inter_latency;
    if (l > 1)
        t += 2 * (l - 1) / l * bytes / m->intra_bandwidth;
    if (k > 1)
        t += 2 * (k - 1) / k * bytes / m->inter_bandwidth;
    return t + 3 * (g - 1) / g * bytes / m->memory;
}

/* Roofline: the slower of the arithmetic (flops at the efficiency's share
 * of the peak) and the memory traffic (each operand read once, each result
 * written once, 4-byte floats). */
static double roof(const struct sc_machine *m, double flops, double bytes)
{
    double tc = flops / (m->peak * m->efficiency), tm = bytes / m->mem_bw;
    return tc > tm ? tc : tm;
}

void sc_machine_roofline(const struct sc_machine *m, const struct sc_layer_work *w, double *fwd, double *bwd_data,
                         double *bwd_filter)
{
    *fwd = *bwd_data = *bwd_filter = 0;
    if (!m->roofline)
        return;
    double flops[3]; /* the layers' count of the kernel's work (src/layers/layers.h) */
    sc_layer_work_flops(w, flops);
    switch (w->kind) {
    case SC_WORK_CONV: {
        const struct sc_conv_args *a = &w->conv;
        double x = (double)a->n * a->c * a->h * a->w, y = (double)a->n * a->f * a->oh * a->ow;
        double wt = (double)a->f * a->c * a->kh * a->kw;
        *fwd = roof(m, flops[0], 4 * (x + wt + y));        /* x, w -> y */
        *bwd_data = roof(m, flops[1], 4 * (y + wt + x));   /* dy, w -> dx */
        *bwd_filter = roof(m, flops[2], 4 * (x + y + wt)); /* x, dy -> dw */
        break;
    }
    case SC_WORK_POOL: {
        /* A comparison or addition per window element, which the layers
         * count as no FLOPs: priced as half a multiply-add's. */
        const struct sc_pool_args *a = &w->pool;
        double x = (double)a->n * a->c * a->h * a->w, y = (double)a->n * a->c * a->oh * a->ow;
        double ops = y * a->kh * a->kw / 2;
        *fwd = roof(m, 2 * ops, 4 * (x + y));
        *bwd_data = roof(m, 2 * ops, 4 * (y + x));
        break;
    }
    case SC_WORK_FC: {
        const struct sc_fc_args *a = &w->fc;
        double x = (double)a->n * a->in, y = (double)a->n * a->out, wt = (double)a->in * a->out;
        *fwd = roof(m, flops[0], 4 * (x + wt + y));
        *bwd_data = roof(m, flops[1], 4 * (y + wt + x));
        *bwd_filter = roof(m, flops[2], 4 * (x + y + wt));
        break;
    }
    default:
        break;
    }
}

struct fill {
    const struct sc_machine *m;
    struct sc_calib *c;
};

static int add_kernel(void *ctx, const struct sc_layer_work *w, const char *key)
{
    struct fill *f = ctx;
    const struct sc_calib_kernel *k = f->m->calib ? sc_calib_find(f->m->calib, key) : NULL;
    if (k)
        return sc_calib_add_kernel(f->c, key, k->fwd, k->bwd_data, k->bwd_filter);
    if (!f->m->roofline)
        return sc_error(SC_ERR_PARSE,
                        "%s:%d: calibration %s has no time for kernel '%s', and no roofline record gives one",
                        f->m->path, f->m->calib_line, f->m->calib_path, key);
    double a, b, g;
    sc_machine_roofline(f->m, w, &a, &b, &g);
    return sc_calib_add_kernel(f->c, key, a, b, g);
}

/* Sizes of the allreduce points: the formula is affine in the bytes, so
 * the calibration's interpolation between any two of them is exact; a
 * range is kept so that the points read as a table. */
#define AR_SMALLEST 4.0
#define AR_FACTOR   16.0
#define AR_POINTS   9

int sc_machine_calib(const struct sc_machine *m, const struct sc_net *net, int ranks, int batch, struct sc_calib **out)
{
    *out = NULL;
    if (ranks < 1)
        return sc_error(SC_ERR_ARG, "sc_machine_calib: %d ranks", ranks);
    struct sc_calib *c;
    int err = sc_calib_new(&c);
    if (err)
        return err;
    snprintf(c->machine, sizeof c->machine, "%.80s, %d ranks on %d nodes", m->name, ranks, sc_machine_nodes(m, ranks));
    c->cores = 0; /* one rank per device: nothing shared */
    c->workers = 1;
    /* Two levels (src/planner/calib.h's node record): the planner prices a
     * message between ranks of one node (rank / ranks_per_node, the
     * order of base/grid.h) on the device-to-device link, and any other
     * on the network, at a rank's share of its node's bandwidth: the
     * node's ranks exchange at once (a redistribution, a channel
     * collective), so they share its adapter.  That share is pessimistic
     * where only some of a node's ranks send off the node (a halo along H
     * between two nodes). */
    c->ranks_per_node = m->ranks_per_node;
    c->p2p_node_alpha = m->intra_latency;
    c->p2p_node_beta = m->intra_bandwidth > 0 ? 1 / m->intra_bandwidth : 0; /* none: one rank per node */
    c->p2p_alpha = m->inter_latency;
    c->p2p_beta = m->ranks_per_node / m->inter_bandwidth;
    c->task = m->task;
    c->stream = m->memory;
    for (int g = 2; g <= ranks && !err; g++) {
        if (ranks % g)
            continue;
        double bytes = AR_SMALLEST;
        for (int i = 0; i < AR_POINTS && !err; i++, bytes *= AR_FACTOR)
            err = sc_calib_add_allreduce(c, g, bytes, sc_machine_allreduce(m, ranks, g, bytes));
    }
    struct sc_plan_opts po = {.ranks = ranks, .batch = batch, .workers = 1};
    struct fill f = {m, c};
    if (!err)
        err = sc_plan_kernels(net, &po, add_kernel, &f);
    if (err) {
        sc_calib_free(c);
        return err;
    }
    *out = c;
    return 0;
}

/* ---- the sweep ---- */

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The grids a plan uses and how many layers each, most used first:
 * "n8:150 n4h2:10". */
static void summary(const struct sc_plan *p, char *buf, size_t len)
{
    int n = p->nlayers, used[n], count[n], nu = 0;
    for (int l = 0; l < n; l++) {
        if (!p->grid[l][0])
            continue;
        int u = 0;
        while (u < nu && strcmp(p->grid[used[u]], p->grid[l]))
            u++;
        if (u == nu)
            used[nu] = l, count[nu++] = 0;
        count[u]++;
    }
    size_t k = 0;
    buf[0] = '\0';
    for (int done = 0; done < nu && k < len; done++) {
        int best = -1;
        for (int u = 0; u < nu; u++)
            if (count[u] > 0 && (best < 0 || count[u] > count[best]))
                best = u;
        k += snprintf(buf + k, len - k, "%s%s:%d", k ? " " : "", p->grid[used[best]], count[best]);
        count[best] = 0;
    }
}

static void json_string(FILE *fp, const char *s)
{
    fputc('"', fp);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(fp, "\\%c", ch);
        else if (ch < ' ')
            fprintf(fp, "\\u%04x", ch);
        else
            fputc(ch, fp);
    }
    fputc('"', fp);
}

struct row {
    int ranks;
    struct sc_plan *plan, *sample;
    char why[256], sample_why[256];
    int batch_split; /* sample parallelism: the batch does not split over the ranks */
    double seconds;  /* the search's */
};

static void print_table(FILE *fp, const struct sc_machine *m, const char *machine_path, const struct sc_net *net,
                        const char *model, int batch, const struct row *rows, int nrows, int base)
{
    (void)net;
    fprintf(fp, "%s on %s (%s: %d ranks per node), batch %d\n", model, m->name, machine_path, m->ranks_per_node, batch);
    if (base >= 0)
        fprintf(fp, "speedup: over the planner's time on %d rank%s; sample: pure sample parallelism, n<ranks>\n",
                rows[base].ranks, rows[base].ranks > 1 ? "s" : "");
    fprintf(fp, "%6s %5s %11s %8s %11s %8s %9s %7s  %s\n", "ranks", "nodes", "time/iter", "speedup", "sample",
            "speedup", "grad-comm", "search", "plan (grid:layers)");
    for (int i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        fprintf(fp, "%6d %5d ", r->ranks, sc_machine_nodes(m, r->ranks));
        if (r->plan)
            fprintf(fp, "%9.3fms %7.2fx ", 1e3 * r->plan->time, rows[base].plan->time / r->plan->time);
        else
            fprintf(fp, "%11s %8s ", "-", "-");
        if (r->sample && base >= 0)
            fprintf(fp, "%9.3fms %7.2fx ", 1e3 * r->sample->time, rows[base].plan->time / r->sample->time);
        else if (r->sample)
            fprintf(fp, "%9.3fms %8s ", 1e3 * r->sample->time, "-");
        else
            fprintf(fp, "%11s %8s ", "-", "-");
        fprintf(fp, "%9s %6.2fs  ", r->plan ? r->plan->grad_comm : "-", r->seconds);
        if (r->plan) {
            char s[1024];
            summary(r->plan, s, sizeof s);
            fprintf(fp, "%s\n", s);
        } else {
            fprintf(fp, "no plan: %s\n", r->why);
        }
    }
    /* Why sample parallelism has no time, where that is not the batch. */
    for (int i = 0; i < nrows; i++)
        if (rows[i].plan && !rows[i].sample && !rows[i].batch_split)
            fprintf(fp, "sample parallelism on %d ranks: %s\n", rows[i].ranks, rows[i].sample_why);
}

static void print_json(FILE *fp, const struct sc_machine *m, const char *machine_path, const struct sc_net *net,
                       const char *model, int batch, const struct row *rows, int nrows, int base)
{
    fprintf(fp, "{\"machine\": ");
    json_string(fp, machine_path);
    fprintf(fp, ", \"name\": ");
    json_string(fp, m->name);
    fprintf(fp, ", \"ranks_per_node\": %d, \"model\": ", m->ranks_per_node);
    json_string(fp, model);
    fprintf(fp, ", \"batch\": %d, \"base_ranks\": %d,\n \"sweep\": [", batch, base >= 0 ? rows[base].ranks : 0);
    for (int i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        fprintf(fp, "%s\n  {\"ranks\": %d, \"nodes\": %d, \"search_seconds\": %.3f, ", i ? "," : "", r->ranks,
                sc_machine_nodes(m, r->ranks), r->seconds);
        if (r->plan) {
            char spec[16384], s[1024];
            sc_plan_parallel_spec(net, r->plan, spec, sizeof spec);
            summary(r->plan, s, sizeof s);
            fprintf(fp, "\"time\": %.9g, \"speedup\": %.6g, \"grad_comm\": \"%s\", \"grids\": ", r->plan->time,
                    rows[base].plan->time / r->plan->time, r->plan->grad_comm);
            json_string(fp, s);
            fprintf(fp, ", \"parallel\": ");
            json_string(fp, spec);
        } else {
            fprintf(fp, "\"time\": null, \"error\": ");
            json_string(fp, r->why);
        }
        if (r->sample) {
            fprintf(fp, ", \"sample_time\": %.9g, \"sample_speedup\": %.6g}", r->sample->time,
                    base >= 0 ? rows[base].plan->time / r->sample->time : 0);
        } else {
            fprintf(fp, ", \"sample_time\": null, \"sample_error\": ");
            json_string(fp, r->sample_why);
            fputc('}', fp);
        }
    }
    fprintf(fp, "\n ]}\n");
}

int sc_machine_sweep(FILE *fp, const struct sc_machine *m, const char *machine_path, const struct sc_net *net,
                     const char *model, int batch, int max_ranks, int json)
{
    struct row rows[16];
    int nrows = 0, base = -1, err = 0;
    memset(rows, 0, sizeof rows);
    for (int P = 1; P <= max_ranks && nrows < 16 && !err; P *= 2) {
        struct row *r = &rows[nrows++];
        struct sc_calib *c = NULL;
        double t0 = now();
        r->ranks = P;
        if ((err = sc_machine_calib(m, net, P, batch, &c)))
            break; /* the machine lacks a time: its file is at fault */
        struct sc_plan_opts po = {
            .ranks = P, .batch = batch, .workers = 1, .mem_limit = m->device_memory, .mix_margin = SC_PLAN_MIX_MARGIN};
        int perr = sc_plan_make(net, c, &po, &r->plan);
        if (perr == SC_ERR_NOMEM || perr == SC_ERR_RUNTIME) {
            err = perr;
        } else if (perr) {
            snprintf(r->why, sizeof r->why, "%s", sc_last_error());
        } else if (base < 0) {
            base = nrows - 1;
        }
        char grid[16];
        snprintf(grid, sizeof grid, "n%d", P);
        po.grid = grid;
        if (!err && batch % P) {
            r->batch_split = 1;
            snprintf(r->sample_why, sizeof r->sample_why, "batch %d does not split over %d ranks", batch, P);
        } else if (!err) {
            int serr = sc_plan_make(net, c, &po, &r->sample);
            if (serr == SC_ERR_NOMEM || serr == SC_ERR_RUNTIME)
                err = serr;
            else if (serr)
                snprintf(r->sample_why, sizeof r->sample_why, "%s", sc_last_error());
        }
        r->seconds = now() - t0;
        sc_calib_free(c);
    }
    if (!err) {
        if (json)
            print_json(fp, m, machine_path, net, model, batch, rows, nrows, base);
        else
            print_table(fp, m, machine_path, net, model, batch, rows, nrows, base);
    }
    for (int i = 0; i < nrows; i++) {
        sc_plan_free(rows[i].plan);
        sc_plan_free(rows[i].sample);
    }
    return err;
}

int sc_machine_plan(FILE *fp, const struct sc_machine *m, const struct sc_net *net, const char *model, int ranks,
                    int batch, const char *grid, const char *grad_comm, double mem_limit, int json)
{
    struct sc_calib *c = NULL;
    struct sc_plan *p = NULL;
    struct sc_plan_opts po = {.ranks = ranks,
                              .batch = batch,
                              .workers = 1,
                              .mem_limit = mem_limit > 0 ? mem_limit : m->device_memory,
                              .grid = grid,
                              .grad_comm = grad_comm,
                              .mix_margin = SC_PLAN_MIX_MARGIN};
    int err = sc_machine_calib(m, net, ranks, batch, &c);
    if (!err)
        err = sc_plan_make(net, c, &po, &p);
    if (!err && json) {
        sc_plan_print_json(fp, net, &po, p);
    } else if (!err) {
        char spec[16384];
        sc_plan_parallel_spec(net, p, spec, sizeof spec);
        fprintf(fp, "%s on %d ranks (%d nodes) of %s, batch %d\n", model, ranks, sc_machine_nodes(m, ranks), m->name,
                batch);
        sc_plan_print(fp, net, p);
        fprintf(fp, "starconv-train --parallel %s --grad-comm %s\n", spec, p->grad_comm);
    }
    sc_plan_free(p);
    sc_calib_free(c);
    return err;
}
