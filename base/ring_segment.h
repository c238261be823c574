/* The segment size of the ring collectives (tasks/tasks.h, sc_ring_opts):
 * the default, and the rule of --comm-segment auto, which sizes segments
 * to the bandwidth of the link between the ranks.  One owner for the
 * runtime (tasks/collectives.c measures the link and applies it), the
 * calibration (which times the ring as training sizes it) and the planner
 * (src/planner/, which applies it to a calibration's link). */
#ifndef SC_BASE_RING_SEGMENT_H
#define SC_BASE_RING_SEGMENT_H

#include <stddef.h>

/* KiB per segment where no link is measured (one rank) and the least
 * that --comm-segment auto gives. */
#define SC_RING_SEGMENT_KB_DEFAULT 512
/* Up to this many KiB a vector takes the direct path of the collectives
 * (tasks/tasks.h, sc_ring_opts.direct_kb 0), which sends fp32 whatever
 * --grad-dtype says: the planner prices it so. */
#define SC_RING_DIRECT_KB_DEFAULT 64
/* The message the link probe times (sc_link_segment_kb in tasks/tasks.h):
 * one such message to the ring neighbour, every rank at once. */
#define SC_LINK_PROBE_BYTES ((size_t)1 << 20)

/* The segment for a link of bytes_per_s (0: unknown): each segment is a
 * StarPU-MPI message, whose fixed cost beyond MPI's own time (a task, a
 * request, the progress thread's turn: a default, not measured) a slow
 * network's transfer time repays and shared memory's does not.  The
 * segment carries 4 such overheads' worth of bytes at that bandwidth, a
 * power of two times the default, never below it (on slow links urgent
 * collectives pass a large one sooner) nor above 64 MiB. */
int sc_ring_segment_kb_for(double bytes_per_s);

#endif
