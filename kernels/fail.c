/* Kernel failures: each worker's record of its first one (fail.h). */
#include "fail.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* One slot per worker.  A slot is claimed once (FREE -> WRITING,
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
static struct slot slots[SC_FAIL_MAX_WORKERS];
static uint64_t next_seq;
static int reported;
static const struct sc_fail_workers *workers;

void sc_fail_set_workers(const struct sc_fail_workers *w)
{
    __atomic_store_n(&workers, w, __ATOMIC_RELEASE);
}

int sc_fail_current(const char **task)
{
    const struct sc_fail_workers *w = __atomic_load_n(&workers, __ATOMIC_ACQUIRE);
    *task = NULL;
    return w ? w->current(task) : -1;
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
    const struct sc_fail_workers *w = __atomic_load_n(&workers, __ATOMIC_ACQUIRE);
    if (!w || worker < 0 || worker >= SC_FAIL_MAX_WORKERS) { /* no sync point reads it: said at once */
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
    w->name(worker, f->where, sizeof f->where);
    vsnprintf(f->cause, sizeof f->cause, fmt, ap);
    one_line(f->task);
    one_line(f->cause);
    __atomic_store_n(&s->state, SLOT_READY, __ATOMIC_RELEASE);
}

void sc_fail_record(const char *op, const char *fmt, ...)
{
    const char *task;
    int worker = sc_fail_current(&task);
    va_list ap;
    va_start(ap, fmt);
    vrecord(worker, task, op, fmt, ap);
    va_end(ap);
}

void sc_fail_vrecord(const char *op, const char *fmt, va_list ap)
{
    const char *task;
    int worker = sc_fail_current(&task);
    vrecord(worker, task, op, fmt, ap);
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
    for (int w = 0; w < SC_FAIL_MAX_WORKERS; w++)
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
