/* Checkpoint on a signal (see preempt.h). */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "src/train/preempt.h"

static volatile sig_atomic_t caught; /* the first signal; 0: none yet */

/* The first signal is noted for the loop; a second one takes the signal's
 * default action at once (the process ends by it), since whoever sends it
 * wants no more waiting. */
static void on_signal(int sig)
{
    if (caught) {
        signal(sig, SIG_DFL);
        raise(sig);
        return;
    }
    caught = sig;
}

static void signal_set(sigset_t *set)
{
    sigemptyset(set);
    sigaddset(set, SIGTERM);
    sigaddset(set, SIGUSR1);
}

void sc_preempt_block_signals(void)
{
    sigset_t set;
    signal_set(&set);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
}

int sc_preempt_arm(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* MPI's and StarPU's calls on this thread go on */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTERM, &sa, NULL) || sigaction(SIGUSR1, &sa, NULL))
        return sc_error(SC_ERR_RUNTIME, "--checkpoint-signal: cannot install the signal handler");
    sigset_t set;
    signal_set(&set);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
    return 0;
}

/* Collectives in flight: the one posted at a boundary is waited for
 * LAG boundaries later, so that a rank whose submission runs some
 * iterations behind the others' (they are throttled each by their own
 * tasks' progress) seldom keeps them waiting. */
enum { LAG = 4 };

struct sc_preempt {
    MPI_Comm comm; /* its own, so that its collectives pair with nothing else */
    int size, rank;
    long polls;
    MPI_Request req[LAG];          /* req[polls % LAG]: the oldest in flight */
    int mine[LAG][2], all[LAG][2]; /* {signal, rank}, reduced by MPI_MAXLOC */
    double waited;                 /* seconds in MPI_Wait, for the log */
};

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

int sc_preempt_start(struct sc_runtime *rt, struct sc_preempt **out)
{
    struct sc_preempt *p = calloc(1, sizeof *p);
    int err = p ? 0 : sc_error(SC_ERR_NOMEM, "out of memory");
    if ((err = sc_runtime_agree(rt, err))) {
        free(p);
        return err;
    }
    p->size = rt->size;
    p->rank = rt->rank;
    for (int i = 0; i < LAG; i++)
        p->req[i] = MPI_REQUEST_NULL;
    p->comm = MPI_COMM_NULL;
    if (rt->size > 1 && MPI_Comm_dup(rt->ctl, &p->comm) != MPI_SUCCESS) {
        free(p);
        return sc_error(SC_ERR_RUNTIME, "MPI_Comm_dup failed");
    }
    *out = p;
    return 0;
}

int sc_preempt_poll(struct sc_preempt *p, int *from)
{
    *from = 0;
    if (p->size == 1)
        return caught;
    int i = (int)(p->polls % LAG);
    if (p->req[i] != MPI_REQUEST_NULL) {
        double t0 = now_s();
        MPI_Wait(&p->req[i], MPI_STATUS_IGNORE);
        p->waited += now_s() - t0;
        if (p->all[i][0]) {
            *from = p->all[i][1];
            return p->all[i][0];
        }
    }
    p->mine[i][0] = caught;
    p->mine[i][1] = p->rank;
    MPI_Iallreduce(p->mine[i], p->all[i], 1, MPI_2INT, MPI_MAXLOC, p->comm, &p->req[i]);
    p->polls++;
    return 0;
}

const char *sc_preempt_signal_name(int sig)
{
    return sig == SIGTERM ? "SIGTERM" : sig == SIGUSR1 ? "SIGUSR1" : "a signal";
}

void sc_preempt_finish(struct sc_preempt *p)
{
    if (!p)
        return;
    MPI_Waitall(LAG, p->req, MPI_STATUSES_IGNORE);
    if (p->polls)
        SC_LOG(2, "--checkpoint-signal: %ld agreements, %.3f ms waited for them in all", p->polls, 1e3 * p->waited);
    if (p->comm != MPI_COMM_NULL)
        MPI_Comm_free(&p->comm);
    free(p);
}
