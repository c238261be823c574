/* Attributes of the submitted tasks: priority and workers from the
 * caller's sc_task_opts, and trace records filled from StarPU's per-task
 * profiling when the task completes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>
#include <starpu_profiling.h>

#include "cl_common.h"

int sc_task_opts_priority(const struct sc_task_opts *opts)
{
    if (!opts)
        return 0;
    int lo = starpu_sched_get_min_priority(), hi = starpu_sched_get_max_priority();
    return opts->priority < lo ? lo : opts->priority > hi ? hi : opts->priority;
}

unsigned long long sc_task_opts_where_mask(const struct sc_task_opts *opts)
{
    enum sc_where w = opts ? opts->where : SC_WHERE_ANY;
    return w == SC_WHERE_CPU ? STARPU_CPU : w == SC_WHERE_CUDA ? STARPU_CUDA : (unsigned long long)-1;
}

/* Records live in fixed-size blocks that never move; only the submitting
 * thread allocates, callbacks only write into the record they were given. */
#define BLOCK      4096
#define MAX_BLOCKS 4096

static struct sc_trace_rec *blocks[MAX_BLOCKS];
static size_t nrecs;
static int recording;
static int64_t rec_iteration;

static void task_done(void *arg)
{
    struct sc_trace_rec *r = arg;
    struct starpu_task *task = starpu_task_get_current();
    if (!r || !task)
        return;
    struct starpu_profiling_task_info *info = task->profiling_info;
    if (info) {
        r->worker = info->workerid;
        r->start = starpu_timing_timespec_to_us(&info->start_time);
        r->end = starpu_timing_timespec_to_us(&info->end_time);
    } else {
        r->worker = starpu_worker_get_id();
        r->end = r->start = starpu_timing_now();
    }
}

void sc_trace_record_on(int64_t iteration)
{
    if (!recording)
        starpu_profiling_status_set(STARPU_PROFILING_ENABLE);
    recording = 1;
    rec_iteration = iteration;
}

void sc_trace_set_iteration(int64_t iteration)
{
    rec_iteration = iteration;
}

int64_t sc_trace_iteration(void)
{
    return rec_iteration;
}

void sc_trace_record_off(void)
{
    if (recording)
        starpu_profiling_status_set(STARPU_PROFILING_DISABLE);
    recording = 0;
}

struct sc_trace_rec *sc_trace_new_rec(const char *name, int kind)
{
    if (!recording || nrecs >= (size_t)BLOCK * MAX_BLOCKS)
        return NULL;
    size_t b = nrecs / BLOCK;
    if (!blocks[b] && !(blocks[b] = malloc(BLOCK * sizeof(**blocks))))
        return NULL;
    struct sc_trace_rec *r = &blocks[b][nrecs % BLOCK];
    memset(r, 0, sizeof(*r));
    snprintf(r->name, sizeof(r->name), "%s", name ? name : "task");
    r->iteration = rec_iteration;
    r->kind = kind;
    r->worker = -1;
    nrecs++;
    return r;
}

void (*sc_trace_task_callback(void))(void *)
{
    return recording ? task_done : NULL;
}

static void task_done_watched(void *arg)
{
    task_done(sc_progress_done(arg));
}

/* sc_progress_on is set before the first task and never cleared, so that
 * every callback gets the argument it was given for. */
void (*sc_task_callback(void))(void *)
{
    return sc_progress_on ? task_done_watched : sc_trace_task_callback();
}

void *sc_task_callback_arg(const char *name)
{
    struct sc_trace_rec *rec = sc_trace_new_rec(name, SC_REC_TASK);
    if (!sc_progress_on)
        return rec;
    return sc_progress_add(SC_WAIT_TASK, name, -1, 0, NULL, 0, rec);
}

void sc_task_watch_begin(void)
{
    struct starpu_task *t = starpu_task_get_current();
    if (t && t->callback_func == task_done_watched)
        sc_progress_begin(t->callback_arg, starpu_worker_get_id());
}

size_t sc_trace_nrecs(void)
{
    return nrecs;
}

const struct sc_trace_rec *sc_trace_rec_at(size_t i)
{
    return i < nrecs ? &blocks[i / BLOCK][i % BLOCK] : NULL;
}

void sc_trace_clear(void)
{
    nrecs = 0;
}
