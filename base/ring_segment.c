/* The ring's segment size rule (ring_segment.h). */
#include "base/ring_segment.h"

/* The default cost, in seconds, of a StarPU-MPI message beyond MPI's own
 * time, against which the segments are sized to the link's bandwidth. */
#define MESSAGE_OVERHEAD_S 100e-6
#define SEGMENT_OVERHEADS  4
#define SEGMENT_KB_MAX     (64 << 10)

int sc_ring_segment_kb_for(double bytes_per_s)
{
    int kb = SC_RING_SEGMENT_KB_DEFAULT;
    double want_kb = bytes_per_s * SEGMENT_OVERHEADS * MESSAGE_OVERHEAD_S / 1024;
    while (kb < SEGMENT_KB_MAX && 2.0 * kb <= want_kb)
        kb *= 2;
    return kb;
}
