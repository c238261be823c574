/* Recording a trace of some iterations on every rank and gathering it on
 * rank 0, from the records the task wrappers and collectives fill. */
#include <stdlib.h>
#include <string.h>

#include <mpi.h>
#include <starpu.h>

#include "codelets/codelets.h"
#include "base/error.h"
#include "src/runtime/trace_run.h"

static double origin;

void sc_trace_run_start(struct sc_runtime *rt, int64_t first_iteration)
{
    sc_trace_clear();
    /* One origin for all ranks, up to the skew of leaving a barrier. */
    MPI_Barrier(rt->ctl);
    origin = starpu_timing_now();
    sc_trace_record_on(first_iteration);
}

void sc_trace_run_iteration(int64_t iteration)
{
    sc_trace_set_iteration(iteration);
}

/* A worker's lane: CPU workers first (the k-th CPU worker of the rank on
 * lane k), then the CUDA workers (the j-th on lane cpu_lanes + j).  StarPU
 * numbers its CUDA workers before its CPU workers, so a worker id is not a
 * lane. */
static int worker_lane(int worker, int cpu_lanes)
{
    if (worker < 0 || worker >= (int)starpu_worker_get_count())
        return 0;
    enum starpu_worker_archtype type = starpu_worker_get_type(worker);
    int k = 0;
    for (int w = 0; w < worker; w++)
        k += starpu_worker_get_type(w) == type;
    return type == STARPU_CUDA_WORKER ? cpu_lanes + k : k;
}

static size_t local_events(struct sc_runtime *rt, struct sc_trace_event *ev, int cpu_lanes)
{
    (void)rt;
    size_t n = 0;
    for (size_t i = 0; i < sc_trace_nrecs(); i++) {
        const struct sc_trace_rec *r = sc_trace_rec_at(i);
        if (r->end <= 0 || r->start <= 0)
            continue; /* not run, or a transfer whose start was not seen */
        struct sc_trace_event *e = &ev[n++];
        memset(e, 0, sizeof(*e));
        snprintf(e->name, sizeof(e->name), "%s", r->name);
        e->rank = rt->rank;
        e->iteration = r->iteration;
        /* A transfer may complete before its "ready" marker's callback ran. */
        double start = r->start < r->end ? r->start : r->end;
        e->start = start - origin;
        e->end = r->end - origin;
        e->bytes = r->bytes;
        if (r->kind == SC_REC_COMM)
            e->lane = SC_TRACE_LANE_COMM;
        else
            e->lane = worker_lane(r->worker, cpu_lanes);
    }
    return n;
}

int sc_trace_run_stop(struct sc_runtime *rt, struct sc_trace *out)
{
    sc_trace_record_off();
    memset(out, 0, sizeof(*out));
    int cpu_lanes, cuda_lanes;
    MPI_Allreduce(&rt->ncpu, &cpu_lanes, 1, MPI_INT, MPI_MAX, rt->ctl);
    MPI_Allreduce(&rt->ncuda, &cuda_lanes, 1, MPI_INT, MPI_MAX, rt->ctl);
    size_t cap = sc_trace_nrecs();
    struct sc_trace_event *mine = malloc((cap ? cap : 1) * sizeof(*mine));
    int err = mine ? 0 : SC_ERR_NOMEM, all_err;
    size_t n = mine ? local_events(rt, mine, cpu_lanes) : 0;
    /* Every rank learns whether all can go on, so that none is left in a
     * collective alone. */
    MPI_Allreduce(&err, &all_err, 1, MPI_INT, MPI_MIN, rt->ctl);
    if (all_err) {
        free(mine);
        sc_trace_clear();
        return sc_error(SC_ERR_NOMEM, "out of memory for the trace");
    }
    int bytes = (int)(n * sizeof(*mine)), counts[rt->size], displs[rt->size];
    MPI_Gather(&bytes, 1, MPI_INT, counts, 1, MPI_INT, 0, rt->ctl);
    long total = 0;
    if (rt->rank == 0)
        for (int r = 0; r < rt->size; r++) {
            displs[r] = (int)total;
            total += counts[r];
        }
    struct sc_trace_event *all = NULL;
    if (rt->rank == 0 && !(all = malloc(total ? (size_t)total : 1)))
        err = SC_ERR_NOMEM;
    MPI_Bcast(&err, 1, MPI_INT, 0, rt->ctl);
    if (!err)
        MPI_Gatherv(mine, bytes, MPI_BYTE, all, counts, displs, MPI_BYTE, 0, rt->ctl);
    free(mine);
    sc_trace_clear();
    if (err) {
        free(all);
        return sc_error(SC_ERR_NOMEM, "out of memory for the trace");
    }
    out->ev = all;
    out->n = rt->rank == 0 ? (size_t)total / sizeof(*all) : 0;
    out->ranks = rt->size;
    out->workers = cpu_lanes + cuda_lanes;
    out->cuda_workers = cuda_lanes;
    /* A trace without its placement is still a trace. */
    if (rt->placements && (out->placement = calloc((size_t)rt->size, sizeof(*out->placement))))
        for (int r = 0; r < rt->size; r++)
            snprintf(out->placement[r], sizeof(out->placement[r]), "%s", rt->placements[r]);
    return 0;
}
