/* What a rank waits for: the tasks, transfers and collectives it has
 * submitted and that have not completed, and when one last completed, for
 * the stall watchdog (src/runtime/stall.h).  The codelets register their
 * tasks (SC_TASK_ATTRS), tasks/ its transfers and collectives; the
 * watchdog reads.  No StarPU, no MPI: a peer is a rank number of the
 * world (StarPU-MPI's transfers go over the world's communicator).
 *
 * Off (sc_progress_on 0) unless the watchdog is: nothing is registered
 * and nothing costs more than a load and a branch. */
#ifndef SC_BASE_PROGRESS_H
#define SC_BASE_PROGRESS_H

#include <stdint.h>

enum sc_wait_kind {
    SC_WAIT_TASK, /* a task of this rank: not started, or running */
    SC_WAIT_SEND, /* a message to peer, waiting for its data or for peer */
    SC_WAIT_RECV, /* a message from peer */
    SC_WAIT_COLL, /* a collective over the ranks of group */
};

/* One thing waited for.  name is the caller's, and must live as long as the
 * run (a layer's, a plan's or a collective's own name): traces use the
 * same names. */
struct sc_wait {
    const char *name;
    int kind;
    int peer;          /* SEND, RECV: the other rank */
    int64_t tag;       /* SEND, RECV: the message's tag */
    const int *group;  /* COLL: the ranks of the collective, in the world's numbering */
    int ngroup;        /* COLL: how many (0: unknown) */
    int64_t iteration; /* the training iteration being submitted (sc_progress_set_iteration) */
    int64_t nth;       /* SEND, RECV, COLL: the how-manieth of its kind, name, peer and tag (from 1) */
    uint64_t seq;      /* order of submission on this rank, from 1 */
    double submitted;  /* seconds, on sc_progress_now's clock */
    double started;    /* a task that began to run; 0: not begun */
    int worker;        /* the StarPU worker running it; -1: none */
    void *rec;         /* the caller's (a trace record that the completion fills), or NULL */
    /* the registry's */
    int pending;
    struct sc_wait *next_free;
};

extern int sc_progress_on;

/* Turns the registry on, once, before anything is submitted. */
int sc_progress_enable(void);
/* The iteration that the items submitted from now on belong to. */
void sc_progress_set_iteration(int64_t iteration);
/* Seconds on a monotonic clock. */
double sc_progress_now(void);

/* Registers one item submitted now; NULL when off (or out of memory: the
 * item is then not watched).  peer and tag for transfers, group and
 * ngroup for collectives (else -1, 0, NULL, 0). */
struct sc_wait *sc_progress_add(int kind, const char *name, int peer, int64_t tag, const int *group, int ngroup,
                                void *rec);
/* The item began to run on worker (a task) or was posted (a collective). */
void sc_progress_begin(struct sc_wait *w, int worker);
/* The item completed: it is forgotten, and the rank made progress.
 * Returns its rec. */
void *sc_progress_done(struct sc_wait *w);

/* What the watchdog polls: items pending, and when the last completed (or,
 * if none was pending before the oldest of them, when that was
 * submitted). */
void sc_progress_poll(long *pending, double *last_progress);
/* A copy of what the rank waits for first: the oldest pending item (the
 * lowest seq), everything submitted before which has completed, so that it
 * waits for no other item of this rank; but a task that has begun and not
 * finished comes first (the one that began first): it holds its worker,
 * and the tasks that wait for a worker wait for it.  Returns 0 when
 * nothing is pending. */
int sc_progress_oldest(struct sc_wait *out);
/* How many items of this kind, name (compared by contents), peer and tag
 * were submitted here (for COLL, peer and tag are not compared).  For a
 * rank that waits for its nth message or collective from this rank: did
 * this rank get as far?  Counts, not iterations: a transfer's or
 * collective's later pieces may be submitted from callbacks, while the
 * main thread submits a later iteration. */
int64_t sc_progress_reached(int kind, const char *name, int peer, int64_t tag);

#endif
