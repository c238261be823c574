/* Stall watchdog: notices a job whose ranks are alive but make no
 * progress (a collective one rank never joins, a message that never
 * arrives, a kernel or an NCCL call that never returns), says what each
 * rank waits for and which rank did not get where the others wait for it,
 * and stops the job, instead of hanging until the batch system kills it.
 *
 * Every rank keeps what it waits for (base/progress.h: the tasks,
 * transfers and collectives submitted and not completed).  A thread on
 * every rank polls it; when, while training, nothing has completed for
 * the timeout with something pending, it tells every other rank, and each
 * rank prints one line on stderr: the oldest thing it waits for (whatever
 * was submitted before it is done, so it waits for nothing else of its
 * rank): its own task, by the name traces use, with how long it has run,
 * or a message from or to a peer (name, tag), or a collective.  Rank 0
 * gathers these lines, asks each peer that a rank waits for whether it
 * got as far as the matching send, receive or collective, and prints one
 * summary line naming the rank(s) that did not reach the point the others
 * wait at (or whose own task does not finish); then MPI_Abort with
 * SC_STALL_EXIT.  The thread uses its own communicator and needs
 * MPI_THREAD_MULTIPLE, as the peer watchdog (watchdog.h), which notices
 * ranks that stop answering at all. */
#ifndef SC_STALL_H
#define SC_STALL_H

#include <mpi.h>

/* The job's exit status when the stall watchdog stops it: the peer
 * watchdog's (a rank that stopped responding), which a job script treats
 * alike. */
#define SC_STALL_EXIT 4

/* The default's floor: a first iteration that creates kernels' primitives
 * and calibrates, or a loaded machine, is no stall. */
#define SC_STALL_MIN_DEFAULT 60.0
/* ... and its multiple of the slowest iteration seen. */
#define SC_STALL_ITERATIONS 20.0

/* Collective, right after MPI_Init and before anything is submitted:
 * starts the registry and the thread.  timeout > 0: seconds; < 0: the
 * default, SC_STALL_ITERATIONS times the slowest iteration seen and at
 * least SC_STALL_MIN_DEFAULT; 0, one rank or valgrind: off.  Rank 0's
 * value applies to all ranks.  Returns 0 or an SC_ERR_* code. */
int sc_stall_start(MPI_Comm world, double timeout);
/* Watching on (the training loop's iterations) or off (set-up, saving). */
void sc_stall_arm(int on);
/* The main thread's measure of an iteration's time, for the default. */
void sc_stall_iteration_seconds(double seconds);
/* Before MPI_Finalize: stops the thread and frees its communicator. */
void sc_stall_stop(void);

#endif
