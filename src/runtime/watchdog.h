/* Peer watchdog: notices a rank that stopped responding (killed, stopped,
 * out of memory, node lost) and stops the whole job with a message naming
 * it, instead of hanging in a transfer.
 *
 * The ranks form a ring: a thread on every rank sends a small heartbeat to
 * its successor about once a second and watches its predecessor.  When the
 * predecessor has not been heard from for `timeout` seconds, or an MPI call
 * to it fails, the thread prints one line on stderr and calls
 * MPI_Abort(MPI_COMM_WORLD, 3), after which mpirun kills every rank.
 *
 * The thread uses its own communicator (a duplicate of MPI_COMM_WORLD with
 * MPI_ERRORS_RETURN), so it needs MPI_THREAD_MULTIPLE.  It sleeps between
 * polls (100 ms at most) and is independent of the computation, so a long
 * compute phase on one rank is no alarm. */
#ifndef SC_WATCHDOG_H
#define SC_WATCHDOG_H

#include <mpi.h>

/* Exit status of the job when the watchdog stops it (MPI_Abort's code):
 * not 2 (bad input) nor 3 (divergence), so that a script can tell. */
#define SC_WATCHDOG_EXIT 4

/* Starts the watchdog over the ranks of world (collective: every rank calls
 * it, right after MPI_Init).  timeout <= 0 or one rank: does nothing and
 * returns 0.  Returns 0 or an SC_ERR_* code (sc_error set). */
int sc_watchdog_start(MPI_Comm world, double timeout);

/* Stops it before MPI_Finalize: sends "bye" to the successor, then keeps
 * watching the predecessor until its "bye" arrives (so a rank that finishes
 * late, e.g. writing a checkpoint, is still watched and no alarm is raised),
 * completes every request, joins the thread and frees the communicator.
 * wait_for_peer = 0 (error paths, where the other ranks may never get here):
 * does not wait for the predecessor's "bye". */
void sc_watchdog_stop(int wait_for_peer);

#endif
