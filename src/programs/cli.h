/* The command line of the starconv programs: one getopt_long loop and the
 * value parsers they share, so that an option means and says the same in
 * starconv-train and starconv-plan.  Every parser returns 0, or SC_ERR_ARG
 * with a message that names the option and the value. */
#ifndef SC_PROGRAMS_CLI_H
#define SC_PROGRAMS_CLI_H

#include <getopt.h>

/* Exit status of bad input: options, files, data. */
#define SC_EXIT_BAD_INPUT 2

/* Whether this process prints: rank 0 of the launcher's job, or not
 * started by mpirun at all. */
int sc_cli_rank0(void);
/* Prints "PROG: MSG" on rank 0; returns status. */
int sc_cli_fail(const char *prog, int status, const char *msg);

/* An integer in [min, max]. */
int sc_cli_long(const char *opt, const char *s, long min, long max, long *out);
int sc_cli_int(const char *opt, const char *s, int min, int max, int *out);
/* A finite number >= min. */
int sc_cli_float(const char *opt, const char *s, float min, float *out);
/* A finite number > 0 ("a positive number of WHAT"). */
int sc_cli_positive(const char *opt, const char *s, const char *what, double *out);
/* "on" or "off". */
int sc_cli_onoff(const char *opt, const char *s, int *out);
/* "A:B" with 1 <= A <= B. */
int sc_cli_range(const char *opt, const char *s, long *first, long *last);
/* --comm-segment: "auto" (0: sized to the link, base/ring_segment.h) or
 * KiB in [4, 2^20]. */
int sc_cli_segment(const char *opt, const char *s, int *kb);

/* --grad-dtype: "fp32" (0) or "bf16" (1): how the gradient reductions'
 * partial sums travel (tasks.h, sc_ring_opts.wire_bf16). */
int sc_cli_grad_dtype(const char *opt, const char *s, int *bf16);
/* --accumulate: micro-batches per iteration, an integer in [1,
 * SC_ACCUMULATE_MAX] (src/net/net.h). */
int sc_cli_accumulate(const char *opt, const char *s, int *k);

/* One option: c is its getopt value, name its long name (without "--"),
 * arg its value (NULL when it takes none).  Returns 0 to go on, a negative
 * SC_ERR_* to stop with that error, or a positive code to stop at once
 * (--help and the like), which sc_cli_parse returns. */
typedef int (*sc_cli_handler)(int c, const char *name, const char *arg, void *ctx);

/* getopt_long over longopts (long options only, and -h), calling handle
 * for each; a missing value, an unknown option and an argument left over
 * are errors that name them. */
int sc_cli_parse(int argc, char **argv, const struct option *longopts, sc_cli_handler handle, void *ctx);

#endif
