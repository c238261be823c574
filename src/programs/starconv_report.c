/* starconv-report: the overlap table of a trace that starconv-train wrote,
 * and optionally its Gantt chart.
 *
 *   starconv-report TRACE.json [--svg OUT.svg]
 *
 * Exit status: 0 done, 2 bad arguments or input (one line on stderr). */
#include "src/starconv.h"
#include "src/report/report.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fputs("usage: starconv-report TRACE.json [--svg OUT.svg]\n"
          "Print how much of the communication in a trace written by starconv-train\n"
          "overlaps computation, per rank and on average (times in ms per iteration).\n"
          "  --svg OUT.svg  also draw the timeline as a Gantt chart\n"
          "  -h, --help     this help\n",
          f);
}

__attribute__((format(printf, 1, 2))) static int fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("starconv-report: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 2;
}

int main(int argc, char **argv)
{
    const char *in = NULL, *svg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return 0;
        } else if (strcmp(a, "--svg") == 0) {
            if (i + 1 >= argc)
                return fail("--svg needs a file name (try --help)");
            svg = argv[++i];
        } else if (strncmp(a, "--svg=", 6) == 0) {
            svg = a + 6;
        } else if (a[0] == '-' && a[1] != '\0') {
            return fail("unknown option '%s' (try --help)", a);
        } else if (in) {
            return fail("one trace file at a time: '%s' and '%s' (try --help)", in, a);
        } else {
            in = a;
        }
    }
    if (!in)
        return fail("missing the trace file (try --help)");
    if (svg && !*svg)
        return fail("--svg needs a file name (try --help)");

    struct sc_trace t;
    if (sc_trace_read_json(in, &t) != 0)
        return fail("%s", sc_last_error());
    struct sc_overlap *o = calloc((size_t)t.ranks, sizeof *o);
    int rc = o ? sc_trace_analyze(&t, o) : sc_error(SC_ERR_NOMEM, "out of memory for %d ranks", t.ranks);
    /* the chart first, so that a failure prints nothing but the error */
    if (rc == 0 && svg)
        rc = sc_trace_write_svg(&t, svg);
    if (rc == 0) {
        sc_trace_print_report(&t, o, stdout);
        rc = sc_trace_print_tasks(&t, stdout);
        if (rc == 0)
            rc = sc_trace_print_load(&t, stdout);
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = sc_error(SC_ERR_IO, "standard output: write error");
    }
    free(o);
    sc_trace_free(&t);
    return rc ? fail("%s", sc_last_error()) : 0;
}
