/* The programs' command line (cli.h). */
#include "src/programs/cli.h"
#include "base/error.h"
#include "src/net/net.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sc_cli_rank0(void)
{
    const char *r = getenv("OMPI_COMM_WORLD_RANK");
    if (!r)
        r = getenv("PMI_RANK");
    return !r || !strcmp(r, "0");
}

int sc_cli_fail(const char *prog, int status, const char *msg)
{
    if (sc_cli_rank0())
        fprintf(stderr, "%s: %s\n", prog, msg);
    return status;
}

int sc_cli_long(const char *opt, const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return sc_error(SC_ERR_ARG, "--%s: '%s' is not an integer in [%ld, %ld]", opt, s, min, max);
    *out = v;
    return 0;
}

int sc_cli_int(const char *opt, const char *s, int min, int max, int *out)
{
    long v;
    int err = sc_cli_long(opt, s, min, max, &v);
    if (!err)
        *out = (int)v;
    return err;
}

int sc_cli_float(const char *opt, const char *s, float min, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !isfinite(v) || v < min)
        return sc_error(SC_ERR_ARG, "--%s: '%s' is not a number >= %g", opt, s, min);
    *out = v;
    return 0;
}

int sc_cli_positive(const char *opt, const char *s, const char *what, double *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v > 0) || !isfinite(v))
        return sc_error(SC_ERR_ARG, "--%s: '%s' is not a positive number of %s", opt, s, what);
    *out = v;
    return 0;
}

int sc_cli_onoff(const char *opt, const char *s, int *out)
{
    if (!strcmp(s, "on"))
        *out = 1;
    else if (!strcmp(s, "off"))
        *out = 0;
    else
        return sc_error(SC_ERR_ARG, "--%s: '%s' is neither on nor off", opt, s);
    return 0;
}

int sc_cli_range(const char *opt, const char *s, long *first, long *last)
{
    char *end, *end2 = NULL;
    errno = 0;
    long a = strtol(s, &end, 10), b = *end == ':' ? strtol(end + 1, &end2, 10) : 0;
    if (errno || end == s || *end != ':' || end2 == end + 1 || *end2 || a < 1 || b < a || b > LONG_MAX / 4)
        return sc_error(SC_ERR_ARG, "--%s: '%s' is not A:B with 1 <= A <= B", opt, s);
    *first = a;
    *last = b;
    return 0;
}

int sc_cli_segment(const char *opt, const char *s, int *kb)
{
    long v;
    if (!strcmp(s, "auto")) {
        *kb = 0;
        return 0;
    }
    if (sc_cli_long(opt, s, 4, 1 << 20, &v))
        return sc_error(SC_ERR_ARG, "--%s: '%s' is neither auto nor an integer in [4, %d]", opt, s, 1 << 20);
    *kb = (int)v;
    return 0;
}

int sc_cli_grad_dtype(const char *opt, const char *s, int *bf16)
{
    if (strcmp(s, "fp32") && strcmp(s, "bf16"))
        return sc_error(SC_ERR_ARG, "--%s: '%s' is neither fp32 nor bf16", opt, s);
    *bf16 = !strcmp(s, "bf16");
    return 0;
}

int sc_cli_accumulate(const char *opt, const char *s, int *k)
{
    return sc_cli_int(opt, s, 1, SC_ACCUMULATE_MAX, k);
}

int sc_cli_parse(int argc, char **argv, const struct option *longopts, sc_cli_handler handle, void *ctx)
{
    int c, err = 0;
    opterr = 0;
    while (!err && (c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        const char *name = "";
        for (const struct option *lo = longopts; lo->name; lo++)
            if (lo->val == c)
                name = lo->name;
        if (c == ':')
            err = sc_error(SC_ERR_ARG, "%s needs a value (see --help)", argv[optind - 1]);
        else if (c == '?')
            err = sc_error(SC_ERR_ARG, "unknown option '%s' (see --help)", argv[optind - 1]);
        else if ((err = handle(c, name, optarg, ctx)) > 0)
            return err;
    }
    if (!err && optind < argc)
        err = sc_error(SC_ERR_ARG, "unexpected argument '%s' (see --help)", argv[optind]);
    return err;
}
