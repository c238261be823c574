/* What a trace says: the overlap analysis of Lee et al. (eq. 11), its
 * table, and a Gantt SVG.  Pure data, like the trace itself (src/io/trace.h):
 * no StarPU, no MPI. */
#ifndef SC_REPORT_REPORT_H
#define SC_REPORT_REPORT_H

#include <stdio.h>

#include "src/io/trace.h"

/* Per rank, over the whole trace.  Times are microseconds per iteration
 * (divided by last - first + 1). */
struct sc_overlap {
    double window;       /* first event start to last event end, over all ranks */
    double compute;      /* time during which at least one worker of the rank ran a task */
    double work;         /* sum of the rank's task durations */
    double comm;         /* time during which at least one transfer of the rank was in flight */
    double exposed;      /* communication time during which the rank computed nothing */
    double idle;         /* time of the window with neither computation nor communication */
    double ratio;        /* (comm - exposed) / comm, Lee et al. eq. 11; NAN when comm == 0 */
    double images_per_s; /* global_batch * iterations / window */
};
/* out[r] for r < t->ranks. */
int sc_trace_analyze(const struct sc_trace *t, struct sc_overlap *out);
/* The table, one row per rank and a "mean" row (see trace.c for the format). */
void sc_trace_print_report(const struct sc_trace *t, const struct sc_overlap *o, FILE *f);
/* The input's load per rank, microseconds per iteration: the time a load
 * task of the rank ran (phase "load"), and of it the time after every
 * other task and transfer of the iteration before had ended, the part of
 * the load that the batch before did not hide (NAN with one iteration
 * traced: the first iteration's load follows the trace's drain, so the
 * exposure is over the later ones). */
struct sc_load_overlap {
    double load;
    double exposed;
};
/* out[r] for r < t->ranks. */
int sc_trace_analyze_load(const struct sc_trace *t, struct sc_load_overlap *out);
/* One line: the load per iteration and its exposure, means of the ranks:
 *   input load: 0.105 ms per iteration, 0.000 ms exposed (after the rank's
 *   previous iteration ended; iterations 4..5, mean of the ranks) */
int sc_trace_print_load(const struct sc_trace *t, FILE *f);
/* A Gantt picture: one row per lane, colours by phase, a time axis. */
int sc_trace_write_svg(const struct sc_trace *t, const char *path);

/* One line: the tasks of an iteration by kind (the phase of their names:
 * "fwd", "bwd_data", "sgd", ...), most frequent first, and the
 * transfers, per iteration of the trace, all ranks together. */
int sc_trace_print_tasks(const struct sc_trace *t, FILE *f);
/* One line: flops of an iteration (all ranks together) over the
 * iteration's time (window, microseconds), and, when peak_gflops > 0, the
 * fraction of that peak. */
void sc_report_print_compute(FILE *f, double flops, double window_us, double peak_gflops);

#endif
