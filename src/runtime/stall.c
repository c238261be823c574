/* Stall watchdog (see stall.h).
 *
 * Messages on a private communicator (tags below): a notice (one int, the
 * rank that saw the stall) from the first rank that sees it to all; each
 * rank's report to rank 0 (struct report); rank 0's questions (struct
 * query) to the peers that a report names, and their answers (one
 * int64: the last iteration in which they submitted the thing asked
 * about).  Everything that follows a stall is bounded in time: a rank
 * that gets no answer names the rank that did not answer, and a rank that
 * rank 0 never stops stops the job itself. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <starpu.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif

#include "base/error.h"
#include "base/progress.h"
#include "src/runtime/stall.h"

enum { TAG_NOTICE = 11, TAG_REPORT, TAG_QUERY, TAG_ANSWER };
enum { NAME_LEN = 64, MAX_GROUP = 64 };

/* The oldest thing a rank waits for, as rank 0 gets it. */
struct report {
    int rank, has; /* has: something is pending */
    long pending;
    double idle; /* seconds since the rank's last completion */
    int kind, peer, worker, ngroup;
    int64_t tag, iteration, nth;
    double age, running; /* since submitted; since begun (-1: not begun) */
    int group[MAX_GROUP];
    char name[NAME_LEN];
    char line[400]; /* the line it printed */
};

struct query {
    int kind, peer;
    int64_t tag;
    char name[NAME_LEN];
};

struct stall {
    MPI_Comm comm;
    int rank, size;
    double timeout; /* > 0: fixed; < 0: the default */
    pthread_t thread;
    int stop, armed;    /* atomics */
    double slowest;     /* the slowest iteration seen, seconds (atomic) */
    MPI_Request notice; /* posted for any rank's notice */
    int notice_buf;
};

static struct stall *st;

static double now_s(void)
{
    return sc_progress_now();
}

static void nap(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

static double limit_of(const struct stall *s)
{
    if (s->timeout > 0)
        return s->timeout;
    double slowest;
    __atomic_load(&s->slowest, &slowest, __ATOMIC_RELAXED);
    double t = SC_STALL_ITERATIONS * slowest;
    return t > SC_STALL_MIN_DEFAULT ? t : SC_STALL_MIN_DEFAULT;
}

/* ---- what this rank waits for ---- */

static void worker_name(int id, char *buf, size_t size)
{
    if (id < 0 || !starpu_is_initialized())
        snprintf(buf, size, "a worker");
    else
        starpu_worker_get_name(id, buf, size);
}

static void describe(const struct report *r, char *buf, size_t size)
{
    char w[64];
    switch (r->kind) {
    case SC_WAIT_TASK:
        if (r->running >= 0) {
            worker_name(r->worker, w, sizeof w);
            snprintf(buf, size, "its task %s of iteration %lld, running for %.1f s on %s", r->name,
                     (long long)r->iteration, r->running, w);
        } else {
            snprintf(buf, size, "its task %s of iteration %lld, not begun (submitted %.1f s ago)", r->name,
                     (long long)r->iteration, r->age);
        }
        break;
    case SC_WAIT_SEND:
        snprintf(buf, size, "a message to rank %d (%s, tag %lld) of iteration %lld, submitted %.1f s ago", r->peer,
                 r->name, (long long)r->tag, (long long)r->iteration, r->age);
        break;
    case SC_WAIT_RECV:
        snprintf(buf, size, "a message from rank %d (%s, tag %lld) of iteration %lld, posted %.1f s ago", r->peer,
                 r->name, (long long)r->tag, (long long)r->iteration, r->age);
        break;
    default: {
        int len =
            snprintf(buf, size, "the collective %s of iteration %lld over ranks ", r->name, (long long)r->iteration);
        for (int i = 0; i < r->ngroup && len < (int)size; i++)
            len += snprintf(buf + len, size - len, "%s%d", i ? "," : "", r->group[i]);
        if (!r->ngroup && len < (int)size)
            snprintf(buf + len, size - len, "(unknown)");
    }
    }
}

static void make_report(struct stall *s, double since, struct report *r)
{
    memset(r, 0, sizeof *r);
    r->rank = s->rank;
    double last, now = now_s();
    sc_progress_poll(&r->pending, &last);
    r->idle = now - (last > since ? last : since);
    struct sc_wait w;
    if ((r->has = sc_progress_oldest(&w))) {
        r->kind = w.kind;
        r->peer = w.peer;
        r->worker = w.worker;
        r->tag = w.tag;
        r->iteration = w.iteration;
        r->nth = w.nth;
        r->age = now - w.submitted;
        r->running = w.started > 0 ? now - w.started : -1;
        r->ngroup = w.ngroup < MAX_GROUP ? w.ngroup : 0;
        if (w.group)
            memcpy(r->group, w.group, sizeof(int) * (size_t)r->ngroup);
        snprintf(r->name, sizeof r->name, "%s", w.name);
    }
    char what[300] = "nothing (its main thread waits for the other ranks)";
    if (r->has)
        describe(r, what, sizeof what);
    snprintf(r->line, sizeof r->line, "rank %d: no progress for %.1f s (%ld pending); it waits for %s", r->rank,
             r->idle, r->pending, what);
}

/* ---- the summary, on rank 0 ---- */

/* How many of q rank p has submitted (-1: no answer within the
 * deadline). */
static int64_t ask(struct stall *s, int p, const struct query *q, double deadline)
{
    if (p == s->rank)
        return sc_progress_reached(q->kind, q->name, q->peer, q->tag);
    int64_t answer = -1;
    MPI_Request req[2];
    MPI_Isend(q, sizeof *q, MPI_BYTE, p, TAG_QUERY, s->comm, &req[0]);
    MPI_Irecv(&answer, 1, MPI_INT64_T, p, TAG_ANSWER, s->comm, &req[1]);
    int done = 0;
    while (!done && now_s() < deadline) {
        MPI_Testall(2, req, &done, MPI_STATUSES_IGNORE);
        if (!done)
            nap(0.01);
    }
    return done ? answer : -1; /* the requests are left to MPI_Abort */
}

/* Marks in culprit the peers that did not get as far as what r waits for
 * (their matching send or receive, or the collective), in silent those
 * that did not answer; returns how many it marked in culprit. */
static int not_reached(struct stall *s, const struct report *r, double deadline, int *culprit, int *silent)
{
    struct query q = {0};
    snprintf(q.name, sizeof q.name, "%s", r->name);
    q.tag = r->tag;
    q.peer = r->rank;
    int n = 0, members[MAX_GROUP], nm = 0;
    if (r->kind == SC_WAIT_RECV || r->kind == SC_WAIT_SEND) {
        q.kind = r->kind == SC_WAIT_RECV ? SC_WAIT_SEND : SC_WAIT_RECV;
        members[nm++] = r->peer;
    } else {
        q.kind = SC_WAIT_COLL;
        for (int i = 0; i < r->ngroup; i++)
            if (r->group[i] != r->rank)
                members[nm++] = r->group[i];
    }
    for (int i = 0; i < nm; i++) {
        int p = members[i];
        if (p < 0 || p >= s->size)
            continue;
        int64_t got = ask(s, p, &q, deadline);
        if (got < 0)
            silent[p] = 1;
        else if (got < r->nth && !culprit[p])
            culprit[p] = 1, n++;
    }
    return n;
}

static void list_ranks(const int *set, int size, char *buf, size_t len)
{
    int k = 0, n = 0;
    for (int r = 0; r < size; r++)
        n += set[r] != 0;
    buf[0] = 0;
    for (int r = 0; r < size; r++)
        if (set[r])
            k += snprintf(buf + k, k < (int)len ? len - k : 0, "%s%d", k ? ", " : (n > 1 ? "ranks " : "rank "), r);
}

static void __attribute__((noreturn)) stop_job(struct stall *s, const char *summary)
{
    fprintf(stderr, "%s: %s; stopping the job (--stall-timeout %.0f)\n", program_invocation_short_name, summary,
            limit_of(s));
    fflush(stderr);
    alarm(20); /* if MPI_Abort itself hangs, SIGALRM ends this process */
    MPI_Abort(MPI_COMM_WORLD, SC_STALL_EXIT);
    _exit(SC_STALL_EXIT);
}

static void __attribute__((noreturn)) summarize(struct stall *s, struct report *all, const int *heard)
{
    double deadline = now_s() + (limit_of(s) > 5 ? limit_of(s) : 5);
    int *culprit = calloc((size_t)s->size, sizeof(int)), *silent = calloc((size_t)s->size, sizeof(int));
    int *local = calloc((size_t)s->size, sizeof(int));
    if (!culprit || !silent || !local)
        stop_job(s, "stalled (out of memory for the diagnosis)");
    int first = -1, nlocal = 0, nsilent = 0; /* first: a report that names a rank that did not reach it */
    for (int r = 0; r < s->size; r++) {
        if (!heard[r]) {
            silent[r] = 1;
            continue;
        }
        if (!all[r].has)
            continue;
        if (all[r].kind == SC_WAIT_TASK)
            local[r] = 1, nlocal++;
        else if (not_reached(s, &all[r], deadline, culprit, silent) && first < 0)
            first = r;
    }
    for (int r = 0; r < s->size; r++)
        nsilent += silent[r];
    char who[256], what[300], line[1024], quiet[300] = "";
    if (nsilent) {
        list_ranks(silent, s->size, who, sizeof who);
        snprintf(quiet, sizeof quiet, " (%s did not answer)", who);
    }
    if (first >= 0) {
        list_ranks(culprit, s->size, who, sizeof who);
        describe(&all[first], what, sizeof what);
        snprintf(line, sizeof line, "stalled: %s did not reach the point where rank %d waits: %s%s", who, first, what,
                 quiet);
    } else if (nlocal) {
        list_ranks(local, s->size, who, sizeof who);
        int r = 0;
        while (!local[r])
            r++;
        describe(&all[r], what, sizeof what);
        snprintf(line, sizeof line, "stalled: %s did not reach the point the others wait at: rank %d waits for %s%s",
                 who, r, what, quiet);
    } else if (nsilent) {
        list_ranks(silent, s->size, who, sizeof who);
        snprintf(line, sizeof line, "stalled: %s did not answer", who);
    } else {
        snprintf(line, sizeof line,
                 "stalled: every rank waits for a message or collective that its peers have posted (the "
                 "network?); rank 0 waits for %s",
                 all[0].has ? (describe(&all[0], what, sizeof what), what) : "nothing");
    }
    stop_job(s, line);
}

/* ---- the thread ---- */

static void __attribute__((noreturn)) on_stall(struct stall *s, int seen_here, double since)
{
    if (seen_here)
        for (int r = 0; r < s->size; r++)
            if (r != s->rank) {
                MPI_Request req;
                MPI_Isend(&s->rank, 1, MPI_INT, r, TAG_NOTICE, s->comm, &req);
                MPI_Request_free(&req);
            }
    struct report mine;
    make_report(s, since, &mine);
    fprintf(stderr, "%s: %s\n", program_invocation_short_name, mine.line);
    fflush(stderr);
    double deadline = now_s() + 2 * (limit_of(s) > 5 ? limit_of(s) : 5);
    if (s->rank != 0) {
        /* The report, then answers to rank 0's questions until it stops
         * the job; if it never does, this rank does. */
        MPI_Request req;
        MPI_Isend(&mine, sizeof mine, MPI_BYTE, 0, TAG_REPORT, s->comm, &req);
        while (now_s() < deadline) {
            int flag = 0;
            MPI_Status status;
            MPI_Iprobe(0, TAG_QUERY, s->comm, &flag, &status);
            if (!flag) {
                nap(0.01);
                continue;
            }
            struct query q;
            MPI_Recv(&q, sizeof q, MPI_BYTE, 0, TAG_QUERY, s->comm, MPI_STATUS_IGNORE);
            q.name[NAME_LEN - 1] = 0;
            int64_t it = sc_progress_reached(q.kind, q.name, q.peer, q.tag);
            MPI_Send(&it, 1, MPI_INT64_T, 0, TAG_ANSWER, s->comm);
        }
        stop_job(s, "stalled, and rank 0 did not stop the job");
    }
    struct report *all = calloc((size_t)s->size, sizeof *all);
    int *heard = calloc((size_t)s->size, sizeof(int));
    if (!all || !heard)
        stop_job(s, "stalled (out of memory for the diagnosis)");
    all[0] = mine;
    heard[0] = 1;
    int left = s->size - 1;
    double reports_until = now_s() + (limit_of(s) > 5 ? limit_of(s) : 5);
    while (left > 0 && now_s() < reports_until) {
        int flag = 0;
        MPI_Status status;
        MPI_Iprobe(MPI_ANY_SOURCE, TAG_REPORT, s->comm, &flag, &status);
        if (!flag) {
            nap(0.01);
            continue;
        }
        struct report r;
        MPI_Recv(&r, sizeof r, MPI_BYTE, status.MPI_SOURCE, TAG_REPORT, s->comm, MPI_STATUS_IGNORE);
        r.name[NAME_LEN - 1] = r.line[sizeof r.line - 1] = 0;
        if (status.MPI_SOURCE > 0 && status.MPI_SOURCE < s->size && !heard[status.MPI_SOURCE]) {
            all[status.MPI_SOURCE] = r;
            heard[status.MPI_SOURCE] = 1;
            left--;
        }
    }
    summarize(s, all, heard);
}

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
    struct stall *s = arg;
    double since = now_s(), last_poll = since;
    int was_armed = 0;
    while (!__atomic_load_n(&s->stop, __ATOMIC_ACQUIRE)) {
        double limit = limit_of(s), now = now_s();
        double poll = limit / 20 < 0.1 ? limit / 20 : 0.1;
        /* This thread did not run for a while (the job suspended and
         * resumed, or starved): no news about the work, whose clock
         * restarts. */
        if (now - last_poll > limit / 4 && now - last_poll > 10 * poll)
            since = now;
        last_poll = now;
        int armed = __atomic_load_n(&s->armed, __ATOMIC_ACQUIRE);
        if (armed && !was_armed)
            since = now;
        was_armed = armed;
        if (s->size > 1) {
            int flag = 0;
            MPI_Test(&s->notice, &flag, MPI_STATUS_IGNORE);
            if (flag)
                on_stall(s, 0, since);
        }
        if (armed) {
            long pending;
            double last;
            sc_progress_poll(&pending, &last);
            if (pending > 0 && now - (last > since ? last : since) > limit)
                on_stall(s, 1, since);
        }
        nap(poll);
    }
    return NULL;
}

int sc_stall_start(MPI_Comm world, double timeout)
{
    int size, rank;
    MPI_Comm_size(world, &size);
    MPI_Comm_rank(world, &rank);
    /* All ranks decide alike: rank 0's timeout, and off if any rank runs
     * under valgrind, which starves such threads. */
    double mine[2] = {rank == 0 ? timeout : -1e300, under_valgrind()}, all[2];
    if (MPI_Allreduce(mine, all, 2, MPI_DOUBLE, MPI_MAX, world) != MPI_SUCCESS)
        return sc_error(SC_ERR_RUNTIME, "MPI_Allreduce failed");
    timeout = all[0];
    if (timeout == 0 || all[1] > 0)
        return 0;
    if (sc_progress_enable())
        return sc_error(SC_ERR_NOMEM, "out of memory for the stall watchdog");
    struct stall *s = calloc(1, sizeof *s);
    if (!s)
        return sc_error(SC_ERR_NOMEM, "out of memory for the stall watchdog");
    if (MPI_Comm_dup(world, &s->comm) != MPI_SUCCESS) {
        free(s);
        return sc_error(SC_ERR_RUNTIME, "MPI_Comm_dup failed");
    }
    s->rank = rank;
    s->size = size;
    s->timeout = timeout;
    s->notice = MPI_REQUEST_NULL;
    if (size > 1)
        MPI_Irecv(&s->notice_buf, 1, MPI_INT, MPI_ANY_SOURCE, TAG_NOTICE, s->comm, &s->notice);
    if (pthread_create(&s->thread, NULL, watch, s)) {
        if (size > 1) {
            MPI_Cancel(&s->notice);
            MPI_Wait(&s->notice, MPI_STATUS_IGNORE);
        }
        MPI_Comm_free(&s->comm);
        free(s);
        return sc_error(SC_ERR_RUNTIME, "cannot start the stall watchdog's thread");
    }
    st = s;
    return 0;
}

void sc_stall_arm(int on)
{
    if (st)
        __atomic_store_n(&st->armed, on, __ATOMIC_RELEASE);
}

void sc_stall_iteration_seconds(double seconds)
{
    struct stall *s = st;
    if (!s)
        return;
    double old; /* only the main thread writes it */
    __atomic_load(&s->slowest, &old, __ATOMIC_RELAXED);
    if (seconds > old)
        __atomic_store(&s->slowest, &seconds, __ATOMIC_RELAXED);
}

void sc_stall_stop(void)
{
    struct stall *s = st;
    if (!s)
        return;
    __atomic_store_n(&s->stop, 1, __ATOMIC_RELEASE);
    pthread_join(s->thread, NULL);
    if (s->notice != MPI_REQUEST_NULL) {
        MPI_Cancel(&s->notice);
        MPI_Wait(&s->notice, MPI_STATUS_IGNORE);
    }
    MPI_Comm_free(&s->comm);
    free(s);
    st = NULL;
}
