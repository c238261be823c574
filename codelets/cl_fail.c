/* Kernel failures: each worker's record of its first one (kernels.h:
 * sc_fail_record; codelets.h: sc_fail_first), and the failures the tests
 * inject (SC_TEST_FAIL_KERNEL). */
#include "cl_common.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One slot per StarPU worker.  A slot is claimed once (FREE -> WRITING,
 * compare-and-swap: the first failure wins, a later one of the same
 * worker is a consequence), filled, then published (READY, release order)
 * for the readers, which may be any thread.  seq orders the failures of
 * all workers. */
enum { SLOT_FREE, SLOT_WRITING, SLOT_READY };
struct slot {
    int state;
    uint64_t seq;
    struct sc_fail f;
};
static struct slot slots[STARPU_NMAXWORKERS];
static uint64_t next_seq;
static int reported;

static void worker_name(int id, char *buf, size_t size)
{
    enum starpu_worker_archtype t = starpu_worker_get_type(id);
    const char *kind = t == STARPU_CPU_WORKER ? "cpu" : t == STARPU_CUDA_WORKER ? "cuda" : "worker";
    snprintf(buf, size, "%s %d", kind,
             t == STARPU_CPU_WORKER || t == STARPU_CUDA_WORKER ? starpu_worker_get_devid(id) : id);
}

/* One line, whatever a library put in its message. */
static void one_line(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f)
            *s = '?';
}

static void vrecord(int worker, const char *task, const char *op, const char *fmt, va_list ap)
{
    if (worker < 0 || worker >= STARPU_NMAXWORKERS) { /* no sync point reads it: said at once */
        char cause[sizeof slots[0].f.cause];
        vsnprintf(cause, sizeof cause, fmt, ap);
        one_line(cause);
        fprintf(stderr, "starconv: %s: %s\n", op, cause);
        return;
    }
    struct slot *s = &slots[worker];
    int expect = SLOT_FREE;
    if (!__atomic_compare_exchange_n(&s->state, &expect, SLOT_WRITING, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;
    s->seq = __atomic_fetch_add(&next_seq, 1, __ATOMIC_RELAXED);
    struct sc_fail *f = &s->f;
    snprintf(f->task, sizeof f->task, "%s", task ? task : "");
    snprintf(f->kernel, sizeof f->kernel, "%s", op ? op : "kernel");
    f->worker = worker;
    worker_name(worker, f->where, sizeof f->where);
    vsnprintf(f->cause, sizeof f->cause, fmt, ap);
    one_line(f->task);
    one_line(f->cause);
    __atomic_store_n(&s->state, SLOT_READY, __ATOMIC_RELEASE);
}

void sc_fail_record(const char *op, const char *fmt, ...)
{
    /* Before StarPU starts (or after it stops) no thread is a worker, and
     * its per-thread key may not exist yet. */
    int worker = starpu_is_initialized() ? starpu_worker_get_id() : -1;
    struct starpu_task *task = worker >= 0 ? starpu_task_get_current() : NULL;
    va_list ap;
    va_start(ap, fmt);
    vrecord(worker, task ? task->name : NULL, op, fmt, ap);
    va_end(ap);
}

void sc_fail_record_from(int worker, const char *task, const char *op, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vrecord(worker, task, op, fmt, ap);
    va_end(ap);
}

int sc_fail_first(struct sc_fail *f)
{
    const struct slot *first = NULL;
    for (int w = 0; w < STARPU_NMAXWORKERS; w++)
        if (__atomic_load_n(&slots[w].state, __ATOMIC_ACQUIRE) == SLOT_READY && (!first || slots[w].seq < first->seq))
            first = &slots[w];
    if (first)
        *f = first->f;
    return first != NULL;
}

void sc_fail_describe(const struct sc_fail *f, char *buf, size_t size)
{
    if (f->task[0] && strcmp(f->task, f->kernel))
        snprintf(buf, size, "kernel %s (%s) failed on worker %s: %s", f->task, f->kernel, f->where, f->cause);
    else
        snprintf(buf, size, "kernel %s failed on worker %s: %s", f->kernel, f->where, f->cause);
}

void sc_fail_set_reported(void)
{
    __atomic_store_n(&reported, 1, __ATOMIC_RELAXED);
}

/* Called by sc_codelets_shutdown, once every task has run. */
void sc_fail_say_unreported(void)
{
    struct sc_fail f;
    if (__atomic_load_n(&reported, __ATOMIC_RELAXED) || !sc_fail_first(&f))
        return;
    char line[sizeof f.task + sizeof f.kernel + sizeof f.where + sizeof f.cause + 64];
    sc_fail_describe(&f, line, sizeof line);
    fprintf(stderr, "starconv: %s\n", line);
    sc_fail_set_reported();
}

/* ---- injected failures ---- */

int sc_fail_inject_on; /* this rank has a failure to inject */
static int inject_now; /* ... in the iteration being submitted */
static int64_t inject_iteration;
static char inject_name[sizeof slots[0].f.task], inject_spec[128];

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
