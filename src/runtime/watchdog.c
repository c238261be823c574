/* Peer watchdog: a heartbeat ring over the ranks (see watchdog.h).
 *
 * Messages are two ints {kind, sequence} with one tag on a private
 * communicator.  MPI keeps messages of one sender, tag and communicator in
 * order, and the receiver has one receive posted at a time, so when the
 * predecessor's "bye" is matched every heartbeat it sent before has been
 * matched too: nothing is left unreceived at MPI_Finalize.
 *
 * Timing: a heartbeat every min(1 s, timeout / 4), a poll every
 * min(100 ms, period / 2).  The watch starts counting at the first message
 * from the predecessor, or, if none comes, START_GRACE timeouts after the
 * start (ranks leave MPI_Init together, so the first heartbeat comes within
 * a second in practice).  Small heartbeats are sent eagerly, so a send
 * normally completes at once; at most MAX_SENDS are outstanding, and a send
 * that does not complete within the timeout is an alarm about the
 * successor. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

#include "base/error.h"
#include "src/runtime/watchdog.h"

enum { MSG_HEARTBEAT = 1, MSG_BYE = 2 };
enum { TAG = 7, MAX_SENDS = 4 };
#define START_GRACE 3.0

struct watchdog {
    MPI_Comm comm;
    int rank, size, pred, succ;
    double timeout, period, poll;
    pthread_t thread;
    pthread_mutex_t mutex;
    pthread_cond_t cond;
    int stop;          /* 1: send bye and finish; under mutex */
    int wait_for_peer; /* set with stop */
    /* owned by the thread */
    MPI_Request sends[MAX_SENDS];
    int sendbuf[MAX_SENDS][2];
    double send_since[MAX_SENDS];
    MPI_Request recv;
    int recvbuf[2];
    int seq;
    double stop_seen, bye_heard; /* for the log: how long stop waited */
};

static struct watchdog *wd;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Never returns: one line naming the peer, then MPI_Abort.  If MPI_Abort
 * itself hangs (it should not), SIGALRM's default action ends this process
 * and mpirun then ends the others. */
static void __attribute__((noreturn)) give_up(struct watchdog *w, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void give_up(struct watchdog *w, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: rank %d: %s; stopping the job\n", program_invocation_short_name, w->rank, msg);
    fflush(stderr);
    alarm(20);
    MPI_Abort(MPI_COMM_WORLD, SC_WATCHDOG_EXIT);
    _exit(SC_WATCHDOG_EXIT);
}

static const char *mpi_error_string(int code)
{
    static __thread char text[MPI_MAX_ERROR_STRING + 1];
    int len = 0;
    if (MPI_Error_string(code, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "MPI error %d", code);
    else
        text[len] = 0;
    return text;
}

static void post_recv(struct watchdog *w)
{
    int err = MPI_Irecv(w->recvbuf, 2, MPI_INT, w->pred, TAG, w->comm, &w->recv);
    if (err != MPI_SUCCESS)
        give_up(w, "receiving from rank %d failed: %s", w->pred, mpi_error_string(err));
}

/* Sends kind to the successor in a free slot; 0 if none is free. */
static int post_send(struct watchdog *w, int kind, double now)
{
    for (int i = 0; i < MAX_SENDS; i++) {
        if (w->sends[i] != MPI_REQUEST_NULL)
            continue;
        w->sendbuf[i][0] = kind;
        w->sendbuf[i][1] = ++w->seq;
        w->send_since[i] = now;
        int err = MPI_Isend(w->sendbuf[i], 2, MPI_INT, w->succ, TAG, w->comm, &w->sends[i]);
        if (err != MPI_SUCCESS)
            give_up(w, "sending to rank %d failed: %s", w->succ, mpi_error_string(err));
        return 1;
    }
    return 0;
}

/* Completes what it can; returns the number of sends still outstanding. */
static int test_sends(struct watchdog *w, double now)
{
    int pending = 0;
    for (int i = 0; i < MAX_SENDS; i++) {
        if (w->sends[i] == MPI_REQUEST_NULL)
            continue;
        int done = 0;
        MPI_Status st;
        int err = MPI_Test(&w->sends[i], &done, &st);
        if (err != MPI_SUCCESS)
            give_up(w, "sending to rank %d failed: %s", w->succ, mpi_error_string(err));
        if (done)
            continue;
        if (now - w->send_since[i] > w->timeout)
            give_up(w, "rank %d has not taken a message for %.0f s (dead, stopped or unreachable)", w->succ,
                    now - w->send_since[i]);
        pending++;
    }
    return pending;
}

/* Valgrind runs the threads of a process one at a time, and without
 * --fair-sched=yes it can leave one thread waiting longer than any
 * sensible timeout: no watchdog there. */
static int under_valgrind(void)
{
#ifdef RUNNING_ON_VALGRIND
    if (RUNNING_ON_VALGRIND)
        return 1;
#endif
    const char *preload = getenv("LD_PRELOAD");
    return preload && strstr(preload, "vgpreload") != NULL;
}

static void *watch(void *arg)
{
    struct watchdog *w = arg;
    double start = now_s(), heard = 0, next_beat = start, last_poll = start;
    int pred_done = 0, bye_sent = 0;
    post_recv(w);
    for (;;) {
        double now = now_s();
        /* This thread itself did not run for a while (the whole job
         * suspended and resumed, e.g. by the batch system, or starved):
         * that is no news about the peers, so their clocks restart. */
        double gap = now - last_poll;
        last_poll = now;
        if (gap > w->timeout / 4 && gap > 4 * w->poll) {
            start += gap;
            if (heard > 0)
                heard = now;
            for (int i = 0; i < MAX_SENDS; i++)
                w->send_since[i] += gap;
        }
        pthread_mutex_lock(&w->mutex);
        int stop = w->stop, wait_for_peer = w->wait_for_peer;
        pthread_mutex_unlock(&w->mutex);
        if (stop && !w->stop_seen)
            w->stop_seen = now;

        /* The predecessor. */
        while (!pred_done) {
            int done = 0;
            MPI_Status st;
            int err = MPI_Test(&w->recv, &done, &st);
            if (err != MPI_SUCCESS)
                give_up(w, "receiving from rank %d failed: %s", w->pred, mpi_error_string(err));
            if (!done)
                break;
            heard = now;
            if (w->recvbuf[0] == MSG_BYE) {
                pred_done = 1;
                w->bye_heard = now;
            } else
                post_recv(w);
        }
        if (!pred_done) {
            double since = heard > 0 ? heard : start;
            double limit = heard > 0 ? w->timeout : START_GRACE * w->timeout;
            if (now - since > limit)
                give_up(w, "rank %d has not been heard from for %.0f s (dead, stopped or unreachable)", w->pred,
                        now - since);
        }

        /* The successor. */
        int pending = test_sends(w, now);
        if (!bye_sent) {
            if (stop)
                bye_sent = post_send(w, MSG_BYE, now);
            else if (now >= next_beat && post_send(w, MSG_HEARTBEAT, now))
                next_beat = now + w->period;
            pending = test_sends(w, now);
        }

        if (bye_sent && !pending && (pred_done || !wait_for_peer))
            break;

        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = until.tv_nsec + (long)(w->poll * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_mutex_lock(&w->mutex);
        if (w->stop == stop) /* a stop request wakes us at once */
            pthread_cond_timedwait(&w->cond, &w->mutex, &until);
        pthread_mutex_unlock(&w->mutex);
    }
    if (!pred_done) { /* an error path: the predecessor may never say bye */
        MPI_Cancel(&w->recv);
        MPI_Wait(&w->recv, MPI_STATUS_IGNORE);
    }
    return NULL;
}

int sc_watchdog_start(MPI_Comm world, double timeout)
{
    int size, rank;
    MPI_Comm_size(world, &size);
    MPI_Comm_rank(world, &rank);
    if (size < 2)
        return 0;
    /* All ranks decide alike (collective, like the MPI_Comm_dup below):
     * rank 0's timeout (an environment variable may not reach the ranks of
     * other nodes), and off if any rank runs under valgrind. */
    double mine[2] = {rank == 0 ? timeout : -1, under_valgrind()}, all[2];
    if (MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, world) != MPI_SUCCESS)
        return sc_error(SC_ERR_RUNTIME, "MPI_Allreduce failed");
    timeout = all[0];
    if (all[1] > 0 && timeout > 0) {
        if (rank == 0)
            SC_LOG(2, "peer watchdog: off under valgrind");
        return 0;
    }
    if (timeout <= 0)
        return 0;
    MPI_Comm comm;
    if (MPI_Comm_dup(world, &comm) != MPI_SUCCESS)
        return sc_error(SC_ERR_RUNTIME, "MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    struct watchdog *w = calloc(1, sizeof(*w));
    if (!w) {
        MPI_Comm_free(&comm);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    w->comm = comm;
    w->rank = rank;
    w->size = size;
    w->pred = (rank + size - 1) % size;
    w->succ = (rank + 1) % size;
    w->timeout = timeout;
    w->period = timeout / 4 < 1.0 ? timeout / 4 : 1.0;
    w->poll = w->period / 2 < 0.1 ? w->period / 2 : 0.1;
    for (int i = 0; i < MAX_SENDS; i++)
        w->sends[i] = MPI_REQUEST_NULL;
    w->recv = MPI_REQUEST_NULL;
    pthread_mutex_init(&w->mutex, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC); /* waits immune to clock changes */
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    if (pthread_create(&w->thread, NULL, watch, w)) {
        MPI_Comm_free(&w->comm);
        pthread_mutex_destroy(&w->mutex);
        pthread_cond_destroy(&w->cond);
        free(w);
        return sc_error(SC_ERR_RUNTIME, "cannot start the watchdog thread");
    }
    wd = w;
    return 0;
}

void sc_watchdog_stop(int wait_for_peer)
{
    struct watchdog *w = wd;
    if (!w)
        return;
    pthread_mutex_lock(&w->mutex);
    w->stop = 1;
    w->wait_for_peer = wait_for_peer;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mutex);
    pthread_join(w->thread, NULL);
    if (wait_for_peer && w->bye_heard > w->stop_seen)
        SC_LOG(2, "peer watchdog: waited %.1f s for rank %d to finish", w->bye_heard - w->stop_seen, w->pred);
    MPI_Comm_free(&w->comm);
    pthread_mutex_destroy(&w->mutex);
    pthread_cond_destroy(&w->cond);
    free(w);
    wd = NULL;
}
