/* Timelines of training iterations: events, Chrome trace-event JSON files,
 * the overlap analysis of Lee et al. (eq. 11), and a Gantt SVG.  Pure data:
 * no StarPU, no MPI.  The training program fills a struct sc_trace from its
 * task and transfer records; starconv-report reads one back from a file. */
#ifndef SC_TRACE_H
#define SC_TRACE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* lane of an event that is a transfer (StarPU-MPI send or receive) */
#define SC_TRACE_LANE_COMM (-1)

struct sc_trace_event {
    char name[64];       /* "<layer or collective>.<phase>", e.g. "conv2.bwd_filter", "conv2.grad_allreduce" */
    int rank;
    int lane;            /* CPU worker index on that rank (0..workers-1), or SC_TRACE_LANE_COMM */
    int64_t iteration;   /* the training iteration the event belongs to */
    double start, end;   /* microseconds from the trace origin, common to all ranks; end >= start */
};

#define SC_TRACE_PLACEMENT_LEN 512

struct sc_trace {
    struct sc_trace_event *ev;
    size_t n;
    int ranks;
    int workers;                          /* worker lanes per rank */
    /* Of those, the last cuda_workers are CUDA workers' lanes ("cuda 0",
     * ...), the others CPU workers' ("cpu 0", ...); 0 in CPU-only runs. */
    int cuda_workers;
    int64_t first_iteration, last_iteration;  /* the traced range, inclusive */
    int global_batch;                     /* images per iteration */
    char model[256];                      /* free text, e.g. the model path; may be empty */
    /* Where each rank's workers ran, e.g. "2 CPU workers on cores 0-1
     * (...)": ranks entries, or NULL (traces written before it existed). */
    char (*placement)[SC_TRACE_PLACEMENT_LEN];
};

/* Chrome trace-event JSON ("traceEvents" object form), written atomically
 * (temporary file + rename; nothing is left behind on failure).  pid = rank,
 * tid = worker lane; transfers go to tid 1000 + k: transfers of one rank
 * with the same name that overlap are merged into one event, and the merged
 * events are packed greedily into as few lanes ("comm", "comm 2", ...) as
 * keep them from overlapping.  cat = the phase (the part of the name after
 * its last '.').  otherData holds ranks, workers, iterations, global_batch,
 * model and, where known, placement (an array of one string per rank, also
 * each rank's process_labels for trace viewers). */
int sc_trace_write_json(const struct sc_trace *t, const char *path);
/* Read a file written by sc_trace_write_json (strict; errors name the path
 * and what is wrong).  tid >= 1000 reads back as SC_TRACE_LANE_COMM. */
int sc_trace_read_json(const char *path, struct sc_trace *t);
void sc_trace_free(struct sc_trace *t);

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
/* A Gantt picture: one row per lane, colours by phase, a time axis. */
int sc_trace_write_svg(const struct sc_trace *t, const char *path);

#endif
