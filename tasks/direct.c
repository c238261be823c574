/* Collectives of small vectors as one task each around an MPI
 * nonblocking collective (tasks.h, sc_direct): a ring of StarPU-MPI
 * messages pays about 0.1 ms per message here, which dominates a vector of
 * a few KiB, while MPI_Iallreduce on the same processes takes 0.03 ms.
 *
 * The task posts the collective and returns at once, so that it holds no
 * worker; it ends (and releases its vector to the tasks that wait for it)
 * only when the collective completes: it has one end dependency
 * (STARPU_TASK_END_DEP), which a thread of ours releases once MPI_Test
 * says the request is done.  Every plan has a communicator of its own, so
 * that collectives of different plans, which tasks may start in any order
 * on different ranks, never pair up wrongly.  Within a plan, MPI wants the
 * collectives of one communicator posted in the same order everywhere:
 * the reductions (allreduce, reduce: all on the one gradient vector) and
 * the broadcasts (on the weights, which a non-root rank broadcasts into
 * without waiting for its reduction) each have a communicator, and each
 * stream is ordered by its vector. */
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>

#include "base/error.h"
#include "tasks/tasks.h"

enum { DIRECT_ALLREDUCE, DIRECT_REDUCE, DIRECT_BCAST };

/* How long a task waits for its collective before handing it over. */
#define SPIN_US 50.0

/* ---- completion of the posted requests ---- */

struct pending {
    MPI_Request req;
    struct starpu_task *task;
    struct sc_trace_rec *rec; /* while a trace is recorded: the collective, posting to completion */
    struct pending *next;
};

/* p: allocated at submission (where running out of memory can be
 * reported), freed once the collective completes. */
struct direct_args {
    int op, root;
    MPI_Comm comm;
    struct pending *p;
};

static pthread_mutex_t poll_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t poll_cond = PTHREAD_COND_INITIALIZER;
static struct pending *poll_head;
static int poll_started;
static void (*poll_wake)(void);

/* Tests the requests while there are any, sleeping on the condition
 * otherwise (so that the thread makes no MPI call once the run's
 * collectives are done: it is never joined). */
static void *poll_main(void *arg)
{
    (void)arg;
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
            if (p->rec)
                p->rec->end = starpu_timing_now();
            starpu_task_end_dep_release(p->task);
            free(p);
            if (poll_wake)
                poll_wake();
        }
        pthread_mutex_lock(&poll_lock);
    }
    return NULL;
}

static void direct_cpu(void *buffers[], void *cl_arg)
{
    const struct direct_args *a = cl_arg;
    float *v = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    int n = (int)STARPU_VECTOR_GET_NX(buffers[0]), me;
    struct pending *p = a->p;
    p->task = starpu_task_get_current();
    if (p->rec)
        p->rec->start = starpu_timing_now();
    MPI_Comm_rank(a->comm, &me);
    switch (a->op) {
    case DIRECT_ALLREDUCE:
        MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_FLOAT, MPI_SUM, a->comm, &p->req);
        break;
    case DIRECT_REDUCE:
        MPI_Ireduce(me == a->root ? MPI_IN_PLACE : v, me == a->root ? v : NULL, n, MPI_FLOAT, MPI_SUM, a->root, a->comm,
                    &p->req);
        break;
    default:
        MPI_Ibcast(v, n, MPI_FLOAT, a->root, a->comm, &p->req);
        break;
    }
    /* The peers are often there already: a short wait here saves the
     * hand-over to our thread; bounded, so that a worker never waits for
     * a collective whose peers wait for this worker. */
    double until = starpu_timing_now() + SPIN_US;
    int flag = 0;
    do
        MPI_Test(&p->req, &flag, MPI_STATUS_IGNORE);
    while (!flag && starpu_timing_now() < until);
    if (flag) {
        if (p->rec)
            p->rec->end = starpu_timing_now();
        starpu_task_end_dep_release(p->task);
        free(p);
        return;
    }
    pthread_mutex_lock(&poll_lock);
    p->next = poll_head;
    poll_head = p;
    pthread_cond_signal(&poll_cond);
    pthread_mutex_unlock(&poll_lock);
}

static struct starpu_codelet cl_direct = {
    .cpu_funcs = {direct_cpu}, .nbuffers = 1, .modes = {STARPU_RW}, .name = "mpi_collective"};

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
    free(d);
}

static int submit(struct sc_direct *d, const struct sc_task_opts *opts, int op, starpu_data_handle_t v)
{
    struct direct_args *a = malloc(sizeof *a);
    struct pending *p = calloc(1, sizeof *p);
    if (!a || !p) {
        free(a), free(p);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    p->rec = sc_trace_new_rec(d->name, SC_REC_COMM);
    *a = (struct direct_args){op, 0, d->comm[op == DIRECT_BCAST], p};
    struct sc_task_opts cpu = {opts ? opts->priority : 0, SC_WHERE_CPU};
    int ret = starpu_task_insert(&cl_direct, STARPU_RW, v, STARPU_CL_ARGS, a, sizeof *a, STARPU_TASK_END_DEP, 1,
                                 STARPU_NAME, d->name, STARPU_PRIORITY, sc_task_opts_priority(&cpu),
                                 STARPU_EXECUTE_WHERE, sc_task_opts_where_mask(&cpu), 0);
    /* An idle worker sleeps until woken or for up to 0.2 ms (runtime.c):
     * a collective is latency, so wake it. */
    if (ret) {
        free(p);
        return sc_error(SC_ERR_RUNTIME, "%s: StarPU refused a collective task (%d)", d->name, ret);
    }
    if (poll_wake)
        poll_wake();
    return 0;
}

int sc_direct_allreduce_submit(struct sc_direct *d, const struct sc_task_opts *opts, starpu_data_handle_t v)
{
    return submit(d, opts, DIRECT_ALLREDUCE, v);
}

int sc_direct_reduce_submit(struct sc_direct *d, const struct sc_task_opts *opts, starpu_data_handle_t v)
{
    return submit(d, opts, DIRECT_REDUCE, v);
}

int sc_direct_bcast_submit(struct sc_direct *d, const struct sc_task_opts *opts, starpu_data_handle_t v)
{
    return submit(d, opts, DIRECT_BCAST, v);
}
