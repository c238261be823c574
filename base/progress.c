/* What a rank waits for (see progress.h).
 *
 * Items live in blocks that never move, recycled through a free list, so
 * that a completion callback only writes into the item it was given.  One
 * mutex guards the list, the counts and the table of what was reached:
 * every item is added by a submitting thread and completed by a worker or
 * by StarPU-MPI's thread, a few hundred times per iteration. */
#include "base/progress.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { BLOCK = 4096, MAX_BLOCKS = 1024 };

int sc_progress_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct sc_wait *blocks[MAX_BLOCKS];
static int nblocks;
static struct sc_wait *free_list;
static long npending;
static uint64_t next_seq = 1;
static double last_progress;
static int64_t current_iteration;

/* What was reached: how many of each transfer (kind, name, peer, tag)
 * and collective (kind, name) were submitted, keyed by the name's address
 * (the callers' names are stable); open addressing. */
struct reached {
    const char *name;
    int kind, peer;
    int64_t tag, count;
};
static struct reached *table;
static size_t table_size, table_used;

double sc_progress_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int sc_progress_enable(void)
{
    pthread_mutex_lock(&lock);
    if (!table) {
        table_size = 4096;
        table = calloc(table_size, sizeof *table);
    }
    int ok = table != NULL;
    pthread_mutex_unlock(&lock);
    if (ok)
        sc_progress_on = 1;
    return ok ? 0 : -1;
}

void sc_progress_set_iteration(int64_t iteration)
{
    __atomic_store_n(&current_iteration, iteration, __ATOMIC_RELAXED);
}

static size_t slot_of(const char *name, int kind, int peer, int64_t tag)
{
    uint64_t h = (uint64_t)(uintptr_t)name * 0x9e3779b97f4a7c15ULL;
    h ^= ((uint64_t)kind << 56) ^ ((uint64_t)(uint32_t)peer << 24) ^ (uint64_t)tag;
    h *= 0xff51afd7ed558ccdULL;
    return (size_t)(h ^ (h >> 29)) & (table_size - 1);
}

static struct reached *find(struct reached *t, size_t size, const char *name, int kind, int peer, int64_t tag)
{
    size_t mask = size - 1;
    for (size_t i = slot_of(name, kind, peer, tag);; i = (i + 1) & mask) {
        struct reached *r = &t[i];
        if (!r->name || (r->name == name && r->kind == kind && r->peer == peer && r->tag == tag))
            return r;
    }
}

/* Under the lock: counts one more, and returns the count (0 when the
 * table cannot grow: a watchdog's diagnosis then lacks it, no result). */
static int64_t note_reached(const char *name, int kind, int peer, int64_t tag)
{
    if (kind == SC_WAIT_COLL)
        peer = -1, tag = 0;
    if (2 * (table_used + 1) > table_size) {
        struct reached *bigger = calloc(2 * table_size, sizeof *bigger);
        if (!bigger)
            return 0;
        size_t old = table_size;
        table_size *= 2;
        for (size_t i = 0; i < old; i++)
            if (table[i].name)
                *find(bigger, table_size, table[i].name, table[i].kind, table[i].peer, table[i].tag) = table[i];
        free(table);
        table = bigger;
    }
    struct reached *r = find(table, table_size, name, kind, peer, tag);
    if (!r->name) {
        *r = (struct reached){name, kind, peer, tag, 0};
        table_used++;
    }
    return ++r->count;
}

struct sc_wait *sc_progress_add(int kind, const char *name, int peer, int64_t tag, const int *group, int ngroup,
                                void *rec)
{
    if (!sc_progress_on)
        return NULL;
    double now = sc_progress_now();
    pthread_mutex_lock(&lock);
    if (!free_list && nblocks < MAX_BLOCKS && (blocks[nblocks] = calloc(BLOCK, sizeof(struct sc_wait)))) {
        for (int i = BLOCK - 1; i >= 0; i--) {
            blocks[nblocks][i].next_free = free_list;
            free_list = &blocks[nblocks][i];
        }
        nblocks++;
    }
    struct sc_wait *w = free_list;
    int64_t iteration = __atomic_load_n(&current_iteration, __ATOMIC_RELAXED);
    if (w) {
        free_list = w->next_free;
        *w = (struct sc_wait){.name = name ? name : "task",
                              .kind = kind,
                              .peer = peer,
                              .tag = tag,
                              .group = group,
                              .ngroup = ngroup,
                              .iteration = iteration,
                              .seq = next_seq++,
                              .submitted = now,
                              .worker = -1,
                              .rec = rec,
                              .pending = 1};
        if (npending++ == 0) /* the clock runs from the first thing waited for */
            last_progress = now;
    }
    int64_t nth = kind != SC_WAIT_TASK && name ? note_reached(name, kind, peer, tag) : 0;
    if (w)
        w->nth = nth;
    pthread_mutex_unlock(&lock);
    return w;
}

void sc_progress_begin(struct sc_wait *w, int worker)
{
    if (!w)
        return;
    double now = sc_progress_now();
    pthread_mutex_lock(&lock);
    w->started = now;
    w->worker = worker;
    pthread_mutex_unlock(&lock);
}

void *sc_progress_done(struct sc_wait *w)
{
    if (!w)
        return NULL;
    double now = sc_progress_now();
    pthread_mutex_lock(&lock);
    void *rec = w->rec;
    w->pending = 0;
    w->next_free = free_list;
    free_list = w;
    npending--;
    last_progress = now;
    pthread_mutex_unlock(&lock);
    return rec;
}

void sc_progress_poll(long *pending, double *last)
{
    pthread_mutex_lock(&lock);
    *pending = npending;
    *last = last_progress;
    pthread_mutex_unlock(&lock);
}

int sc_progress_oldest(struct sc_wait *out)
{
    pthread_mutex_lock(&lock);
    const struct sc_wait *best = NULL, *running = NULL;
    for (int b = 0; b < nblocks; b++)
        for (int i = 0; i < BLOCK; i++) {
            const struct sc_wait *w = &blocks[b][i];
            if (w->pending && (!best || w->seq < best->seq))
                best = w;
            if (w->pending && w->kind == SC_WAIT_TASK && w->started > 0 && (!running || w->started < running->started))
                running = w;
        }
    if (running)
        best = running;
    if (best)
        *out = *best;
    pthread_mutex_unlock(&lock);
    return best != NULL;
}

int64_t sc_progress_reached(int kind, const char *name, int peer, int64_t tag)
{
    int64_t n = 0;
    pthread_mutex_lock(&lock);
    for (size_t i = 0; table && i < table_size; i++) {
        const struct reached *r = &table[i];
        if (r->name && r->kind == kind && (kind == SC_WAIT_COLL || (r->peer == peer && r->tag == tag)) &&
            !strcmp(r->name, name))
            n += r->count;
    }
    pthread_mutex_unlock(&lock);
    return n;
}
