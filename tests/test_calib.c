/* Calibrations (src/planner/calib.h): the kernel keys, lookup and replacement,
 * the allreduce interpolation, the file's round trip, and the malformed
 * files the loader must refuse with the line that is wrong.  No StarPU,
 * no MPI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"
#include "src/planner/calib.h"

#include "check.h"

static int close_to(double a, double b)
{
    return fabs(a - b) <= 1e-8 * fabs(b) + 1e-300;
}

/* A temporary file holding len bytes of text; its path in path. */
static int write_temp(char *path, const char *text, size_t len)
{
    strcpy(path, "/tmp/test_calib.XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    int ok = write(fd, text, len) == (ssize_t)len;
    close(fd);
    return ok ? 0 : -1;
}

static void keys(void)
{
    struct sc_layer_work w;
    char key[SC_CALIB_KEY_LEN];
    memset(&w, 0, sizeof w);
    w.kind = SC_WORK_CONV;
    w.conv = (struct sc_conv_args){2, 64, 8, 8, 64, 3, 3, 1, 1, 1, 1, 8, 8, 0, 0};
    sc_calib_kernel_key(&w, key, sizeof key);
    check(!strcmp(key, "conv n=2 c=64 h=8 w=8 f=64 k=3x3 s=1x1 p=1x1 o=8x8"), "conv key: %s", key);
    char again[SC_CALIB_KEY_LEN];
    w.conv.relu = w.conv.nobias = 1;
    sc_calib_kernel_key(&w, again, sizeof again);
    check(!strcmp(key, again), "relu and nobias are not in the key: %s", again);

    memset(&w, 0, sizeof w);
    w.kind = SC_WORK_POOL;
    w.pool = (struct sc_pool_args){4, 16, 28, 28, 2, 2, 2, 2, 0, 0, 14, 14, 1, 0};
    sc_calib_kernel_key(&w, key, sizeof key);
    check(!strcmp(key, "maxpool n=4 c=16 h=28 w=28 k=2x2 s=2x2 p=0x0 o=14x14"), "max pooling key: %s", key);
    w.pool.max = 0;
    sc_calib_kernel_key(&w, key, sizeof key);
    check(!strcmp(key, "avgpool n=4 c=16 h=28 w=28 k=2x2 s=2x2 p=0x0 o=14x14"), "average pooling key: %s", key);

    memset(&w, 0, sizeof w);
    w.kind = SC_WORK_FC;
    w.fc = (struct sc_fc_args){32, 800, 500, 1};
    sc_calib_kernel_key(&w, key, sizeof key);
    check(!strcmp(key, "fc n=32 in=800 out=500"), "fully connected key: %s", key);

    memset(&w, 0, sizeof w);
    w.kind = SC_WORK_STREAM;
    strcpy(key, "x");
    sc_calib_kernel_key(&w, key, sizeof key);
    check(key[0] == '\0', "a streaming layer's key is empty");
}

static void kernels(void)
{
    struct sc_calib *c;
    check(sc_calib_new(&c) == 0 && c->p2p_alpha < 0 && c->nkernels == 0 && c->npoints == 0 && c->ranks_per_node == 0 &&
              c->p2p_node_alpha < 0 && c->p2p_node_beta < 0 && c->busy < 0 && c->load < 0 && c->rowcopy < 0,
          "a new calibration holds nothing, p2p not measured, one level");
    check(sc_calib_find(c, "fc n=1 in=2 out=3") == NULL, "nothing found in an empty calibration");
    char key[32];
    for (int i = 0; i < 300; i++) { /* past the first growths */
        snprintf(key, sizeof key, "fc n=%d in=10 out=10", i);
        sc_calib_add_kernel(c, key, i * 1e-6, i * 2e-6, i * 3e-6);
    }
    const struct sc_calib_kernel *k = sc_calib_find(c, "fc n=123 in=10 out=10");
    check(c->nkernels == 300 && k && close_to(k->fwd, 123e-6) && close_to(k->bwd_data, 246e-6) &&
              close_to(k->bwd_filter, 369e-6),
          "300 kernels added, each found with its times");
    int rc = sc_calib_add_kernel(c, "fc n=123 in=10 out=10", 1, 2, 0);
    k = sc_calib_find(c, "fc n=123 in=10 out=10");
    check(rc == 0 && c->nkernels == 300 && k && k->fwd == 1 && k->bwd_data == 2 && k->bwd_filter == 0,
          "adding a key again replaces its times");
    check(sc_calib_find(c, "fc n=123 in=10") == NULL && sc_calib_find(c, "") == NULL,
          "a prefix of a key and the empty key are not found");
    rc = sc_calib_add_kernel(c, "", 1, 1, 1);
    check(rc == SC_ERR_ARG, "an empty key is refused: %s", sc_last_error());
    rc = sc_calib_add_kernel(c, "conv # x", 1, 1, 1);
    check(rc == SC_ERR_ARG, "a key with '#' is refused: %s", sc_last_error());
    char longkey[SC_CALIB_KEY_LEN + 1];
    memset(longkey, 'k', SC_CALIB_KEY_LEN);
    longkey[SC_CALIB_KEY_LEN] = '\0';
    rc = sc_calib_add_kernel(c, longkey, 1, 1, 1);
    check(rc == SC_ERR_ARG, "a key of %d characters is refused: %s", SC_CALIB_KEY_LEN, sc_last_error());
    rc = sc_calib_add_kernel(c, "fc n=1 in=1 out=1", NAN, 1, 1);
    check(rc == SC_ERR_ARG && c->nkernels == 300, "a NaN time is refused: %s", sc_last_error());
    rc = sc_calib_add_kernel(c, "fc n=1 in=1 out=1", 1, -1, 1);
    check(rc == SC_ERR_ARG && c->nkernels == 300, "a negative time is refused: %s", sc_last_error());
    sc_calib_free(c);
    sc_calib_free(NULL);
}

static void allreduce(void)
{
    struct sc_calib *c;
    sc_calib_new(&c);
    check(sc_calib_allreduce(c, 2, 4096) < 0, "no points: not measured");
    /* Out of order, to test the sorting. */
    sc_calib_add_allreduce(c, 2, 1 << 20, 1e-3);
    sc_calib_add_allreduce(c, 4, 4096, 7e-4);
    sc_calib_add_allreduce(c, 2, 4096, 1e-4);
    sc_calib_add_allreduce(c, 2, 8 << 20, 5e-3);
    sc_calib_add_allreduce(c, 2, 64 << 10, 2e-4);
    sc_calib_add_allreduce(c, 8, 4096, 9e-4);
    sc_calib_add_allreduce(c, 8, 64 << 10, 8e-4); /* noise: larger and faster */
    int sorted = c->npoints == 7;
    for (int i = 1; i < c->npoints; i++)
        sorted &=
            c->allreduce[i - 1].group < c->allreduce[i].group ||
            (c->allreduce[i - 1].group == c->allreduce[i].group && c->allreduce[i - 1].bytes < c->allreduce[i].bytes);
    check(sorted, "points sorted by group, then bytes");
    sc_calib_add_allreduce(c, 2, 64 << 10, 3e-4);
    check(c->npoints == 7 && sc_calib_allreduce(c, 2, 64 << 10) == 3e-4, "adding a point again replaces it");
    sc_calib_add_allreduce(c, 2, 64 << 10, 2e-4);

    check(close_to(sc_calib_allreduce(c, 2, 4096), 1e-4), "at a point: its time");
    check(close_to(sc_calib_allreduce(c, 2, (4096 + 65536) / 2.0), 1.5e-4), "halfway between two points: %g",
          sc_calib_allreduce(c, 2, (4096 + 65536) / 2.0));
    double want = 1e-3 + (3 << 20) * (4e-3 / (7 << 20));
    check(close_to(sc_calib_allreduce(c, 2, 4 << 20), want), "between 1 and 8 MiB: %g, expected %g",
          sc_calib_allreduce(c, 2, 4 << 20), want);
    want = 5e-3 + (8 << 20) * (4e-3 / (7 << 20));
    check(close_to(sc_calib_allreduce(c, 2, 16 << 20), want),
          "beyond the largest, along the last slope: %g, "
          "expected %g",
          sc_calib_allreduce(c, 2, 16 << 20), want);
    check(sc_calib_allreduce(c, 2, 100) == 1e-4 && sc_calib_allreduce(c, 2, 0) == 1e-4,
          "below the smallest: the smallest's time");
    check(sc_calib_allreduce(c, 1, 1 << 20) == 0 && sc_calib_allreduce(c, 0, 1 << 20) == 0, "one rank: 0");
    check(sc_calib_allreduce(c, 3, 4096) < 0 && sc_calib_allreduce(c, 16, 4096) < 0, "a group size not measured: < 0");
    check(sc_calib_allreduce(c, 4, 1 << 20) == 7e-4 && sc_calib_allreduce(c, 4, 1) == 7e-4,
          "one point: its time at any size");
    check(sc_calib_allreduce(c, 8, 1 << 20) == 8e-4, "a falling last slope is not followed beyond the largest");
    check(close_to(sc_calib_allreduce(c, 8, 34816), 8.5e-4), "but is between its points: %g",
          sc_calib_allreduce(c, 8, 34816));
    check(sc_calib_add_allreduce(c, 0, 4096, 1) == SC_ERR_ARG && sc_calib_add_allreduce(c, 2, -1, 1) == SC_ERR_ARG &&
              sc_calib_add_allreduce(c, 2, 4096, INFINITY) == SC_ERR_ARG && c->npoints == 7,
          "bad points refused: %s", sc_last_error());
    sc_calib_free(c);
}

static void round_trip(void)
{
    struct sc_calib *c, *d = NULL;
    sc_calib_new(&c);
    snprintf(c->machine, sizeof c->machine, "AMD EPYC 7B13 #1, 2 cores");
    c->cores = 2;
    c->workers = 1;
    c->p2p_alpha = 2.5e-5;
    c->p2p_beta = 1.0 / 3e9;
    c->task = 1.234567891e-5;
    c->stream = 9.87654321e9;
    c->ranks_per_node = 4;
    c->p2p_node_alpha = 5e-6;
    c->p2p_node_beta = 1.0 / 32e9;
    c->busy = 9.87e-3;
    c->load = 3.5e-9;
    c->rowcopy = 4.5e-9;
    sc_calib_add_allreduce(c, 2, 4096, 1.1e-4);
    sc_calib_add_allreduce(c, 2, 8 << 20, 4.4e-3);
    sc_calib_add_allreduce(c, 4, 65536, 2.2e-4);
    sc_calib_add_kernel(c, "conv n=2 c=64 h=8 w=8 f=64 k=3x3 s=1x1 p=1x1 o=8x8", 1.0 / 3, 2.0 / 3, 1e-7);
    sc_calib_add_kernel(c, "maxpool n=4 c=16 h=28 w=28 k=2x2 s=2x2 p=0x0 o=14x14", 3.3e-5, 4.4e-5, 0);
    sc_calib_add_kernel(c, "fc n=32 in=800 out=500", 0, 0, 0);
    char path[64];
    if (write_temp(path, "", 0)) {
        check(0, "cannot make a temporary file");
        return;
    }
    int rc = sc_calib_save(c, path);
    check(rc == 0, "saved: %s", rc ? sc_last_error() : path);
    rc = sc_calib_load(path, &d);
    check(rc == 0 && d, "loaded back: %s", rc ? sc_last_error() : "");
    if (!d) {
        unlink(path);
        sc_calib_free(c);
        return;
    }
    check(!strcmp(d->machine, "AMD EPYC 7B13 1, 2 cores"), "machine, its '#' saved as a space: %s", d->machine);
    check(d->cores == 2 && d->workers == 1, "cores and workers");
    check(close_to(d->p2p_alpha, c->p2p_alpha) && close_to(d->p2p_beta, c->p2p_beta) && close_to(d->task, c->task) &&
              close_to(d->stream, c->stream),
          "p2p, task and stream");
    check(d->ranks_per_node == 4 && close_to(d->p2p_node_alpha, 5e-6) && close_to(d->p2p_node_beta, 1.0 / 32e9),
          "node: %d ranks per node, within-node link %g %g", d->ranks_per_node, d->p2p_node_alpha, d->p2p_node_beta);
    check(close_to(d->busy, 9.87e-3) && close_to(d->load, 3.5e-9) && close_to(d->rowcopy, 4.5e-9),
          "busy %g, load %g, rowcopy %g", d->busy, d->load, d->rowcopy);
    int same = d->npoints == c->npoints;
    for (int i = 0; same && i < c->npoints; i++)
        same = d->allreduce[i].group == c->allreduce[i].group && d->allreduce[i].bytes == c->allreduce[i].bytes &&
               close_to(d->allreduce[i].seconds, c->allreduce[i].seconds);
    check(same, "allreduce points");
    same = d->nkernels == c->nkernels;
    for (int i = 0; same && i < c->nkernels; i++) {
        const struct sc_calib_kernel *k = sc_calib_find(d, c->kernels[i].key);
        same = k && close_to(k->fwd, c->kernels[i].fwd) && close_to(k->bwd_data, c->kernels[i].bwd_data) &&
               close_to(k->bwd_filter, c->kernels[i].bwd_filter);
    }
    check(same, "kernels, their keys with spaces");
    sc_calib_free(d);
    d = NULL;

    /* Nothing measured: nothing but the version line, and it loads as new. */
    struct sc_calib *e;
    sc_calib_new(&e);
    rc = sc_calib_save(e, path);
    if (!rc)
        rc = sc_calib_load(path, &d);
    check(rc == 0 && d && d->p2p_alpha < 0 && d->p2p_beta < 0 && d->cores == 0 && d->workers == 0 && d->task == 0 &&
              d->stream == 0 && d->nkernels == 0 && d->npoints == 0 && !d->machine[0] && d->ranks_per_node == 0 &&
              d->p2p_node_alpha < 0 && d->p2p_node_beta < 0,
          "an empty calibration round trip: %s", rc ? sc_last_error() : "ok");
    sc_calib_free(d);
    /* One level: no node record is written (and none is read back). */
    FILE *f = fopen(path, "r");
    char text[4096] = "";
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    check(n > 0 && !strstr(text, "node"), "one level: no node record");
    e->ranks_per_node = 2;
    e->p2p_node_alpha = 1e-6;
    rc = sc_calib_save(e, path);
    check(rc == SC_ERR_ARG, "ranks per node without a within-node link is not saved: %s", sc_last_error());
    e->ranks_per_node = 0;
    e->task = NAN;
    rc = sc_calib_save(e, path);
    check(rc == SC_ERR_ARG, "a NaN is not saved: %s", sc_last_error());
    sc_calib_free(e);
    unlink(path);
    sc_calib_free(c);
}

/* What a hand-edited file may look like. */
static void tolerated(void)
{
    const char *text = "# made by hand\r\n"
                       "\n"
                       "   starconv-calibration\t1   # version\r\n"
                       "kernel 1e-3 2e-3 0\t  fc   n=2\tin=3 out=4   # the key's blanks\r\n"
                       "allreduce 2 4096 0.0001\n"
                       "machine   a  b  \n"
                       "p2p 0 0\n"
                       "node\t2  1e-6 2e-10 # two per node\n"
                       "busy 0.009\n"
                       "load 2e-9\n"
                       "rowcopy 5e-9\n"
                       "cores 2"; /* no final newline */
    char path[64];
    struct sc_calib *c = NULL;
    if (write_temp(path, text, strlen(text))) {
        check(0, "cannot make a temporary file");
        return;
    }
    int rc = sc_calib_load(path, &c);
    check(rc == 0 && c, "comments, blank lines, CRLF, tabs and records in any order: %s", rc ? sc_last_error() : "ok");
    if (c) {
        const struct sc_calib_kernel *k = sc_calib_find(c, "fc n=2 in=3 out=4");
        check(k && k->fwd == 1e-3 && k->bwd_data == 2e-3, "a key's blanks read as single spaces");
        check(!strcmp(c->machine, "a b") && c->cores == 2 && c->p2p_alpha == 0 && c->npoints == 1,
              "the other records: machine '%s'", c->machine);
        check(c->ranks_per_node == 2 && c->p2p_node_alpha == 1e-6 && c->p2p_node_beta == 2e-10, "node record");
        check(c->busy == 0.009 && c->load == 2e-9 && c->rowcopy == 5e-9, "busy, load and rowcopy records: %g %g %g",
              c->busy, c->load, c->rowcopy);
    }
    sc_calib_free(c);
    unlink(path);
}

struct bad_file {
    const char *text;
    int line;
    const char *what; /* a piece of the message */
};

#define V "starconv-calibration 1\n"

static void malformed(void)
{
    static char long_key[300], long_machine[300];
    snprintf(long_key, sizeof long_key, V "kernel 1 2 3 conv %0*d\n", SC_CALIB_KEY_LEN, 0);
    snprintf(long_machine, sizeof long_machine, V "machine %0*d\n", 200, 0);
    const struct bad_file cases[] = {
        {"", 1, "no 'starconv-calibration 1'"},
        {"# a comment\n\n", 2, "no 'starconv-calibration 1'"},
        {"cores 2\n" V, 1, "must come first"},
        {"starconv-calibration 2\n", 1, "version '2'"},
        {"starconv-calibration\n", 1, "version"},
        {"starconv-calibration 1 1\n", 1, "version"},
        {"# c\n" V "cores 2\nbogus 1\n", 4, "unknown record 'bogus'"},
        {V "cores\n", 2, "'cores' takes"},
        {V "cores 2 3\n", 2, "one field too many"},
        {V "cores two\n", 2, "'two' is not a whole number"},
        {V "cores 0\n", 2, "not a whole number >= 1"},
        {V "workers 1.5\n", 2, "not a whole number"},
        {V "task -1e-5\n", 2, "must be finite and >= 0"},
        {V "task -0\n", 2, "must be finite and >= 0"},
        {V "task nan\n", 2, "must be finite"},
        {V "stream inf\n", 2, "must be finite"},
        {V "task 1e-5x\n", 2, "'1e-5x' is not a number"},
        {V "task 1e999\n", 2, "must be finite"},
        {V "p2p 1e-5\n", 2, "'p2p' takes 2 numbers"},
        {V "busy -1\n", 2, "must be finite and >= 0"},
        {V "busy 1 2\n", 2, "one field too many"},
        {V "busy 1\nbusy 1\n", 3, "second 'busy' record (the first is on line 2)"},
        {V "load\n", 2, "'load' takes 1 number"},
        {V "load 1\nload 1\n", 3, "second 'load' record (the first is on line 2)"},
        {V "rowcopy -1e-9\n", 2, "must be finite and >= 0"},
        {V "rowcopy 1\nrowcopy 1\n", 3, "second 'rowcopy' record (the first is on line 2)"},
        {V "p2p 1e-5 1e-10 3\n", 2, "one field too many"},
        {V "node 4 1e-6\n", 2, "'node' takes ranks per node and 2 numbers"},
        {V "node 4\n", 2, "'node' takes ranks per node"},
        {V "node 0 1e-6 1e-10\n", 2, "'0' is not a whole number >= 1"},
        {V "node 2.5 1e-6 1e-10\n", 2, "not a whole number"},
        {V "node 4 -1e-6 1e-10\n", 2, "must be finite and >= 0"},
        {V "node 4 1e-6 1e-10 7\n", 2, "one field too many"},
        {V "node 4 1e-6 1e-10\np2p 0 0\nnode 4 1e-6 1e-10\n", 4, "second 'node' record (the first is on line 2)"},
        {V "allreduce 2 4096\n", 2, "'allreduce' takes"},
        {V "allreduce 0 4096 1e-3\n", 2, "'0' is not a whole number"},
        {V "allreduce 2.5 4096 1e-3\n", 2, "not a whole number"},
        {V "allreduce 2 4096 1e-3 7\n", 2, "one field too many"},
        {V "kernel 1 2 3\n", 2, "the key is missing"},
        {V "kernel 1 2 3   # a comment is no key\n", 2, "the key is missing"},
        {V "kernel 1 2 x conv\n", 2, "'x' is not a number"},
        {V "kernel 1 2 conv n=2\n", 2, "'conv' is not a number"},
        {V "kernel 1 2 3 conv \x01 x\n", 2, "control character"},
        {long_key, 2, "kernel key of"},
        {long_machine, 2, "machine text of"},
        {V "cores 2\ntask 1\ncores 2\n", 4, "second 'cores' record (the first is on line 2)"},
        {V "machine a\nmachine b\n", 3, "second 'machine'"},
        {V V, 2, "second 'starconv-calibration'"},
        {V "allreduce 2 4096 1\nallreduce 2 4096 2\n", 3, "second allreduce record"},
        {V "kernel 1 2 3 fc n=1 in=1 out=1\nkernel 1 2 3 fc  n=1 in=1 out=1\n", 3, "second kernel record"},
    };
    int n = (int)(sizeof cases / sizeof *cases);
    for (int i = 0; i < n; i++) {
        char path[64], where[96];
        struct sc_calib *c = (struct sc_calib *)1;
        if (write_temp(path, cases[i].text, strlen(cases[i].text))) {
            check(0, "cannot make a temporary file");
            continue;
        }
        int rc = sc_calib_load(path, &c);
        snprintf(where, sizeof where, "%s:%d: ", path, cases[i].line);
        const char *msg = sc_last_error();
        check(rc == SC_ERR_PARSE && c == NULL && !strncmp(msg, where, strlen(where)) && strstr(msg, cases[i].what),
              "malformed file %d refused at line %d: %s", i, cases[i].line, msg);
        unlink(path);
    }

    /* A NUL byte: not a text file. */
    char path[64];
    struct sc_calib *c = NULL;
    static const char nul[] = V "task 1\0\n";
    if (!write_temp(path, nul, sizeof nul - 1)) {
        int rc = sc_calib_load(path, &c);
        check(rc == SC_ERR_PARSE && strstr(sc_last_error(), ":2: a NUL byte"), "a NUL byte refused: %s",
              sc_last_error());
        unlink(path);
    }
    /* Too large to be a calibration: refused without reading it all. */
    if (!write_temp(path, V, strlen(V)) && truncate(path, 17 << 20) == 0) {
        int rc = sc_calib_load(path, &c);
        check(rc == SC_ERR_PARSE && strstr(sc_last_error(), "larger than 16 MiB"), "a 17 MiB file refused: %s",
              sc_last_error());
    }
    unlink(path);
}

static void missing(void)
{
    struct sc_calib *c = (struct sc_calib *)1;
    int rc = sc_calib_load("/nonexistent/calibration.txt", &c);
    check(rc == SC_ERR_IO && c == NULL &&
              strstr(sc_last_error(), "cannot read calibration /nonexistent/calibration.txt: No such file"),
          "a missing file: %s", sc_last_error());
    rc = sc_calib_load("/tmp", &c);
    check(rc == SC_ERR_IO, "a directory: %s", sc_last_error());
    struct sc_calib *e;
    sc_calib_new(&e);
    rc = sc_calib_save(e, "/nonexistent/calibration.txt");
    check(rc == SC_ERR_IO, "saving into a missing directory: %s", sc_last_error());
    sc_calib_free(e);
}

int main(void)
{
    keys();
    kernels();
    allreduce();
    round_trip();
    tolerated();
    malformed();
    missing();
    printf("%s: %d passed, %d failed\n", failures ? "FAIL" : "PASS", passes, failures);
    return failures ? 1 : 0;
}
