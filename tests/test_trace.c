/* Traces: the overlap analysis of a hand-made trace whose answer is known,
 * the JSON round trip (transfers merged and packed into lanes), the reader
 * on malformed and mutated files, the report table and the SVG. */
#define _POSIX_C_SOURCE 200809L
#include "src/starconv.h"
#include "src/report/report.h"

#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"

static char dir[256];

static const char *path_of(const char *name)
{
    static char p[4][512];
    static int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof p[i], "%s/%s", dir, name);
    return p[i];
}

static void write_bytes(const char *path, const void *data, size_t len)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(1);
    }
}

/* The whole file, NUL-terminated; *len its size.  Exits if unreadable. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    buf[n] = '\0';
    if (len)
        *len = (size_t)n;
    return buf;
}

/* ---- the hand-made trace ------------------------------------------------- */

#define ODD_NAME "x\"y\\z<&>\t\xc3\xa9.fwd" /* every escape JSON and XML need */

static const struct sc_trace_event events[] = {
    /* rank 0: computes [0,10] and [20,30]; a transfer [5,25] of which
     * [10,20] is exposed.  Lane 1's task lies inside lane 0's. */
    {"conv1.fwd", 0, 0, 5, 0, 10},
    {"conv1.bwd_data", 0, 0, 5, 20, 30},
    {"conv2.fwd", 0, 1, 5, 2, 8},
    {"conv1.grad_allreduce", 0, SC_TRACE_LANE_COMM, 5, 5, 25},
    /* rank 1: computes [0,50] on two overlapping lanes; all transfers lie
     * inside: three of one name that touch or overlap (one event [10,30]),
     * another name overlapping them (a second lane), and a third one after
     * both that fits back in the first lane. */
    {"fc.fwd", 1, 0, 6, 0, 40},
    {"fc.bwd_filter", 1, 1, 6, 30, 50},
    {"fc.grad_allreduce", 1, SC_TRACE_LANE_COMM, 6, 10, 20},
    {"fc.grad_allreduce", 1, SC_TRACE_LANE_COMM, 5, 20, 30},
    {"fc.grad_allreduce", 1, SC_TRACE_LANE_COMM, 6, 12, 14},
    {"fc.reduce_scatter", 1, SC_TRACE_LANE_COMM, 6, 15, 45},
    {"fc.allgather", 1, SC_TRACE_LANE_COMM, 6, 46, 48},
    /* rank 2: no transfer at all */
    {"load", 2, 0, 5, 0, 60},
    {ODD_NAME, 2, 1, 6, 0, 5},
};
#define NEVENTS (sizeof events / sizeof events[0])

static struct sc_trace make_trace(struct sc_trace_event *ev)
{
    struct sc_trace t;
    memset(&t, 0, sizeof t);
    memcpy(ev, events, sizeof events);
    t.ev = ev;
    t.n = NEVENTS;
    t.ranks = 3;
    t.workers = 2;
    t.first_iteration = 5;
    t.last_iteration = 6;
    t.global_batch = 64;
    strcpy(t.model, "models/lenet.cfg");
    return t;
}

/* per iteration (2 iterations, window 60 us) */
static const struct sc_overlap expected[3] = {
    {30, 10, 13, 10, 5, 15, 0.5, 64 * 2 / 60e-6},
    {30, 25, 30, 18.5, 0, 5, 1, 64 * 2 / 60e-6},
    {30, 30, 32.5, 0, 0, 0, NAN, 64 * 2 / 60e-6},
};

static int close_to(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return fabs(a - b) <= 1e-9 * fmax(1, fabs(b));
}

static void check_overlap(const char *what, const struct sc_overlap *o)
{
    static const char *const field[] = {"window",  "compute", "work",  "comm",
                                        "exposed", "idle",    "ratio", "images_per_s"};
    for (int r = 0; r < 3; r++) {
        const double *got = &o[r].window, *want = &expected[r].window;
        for (int k = 0; k < 8; k++)
            check(close_to(got[k], want[k]), "%s: rank %d %s = %.12g (want %.12g)", what, r, field[k], got[k], want[k]);
    }
}

static void test_analyze(void)
{
    struct sc_trace_event ev[NEVENTS];
    struct sc_trace t = make_trace(ev);
    struct sc_overlap o[3];
    int rc = sc_trace_analyze(&t, o);
    check(rc == 0, "analyze the hand-made trace: %d %s", rc, sc_last_error());
    check_overlap("analyze", o);

    /* the order of the events does not matter */
    for (size_t i = 0; i < NEVENTS / 2; i++) {
        struct sc_trace_event tmp = ev[i];
        ev[i] = ev[NEVENTS - 1 - i];
        ev[NEVENTS - 1 - i] = tmp;
    }
    rc = sc_trace_analyze(&t, o);
    check(rc == 0, "analyze the reversed trace");
    check_overlap("analyze reversed", o);

    /* iterations count at least one */
    t.first_iteration = 9;
    t.last_iteration = 3;
    rc = sc_trace_analyze(&t, o);
    check(rc == 0 && close_to(o[0].compute, 20) && close_to(o[0].window, 60),
          "last < first counts one iteration: compute %g window %g", o[0].compute, o[0].window);

    /* bad traces are refused, not read out of bounds */
    t = make_trace(ev);
    ev[3].rank = 3;
    rc = sc_trace_analyze(&t, o);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "rank 3"), "event on rank 3 of 3: %d %s", rc, sc_last_error());
    t = make_trace(ev);
    ev[0].lane = 2;
    rc = sc_trace_analyze(&t, o);
    check(rc == SC_ERR_ARG, "event on lane 2 of 2 workers: %d %s", rc, sc_last_error());
    t = make_trace(ev);
    ev[0].end = -1;
    rc = sc_trace_analyze(&t, o);
    check(rc == SC_ERR_ARG, "event ending before it starts: %d %s", rc, sc_last_error());

    /* an empty trace: nothing to divide by */
    t = make_trace(ev);
    t.n = 0;
    rc = sc_trace_analyze(&t, o);
    check(rc == 0 && o[0].window == 0 && o[0].idle == 0 && isnan(o[0].ratio) && isnan(o[0].images_per_s),
          "empty trace: window %g ratio %g images/s %g", o[0].window, o[0].ratio, o[0].images_per_s);
}

/* ---- JSON round trip ------------------------------------------------------ */

static const struct sc_trace_event *find(const struct sc_trace *t, const char *name, int rank, double start)
{
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->ev[i].name, name) == 0 && t->ev[i].rank == rank && fabs(t->ev[i].start - start) < 1e-9)
            return &t->ev[i];
    return NULL;
}

static void expect_event(const struct sc_trace *t, const char *name, int rank, int lane, int64_t iteration,
                         double start, double end)
{
    const struct sc_trace_event *e = find(t, name, rank, start);
    check(e && e->lane == lane && e->iteration == iteration && fabs(e->end - end) < 1e-9,
          "read back %s on rank %d at %g: lane %d iteration %lld end %g (want %d %lld %g)", name, rank, start,
          e ? e->lane : -99, e ? (long long)e->iteration : -99, e ? e->end : -99, lane, (long long)iteration, end);
}

static void expect_text(const char *text, const char *needle, const char *what)
{
    check(strstr(text, needle) != NULL, "%s: has %s", what, needle);
}

static void test_json(void)
{
    struct sc_trace_event ev[NEVENTS];
    struct sc_trace t = make_trace(ev), back;
    const char *path = path_of("trace.json");
    int rc = sc_trace_write_json(&t, path);
    check(rc == 0, "write %s: %d %s", path, rc, sc_last_error());

    char *text = slurp(path, NULL);
    expect_text(text, "{\"traceEvents\":[", "json");
    expect_text(text, "\"displayTimeUnit\":\"ms\"", "json");
    expect_text(text,
                "\"otherData\":{\"ranks\":3,\"workers\":2,\"first_iteration\":5,"
                "\"last_iteration\":6,\"global_batch\":64,\"model\":\"models/lenet.cfg\"}",
                "json");
    expect_text(text,
                "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":2,\"tid\":0,"
                "\"args\":{\"name\":\"rank 2\"}}",
                "json");
    expect_text(text,
                "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,"
                "\"args\":{\"name\":\"cpu 1\"}}",
                "json");
    expect_text(text,
                "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1001,"
                "\"args\":{\"name\":\"comm 2\"}}",
                "json");
    expect_text(text,
                "{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":1001,"
                "\"args\":{\"sort_index\":3}}",
                "json");
    expect_text(text,
                "{\"name\":\"conv1.fwd\",\"cat\":\"fwd\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
                "\"ts\":0.000,\"dur\":10.000,\"args\":{\"iteration\":5}}",
                "json");
    expect_text(text,
                "{\"name\":\"fc.grad_allreduce\",\"cat\":\"grad_allreduce\",\"ph\":\"X\","
                "\"pid\":1,\"tid\":1000,\"ts\":10.000,\"dur\":20.000,"
                "\"args\":{\"iteration\":5,\"transfers\":3}}",
                "json: merged transfers");
    expect_text(text,
                "\"name\":\"fc.reduce_scatter\",\"cat\":\"reduce_scatter\",\"ph\":\"X\","
                "\"pid\":1,\"tid\":1001,",
                "json: an overlapping transfer in a second lane");
    expect_text(text,
                "\"name\":\"fc.allgather\",\"cat\":\"allgather\",\"ph\":\"X\",\"pid\":1,"
                "\"tid\":1000,",
                "json: a later transfer back in the first lane");
    expect_text(text, "{\"name\":\"load\",\"cat\":\"load\",", "json: a name without a phase");
    expect_text(text, "\"x\\\"y\\\\z<&>\\t\xc3\xa9.fwd\"", "json: escaped name");
    check(strstr(text, "\"tid\":1002") == NULL && strstr(text, "\"pid\":0,\"tid\":1001") == NULL,
          "json: no more transfer lanes than needed");
    free(text);

    DIR *d = opendir(dir);
    struct dirent *de;
    int tmps = 0;
    while (d && (de = readdir(d)))
        tmps += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    check(tmps == 0, "no temporary file left after writing");

    rc = sc_trace_read_json(path, &back);
    check(rc == 0, "read %s back: %d %s", path, rc, sc_last_error());
    if (rc)
        return;
    check(back.n == 11, "read back 11 events (7 tasks, 4 merged transfers): %zu", back.n);
    check(back.ranks == 3 && back.workers == 2 && back.first_iteration == 5 && back.last_iteration == 6 &&
              back.global_batch == 64 && strcmp(back.model, "models/lenet.cfg") == 0,
          "read back otherData: %d ranks %d workers %lld..%lld batch %d model '%s'", back.ranks, back.workers,
          (long long)back.first_iteration, (long long)back.last_iteration, back.global_batch, back.model);
    expect_event(&back, "conv1.fwd", 0, 0, 5, 0, 10);
    expect_event(&back, "conv1.bwd_data", 0, 0, 5, 20, 30);
    expect_event(&back, "conv2.fwd", 0, 1, 5, 2, 8);
    expect_event(&back, "conv1.grad_allreduce", 0, SC_TRACE_LANE_COMM, 5, 5, 25);
    expect_event(&back, "fc.fwd", 1, 0, 6, 0, 40);
    expect_event(&back, "fc.bwd_filter", 1, 1, 6, 30, 50);
    expect_event(&back, "fc.grad_allreduce", 1, SC_TRACE_LANE_COMM, 5, 10, 30);
    expect_event(&back, "fc.reduce_scatter", 1, SC_TRACE_LANE_COMM, 6, 15, 45);
    expect_event(&back, "fc.allgather", 1, SC_TRACE_LANE_COMM, 6, 46, 48);
    expect_event(&back, "load", 2, 0, 5, 0, 60);
    expect_event(&back, ODD_NAME, 2, 1, 6, 0, 5);

    struct sc_overlap o[3];
    rc = sc_trace_analyze(&back, o);
    check(rc == 0, "analyze the trace read back");
    check_overlap("analyze read back", o);

    /* the merged file is a fixed point, but for the count of transfers
     * merged, which struct sc_trace_event does not hold */
    const char *again = path_of("again.json");
    rc = sc_trace_write_json(&back, again);
    char *a = slurp(path, NULL), *b = slurp(again, NULL), *three = strstr(a, "\"transfers\":3");
    if (three)
        three[12] = '1';
    check(rc == 0 && three && strcmp(a, b) == 0, "writing the trace read back gives the same file");
    free(a);
    free(b);
    sc_trace_free(&back);
    check(back.ev == NULL && back.n == 0, "sc_trace_free empties the trace");

    /* failed writes: an error naming the path, nothing left behind */
    const char *nodir = path_of("nodir/trace.json");
    rc = sc_trace_write_json(&t, nodir);
    check(rc == SC_ERR_IO && strstr(sc_last_error(), nodir), "write into a missing directory: %d %s", rc,
          sc_last_error());
    const char *sub = path_of("adir");
    mkdir(sub, 0700);
    rc = sc_trace_write_json(&t, sub);
    check(rc == SC_ERR_IO && strstr(sc_last_error(), sub), "write over a directory: %d %s", rc, sc_last_error());
    d = opendir(dir);
    tmps = 0;
    while (d && (de = readdir(d)))
        tmps += strstr(de->d_name, ".tmp.") != NULL;
    if (d)
        closedir(d);
    check(tmps == 0, "no temporary file left after a failed write");
    ev[0].rank = -1;
    rc = sc_trace_write_json(&t, path_of("bad.json"));
    check(rc == SC_ERR_ARG && access(path_of("bad.json"), F_OK) != 0,
          "an event on rank -1 is refused and no file written: %d %s", rc, sc_last_error());
}

/* ---- the reader on other files --------------------------------------------- */

static void test_reader_valid(void)
{
    /* no otherData, keys in another order, metadata and unknown keys,
     * \u escapes (a surrogate pair): ranks, workers and iterations come
     * from the events */
    static const char text[] = " {\"unknown\":[1,-2.5e-3,{\"a\":null,\"b\":true,\"c\":false},\"s\"],\n"
                               "\"traceEvents\":[\n"
                               "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":0,\"args\":{\"name\":\"rank 0\"}},\n"
                               "{\"args\":{\"iteration\":3,\"x\":[]},\"dur\":2.5,\"ts\":1,\"tid\":2,\"pid\":1,"
                               "\"ph\":\"X\",\"cat\":\"fwd\",\"name\":\"a\\u00e9\\ud83d\\ude00\\/.fwd\"},\n"
                               "{\"name\":\"b.sgd\",\"ph\":\"X\",\"pid\":0,\"tid\":1003,\"ts\":0,\"dur\":1E0,"
                               "\"args\":{\"iteration\":7}},\n"
                               "{\"name\":\"c\",\"ph\":\"B\",\"pid\":9,\"tid\":0,\"ts\":0}\n"
                               "]}\r\n\t ";
    const char *path = path_of("valid.json");
    struct sc_trace t;
    write_bytes(path, text, sizeof text - 1);
    int rc = sc_trace_read_json(path, &t);
    check(rc == 0, "read a trace without otherData: %d %s", rc, sc_last_error());
    if (rc)
        return;
    check(t.n == 2 && t.ranks == 2 && t.workers == 3 && t.first_iteration == 3 && t.last_iteration == 7 &&
              t.global_batch == 0 && t.model[0] == '\0',
          "derived: %zu events %d ranks %d workers %lld..%lld", t.n, t.ranks, t.workers, (long long)t.first_iteration,
          (long long)t.last_iteration);
    check(t.n == 2 && strcmp(t.ev[0].name, "a\xc3\xa9\xf0\x9f\x98\x80/.fwd") == 0 && t.ev[0].rank == 1 &&
              t.ev[0].lane == 2 && t.ev[0].start == 1 && t.ev[0].end == 3.5 && t.ev[0].iteration == 3,
          "first event: '%s'", t.n ? t.ev[0].name : "");
    check(t.n == 2 && t.ev[1].lane == SC_TRACE_LANE_COMM && t.ev[1].rank == 0, "tid 1003 reads as a transfer");
    sc_trace_free(&t);
}

static void expect_bad(const char *what, const char *text, size_t len, const char *needle)
{
    const char *path = path_of("bad.json");
    struct sc_trace t;
    write_bytes(path, text, len);
    memset(&t, 0xab, sizeof t);
    int rc = sc_trace_read_json(path, &t);
    const char *msg = sc_last_error();
    check(rc == SC_ERR_PARSE && strstr(msg, path) && strstr(msg, needle) && t.ev == NULL && t.n == 0,
          "%s: rc %d, \"%s\" has \"%s\"", what, rc, msg, needle);
    if (rc == 0)
        sc_trace_free(&t);
}

#define BAD(what, text, needle) expect_bad(what, text, sizeof text - 1, needle)

static void test_reader_malformed(void)
{
    static const char ev_ok[] = "{\"name\":\"a.fwd\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1,"
                                "\"args\":{\"iteration\":0}}";
    char buf[1024];

    BAD("empty file", "", "byte 0: empty file");
    BAD("only blanks", " \n", "byte 2: expected a value");
    BAD("garbage", "hello", "byte 0: expected a value");
    BAD("binary", "\x01\xff\x00", "found byte 0x01");
    BAD("top-level array", "[]", "traceEvents");
    BAD("no traceEvents", "{\"a\":1}", "\"traceEvents\" missing");
    BAD("traceEvents an object", "{\"traceEvents\":{}}", "not an array");
    BAD("trailing comma", "{\"traceEvents\":[1,]}", "byte 18: expected a value");
    BAD("trailing comma in object", "{\"traceEvents\":[],}", "expected a key string");
    BAD("missing colon", "{\"traceEvents\" []}", "expected ':'");
    BAD("missing comma", "{\"traceEvents\":[] \"x\":1}", "expected ',' or '}'");
    BAD("unterminated string", "{\"traceEvents", "unterminated string");
    BAD("bad escape", "{\"trace\\x\":1}", "bad escape");
    BAD("short \\u", "{\"a\\u12\":1}", "bad escape");
    BAD("lone surrogate", "{\"a\\ud800\":1}", "surrogate");
    BAD("lone low surrogate", "{\"a\\udc00x\":1}", "surrogate");
    BAD("\\u0000", "{\"a\\u0000\":1}", "\\u0000");
    BAD("raw newline in a string", "{\"a\nb\":1}", "control character");
    BAD("leading zero", "{\"a\":01}", "byte 5: bad number");
    BAD("bare minus", "{\"a\":-}", "bad number");
    BAD("no digit after the point", "{\"a\":1.}", "no digit after '.'");
    BAD("no exponent digit", "{\"a\":1e+}", "exponent");
    BAD("huge number", "{\"a\":1e999}", "out of range");
    BAD("hex number", "{\"a\":0x10}", "byte 5: bad number");
    BAD("misspelt true", "{\"a\":tru}", "expected a value");
    BAD("NaN", "{\"a\":NaN}", "expected a value");
    BAD("trailing garbage", "{\"traceEvents\":[]} x", "byte 19: expected the end of the file");
    BAD("two documents", "{\"traceEvents\":[]}{}", "expected the end");
    BAD("event not an object", "{\"traceEvents\":[3]}", "traceEvents[0] is not an object");
    BAD("ph missing", "{\"traceEvents\":[{\"name\":\"a\"}]}", "\"ph\" missing");
    BAD("name a number",
        "{\"traceEvents\":[{\"name\":5,\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1,"
        "\"args\":{\"iteration\":0}}]}",
        "\"name\" missing or not a string");
    BAD("pid a string",
        "{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"pid\":\"0\",\"tid\":0,\"ts\":0,"
        "\"dur\":1,\"args\":{\"iteration\":0}}]}",
        "\"pid\"");
    BAD("pid fractional",
        "{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0.5,\"tid\":0,\"ts\":0,"
        "\"dur\":1,\"args\":{\"iteration\":0}}]}",
        "\"pid\"");
    BAD("tid negative",
        "{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":-1,\"ts\":0,"
        "\"dur\":1,\"args\":{\"iteration\":0}}]}",
        "\"tid\"");
    BAD("ts missing",
        "{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":0,"
        "\"dur\":1,\"args\":{\"iteration\":0}}]}",
        "\"ts\"");
    BAD("dur negative",
        "{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,"
        "\"dur\":-1,\"args\":{\"iteration\":0}}]}",
        "\"dur\"");
    BAD("args not an object",
        "{\"traceEvents\":[{\"name\":\"a\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,"
        "\"dur\":1,\"args\":[]}]}",
        "iteration");
    BAD("name too long",
        "{\"traceEvents\":[{\"name\":\"0123456789012345678901234567890123456789012345678901"
        "234567890123\",\"ph\":\"X\",\"pid\":0,\"tid\":0,\"ts\":0,\"dur\":1,"
        "\"args\":{\"iteration\":0}}]}",
        "longer than 63");
    snprintf(buf, sizeof buf,
             "{\"traceEvents\":[%s],\"otherData\":{\"ranks\":\"1\",\"workers\":1,"
             "\"first_iteration\":0,\"last_iteration\":0,\"global_batch\":1,\"model\":\"\"}}",
             ev_ok);
    expect_bad("ranks a string", buf, strlen(buf), "\"ranks\"");
    snprintf(buf, sizeof buf,
             "{\"traceEvents\":[%s],\"otherData\":{\"ranks\":1,\"workers\":1,"
             "\"first_iteration\":0,\"last_iteration\":0,\"global_batch\":1}}",
             ev_ok);
    expect_bad("model missing", buf, strlen(buf), "\"model\"");
    snprintf(buf, sizeof buf, "{\"traceEvents\":[%s],\"otherData\":[]}", ev_ok);
    expect_bad("otherData an array", buf, strlen(buf), "not an object");
    snprintf(buf, sizeof buf,
             "{\"traceEvents\":[%s],\"otherData\":{\"ranks\":0,\"workers\":1,"
             "\"first_iteration\":0,\"last_iteration\":0,\"global_batch\":1,\"model\":\"\"}}",
             ev_ok);
    expect_bad("zero ranks", buf, strlen(buf), "\"ranks\"");
    snprintf(buf, sizeof buf,
             "{\"otherData\":{\"ranks\":1,\"workers\":1,\"first_iteration\":0,"
             "\"last_iteration\":0,\"global_batch\":1,\"model\":\"\"},\"traceEvents\":[%s,"
             "{\"name\":\"b\",\"ph\":\"X\",\"pid\":1,\"tid\":0,\"ts\":0,\"dur\":1,"
             "\"args\":{\"iteration\":0}}]}",
             ev_ok);
    expect_bad("pid beyond otherData's ranks", buf, strlen(buf), "pid 1 but otherData has 1 ranks");
    snprintf(buf, sizeof buf,
             "{\"otherData\":{\"ranks\":1,\"workers\":1,\"first_iteration\":0,"
             "\"last_iteration\":0,\"global_batch\":1,\"model\":\"\"},\"traceEvents\":["
             "{\"name\":\"b\",\"ph\":\"X\",\"pid\":0,\"tid\":1,\"ts\":0,\"dur\":1,"
             "\"args\":{\"iteration\":0}}]}");
    expect_bad("tid beyond otherData's workers", buf, strlen(buf), "tid 1 but otherData has 1");

    /* deep nesting, closed or not: an error, not a stack overflow */
    size_t deep = 100000;
    char *nest = malloc(2 * deep + 1);
    memset(nest, '[', deep);
    memset(nest + deep, ']', deep);
    expect_bad("100000 nested arrays", nest, 2 * deep, "nested deeper than");
    expect_bad("100000 unclosed arrays", nest, deep, "nested deeper than");
    for (size_t i = 0; i < deep / 5; i++)
        memcpy(nest + 5 * i, "{\"a\":", 5);
    expect_bad("20000 nested objects", nest, deep, "nested deeper than");
    free(nest);

    struct sc_trace t;
    const char *missing = path_of("missing.json");
    int rc = sc_trace_read_json(missing, &t);
    check(rc == SC_ERR_IO && strstr(sc_last_error(), missing), "missing file: %d %s", rc, sc_last_error());
    rc = sc_trace_read_json(dir, &t);
    check(rc == SC_ERR_IO && strstr(sc_last_error(), dir), "a directory: %d %s", rc, sc_last_error());
}

/* Every prefix of a good file, and the good file with bytes changed at
 * random: each is read or refused with a message, never a crash. */
static void test_reader_mutations(void)
{
    size_t len;
    char *good = slurp(path_of("trace.json"), &len);
    const char *path = path_of("mutant.json");
    size_t close = (size_t)(strrchr(good, '}') - good) + 1;
    int refused = 0, messages = 0;
    for (size_t n = 0; n < close; n++) {
        struct sc_trace t;
        write_bytes(path, good, n);
        int rc = sc_trace_read_json(path, &t);
        refused += rc == SC_ERR_PARSE;
        messages += rc != 0 && strstr(sc_last_error(), path) != NULL;
        if (rc == 0)
            sc_trace_free(&t);
    }
    check(refused == (int)close && messages == (int)close,
          "all %zu truncations refused with a message naming the file: %d refused", close, refused);

    static const char bytes[] = "{}[]\",:0123456789.-+eE\\u \x01\xff"
                                "abcdefnrtx";
    unsigned seed = 12345;
    int read = 0, bad = 0, unnamed = 0;
    char *m = malloc(len);
    for (int k = 0; k < 3000; k++) {
        memcpy(m, good, len);
        int changes = 1 + k % 4;
        for (int c = 0; c < changes; c++) {
            seed = seed * 1103515245u + 12345u;
            size_t at = (seed >> 8) % len;
            seed = seed * 1103515245u + 12345u;
            m[at] = bytes[(seed >> 8) % (sizeof bytes - 1)];
        }
        struct sc_trace t;
        write_bytes(path, m, len);
        int rc = sc_trace_read_json(path, &t);
        if (rc == 0) {
            struct sc_overlap *o = calloc((size_t)t.ranks, sizeof *o);
            if (!o || sc_trace_analyze(&t, o) != 0)
                bad++;
            free(o);
            sc_trace_free(&t);
            read++;
        } else if (!strstr(sc_last_error(), path)) {
            unnamed++;
        }
    }
    free(m);
    free(good);
    check(bad == 0 && unnamed == 0,
          "3000 mutated files: %d read (all analyzable: %d failed), the rest refused naming the "
          "file (%d did not)",
          read, bad, unnamed);
}

/* ---- report and SVG --------------------------------------------------------- */

static void test_report(void)
{
    struct sc_trace_event ev[NEVENTS];
    struct sc_trace t = make_trace(ev);
    struct sc_overlap o[3];
    sc_trace_analyze(&t, o);
    const char *path = path_of("report.txt");
    FILE *f = fopen(path, "w");
    if (!f)
        exit(1);
    sc_trace_print_report(&t, o, f);
    fclose(f);
    char *text = slurp(path, NULL);
    printf("%s", text);
    char *lines[8] = {0};
    int n = 0;
    for (char *s = strtok(text, "\n"); s && n < 8; s = strtok(NULL, "\n"))
        lines[n++] = s;
    check(n == 6, "report has 6 lines: %d", n);
    if (n != 6) {
        free(text);
        return;
    }
    check(strcmp(lines[0], "overlap report: models/lenet.cfg, 3 ranks x 2 workers, iterations "
                           "5..6, times in ms per iteration") == 0,
          "report title: %s", lines[0]);
    check(strcmp(lines[1], "rank  compute_ms     work_ms     comm_ms  exposed_ms  overlap     "
                           "idle_ms    images/s") == 0,
          "report header: %s", lines[1]);
    check(strcmp(lines[2], "0          0.010       0.013       0.010       0.005    0.500     "
                           "  0.015   2133333.3") == 0,
          "report rank 0: %s", lines[2]);
    check(strstr(lines[4], "    n/a  ") != NULL, "report rank 2 has no overlap: %s", lines[4]);
    check(strncmp(lines[5], "mean", 4) == 0 && strstr(lines[5], "  0.750  ") != NULL,
          "report mean overlap of ranks 0 and 1: %s", lines[5]);
    for (int i = 2; i < 6; i++)
        check(strlen(lines[i]) == strlen(lines[1]), "report row %d as wide as the header", i - 2);
    free(text);

    t.model[0] = '\0';
    f = fopen(path, "w");
    sc_trace_print_report(&t, o, f);
    fclose(f);
    text = slurp(path, NULL);
    check(strncmp(text, "overlap report: 3 ranks x 2 workers,", 36) == 0, "report without a model: %.40s", text);
    free(text);
}

static void test_svg(void)
{
    struct sc_trace_event ev[NEVENTS];
    struct sc_trace t = make_trace(ev);
    const char *path = path_of("trace.svg");
    int rc = sc_trace_write_svg(&t, path);
    check(rc == 0, "write %s: %d %s", path, rc, sc_last_error());
    char *text = slurp(path, NULL);
    check(strncmp(text, "<svg", 4) == 0 || strncmp(text, "<?xml", 5) == 0, "svg starts as one");
    expect_text(text, "</svg>\n", "svg");
    for (size_t i = 0; i < NEVENTS - 1; i++)
        expect_text(text, events[i].name, "svg");
    expect_text(text, "x&quot;y\\z&lt;&amp;&gt;?\xc3\xa9.fwd", "svg: escaped name");
    expect_text(text, ">r1 cpu1<", "svg lane label");
    expect_text(text, ">r1 comm<", "svg lane label");
    expect_text(text, ">r1 comm2<", "svg lane label");
    check(strstr(text, ">r0 comm2<") == NULL && strstr(text, ">r2 comm<") == NULL,
          "svg: transfer lanes only where needed");
    expect_text(text, "3 transfers", "svg: merged transfers");
    expect_text(text, ">bwd_filter</text>", "svg legend");
    expect_text(text, ">ms</text>", "svg axis");
    check(strchr(text, '\t') == NULL, "svg: no control character");
    free(text);

    t.n = 0;
    rc = sc_trace_write_svg(&t, path_of("empty.svg"));
    check(rc == 0, "svg of an empty trace: %d %s", rc, sc_last_error());
    t = make_trace(ev);
    rc = sc_trace_write_svg(&t, path_of("nodir/x.svg"));
    check(rc == SC_ERR_IO && strstr(sc_last_error(), "nodir/x.svg"), "svg into a missing directory: %d %s", rc,
          sc_last_error());
}

/* Where each rank's workers ran: written into otherData and as each
 * rank's process_labels, read back, and refused when malformed. */
/* A run with a CUDA worker: its lane is named "cuda 0" (StarPU numbers
 * CUDA workers first; the lanes keep CPU workers first), and otherData
 * says how many lanes are CUDA workers'. */
static void test_json_cuda(void)
{
    struct sc_trace_event ev[NEVENTS];
    struct sc_trace t = make_trace(ev), back;
    t.cuda_workers = 1;
    const char *path = path_of("trace_cuda.json");
    int rc = sc_trace_write_json(&t, path);
    check(rc == 0, "write %s: %d %s", path, rc, sc_last_error());
    char *text = slurp(path, NULL);
    expect_text(text,
                "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":0,"
                "\"args\":{\"name\":\"cpu 0\"}}",
                "json cuda: a CPU lane");
    expect_text(text,
                "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":1,"
                "\"args\":{\"name\":\"cuda 0\"}}",
                "json cuda: the CUDA lane");
    expect_text(text, "\"global_batch\":64,\"cuda_workers\":1,\"model\":", "json cuda: otherData");
    free(text);
    rc = sc_trace_read_json(path, &back);
    check(rc == 0, "read %s back: %d %s", path, rc, sc_last_error());
    if (rc)
        return;
    check(back.workers == 2 && back.cuda_workers == 1, "read back: %d workers, %d of them CUDA", back.workers,
          back.cuda_workers);
    sc_trace_free(&back);
}

static void test_placement(void)
{
    struct sc_trace_event ev[NEVENTS];
    struct sc_trace t = make_trace(ev), back;
    char(*where)[SC_TRACE_PLACEMENT_LEN] = calloc(3, sizeof *where);
    strcpy(where[0], "2 CPU workers on cores 0-1 (bound by the launcher to core 0; alone)");
    strcpy(where[1], "1 CPU worker on core 2 (bound by the launcher to core 2)");
    strcpy(where[2], "quote \" and backslash \\");
    t.placement = where;
    const char *path = path_of("placement.json");
    int rc = sc_trace_write_json(&t, path);
    check(rc == 0, "write with placement: %d %s", rc, sc_last_error());
    char *text = slurp(path, NULL);
    expect_text(text,
                "\"model\":\"models/lenet.cfg\",\"placement\":[\"2 CPU workers on cores 0-1 (bound by "
                "the launcher to core 0; alone)\",\"1 CPU worker on core 2",
                "json placement");
    expect_text(text,
                "{\"name\":\"process_labels\",\"ph\":\"M\",\"pid\":1,\"tid\":0,\"args\":{\"labels\":\"1 "
                "CPU worker on core 2 (bound by the launcher to core 2)\"}}",
                "json placement");
    free(text);
    rc = sc_trace_read_json(path, &back);
    check(rc == 0 && back.placement && !strcmp(back.placement[0], where[0]) && !strcmp(back.placement[1], where[1]) &&
              !strcmp(back.placement[2], where[2]),
          "placement read back: %d %s", rc, rc ? sc_last_error() : "");
    sc_trace_free(&back);
    check(back.placement == NULL, "sc_trace_free frees the placement");
    free(where);

    char buf[1024];
    snprintf(buf, sizeof buf,
             "{\"traceEvents\":[],\"otherData\":{\"ranks\":2,\"workers\":1,\"first_iteration\":0,"
             "\"last_iteration\":0,\"global_batch\":1,\"model\":\"\",\"placement\":[\"a\"]}}");
    expect_bad("placement of 1 rank of 2", buf, strlen(buf), "\"placement\"");
    snprintf(buf, sizeof buf,
             "{\"traceEvents\":[],\"otherData\":{\"ranks\":1,\"workers\":1,\"first_iteration\":0,"
             "\"last_iteration\":0,\"global_batch\":1,\"model\":\"\",\"placement\":[3]}}");
    expect_bad("placement not a string", buf, strlen(buf), "placement[0]");
}

int main(void)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/test_trace.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        perror(dir);
        return 1;
    }
    test_analyze();
    test_json();
    test_json_cuda();
    test_placement();
    test_reader_valid();
    test_reader_malformed();
    test_reader_mutations();
    test_report();
    test_svg();

    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (failures == 0 && system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    printf("%d passed, %d failed%s%s\n", passes, failures, failures ? "; files kept in " : "", failures ? dir : "");
    return failures ? 1 : 0;
}
