/* Kernel failures under StarPU: the workers and tasks that the records
 * (kernels/fail.h) name, and the failures the tests inject
 * (SC_TEST_FAIL_KERNEL). */
#include "cl_common.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

int sc_fail_inject_on; /* this rank has a failure to inject */
static int inject_now; /* ... in the iteration being submitted */
static int64_t inject_iteration;
static char inject_name[sizeof(((struct sc_fail *)0)->task)], inject_spec[128]; /* the name as a record holds it */

int sc_fail_inject_setup(const char *spec, int rank)
{
    sc_fail_inject_on = inject_now = 0;
    if (!spec || !*spec)
        return 0;
    /* NAME@ITERATION[:RANK]; NAME may hold '@' and ':' itself */
    const char *at = strrchr(spec, '@');
    char *end = NULL;
    long long it = 0;
    long r = -1;
    int ok = at && at > spec && (size_t)(at - spec) < sizeof inject_name && strlen(spec) < sizeof inject_spec;
    if (ok) {
        errno = 0;
        it = strtoll(at + 1, &end, 10);
        ok = !errno && end != at + 1 && it >= 1;
    }
    if (ok && *end == ':') {
        const char *p = end + 1;
        r = strtol(p, &end, 10);
        ok = !errno && end != p && r >= 0 && r <= INT_MAX;
    }
    if (!ok || *end)
        return sc_error(SC_ERR_ARG, "SC_TEST_FAIL_KERNEL: '%.64s' is not NAME@ITERATION[:RANK] (e.g. conv2.fwd@3:1)",
                        spec);
    memcpy(inject_name, spec, (size_t)(at - spec));
    inject_name[at - spec] = 0;
    snprintf(inject_spec, sizeof inject_spec, "%s", spec);
    inject_iteration = it;
    sc_fail_inject_on = r < 0 || r == rank;
    return 0;
}

void sc_fail_inject_iteration(int64_t iteration)
{
    inject_now = sc_fail_inject_on && iteration == inject_iteration;
}

const char *sc_fail_inject_name(const char *name)
{
    return inject_now && name && !strcmp(name, inject_name) ? inject_name : name;
}

int sc_fail_inject_hit(void)
{
    struct starpu_task *t = starpu_task_get_current();
    if (!t || t->name != inject_name)
        return 0;
    sc_fail_record(t->cl && t->cl->name ? t->cl->name : "kernel", "injected failure (SC_TEST_FAIL_KERNEL=%s)",
                   inject_spec);
    return 1;
}
