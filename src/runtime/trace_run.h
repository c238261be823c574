/* Recording the timeline of some training iterations (see trace.h for
 * what is done with it). */
#ifndef SC_TRACE_RUN_H
#define SC_TRACE_RUN_H

#include "src/runtime/runtime.h"
#include "src/io/trace.h"

/* Collective: start recording; the tasks and transfers submitted from now
 * on are recorded.  Call it when nothing is in flight. */
void sc_trace_run_start(struct sc_runtime *rt, int64_t first_iteration);
/* The iteration that the work submitted from now on belongs to. */
void sc_trace_run_iteration(int64_t iteration);
/* Collective, once everything recorded is done: stop, and gather every
 * rank's events into rank 0's out (other ranks get no events).  The caller
 * sets the iterations, batch and model, and frees out with sc_trace_free. */
int sc_trace_run_stop(struct sc_runtime *rt, struct sc_trace *out);

#endif
