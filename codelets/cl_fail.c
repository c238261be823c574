/* Kernel failures under StarPU: the workers and tasks that the records
 * (kernels/fail.h) name, and the failures the tests inject
 * (SC_TEST_FAIL_KERNEL). */
#include "cl_common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The records themselves are the kernels' (kernels/fail.c), which know
 * no StarPU: what worker and task the calling thread is, StarPU says here. */
_Static_assert(STARPU_NMAXWORKERS <= SC_FAIL_MAX_WORKERS, "kernels/fail.h: SC_FAIL_MAX_WORKERS below StarPU's workers");

static int current_worker(const char **task)
{
    /* Before StarPU starts (or after it stops) no thread is a worker, and
     * its per-thread key may not exist yet. */
    int worker = starpu_is_initialized() ? starpu_worker_get_id() : -1;
    struct starpu_task *t = worker >= 0 ? starpu_task_get_current() : NULL;
    *task = t ? t->name : NULL;
    return worker;
}

static void worker_name(int id, char *buf, size_t size)
{
    enum starpu_worker_archtype t = starpu_worker_get_type(id);
    const char *kind = t == STARPU_CPU_WORKER ? "cpu" : t == STARPU_CUDA_WORKER ? "cuda" : "worker";
    snprintf(buf, size, "%s %d", kind,
             t == STARPU_CPU_WORKER || t == STARPU_CUDA_WORKER ? starpu_worker_get_devid(id) : id);
}

void sc_fail_workers_init(void)
{
    static const struct sc_fail_workers starpu_workers = {current_worker, worker_name};
    sc_fail_set_workers(&starpu_workers);
}

/* ---- injected failures ---- */

int sc_fail_inject_on;     /* this rank has a failure or a stall to inject */
static int inject_failure; /* a failure */
static int inject_now;     /* ... in the iteration being submitted */
static int64_t inject_iteration;
static char inject_name[sizeof(((struct sc_fail *)0)->task)], inject_spec[128]; /* the name as a record holds it */
/* SC_TEST_STALL: a task of this rank that never finishes, or a message it
 * never sends */
static int stall_task, stall_send, stall_now;
static int64_t stall_iteration, current_iteration;
static char stall_name[sizeof inject_name];

/* NAME@ITERATION[:RANK] into name (of size len), *it and *r (-1: every
 * rank); NAME may hold '@' and ':' itself.  1 if well formed. */
static int parse_spec(const char *spec, char *name, size_t len, long long *it, long *r)
{
    const char *at = strrchr(spec, '@');
    char *end = NULL;
    *r = -1;
    int ok = at && at > spec && (size_t)(at - spec) < len && strlen(spec) < sizeof inject_spec;
    if (ok) {
        errno = 0;
        *it = strtoll(at + 1, &end, 10);
        ok = !errno && end != at + 1 && *it >= 1;
    }
    if (ok && *end == ':') {
        const char *p = end + 1;
        *r = strtol(p, &end, 10);
        ok = !errno && end != p && *r >= 0 && *r <= INT_MAX;
    }
    if (!ok || *end)
        return 0;
    memcpy(name, spec, (size_t)(at - spec));
    name[at - spec] = 0;
    return 1;
}

int sc_fail_inject_setup(const char *spec, int rank)
{
    inject_failure = inject_now = 0;
    if (!spec || !*spec)
        return 0;
    long long it = 0;
    long r;
    if (!parse_spec(spec, inject_name, sizeof inject_name, &it, &r))
        return sc_error(SC_ERR_ARG, "SC_TEST_FAIL_KERNEL: '%.64s' is not NAME@ITERATION[:RANK] (e.g. conv2.fwd@3:1)",
                        spec);
    snprintf(inject_spec, sizeof inject_spec, "%s", spec);
    inject_iteration = it;
    inject_failure = r < 0 || r == rank;
    sc_fail_inject_on = inject_failure || stall_task;
    return 0;
}

/* ---- injected stalls ---- */

int sc_stall_inject_setup(const char *spec, int rank)
{
    stall_task = stall_send = stall_now = 0;
    if (!spec || !*spec)
        return 0;
    int task = !strncmp(spec, "task:", 5), send = !strncmp(spec, "send:", 5);
    long long it = 0;
    long r;
    if ((!task && !send) || !parse_spec(spec + 5, stall_name, sizeof stall_name, &it, &r))
        return sc_error(SC_ERR_ARG,
                        "SC_TEST_STALL: '%.64s' is not task:NAME@ITERATION[:RANK] or send:NAME@ITERATION[:RANK]", spec);
    stall_iteration = it;
    int here = r < 0 || r == rank;
    stall_task = task && here;
    stall_send = send && here;
    sc_fail_inject_on = inject_failure || stall_task;
    return 0;
}

int sc_stall_inject_send(const char *name)
{
    /* From the first of them on, as a rank that never got to that point
     * would: the later messages of the transfer are not posted either. */
    return stall_send && current_iteration >= stall_iteration && name && !strcmp(name, stall_name);
}

void sc_fail_inject_iteration(int64_t iteration)
{
    current_iteration = iteration;
    inject_now = inject_failure && iteration == inject_iteration;
    stall_now = stall_task && iteration == stall_iteration;
}

const char *sc_fail_inject_name(const char *name)
{
    if (stall_now && name && !strcmp(name, stall_name)) {
        stall_now = stall_task = 0; /* one task */
        return stall_name;
    }
    return inject_now && name && !strcmp(name, inject_name) ? inject_name : name;
}

/* The injected stall: this worker never comes back (the process ends by
 * the watchdog's MPI_Abort). */
static void __attribute__((noreturn)) stall_for_ever(void)
{
    for (;;)
        sleep(60);
}

int sc_fail_inject_hit(void)
{
    struct starpu_task *t = starpu_task_get_current();
    if (t && t->name == stall_name)
        stall_for_ever();
    if (!t || t->name != inject_name)
        return 0;
    sc_fail_record(t->cl && t->cl->name ? t->cl->name : "kernel", "injected failure (SC_TEST_FAIL_KERNEL=%s)",
                   inject_spec);
    return 1;
}
