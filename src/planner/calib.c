/* A calibration in memory and in its text file (calib.h). */
#include "src/planner/calib.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/atomic_file.h"
#include "base/records.h"
#include "base/error.h"

/* A calibration is a few hundred lines; anything this large is the wrong
 * file, and refusing it early keeps a mistaken path from eating memory. */
#define CALIB_MAX_BYTES (16 * 1024 * 1024)
#define CALIB_MAGIC     "starconv-calibration"
#define CALIB_VERSION   1

int sc_calib_new(struct sc_calib **out)
{
    if (!out)
        return sc_error(SC_ERR_ARG, "sc_calib_new: out is NULL");
    struct sc_calib *c = calloc(1, sizeof *c);
    if (!(*out = c))
        return sc_error(SC_ERR_NOMEM, "out of memory for a calibration");
    c->p2p_alpha = c->p2p_beta = -1;
    c->p2p_node_alpha = c->p2p_node_beta = -1;
    c->busy = c->load = c->rowcopy = -1;
    return 0;
}

void sc_calib_free(struct sc_calib *c)
{
    if (!c)
        return;
    free(c->kernels);
    free(c->allreduce);
    free(c);
}

/* ---- the records in memory ---- */

static int valid_time(double v)
{
    return isfinite(v) && v >= 0;
}

/* A key the file can hold: not empty, short enough, on one line, without
 * the comment character, not starting or ending with a blank (the loader
 * trims them). */
static int valid_key(const char *key)
{
    size_t n = strlen(key);
    if (n == 0 || n >= SC_CALIB_KEY_LEN || key[0] == ' ' || key[n - 1] == ' ')
        return 0;
    for (size_t i = 0; i < n; i++)
        if (key[i] == '#' || (unsigned char)key[i] < ' ')
            return 0;
    return 1;
}

const struct sc_calib_kernel *sc_calib_find(const struct sc_calib *c, const char *key)
{
    /* Linear: a calibration holds a few hundred kernels. */
    for (int i = 0; c && key && i < c->nkernels; i++)
        if (!strcmp(c->kernels[i].key, key))
            return &c->kernels[i];
    return NULL;
}

int sc_calib_add_kernel(struct sc_calib *c, const char *key, double fwd, double bwd_data, double bwd_filter)
{
    if (!c || !key || !valid_key(key))
        return sc_error(SC_ERR_ARG, "sc_calib_add_kernel: bad key '%s' (1 to %d characters, no '#')",
                        key ? key : "(null)", SC_CALIB_KEY_LEN - 1);
    if (!valid_time(fwd) || !valid_time(bwd_data) || !valid_time(bwd_filter))
        return sc_error(SC_ERR_ARG, "sc_calib_add_kernel: %s: times must be finite and >= 0 (%g %g %g)", key, fwd,
                        bwd_data, bwd_filter);
    struct sc_calib_kernel *k = (struct sc_calib_kernel *)sc_calib_find(c, key);
    if (!k) {
        if (c->nkernels == c->cap_kernels) {
            int cap = c->cap_kernels ? 2 * c->cap_kernels : 64;
            struct sc_calib_kernel *p = realloc(c->kernels, (size_t)cap * sizeof *p);
            if (!p)
                return sc_error(SC_ERR_NOMEM, "out of memory for a calibration's kernels");
            c->kernels = p;
            c->cap_kernels = cap;
        }
        k = &c->kernels[c->nkernels++];
        snprintf(k->key, sizeof k->key, "%s", key);
    }
    k->fwd = fwd;
    k->bwd_data = bwd_data;
    k->bwd_filter = bwd_filter;
    return 0;
}

/* The first point of c->allreduce not before (group, bytes). */
static int point_at(const struct sc_calib *c, int group, double bytes)
{
    int i = 0;
    while (i < c->npoints &&
           (c->allreduce[i].group < group || (c->allreduce[i].group == group && c->allreduce[i].bytes < bytes)))
        i++;
    return i;
}

int sc_calib_add_allreduce(struct sc_calib *c, int group, double bytes, double seconds)
{
    if (!c || group < 1 || !valid_time(bytes) || !valid_time(seconds))
        return sc_error(SC_ERR_ARG, "sc_calib_add_allreduce: bad point (group %d, %g bytes, %g s)", group, bytes,
                        seconds);
    int i = point_at(c, group, bytes);
    if (i < c->npoints && c->allreduce[i].group == group && c->allreduce[i].bytes == bytes) {
        c->allreduce[i].seconds = seconds;
        return 0;
    }
    if (c->npoints == c->cap_points) {
        int cap = c->cap_points ? 2 * c->cap_points : 16;
        struct sc_calib_point *p = realloc(c->allreduce, (size_t)cap * sizeof *p);
        if (!p)
            return sc_error(SC_ERR_NOMEM, "out of memory for a calibration's allreduce times");
        c->allreduce = p;
        c->cap_points = cap;
    }
    memmove(&c->allreduce[i + 1], &c->allreduce[i], (size_t)(c->npoints - i) * sizeof *c->allreduce);
    c->allreduce[i] = (struct sc_calib_point){group, bytes, seconds};
    c->npoints++;
    return 0;
}

double sc_calib_allreduce(const struct sc_calib *c, int group, double bytes)
{
    if (group <= 1)
        return 0;
    if (!c)
        return -1;
    int lo = point_at(c, group, -1), hi = lo;
    while (hi < c->npoints && c->allreduce[hi].group == group)
        hi++;
    if (hi == lo)
        return -1;
    const struct sc_calib_point *p = &c->allreduce[lo];
    int n = hi - lo;
    if (bytes <= p[0].bytes || n == 1)
        return p[0].seconds; /* one point: no slope to follow */
    int i = 1;
    while (i < n - 1 && p[i].bytes < bytes)
        i++;
    /* p[i-1] and p[i] around bytes, or the last two beyond the largest:
     * along their line, whose slope, beyond the largest, is kept >= 0 so
     * that noise between the last two points never predicts a larger
     * vector to be faster. */
    double slope = (p[i].seconds - p[i - 1].seconds) / (p[i].bytes - p[i - 1].bytes);
    if (bytes > p[i].bytes && slope < 0)
        slope = 0;
    return p[i].seconds + slope * (bytes - p[i].bytes);
}

void sc_calib_kernel_key(const struct sc_layer_work *w, char *key, size_t len)
{
    if (!len)
        return;
    switch (w->kind) {
    case SC_WORK_CONV: {
        const struct sc_conv_args *a = &w->conv;
        snprintf(key, len, "conv n=%d c=%d h=%d w=%d f=%d k=%dx%d s=%dx%d p=%dx%d o=%dx%d", a->n, a->c, a->h, a->w,
                 a->f, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw, a->oh, a->ow);
        break;
    }
    case SC_WORK_POOL: {
        const struct sc_pool_args *a = &w->pool;
        snprintf(key, len, "%s n=%d c=%d h=%d w=%d k=%dx%d s=%dx%d p=%dx%d o=%dx%d", a->max ? "maxpool" : "avgpool",
                 a->n, a->c, a->h, a->w, a->kh, a->kw, a->sh, a->sw, a->ph, a->pw, a->oh, a->ow);
        break;
    }
    case SC_WORK_FC:
        snprintf(key, len, "fc n=%d in=%d out=%d", w->fc.n, w->fc.in, w->fc.out);
        break;
    default:
        key[0] = '\0';
    }
}

/* ---- the file ---- */

/* Numbers as the loader reads them back: 9 digits keep times to a part in
 * a billion; bytes are integers, written whole. */
static int write_body(FILE *fp, const void *ctx)
{
    const struct sc_calib *c = ctx;
    fprintf(fp, "# made by starconv-plan calibrate; see src/planner/calib.h\n%s %d\n", CALIB_MAGIC, CALIB_VERSION);
    if (c->machine[0]) {
        fputs("machine ", fp);
        for (const char *s = c->machine; *s; s++) /* what would end the line or the record early */
            fputc(*s == '#' || (unsigned char)*s < ' ' ? ' ' : *s, fp);
        fputc('\n', fp);
    }
    if (c->cores > 0)
        fprintf(fp, "cores %d\n", c->cores);
    if (c->workers > 0)
        fprintf(fp, "workers %d\n", c->workers);
    if (c->p2p_alpha >= 0)
        fprintf(fp, "p2p %.9g %.9g\n", c->p2p_alpha, c->p2p_beta);
    if (c->ranks_per_node > 0)
        fprintf(fp, "node %d %.9g %.9g\n", c->ranks_per_node, c->p2p_node_alpha, c->p2p_node_beta);
    if (c->busy >= 0)
        fprintf(fp, "busy %.9g\n", c->busy);
    if (c->load >= 0)
        fprintf(fp, "load %.9g\n", c->load);
    if (c->rowcopy >= 0)
        fprintf(fp, "rowcopy %.9g\n", c->rowcopy);
    if (c->task > 0)
        fprintf(fp, "task %.9g\n", c->task);
    if (c->stream > 0)
        fprintf(fp, "stream %.9g\n", c->stream);
    for (int i = 0; i < c->npoints; i++)
        fprintf(fp, "allreduce %d %.17g %.9g\n", c->allreduce[i].group, c->allreduce[i].bytes, c->allreduce[i].seconds);
    for (int i = 0; i < c->nkernels; i++)
        fprintf(fp, "kernel %.9g %.9g %.9g %s\n", c->kernels[i].fwd, c->kernels[i].bwd_data, c->kernels[i].bwd_filter,
                c->kernels[i].key);
    return 0; /* write errors: ferror, in sc_write_atomic */
}

int sc_calib_save(const struct sc_calib *c, const char *path)
{
    if (!c || !path)
        return sc_error(SC_ERR_ARG, "sc_calib_save: %s is NULL", c ? "path" : "the calibration");
    /* What the loader would refuse is refused here, so that a file written
     * is a file that loads. */
    if ((c->p2p_alpha >= 0 && !valid_time(c->p2p_beta)) || isnan(c->p2p_alpha) || isinf(c->p2p_alpha) ||
        !isfinite(c->task) || !isfinite(c->stream) || isnan(c->busy) || isinf(c->busy) || isnan(c->load) ||
        isinf(c->load) || isnan(c->rowcopy) || isinf(c->rowcopy))
        return sc_error(SC_ERR_ARG,
                        "%s: not saved: a time of the calibration is not finite (p2p %g %g, task %g, "
                        "stream %g)",
                        path, c->p2p_alpha, c->p2p_beta, c->task, c->stream);
    if (c->ranks_per_node < 0 ||
        (c->ranks_per_node > 0 && (!valid_time(c->p2p_node_alpha) || !valid_time(c->p2p_node_beta))))
        return sc_error(SC_ERR_ARG,
                        "%s: not saved: %d ranks per node with the within-node link %g %g (ranks per node "
                        ">= 1 with a finite link >= 0, or 0 for one level)",
                        path, c->ranks_per_node, c->p2p_node_alpha, c->p2p_node_beta);
    return sc_write_atomic(path, write_body, c);
}

struct parser {
    const char *path;
    int line;
    struct sc_calib *c;
    int seen[11]; /* the line of each one-off record (index: record_names) */
};

static const char *const record_names[11] = {CALIB_MAGIC, "machine", "cores", "workers", "p2p",    "task",
                                             "stream",    "node",    "busy",  "load",    "rowcopy"};

__attribute__((format(printf, 2, 3))) static int bad(const struct parser *ps, const char *fmt, ...)
{
    char what[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return sc_error(SC_ERR_PARSE, "%s:%d: %s", ps->path, ps->line, what);
}

/* The rest of the line, trimmed, each run of blanks made one space (keys
 * then match however the file was edited), in place. */
static char *rest_of_line(char *p)
{
    char *out = p, *w = p;
    while (sc_records_blank(*p))
        p++;
    while (*p) {
        if (sc_records_blank(*p)) {
            while (sc_records_blank(*p))
                p++;
            if (*p)
                *w++ = ' ';
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
    return out;
}

/* n numbers of record rec into v: finite, >= 0, and whole where is_int
 * (then 1 to INT_MAX); then nothing more unless more_ok. */
static int numbers(const struct parser *ps, char **p, const char *rec, const char *what, int n, double *v, int is_int,
                   int more_ok)
{
    for (int i = 0; i < n; i++) {
        char *f = sc_records_field(p), *end;
        if (!f)
            return bad(ps, "'%s' takes %s", rec, what);
        errno = 0;
        if (is_int) {
            long x = strtol(f, &end, 10);
            if (*end || errno || x < 1 || x > INT_MAX)
                return bad(ps, "'%s': '%s' is not a whole number >= 1 (%s)", rec, f, what);
            v[i] = (double)x;
        } else {
            v[i] = strtod(f, &end);
            if (*end || end == f)
                return bad(ps, "'%s': '%s' is not a number (%s)", rec, f, what);
            if (!isfinite(v[i]) || v[i] < 0 || signbit(v[i]))
                return bad(ps, "'%s': '%s' must be finite and >= 0", rec, f);
        }
    }
    if (!more_ok && **p) {
        char *extra = sc_records_field(p);
        if (extra)
            return bad(ps, "'%s' takes %s; '%s' is one field too many", rec, what, extra);
    }
    return 0;
}

/* A record that may appear once: its index in record_names, after the
 * check that it has not appeared before. */
static int once(struct parser *ps, int idx)
{
    if (ps->seen[idx])
        return bad(ps, "a second '%s' record (the first is on line %d)", record_names[idx], ps->seen[idx]);
    ps->seen[idx] = ps->line;
    return 0;
}

static int parse_kernel(struct parser *ps, char *p)
{
    double v[3];
    int err = numbers(ps, &p, "kernel", "3 times (fwd bwd_data bwd_filter s) and a key", 3, v, 0, 1);
    if (err)
        return err;
    char *key = rest_of_line(p);
    if (!*key)
        return bad(ps, "'kernel' takes 3 times (fwd bwd_data bwd_filter s) and a key; the key is missing");
    if (strlen(key) >= SC_CALIB_KEY_LEN)
        return bad(ps, "kernel key of %zu characters (at most %d): '%.40s...'", strlen(key), SC_CALIB_KEY_LEN - 1, key);
    if (!valid_key(key))
        return bad(ps, "a kernel key with a control character");
    if (sc_calib_find(ps->c, key))
        return bad(ps, "a second kernel record for '%s'", key);
    return sc_calib_add_kernel(ps->c, key, v[0], v[1], v[2]);
}

static int parse_allreduce(struct parser *ps, char *p)
{
    double g, v[2];
    const char *what = "a group size, bytes and seconds";
    int err = numbers(ps, &p, "allreduce", what, 1, &g, 1, 1);
    if (!err)
        err = numbers(ps, &p, "allreduce", what, 2, v, 0, 0);
    if (err)
        return err;
    int i = point_at(ps->c, (int)g, v[0]);
    if (i < ps->c->npoints && ps->c->allreduce[i].group == (int)g && ps->c->allreduce[i].bytes == v[0])
        return bad(ps, "a second allreduce record for group %d at %.17g bytes", (int)g, v[0]);
    return sc_calib_add_allreduce(ps->c, (int)g, v[0], v[1]);
}

/* One line without its comment. */
static int parse_line(struct parser *ps, char *p)
{
    struct sc_calib *c = ps->c;
    char *rec = sc_records_field(&p);
    double v[2];
    int err;
    if (!rec)
        return 0;
    if (!ps->seen[0]) {
        if (strcmp(rec, CALIB_MAGIC))
            return bad(ps, "not a starconv calibration: '%s %d' must come first, not '%s'", CALIB_MAGIC, CALIB_VERSION,
                       rec);
        char *ver = sc_records_field(&p), *extra = sc_records_field(&p);
        if (!ver || extra)
            return bad(ps, "'%s' takes a version number", CALIB_MAGIC);
        if (strcmp(ver, "1"))
            return bad(ps, "calibration version '%s'; this starconv reads version %d (calibrate again)", ver,
                       CALIB_VERSION);
        ps->seen[0] = ps->line;
        return 0;
    }
    if (!strcmp(rec, CALIB_MAGIC))
        return once(ps, 0);
    if (!strcmp(rec, "machine")) {
        char *text = rest_of_line(p);
        if (strlen(text) >= sizeof c->machine)
            return bad(ps, "machine text of %zu characters (at most %zu)", strlen(text), sizeof c->machine - 1);
        if ((err = once(ps, 1)))
            return err;
        snprintf(c->machine, sizeof c->machine, "%s", text);
        return 0;
    }
    if (!strcmp(rec, "cores") || !strcmp(rec, "workers")) {
        int is_cores = rec[0] == 'c';
        if ((err = numbers(ps, &p, rec, "a count >= 1", 1, v, 1, 0)) || (err = once(ps, is_cores ? 2 : 3)))
            return err;
        *(is_cores ? &c->cores : &c->workers) = (int)v[0];
        return 0;
    }
    if (!strcmp(rec, "p2p")) {
        if ((err = numbers(ps, &p, rec, "2 numbers (alpha s, beta s/byte)", 2, v, 0, 0)) || (err = once(ps, 4)))
            return err;
        c->p2p_alpha = v[0];
        c->p2p_beta = v[1];
        return 0;
    }
    /* The optional records of one time each, in record_names from 8. */
    double *const times[] = {&c->busy, &c->load, &c->rowcopy};
    for (int i = 0; i < 3; i++)
        if (!strcmp(rec, record_names[8 + i])) {
            if ((err = numbers(ps, &p, rec, "1 number (s)", 1, v, 0, 0)) || (err = once(ps, 8 + i)))
                return err;
            *times[i] = v[0];
            return 0;
        }
    if (!strcmp(rec, "task") || !strcmp(rec, "stream")) {
        int is_task = rec[0] == 't';
        if ((err = numbers(ps, &p, rec, is_task ? "1 number (s)" : "1 number (bytes/s)", 1, v, 0, 0)) ||
            (err = once(ps, is_task ? 5 : 6)))
            return err;
        *(is_task ? &c->task : &c->stream) = v[0];
        return 0;
    }
    if (!strcmp(rec, "node")) {
        const char *what = "ranks per node and 2 numbers (alpha s, beta s/byte)";
        double n;
        if ((err = numbers(ps, &p, rec, what, 1, &n, 1, 1)) || (err = numbers(ps, &p, rec, what, 2, v, 0, 0)) ||
            (err = once(ps, 7)))
            return err;
        c->ranks_per_node = (int)n;
        c->p2p_node_alpha = v[0];
        c->p2p_node_beta = v[1];
        return 0;
    }
    if (!strcmp(rec, "allreduce"))
        return parse_allreduce(ps, p);
    if (!strcmp(rec, "kernel"))
        return parse_kernel(ps, p);
    return bad(ps,
               "unknown record '%s' (machine, cores, workers, p2p, node, busy, load, rowcopy, task, stream, allreduce, "
               "kernel)",
               rec);
}

static int on_line(void *ctx, int number, char *text)
{
    struct parser *ps = ctx;
    ps->line = number;
    return parse_line(ps, text);
}

int sc_calib_load(const char *path, struct sc_calib **out)
{
    if (!out)
        return sc_error(SC_ERR_ARG, "sc_calib_load: out is NULL");
    *out = NULL;
    if (!path)
        return sc_error(SC_ERR_ARG, "sc_calib_load: path is NULL");
    char *buf = NULL;
    size_t n = 0;
    struct sc_calib *c;
    int err = sc_records_read(path, "calibration", CALIB_MAX_BYTES, &buf, &n);
    if (err)
        return err;
    if (!(err = sc_calib_new(&c))) {
        struct parser ps = {.path = path, .c = c};
        int lines;
        err = sc_records_lines(buf, n, path, on_line, &ps, &lines);
        if (!err && !ps.seen[0]) {
            ps.line = lines ? lines : 1;
            err = bad(&ps, "not a starconv calibration: no '%s %d' line", CALIB_MAGIC, CALIB_VERSION);
        }
        if (err) {
            sc_calib_free(c);
            c = NULL;
        }
    }
    free(buf);
    *out = c;
    return err;
}
