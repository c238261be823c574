/* Checkpoint on a signal (--checkpoint-signal): a batch system that
 * preempts or time-limits a job sends SIGTERM (or, ahead of the end, the
 * signal of SLURM's --signal, e.g. SIGUSR1); the training loop then ends
 * its current iteration, writes the --save checkpoint and stops with
 * SC_EXIT_CHECKPOINTED on every rank.  A second signal ends the process at
 * once, by the signal's default action.
 *
 * The ranks must stop after the same iteration even when only some of them
 * got the signal, or got it at different moments: at each iteration
 * boundary every rank posts a one-int MPI_Iallreduce of what it got, and
 * waits for the one it posted a few boundaries before (complete by then in
 * practice), so that all ranks learn of a signal at the same boundary, a
 * few iterations after it came.  The iterations then submitted run to
 * their end before the checkpoint, as at any checkpoint. */
#ifndef SC_TRAIN_PREEMPT_H
#define SC_TRAIN_PREEMPT_H

#include "src/runtime/runtime.h"

/* Exit status of a run that a signal stopped after writing its checkpoint:
 * EX_TEMPFAIL of sysexits.h ("try again later"), which no other outcome of
 * starconv-train and no signal's death (128 + N) shares, so that a job
 * script can requeue the job with --resume. */
#define SC_EXIT_CHECKPOINTED 75

/* Before the runtime starts its threads (MPI's, StarPU's, the watchdog's),
 * which inherit the mask: blocks SIGTERM and SIGUSR1, so that only the
 * thread that later arms the handler takes them. */
void sc_preempt_block_signals(void);
/* After the runtime has started, on the main thread: the handler for
 * SIGTERM and SIGUSR1, which are then unblocked on this thread. */
int sc_preempt_arm(void);

struct sc_preempt;
/* Collective: the state of the agreement over rt's ranks. */
int sc_preempt_start(struct sc_runtime *rt, struct sc_preempt **out);
/* Collective, at every iteration boundary: 0 to go on, or the signal that
 * every rank agrees to stop on (*from: the lowest rank that got it). */
int sc_preempt_poll(struct sc_preempt *p, int *from);
/* "SIGTERM", "SIGUSR1". */
const char *sc_preempt_signal_name(int sig);
/* Collective: completes the outstanding collective and frees p (NULL: nothing). */
void sc_preempt_finish(struct sc_preempt *p);

#endif
