/* Timelines of training iterations: Chrome trace-event JSON out and in, the
 * overlap analysis, the report table and a Gantt SVG.  See trace.h.
 *
 * The report (sc_trace_print_report), times in milliseconds per iteration:
 *
 *   overlap report: MODEL, R ranks x W workers, iterations A..B, times in ms per iteration
 *   rank  compute_ms     work_ms     comm_ms  exposed_ms  overlap     idle_ms    images/s
 *   0         10.000      13.000      10.000       5.000    0.500      15.000   2133333.3
 *   ...
 *   mean      ...
 *
 * ("MODEL, " is left out when the model is empty.)  Columns have fixed
 * widths and are separated by at least two spaces; a value that is not
 * defined (overlap without communication, images/s of an empty trace)
 * prints "n/a".  The mean row averages each column over the ranks where it
 * is defined. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "trace.h"
#include "starconv.h"
#include "base/atomic_file.h"
#include "base/json.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* tid of the first transfer lane; worker lanes are below it */
#define COMM_TID 1000
/* Bounds on what a file may claim, so that a corrupt count cannot make a
 * reader allocate or draw without end. */
#define MAX_RANKS (1 << 20)
#define MAX_DEPTH 64
/* JSON numbers are doubles: integers beyond 2^53 are not exact */
#define MAX_EXACT 9007199254740992.0

static const char *phase_of(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* A trace the writers and the analysis can trust: every later loop indexes
 * per-rank arrays by ev->rank. */
static int check_trace(const struct sc_trace *t, const char *what)
{
    if (t->ranks < 1 || t->ranks > MAX_RANKS)
        return sc_error(SC_ERR_ARG, "%s: %d ranks (want 1..%d)", what, t->ranks, MAX_RANKS);
    if (t->workers < 0 || t->workers > COMM_TID)
        return sc_error(SC_ERR_ARG, "%s: %d workers (want 0..%d)", what, t->workers, COMM_TID);
    if (t->n && !t->ev)
        return sc_error(SC_ERR_ARG, "%s: %zu events but no event array", what, t->n);
    if (!memchr(t->model, '\0', sizeof t->model))
        return sc_error(SC_ERR_ARG, "%s: model name not terminated", what);
    for (int r = 0; t->placement && r < t->ranks; r++)
        if (!memchr(t->placement[r], '\0', sizeof t->placement[r]))
            return sc_error(SC_ERR_ARG, "%s: placement of rank %d not terminated", what, r);
    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (!memchr(e->name, '\0', sizeof e->name))
            return sc_error(SC_ERR_ARG, "%s: event %zu: name not terminated", what, i);
        if (e->rank < 0 || e->rank >= t->ranks)
            return sc_error(SC_ERR_ARG, "%s: event %zu (%s): rank %d outside 0..%d", what, i,
                            e->name, e->rank, t->ranks - 1);
        if (e->lane != SC_TRACE_LANE_COMM && (e->lane < 0 || e->lane >= t->workers))
            return sc_error(SC_ERR_ARG, "%s: event %zu (%s): lane %d outside 0..%d", what, i,
                            e->name, e->lane, t->workers - 1);
        if (!isfinite(e->start) || !isfinite(e->end) || e->end < e->start)
            return sc_error(SC_ERR_ARG, "%s: event %zu (%s): bad times %g..%g", what, i, e->name,
                            e->start, e->end);
    }
    return 0;
}

static double iterations_of(const struct sc_trace *t)
{
    double it = (double)t->last_iteration - (double)t->first_iteration + 1;
    return it >= 1 ? it : 1;
}

/* ---- transfers: merged per rank and name, packed into lanes ------------- */

struct comm_ev {
    const char *name;
    int rank;
    int lane;          /* k: tid 1000 + k, "comm", "comm 2", ... */
    int64_t iteration; /* the smallest of the merged transfers */
    double start, end;
    int transfers;     /* how many transfers were merged into this one */
};

static int cmp_by_name(const void *pa, const void *pb)
{
    const struct comm_ev *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    int c = strcmp(a->name, b->name);
    if (c)
        return c;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    return (a->end > b->end) - (a->end < b->end);
}

static int cmp_by_start(const void *pa, const void *pb)
{
    const struct comm_ev *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    if (a->start != b->start)
        return a->start < b->start ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return strcmp(a->name, b->name);
}

/* A collective shows up as many small transfers of one name; one event per
 * busy stretch keeps the picture readable.  Greedy first-fit by start time
 * uses the fewest lanes that keep events of a lane from overlapping.
 * lanes[r] receives the number of transfer lanes of rank r. */
static int pack_comm(const struct sc_trace *t, struct comm_ev **out, size_t *nout, int **lanes_out)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].lane == SC_TRACE_LANE_COMM;
    struct comm_ev *c = malloc((n ? n : 1) * sizeof *c);
    int *lanes = calloc((size_t)t->ranks, sizeof *lanes);
    double *lane_end = NULL;
    if (!c || !lanes)
        goto nomem;
    n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->lane == SC_TRACE_LANE_COMM)
            c[n++] = (struct comm_ev){e->name, e->rank, 0, e->iteration, e->start, e->end, 1};
    }
    qsort(c, n, sizeof *c, cmp_by_name);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        struct comm_ev *last = m ? &c[m - 1] : NULL;
        if (last && last->rank == c[i].rank && strcmp(last->name, c[i].name) == 0 &&
            c[i].start <= last->end) {
            if (c[i].end > last->end)
                last->end = c[i].end;
            if (c[i].iteration < last->iteration)
                last->iteration = c[i].iteration;
            last->transfers++;
        } else {
            c[m++] = c[i];
        }
    }
    qsort(c, m, sizeof *c, cmp_by_start);
    size_t cap = 0;
    for (size_t i = 0; i < m; i++) {
        int r = c[i].rank, k = 0;
        while (k < lanes[r] && lane_end[k] > c[i].start)
            k++;
        if (k == lanes[r]) {
            if ((size_t)k == cap) {
                cap = cap ? 2 * cap : 8;
                double *p = realloc(lane_end, cap * sizeof *p);
                if (!p)
                    goto nomem;
                lane_end = p;
            }
            lanes[r]++;
        }
        lane_end[k] = c[i].end;
        c[i].lane = k;
    }
    free(lane_end);
    *out = c;
    *nout = m;
    *lanes_out = lanes;
    return 0;
nomem:
    free(c);
    free(lanes);
    free(lane_end);
    return sc_error(SC_ERR_NOMEM, "trace: out of memory packing %zu transfers", n);
}


/* ---- JSON writer -------------------------------------------------------- */

struct packed {
    const struct sc_trace *t;
    const struct comm_ev *c;
    size_t nc;
    const int *lanes;
};

static void json_str(FILE *f, const char *s)
{
    putc('"', f);
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch == '"' || ch == '\\')
            fprintf(f, "\\%c", ch);
        else if (ch == '\n')
            fputs("\\n", f);
        else if (ch == '\t')
            fputs("\\t", f);
        else if (ch < 0x20 || ch == 0x7f)
            fprintf(f, "\\u%04x", ch);
        else
            putc(ch, f); /* UTF-8 passes through */
    }
    putc('"', f);
}

static void json_sep(FILE *f, int *first)
{
    fputs(*first ? "\n" : ",\n", f);
    *first = 0;
}

static void json_meta_name(FILE *f, int *first, const char *what, int pid, int tid, const char *name)
{
    json_sep(f, first);
    fprintf(f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", what, pid,
            tid);
    json_str(f, name);
    fputs("}}", f);
}

static void json_meta_sort(FILE *f, int *first, const char *what, int pid, int tid, int index)
{
    json_sep(f, first);
    fprintf(f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}",
            what, pid, tid, index);
}

static void json_event(FILE *f, int *first, const char *name, int pid, int tid, double start,
                       double end, int64_t iteration, int transfers)
{
    json_sep(f, first);
    fputs("{\"name\":", f);
    json_str(f, name);
    fputs(",\"cat\":", f);
    json_str(f, phase_of(name));
    fprintf(f, ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
            "\"args\":{\"iteration\":%" PRId64, pid, tid, start, end - start, iteration);
    if (transfers > 0)
        fprintf(f, ",\"transfers\":%d", transfers);
    fputs("}}", f);
}

static int json_body(FILE *f, const void *ctx)
{
    const struct packed *p = ctx;
    const struct sc_trace *t = p->t;
    char name[32];
    int first = 1;
    fputs("{\"traceEvents\":[", f);
    for (int r = 0; r < t->ranks; r++) {
        snprintf(name, sizeof name, "rank %d", r);
        json_meta_name(f, &first, "process_name", r, 0, name);
        json_meta_sort(f, &first, "process_sort_index", r, 0, r);
        if (t->placement) {
            json_sep(f, &first);
            fprintf(f, "{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":%d,\"tid\":0,\"args\":{\"labels\":", r);
            json_str(f, t->placement[r]);
            fputs("}}", f);
        }
        int ncpu_lanes = t->workers - t->cuda_workers;
        for (int w = 0; w < t->workers; w++) {
            if (w < ncpu_lanes)
                snprintf(name, sizeof name, "cpu %d", w);
            else
                snprintf(name, sizeof name, "cuda %d", w - ncpu_lanes);
            json_meta_name(f, &first, "thread_name", r, w, name);
            json_meta_sort(f, &first, "thread_sort_index", r, w, w);
        }
        for (int k = 0; k < p->lanes[r]; k++) {
            if (k == 0)
                snprintf(name, sizeof name, "comm");
            else
                snprintf(name, sizeof name, "comm %d", k + 1);
            json_meta_name(f, &first, "thread_name", r, COMM_TID + k, name);
            json_meta_sort(f, &first, "thread_sort_index", r, COMM_TID + k, t->workers + k);
        }
    }
    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->lane != SC_TRACE_LANE_COMM)
            json_event(f, &first, e->name, e->rank, e->lane, e->start, e->end, e->iteration, 0);
    }
    for (size_t i = 0; i < p->nc; i++) {
        const struct comm_ev *c = &p->c[i];
        json_event(f, &first, c->name, c->rank, COMM_TID + c->lane, c->start, c->end,
                   c->iteration, c->transfers);
    }
    fprintf(f, "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"ranks\":%d,\"workers\":%d,"
            "\"first_iteration\":%" PRId64 ",\"last_iteration\":%" PRId64
            ",\"global_batch\":%d,",
            t->ranks, t->workers, t->first_iteration, t->last_iteration, t->global_batch);
    if (t->cuda_workers)
        fprintf(f, "\"cuda_workers\":%d,", t->cuda_workers);
    fputs("\"model\":", f);
    json_str(f, t->model);
    if (t->placement) {
        fputs(",\"placement\":[", f);
        for (int r = 0; r < t->ranks; r++) {
            fputs(r ? "," : "", f);
            json_str(f, t->placement[r]);
        }
        fputs("]", f);
    }
    fputs("}}\n", f);
    return 0; /* write errors: ferror, in sc_write_atomic */
}

int sc_trace_write_json(const struct sc_trace *t, const char *path)
{
    int rc = check_trace(t, path);
    if (rc)
        return rc;
    struct packed p = {t, NULL, 0, NULL};
    struct comm_ev *c;
    int *lanes;
    rc = pack_comm(t, &c, &p.nc, &lanes);
    if (rc)
        return rc;
    p.c = c;
    p.lanes = lanes;
    rc = sc_write_atomic(path, json_body, &p);
    free(c);
    free(lanes);
    return rc;
}

/* ---- reader: the file as a tree of JSON values (base/json.h), read as a
 * trace; positions in messages are byte offsets from 0. */

__attribute__((format(printf, 3, 4))) static int jerr(const char *path, size_t pos, const char *fmt, ...)
{
    struct sc_json where = {NULL, 0, 0, path, NULL};
    va_list ap;
    va_start(ap, fmt);
    int rc = sc_json_verror_at(&where, pos, fmt, ap);
    va_end(ap);
    return rc;
}

static int read_file(const char *path, char **out, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return sc_error(SC_ERR_IO, "%s: %s", path, strerror(errno));
    /* read until the end rather than trust a size: pipes have none */
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        n += fread(buf + n, 1, cap - 1 - n, f);
        if (n < cap - 1)
            break;
        char *p = cap < SIZE_MAX / 2 ? realloc(buf, cap * 2) : NULL;
        if (!p)
            free(buf);
        buf = p;
        cap *= 2;
    }
    if (!buf) {
        fclose(f);
        return sc_error(SC_ERR_NOMEM, "%s: out of memory reading the file", path);
    }
    int err = ferror(f) ? errno : 0;
    fclose(f);
    if (err) {
        free(buf);
        return sc_error(SC_ERR_IO, "%s: read error: %s", path, strerror(err));
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return 0;
}

/* An integral number in [lo, hi]. */
static int jint(const struct sc_json_value *v, double lo, double hi, int64_t *out)
{
    if (!v || v->type != SC_JSON_NUM || v->num != floor(v->num) || v->num < lo || v->num > hi)
        return -1;
    *out = (int64_t)v->num;
    return 0;
}

static int read_event(const char *path, size_t idx, const struct sc_json_value *ev, struct sc_trace_event *out)
{
    const struct sc_json_value *name = sc_json_get(ev, "name"), *args = sc_json_get(ev, "args");
    const struct sc_json_value *ts = sc_json_get(ev, "ts"), *dur = sc_json_get(ev, "dur");
    const struct sc_json_value *iter = args && args->type == SC_JSON_OBJ ? sc_json_get(args, "iteration") : NULL;
    int64_t pid, tid, it;
    memset(out, 0, sizeof *out);
    if (!name || name->type != SC_JSON_STR)
        return jerr(path, ev->pos, "traceEvents[%zu]: \"name\" missing or not a string", idx);
    if (strlen(name->str) >= sizeof out->name)
        return jerr(path, name->pos, "traceEvents[%zu]: name longer than %zu bytes", idx,
                    sizeof out->name - 1);
    if (jint(sc_json_get(ev, "pid"), 0, MAX_RANKS - 1, &pid))
        return jerr(path, ev->pos, "traceEvents[%zu]: \"pid\" missing or not an integer in 0..%d",
                    idx, MAX_RANKS - 1);
    if (jint(sc_json_get(ev, "tid"), 0, 2147483647.0, &tid))
        return jerr(path, ev->pos, "traceEvents[%zu]: \"tid\" missing or not an integer >= 0", idx);
    if (!ts || ts->type != SC_JSON_NUM)
        return jerr(path, ev->pos, "traceEvents[%zu]: \"ts\" missing or not a number", idx);
    if (!dur || dur->type != SC_JSON_NUM || dur->num < 0)
        return jerr(path, ev->pos, "traceEvents[%zu]: \"dur\" missing or not a number >= 0", idx);
    if (!isfinite(ts->num + dur->num))
        return jerr(path, ev->pos, "traceEvents[%zu]: end time out of range", idx);
    if (jint(iter, -MAX_EXACT, MAX_EXACT, &it))
        return jerr(path, ev->pos, "traceEvents[%zu]: \"args\".\"iteration\" missing or not an integer",
                    idx);
    strcpy(out->name, name->str);
    out->rank = (int)pid;
    out->lane = tid >= COMM_TID ? SC_TRACE_LANE_COMM : (int)tid;
    out->iteration = it;
    out->start = ts->num;
    out->end = ts->num + dur->num;
    return 0;
}

static int read_other(const char *path, const struct sc_json_value *od, struct sc_trace *t)
{
    static const struct { const char *key; double lo, hi; } keys[] = {
        {"ranks", 1, MAX_RANKS},
        {"workers", 0, COMM_TID},
        {"first_iteration", -MAX_EXACT, MAX_EXACT},
        {"last_iteration", -MAX_EXACT, MAX_EXACT},
        {"global_batch", 0, 2147483647.0},
    };
    int64_t v[5];
    if (od->type != SC_JSON_OBJ)
        return jerr(path, od->pos, "\"otherData\" is not an object");
    for (int i = 0; i < 5; i++)
        if (jint(sc_json_get(od, keys[i].key), keys[i].lo, keys[i].hi, &v[i]))
            return jerr(path, od->pos, "otherData: \"%s\" missing or not an integer in %.0f..%.0f",
                        keys[i].key, keys[i].lo, keys[i].hi);
    const struct sc_json_value *model = sc_json_get(od, "model");
    if (!model || model->type != SC_JSON_STR)
        return jerr(path, od->pos, "otherData: \"model\" missing or not a string");
    if (strlen(model->str) >= sizeof t->model)
        return jerr(path, model->pos, "otherData: model longer than %zu bytes",
                    sizeof t->model - 1);
    int64_t cuda_workers = 0;
    const struct sc_json_value *cw = sc_json_get(od, "cuda_workers");
    if (cw && jint(cw, 0, (double)v[1], &cuda_workers))
        return jerr(path, cw->pos, "otherData: \"cuda_workers\" is not an integer in 0..%d", (int)v[1]);
    const struct sc_json_value *placement = sc_json_get(od, "placement");
    if (placement) {
        if (placement->type != SC_JSON_ARR || placement->n != (size_t)v[0])
            return jerr(path, placement->pos, "otherData: \"placement\" is not an array of %d strings", (int)v[0]);
        for (size_t r = 0; r < placement->n; r++)
            if (placement->item[r].type != SC_JSON_STR || strlen(placement->item[r].str) >= SC_TRACE_PLACEMENT_LEN)
                return jerr(path, placement->item[r].pos,
                            "otherData: placement[%zu] is not a string of less than %d bytes", r,
                            SC_TRACE_PLACEMENT_LEN);
        if (!(t->placement = calloc(placement->n ? placement->n : 1, sizeof *t->placement)))
            return sc_error(SC_ERR_NOMEM, "%s: out of memory", path);
        for (size_t r = 0; r < placement->n; r++)
            strcpy(t->placement[r], placement->item[r].str);
    }
    t->ranks = (int)v[0];
    t->workers = (int)v[1];
    t->cuda_workers = (int)cuda_workers;
    t->first_iteration = v[2];
    t->last_iteration = v[3];
    t->global_batch = (int)v[4];
    strcpy(t->model, model->str);
    return 0;
}

static int read_trace(const char *path, const struct sc_json_value *root, struct sc_trace *t)
{
    if (root->type != SC_JSON_OBJ)
        return jerr(path, root->pos, "not a JSON object with \"traceEvents\"");
    const struct sc_json_value *evs = sc_json_get(root, "traceEvents"), *od = sc_json_get(root, "otherData");
    if (!evs || evs->type != SC_JSON_ARR)
        return jerr(path, evs ? evs->pos : root->pos, "\"traceEvents\" missing or not an array");
    int rc = od ? read_other(path, od, t) : 0;
    if (rc)
        return rc;
    size_t n = 0;
    for (size_t i = 0; i < evs->n; i++) {
        const struct sc_json_value *ev = &evs->item[i], *ph;
        if (ev->type != SC_JSON_OBJ)
            return jerr(path, ev->pos, "traceEvents[%zu] is not an object", i);
        if (!(ph = sc_json_get(ev, "ph")) || ph->type != SC_JSON_STR)
            return jerr(path, ev->pos, "traceEvents[%zu]: \"ph\" missing or not a string", i);
        n += strcmp(ph->str, "X") == 0;
    }
    t->ev = malloc((n ? n : 1) * sizeof *t->ev);
    if (!t->ev)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory for %zu events", path, n);
    int maxpid = 0, maxtid = -1;
    for (size_t i = 0; i < evs->n; i++) {
        const struct sc_json_value *ev = &evs->item[i];
        if (strcmp(sc_json_get(ev, "ph")->str, "X") != 0)
            continue;
        struct sc_trace_event *e = &t->ev[t->n];
        if ((rc = read_event(path, i, ev, e)))
            return rc;
        if (od && e->rank >= t->ranks)
            return jerr(path, ev->pos, "traceEvents[%zu]: pid %d but otherData has %d ranks", i,
                        e->rank, t->ranks);
        if (od && e->lane >= t->workers)
            return jerr(path, ev->pos, "traceEvents[%zu]: tid %d but otherData has %d workers", i,
                        e->lane, t->workers);
        if (!od) {
            if (e->rank > maxpid)
                maxpid = e->rank;
            if (e->lane > maxtid)
                maxtid = e->lane;
            if (t->n == 0 || e->iteration < t->first_iteration)
                t->first_iteration = e->iteration;
            if (t->n == 0 || e->iteration > t->last_iteration)
                t->last_iteration = e->iteration;
        }
        t->n++;
    }
    if (!od) {
        t->ranks = maxpid + 1;
        t->workers = maxtid + 1;
    }
    return 0;
}

int sc_trace_read_json(const char *path, struct sc_trace *t)
{
    memset(t, 0, sizeof *t);
    char *buf = NULL;
    size_t len = 0;
    int rc = read_file(path, &buf, &len);
    if (rc)
        return rc;
    if (len == 0) {
        free(buf);
        return jerr(path, 0, "empty file");
    }
    struct sc_json j = {buf, len, 0, path, NULL};
    struct sc_json_value root;
    rc = sc_json_parse_value(&j, &root, MAX_DEPTH);
    if (rc == 0)
        rc = sc_json_expect_end(&j);
    if (rc == 0)
        rc = read_trace(path, &root, t);
    sc_json_free(&root);
    free(buf);
    if (rc)
        sc_trace_free(t);
    return rc;
}

void sc_trace_free(struct sc_trace *t)
{
    free(t->ev);
    free(t->placement);
    memset(t, 0, sizeof *t);
}

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
    int rc = check_trace(t, "sc_trace_analyze");
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
    double iters = iterations_of(t);
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
    {"compute_ms", 10, 3}, {"work_ms", 10, 3}, {"comm_ms", 10, 3}, {"exposed_ms", 10, 3},
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
    fprintf(f, "overlap report: %s%s%d ranks x %d workers, iterations %" PRId64 "..%" PRId64
            ", times in ms per iteration\n",
            t->model, t->model[0] ? ", " : "", t->ranks, t->workers, t->first_iteration,
            t->last_iteration);
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

/* ---- SVG ---------------------------------------------------------------- */

#define SVG_WIDTH 1600
#define SVG_LEFT 100 /* room for the lane labels */
#define SVG_RIGHT 20
#define SVG_TOP 56   /* title and axis labels */
#define SVG_ROW 16
#define SVG_LEGEND_COL 170

/* Colours of the common phases, chosen so that the phases that follow each
 * other in an iteration contrast; other phases get one of the fallback
 * colours by a hash of their name, so a phase keeps its colour from one
 * picture to the next. */
static const char *phase_colour(const char *phase)
{
    static const struct { const char *phase, *colour; } known[] = {
        {"fwd", "#4e79a7"},            {"bwd_data", "#f28e2b"},
        {"bwd_filter", "#e15759"},     {"bwd_weights", "#e15759"}, /* the same thing */
        {"relu_bwd", "#ff9da7"},       {"load", "#bab0ac"},
        {"xent", "#9c755f"},           {"reduce_scatter", "#59a14f"},
        {"grad_allreduce", "#17becf"}, {"allgather", "#b6e880"},
        {"sgd", "#b07aa1"},            {"accumulate", "#edc948"},
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
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        case '\'': fputs("&apos;", f); break;
        default: putc(ch < 0x20 ? '?' : ch, f);
        }
    }
}

struct svg {
    const struct packed *p;
    const int *row0;       /* first row of each rank */
    int rows;
    const char **phases;   /* distinct, sorted */
    size_t nphases;
    double t0, span;       /* the time range drawn, microseconds; span > 0 */
};

static double svg_x(const struct svg *g, double t)
{
    return SVG_LEFT + (t - g->t0) / g->span * (SVG_WIDTH - SVG_LEFT - SVG_RIGHT);
}

static void svg_rect(FILE *f, const struct svg *g, int row, const char *name, int64_t iteration,
                     double start, double end, int transfers)
{
    double x = svg_x(g, start), w = svg_x(g, end) - x;
    fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"><title>", x,
            SVG_TOP + row * SVG_ROW + 2, w > 0.5 ? w : 0.5, SVG_ROW - 4,
            phase_colour(phase_of(name)));
    xml_str(f, name);
    fprintf(f, ", iteration %" PRId64 ": start %.3f ms, duration %.3f ms", iteration, start / 1e3,
            (end - start) / 1e3);
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

    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" "
            "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            SVG_WIDTH, height, SVG_WIDTH, height);
    fputs("<text x=\"10\" y=\"18\" font-size=\"14\">", f);
    xml_str(f, t->model[0] ? t->model : "trace");
    fprintf(f, ": %d ranks x %d workers, iterations %" PRId64 "..%" PRId64 "</text>\n", t->ranks,
            t->workers, t->first_iteration, t->last_iteration);

    /* rows: stripes and labels */
    for (int r = 0; r < t->ranks; r++) {
        int lanes = g->row0[r + 1] - g->row0[r];
        for (int l = 0; l < lanes; l++) {
            int row = g->row0[r] + l, y = SVG_TOP + row * SVG_ROW;
            if (row % 2)
                fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"#f2f2f2\"/>\n",
                        SVG_LEFT, y, SVG_WIDTH - SVG_LEFT - SVG_RIGHT, SVG_ROW);
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
            fprintf(f, "<line x1=\"0\" x2=\"%d\" y1=\"%d\" y2=\"%d\" stroke=\"#888\"/>\n",
                    SVG_WIDTH - SVG_RIGHT, SVG_TOP + g->row0[r] * SVG_ROW,
                    SVG_TOP + g->row0[r] * SVG_ROW);
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
        fprintf(f, "<line x1=\"%.2f\" x2=\"%.2f\" y1=\"%d\" y2=\"%d\" stroke=\"#ccc\"/>\n", x, x,
                SVG_TOP - 4, plot_bottom);
        fprintf(f, "<text x=\"%.2f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", x, SVG_TOP - 8,
                ms);
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">ms</text>\n", SVG_LEFT - 6,
            SVG_TOP - 8);

    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->lane != SC_TRACE_LANE_COMM)
            svg_rect(f, g, g->row0[e->rank] + e->lane, e->name, e->iteration, e->start, e->end, 0);
    }
    for (size_t i = 0; i < g->p->nc; i++) {
        const struct comm_ev *c = &g->p->c[i];
        svg_rect(f, g, g->row0[c->rank] + t->workers + c->lane, c->name, c->iteration, c->start,
                 c->end, c->transfers);
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
    int rc = check_trace(t, path);
    if (rc)
        return rc;
    struct packed p = {t, NULL, 0, NULL};
    struct comm_ev *c;
    int *lanes;
    if ((rc = pack_comm(t, &c, &p.nc, &lanes)))
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
        phases[i] = phase_of(t->ev[i].name);
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
