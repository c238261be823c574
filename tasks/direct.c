/* Collectives of small vectors as one MPI nonblocking collective each
 * (tasks.h, sc_direct): each StarPU-MPI message of a ring costs a task's
 * and a request's overhead, which dominates a vector of a few KiB, where
 * one MPI_Iallreduce on the same processes takes microseconds.
 *
 * The collective is a node of the task graph without being a task: an
 * asynchronous acquisition of its vector (starpu_data_acquire_cb, in
 * read-write mode, ordered with the tasks that use the vector as a task
 * would be).  When the vector is ready, StarPU calls us in the thread
 * that made it ready (the worker that ran its producer, or the submitting
 * thread if it is ready at submission); we post the collective there and
 * release the vector once MPI says it is complete.  A task would cost a
 * scheduler push and pop, and a sleeping worker's wake-up, around a
 * collective that takes microseconds, as long again as the collective
 * (sc-allreduce-bench measures both).  This is
 * how StarPU-MPI itself sends a piece of data.  The collective starts as
 * soon as its vector is ready, so no priority applies.
 *
 * Completion: a short wait where the collective was posted (the peers are
 * often there already), else a thread of ours tests the request and
 * releases the vector.  Every plan has a communicator of its own, so that
 * collectives of different plans, which may start in any order on
 * different ranks, never pair up wrongly.  Within a plan, MPI wants the
 * collectives of one communicator posted in the same order everywhere:
 * the reductions (allreduce, reduce: all on the one gradient vector) and
 * the broadcasts (on the weights, which a non-root rank broadcasts into
 * without waiting for its reduction) each have a communicator, and each
 * stream is ordered by its vector. */
#define _GNU_SOURCE /* pthread_setname_np */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "base/error.h"
#include "base/progress.h"
#include "tasks/tasks.h"

enum { DIRECT_ALLREDUCE, DIRECT_REDUCE, DIRECT_BCAST };

/* How long a task waits for its collective before handing it over. */
#define SPIN_US 50.0

/* ---- completion of the posted requests ---- */

/* Allocated at submission (where running out of memory can be reported),
 * freed once the collective completes. */
struct pending {
    int op;
    MPI_Comm comm;
    starpu_data_handle_t vec;
    MPI_Request req;
    struct sc_trace_rec *rec; /* while a trace is recorded: the collective, posting to completion */
    struct sc_wait *wait;     /* while the stall watchdog is on (base/progress.h) */
    struct pending *next;
};

static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poll_cond = PTHREAD_COND_INITIALIZER;
static struct pending *poll_head;
static int poll_started;
static void (*poll_wake)(void);

/* The collective is done: the vector goes to the tasks after it, and
 * sleeping workers are woken for them. */
static void complete(struct pending *p)
{
    if (p->rec)
        p->rec->end = starpu_timing_now();
    sc_progress_done(p->wait);
    starpu_data_release(p->vec);
    free(p);
    if (poll_wake)
        poll_wake();
}

/* Tests the requests while there are any, sleeping on the condition
 * otherwise (so that the thread makes no MPI call once the run's
 * collectives are done: it is never joined). */
static void *poll_main(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "sc-direct"); /* as top -H shows it, beside sc-cpuN and StarPU's MPI */
    pthread_mutex_lock(&poll_lock);
    for (;;) {
        while (!poll_head)
            pthread_cond_wait(&poll_cond, &poll_lock);
        struct pending *done = NULL, **pp = &poll_head;
        while (*pp) {
            int flag = 0;
            MPI_Test(&(*pp)->req, &flag, MPI_STATUS_IGNORE);
            if (flag) {
                struct pending *p = *pp;
                *pp = p->next;
                p->next = done;
                done = p;
            } else {
                pp = &(*pp)->next;
            }
        }
        pthread_mutex_unlock(&poll_lock);
        if (!done)
            sched_yield();
        while (done) {
            struct pending *p = done;
            done = p->next;
            complete(p);
        }
        pthread_mutex_lock(&poll_lock);
    }
    return NULL;
}

/* The vector is ready (acquired for us): post the collective. */
static void post(void *arg)
{
    struct pending *p = arg;
    /* acquired in main memory, whichever thread (a CUDA worker too) calls */
    float *v = (float *)starpu_data_handle_to_pointer(p->vec, STARPU_MAIN_RAM);
    int n = (int)starpu_vector_get_nx(p->vec), me, root = 0;
    if (p->rec)
        p->rec->start = starpu_timing_now();
    sc_progress_begin(p->wait, -1);
    MPI_Comm_rank(p->comm, &me);
    switch (p->op) {
    case DIRECT_ALLREDUCE:
        MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, p->comm, &p->req);
        break;
    case DIRECT_REDUCE:
        MPI_Ireduce(me == root ? MPI_IN_PLACE : v, me == root ? v : NULL, n, MPI_FLOAT, MPI_SUM, root, p->comm,
                    &p->req);
        break;
    default:
        MPI_Ibcast(v, n, MPI_FLOAT, root, p->comm, &p->req);
        break;
    }
    /* The peers are often there already: a short wait here saves the
     * hand-over to our thread; bounded, so that this thread (a worker, or
     * the one submitting) never waits long for peers that may be waiting
     * for it. */
    double until = starpu_timing_now() + SPIN_US;
    int flag = 0;
    do
        MPI_Test(&p->req, &flag, MPI_STATUS_IGNORE);
    while (!flag && starpu_timing_now() < until);
    if (flag) {
        complete(p);
        return;
    }
    pthread_mutex_lock(&poll_lock);
    p->next = poll_head;
    poll_head = p;
    pthread_cond_signal(&poll_cond);
    pthread_mutex_unlock(&poll_lock);
}

static int start_poller(void)
{
    pthread_mutex_lock(&poll_lock);
    int err = 0;
    if (!poll_started) {
        pthread_t t;
        err = pthread_create(&t, NULL, poll_main, NULL);
        if (!err) {
            pthread_detach(t);
            poll_started = 1;
        }
    }
    pthread_mutex_unlock(&poll_lock);
    return err ? sc_error(SC_ERR_RUNTIME, "cannot start the thread of the direct collectives") : 0;
}

void sc_direct_set_wake_hook(void (*fn)(void))
{
    poll_wake = fn;
}

/* ---- plans ---- */

struct sc_direct {
    MPI_Comm comm[2]; /* reductions, broadcasts */
    char name[80];
    int *group, ngroup; /* the ranks of comm[0] in the world's numbering, for the stall watchdog */
};

int sc_direct_create(struct sc_direct **out, MPI_Comm comm, int color, int key, const char *name)
{
    struct sc_direct *d = calloc(1, sizeof *d);
    if (!d)
        return sc_error(SC_ERR_NOMEM, "out of memory for a collective plan");
    d->comm[0] = d->comm[1] = MPI_COMM_NULL;
    if (MPI_Comm_split(comm, color, key, &d->comm[0]) != MPI_SUCCESS ||
        MPI_Comm_dup(d->comm[0], &d->comm[1]) != MPI_SUCCESS) {
        sc_direct_destroy(d);
        return sc_error(SC_ERR_RUNTIME, "%s: MPI_Comm_split failed", name);
    }
    snprintf(d->name, sizeof d->name, "%s", name);
    MPI_Group g, world;
    MPI_Comm_group(d->comm[0], &g);
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    MPI_Group_size(g, &d->ngroup);
    int *mine = malloc(sizeof(int) * (size_t)d->ngroup);
    d->group = malloc(sizeof(int) * (size_t)d->ngroup);
    for (int i = 0; mine && d->group && i < d->ngroup; i++)
        mine[i] = i;
    if (mine && d->group)
        MPI_Group_translate_ranks(g, d->ngroup, mine, world, d->group);
    else
        d->ngroup = 0; /* unknown: the watchdog then asks every rank */
    free(mine);
    MPI_Group_free(&g);
    MPI_Group_free(&world);
    int err = start_poller();
    if (err) {
        sc_direct_destroy(d);
        return err;
    }
    *out = d;
    return 0;
}

void sc_direct_destroy(struct sc_direct *d)
{
    if (!d)
        return;
    for (int i = 0; i < 2; i++)
        if (d->comm[i] != MPI_COMM_NULL)
            MPI_Comm_free(&d->comm[i]);
    free(d->group);
    free(d);
}

static int submit(struct sc_direct *d, int op, starpu_data_handle_t v)
{
    if (sc_stall_inject_send(d->name))
        return 0; /* tests/test_stall.sh: a collective this rank never joins */
    struct pending *p = calloc(1, sizeof *p);
    if (!p)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    *p = (struct pending){.op = op, .comm = d->comm[op == DIRECT_BCAST], .vec = v};
    p->rec = sc_trace_new_rec(d->name, SC_REC_COMM);
    int me;
    MPI_Comm_rank(p->comm, &me);
    /* what this rank sends, counted as tasks.h's sc_ring_bytes_sent counts it */
    if (p->rec && (op == DIRECT_ALLREDUCE || (op == DIRECT_REDUCE) == (me != 0)))
        p->rec->bytes = (double)starpu_vector_get_nx(v) * sizeof(float);
    p->wait = sc_progress_add(SC_WAIT_COLL, d->name, -1, 0, d->group, d->ngroup, NULL);
    int ret = starpu_data_acquire_cb(v, STARPU_RW, post, p);
    if (ret) {
        sc_progress_done(p->wait);
        free(p);
        return sc_error(SC_ERR_RUNTIME, "%s: StarPU refused to acquire a vector for its collective (%d)", d->name, ret);
    }
    return 0;
}

int sc_direct_allreduce_submit(struct sc_direct *d, starpu_data_handle_t v)
{
    return submit(d, DIRECT_ALLREDUCE, v);
}

int sc_direct_reduce_submit(struct sc_direct *d, starpu_data_handle_t v)
{
    return submit(d, DIRECT_REDUCE, v);
}

int sc_direct_bcast_submit(struct sc_direct *d, starpu_data_handle_t v)
{
    return submit(d, DIRECT_BCAST, v);
}
