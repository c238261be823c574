/* Timelines of training iterations: events and Chrome trace-event JSON
 * files (the analysis and the picture: src/report/report.h).  Pure data:
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
    char name[64]; /* "<layer or collective>.<phase>", e.g. "conv2.bwd_filter", "conv2.grad_allreduce" */
    int rank;
    int lane;          /* CPU worker index on that rank (0..workers-1), or SC_TRACE_LANE_COMM */
    int64_t iteration; /* the training iteration the event belongs to */
    double start, end; /* microseconds from the trace origin, common to all ranks; end >= start */
    double bytes;      /* a transfer: the bytes its rank sent (0: a receive, a task) */
};

#define SC_TRACE_PLACEMENT_LEN 512

struct sc_trace {
    struct sc_trace_event *ev;
    size_t n;
    int ranks;
    int workers; /* worker lanes per rank */
    /* Of those, the last cuda_workers are CUDA workers' lanes ("cuda 0",
     * ...), the others CPU workers' ("cpu 0", ...); 0 in CPU-only runs. */
    int cuda_workers;
    int64_t first_iteration, last_iteration; /* the traced range, inclusive */
    int global_batch;                        /* images per iteration */
    char model[256];                         /* free text, e.g. the model path; may be empty */
    char precision[8];                       /* the convolutions' ("fp32", "bf16"); empty when
                                              * unknown (traces written before it existed) */
    /* How the gradient reductions' partial sums travelled ("fp32", "bf16":
     * --grad-dtype); "" where unknown (traces written before it existed). */
    char grad_dtype[8];
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
 * its last '.'); a transfer's args.bytes, the bytes its rank sent.
 * otherData holds ranks, workers, iterations, global_batch, model and,
 * where known, precision, grad_dtype and placement (an array of one string
 * per rank, also each rank's process_labels for trace viewers). */
int sc_trace_write_json(const struct sc_trace *t, const char *path);
/* Read a file written by sc_trace_write_json (strict; errors name the path
 * and what is wrong).  tid >= 1000 reads back as SC_TRACE_LANE_COMM. */
int sc_trace_read_json(const char *path, struct sc_trace *t);
void sc_trace_free(struct sc_trace *t);

/* What the analysis (src/report/) and the writers share. */
/* 0, or SC_ERR_ARG naming what: a trace every later loop may index per
 * rank (counts in bounds, names terminated, times finite and ordered). */
int sc_trace_check(const struct sc_trace *t, const char *what);
/* The part of an event's name after its last '.' ("bwd_filter"). */
const char *sc_trace_phase(const char *name);
/* Iterations the trace covers, at least 1. */
double sc_trace_iterations(const struct sc_trace *t);

/* Transfers of one rank with one name that overlap, merged into one event
 * and packed greedily into lanes. */
struct sc_trace_comm {
    const char *name;
    int rank;
    int lane;          /* k: tid 1000 + k, "comm", "comm 2", ... */
    int64_t iteration; /* the smallest of the merged transfers */
    double start, end;
    int transfers; /* how many transfers were merged into this one */
    double bytes;  /* the bytes they sent, together */
};
/* *out: the merged transfers (*nout), lanes[r]: the transfer lanes of rank
 * r; both malloc'ed, the caller frees them. */
int sc_trace_pack_comm(const struct sc_trace *t, struct sc_trace_comm **out, size_t *nout, int **lanes_out);
/* A trace with its transfers packed, as the writers draw it. */
struct sc_trace_packed {
    const struct sc_trace *t;
    const struct sc_trace_comm *c;
    size_t nc;
    const int *lanes;
};

#endif
