/* Kernel failures agreed across the ranks (kernel_failure.h). */
#include <limits.h>
#include <mpi.h>

#include "codelets/codelets.h"
#include "kernels/fail.h"
#include "src/runtime/kernel_failure.h"
#include "base/error.h"
#include "base/progress.h"

int sc_kernel_failure_check(struct sc_runtime *rt)
{
    struct sc_fail f;
    int mine = sc_fail_first(&f) ? rt->rank : INT_MAX, who;
    MPI_Allreduce(&mine, &who, 1, MPI_INT, MPI_MIN, rt->ctl);
    if (who == INT_MAX)
        return 0;
    char line[448] = "";
    if (rt->rank == who)
        sc_fail_describe(&f, line, sizeof line);
    MPI_Bcast(line, (int)sizeof line, MPI_CHAR, who, rt->ctl);
    line[sizeof line - 1] = 0;
    /* the one line is this; what fails while the tasks in flight drain
     * follows from it */
    sc_fail_set_reported();
    return sc_error(SC_ERR_KERNEL, "rank %d: %s", who, line);
}

void sc_kernel_failure_iteration(int64_t iteration)
{
    sc_fail_inject_iteration(iteration);
    if (iteration > 0) /* what the stall watchdog names: the iteration of the work */
        sc_progress_set_iteration(iteration);
}
