/* Launch geometry shared by the .cu files: THREADS per block, and grids
 * for grid-stride loops over n elements. */
#ifndef SC_LAUNCH_CUH
#define SC_LAUNCH_CUH

#include <stddef.h>

static const int THREADS = 256;

/* Enough blocks to fill a GPU, never more than needed. */
static inline unsigned blocks_for(size_t n)
{
    size_t b = (n + THREADS - 1) / THREADS;
    if (b > 65535u * 4)
        b = 65535u * 4;
    return b ? (unsigned)b : 1u;
}

#define GRID_STRIDE(i, n)                                                                                              \
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (size_t)gridDim.x * blockDim.x)

#endif
