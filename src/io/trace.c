/* Timelines of training iterations as Chrome trace-event JSON files, out
 * and in, and the checks and transfer packing that the report and the SVG
 * (src/report/) share.  See trace.h. */
#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include "src/io/trace.h"
#include "base/error.h"
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

const char *sc_trace_phase(const char *name)
{
    const char *dot = strrchr(name, '.');
    return dot ? dot + 1 : name;
}

/* A trace the writers and the analysis can trust: every later loop indexes
 * per-rank arrays by ev->rank. */
int sc_trace_check(const struct sc_trace *t, const char *what)
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
            return sc_error(SC_ERR_ARG, "%s: event %zu (%s): rank %d outside 0..%d", what, i, e->name, e->rank,
                            t->ranks - 1);
        if (e->lane != SC_TRACE_LANE_COMM && (e->lane < 0 || e->lane >= t->workers))
            return sc_error(SC_ERR_ARG, "%s: event %zu (%s): lane %d outside 0..%d", what, i, e->name, e->lane,
                            t->workers - 1);
        if (!isfinite(e->start) || !isfinite(e->end) || e->end < e->start)
            return sc_error(SC_ERR_ARG, "%s: event %zu (%s): bad times %g..%g", what, i, e->name, e->start, e->end);
    }
    return 0;
}

double sc_trace_iterations(const struct sc_trace *t)
{
    double it = (double)t->last_iteration - (double)t->first_iteration + 1;
    return it >= 1 ? it : 1;
}

/* ---- transfers: merged per rank and name, packed into lanes ------------- */

static int cmp_by_name(const void *pa, const void *pb)
{
    const struct sc_trace_comm *a = pa, *b = pb;
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
    const struct sc_trace_comm *a = pa, *b = pb;
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
int sc_trace_pack_comm(const struct sc_trace *t, struct sc_trace_comm **out, size_t *nout, int **lanes_out)
{
    size_t n = 0;
    for (size_t i = 0; i < t->n; i++)
        n += t->ev[i].lane == SC_TRACE_LANE_COMM;
    struct sc_trace_comm *c = malloc((n ? n : 1) * sizeof *c);
    int *lanes = calloc((size_t)t->ranks, sizeof *lanes);
    double *lane_end = NULL;
    if (!c || !lanes)
        goto nomem;
    n = 0;
    for (size_t i = 0; i < t->n; i++) {
        const struct sc_trace_event *e = &t->ev[i];
        if (e->lane == SC_TRACE_LANE_COMM)
            c[n++] = (struct sc_trace_comm){e->name, e->rank, 0, e->iteration, e->start, e->end, 1, e->bytes};
    }
    qsort(c, n, sizeof *c, cmp_by_name);
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        struct sc_trace_comm *last = m ? &c[m - 1] : NULL;
        if (last && last->rank == c[i].rank && strcmp(last->name, c[i].name) == 0 && c[i].start <= last->end) {
            if (c[i].end > last->end)
                last->end = c[i].end;
            if (c[i].iteration < last->iteration)
                last->iteration = c[i].iteration;
            last->transfers++;
            last->bytes += c[i].bytes;
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
    fprintf(f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":", what, pid, tid);
    json_str(f, name);
    fputs("}}", f);
}

static void json_meta_sort(FILE *f, int *first, const char *what, int pid, int tid, int index)
{
    json_sep(f, first);
    fprintf(f, "{\"name\":\"%s\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"sort_index\":%d}}", what, pid, tid,
            index);
}

static void json_event(FILE *f, int *first, const char *name, int pid, int tid, double start, double end,
                       int64_t iteration, int transfers, double bytes)
{
    json_sep(f, first);
    fputs("{\"name\":", f);
    json_str(f, name);
    fputs(",\"cat\":", f);
    json_str(f, sc_trace_phase(name));
    fprintf(f,
            ",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"ts\":%.3f,\"dur\":%.3f,"
            "\"args\":{\"iteration\":%" PRId64,
            pid, tid, start, end - start, iteration);
    if (transfers > 0)
        fprintf(f, ",\"transfers\":%d", transfers);
    if (bytes > 0)
        fprintf(f, ",\"bytes\":%.0f", bytes);
    fputs("}}", f);
}

static int json_body(FILE *f, const void *ctx)
{
    const struct sc_trace_packed *p = ctx;
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
            json_event(f, &first, e->name, e->rank, e->lane, e->start, e->end, e->iteration, 0, 0);
    }
    for (size_t i = 0; i < p->nc; i++) {
        const struct sc_trace_comm *c = &p->c[i];
        json_event(f, &first, c->name, c->rank, COMM_TID + c->lane, c->start, c->end, c->iteration, c->transfers,
                   c->bytes);
    }
    fprintf(f,
            "\n],\n\"displayTimeUnit\":\"ms\",\n\"otherData\":{\"ranks\":%d,\"workers\":%d,"
            "\"first_iteration\":%" PRId64 ",\"last_iteration\":%" PRId64 ",\"global_batch\":%d,",
            t->ranks, t->workers, t->first_iteration, t->last_iteration, t->global_batch);
    if (t->cuda_workers)
        fprintf(f, "\"cuda_workers\":%d,", t->cuda_workers);
    fputs("\"model\":", f);
    json_str(f, t->model);
    if (t->precision[0]) {
        fputs(",\"precision\":", f);
        json_str(f, t->precision);
    }
    if (t->grad_dtype[0]) {
        fputs(",\"grad_dtype\":", f);
        json_str(f, t->grad_dtype);
    }
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
    int rc = sc_trace_check(t, path);
    if (rc)
        return rc;
    struct sc_trace_packed p = {t, NULL, 0, NULL};
    struct sc_trace_comm *c;
    int *lanes;
    rc = sc_trace_pack_comm(t, &c, &p.nc, &lanes);
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
        return jerr(path, name->pos, "traceEvents[%zu]: name longer than %zu bytes", idx, sizeof out->name - 1);
    if (jint(sc_json_get(ev, "pid"), 0, MAX_RANKS - 1, &pid))
        return jerr(path, ev->pos, "traceEvents[%zu]: \"pid\" missing or not an integer in 0..%d", idx, MAX_RANKS - 1);
    if (jint(sc_json_get(ev, "tid"), 0, 2147483647.0, &tid))
        return jerr(path, ev->pos, "traceEvents[%zu]: \"tid\" missing or not an integer >= 0", idx);
    if (!ts || ts->type != SC_JSON_NUM)
        return jerr(path, ev->pos, "traceEvents[%zu]: \"ts\" missing or not a number", idx);
    if (!dur || dur->type != SC_JSON_NUM || dur->num < 0)
        return jerr(path, ev->pos, "traceEvents[%zu]: \"dur\" missing or not a number >= 0", idx);
    if (!isfinite(ts->num + dur->num))
        return jerr(path, ev->pos, "traceEvents[%zu]: end time out of range", idx);
    if (jint(iter, -MAX_EXACT, MAX_EXACT, &it))
        return jerr(path, ev->pos, "traceEvents[%zu]: \"args\".\"iteration\" missing or not an integer", idx);
    const struct sc_json_value *bytes = sc_json_get(args, "bytes");
    int64_t nbytes = 0;
    if (bytes && jint(bytes, 0, MAX_EXACT, &nbytes))
        return jerr(path, bytes->pos, "traceEvents[%zu]: \"args\".\"bytes\" is not an integer >= 0", idx);
    strcpy(out->name, name->str);
    out->rank = (int)pid;
    out->lane = tid >= COMM_TID ? SC_TRACE_LANE_COMM : (int)tid;
    out->iteration = it;
    out->start = ts->num;
    out->end = ts->num + dur->num;
    out->bytes = (double)nbytes;
    return 0;
}

static int read_other(const char *path, const struct sc_json_value *od, struct sc_trace *t)
{
    static const struct {
        const char *key;
        double lo, hi;
    } keys[] = {
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
            return jerr(path, od->pos, "otherData: \"%s\" missing or not an integer in %.0f..%.0f", keys[i].key,
                        keys[i].lo, keys[i].hi);
    const struct sc_json_value *model = sc_json_get(od, "model");
    if (!model || model->type != SC_JSON_STR)
        return jerr(path, od->pos, "otherData: \"model\" missing or not a string");
    if (strlen(model->str) >= sizeof t->model)
        return jerr(path, model->pos, "otherData: model longer than %zu bytes", sizeof t->model - 1);
    const struct sc_json_value *precision = sc_json_get(od, "precision");
    if (precision && (precision->type != SC_JSON_STR || strlen(precision->str) >= sizeof t->precision))
        return jerr(path, precision->pos, "otherData: \"precision\" is not a string of less than %zu bytes",
                    sizeof t->precision);
    const struct sc_json_value *gd = sc_json_get(od, "grad_dtype");
    if (gd && (gd->type != SC_JSON_STR || (strcmp(gd->str, "fp32") && strcmp(gd->str, "bf16"))))
        return jerr(path, gd->pos, "otherData: \"grad_dtype\" is neither \"fp32\" nor \"bf16\"");
    if (gd)
        snprintf(t->grad_dtype, sizeof t->grad_dtype, "%s", gd->str);
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
    if (precision)
        strcpy(t->precision, precision->str);
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
            return jerr(path, ev->pos, "traceEvents[%zu]: pid %d but otherData has %d ranks", i, e->rank, t->ranks);
        if (od && e->lane >= t->workers)
            return jerr(path, ev->pos, "traceEvents[%zu]: tid %d but otherData has %d workers", i, e->lane, t->workers);
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
