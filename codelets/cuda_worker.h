/* The CUDA workers under StarPU (cuda_worker.c), for the codelets built
 * with SC_USE_CUDA: each CUDA worker's state (kernels/cuda_ctx.h), made on
 * the worker's StarPU stream at sc_codelets_init, and the context the
 * codelets hand to the CUDA kernels.  No codelets here: each op's CUDA
 * function is in its own cl_<op>.c. */
#ifndef SC_CODELETS_CUDA_WORKER_H
#define SC_CODELETS_CUDA_WORKER_H

#include <stddef.h>

#include "kernels/cuda_ctx.h"

/* Start-up and shut-down of the per-worker state (from sc_codelets_init /
 * sc_codelets_shutdown); no-ops without CUDA workers.  sc_cuda_init: 0, or
 * SC_ERR_RUNTIME naming a CUDA worker whose cuDNN or cuBLAS handle could
 * not be made, with the library's error (from the worker's failure
 * record). */
int sc_cuda_init(void);
void sc_cuda_shutdown(void);
/* The size of the scratch handle (sc_workspace_handle): the cuDNN
 * workspace limit (sc_cuda_workspace_limit) where this rank has CUDA
 * workers, else 4 bytes.  0, or SC_ERR_ARG for a bad value. */
int sc_cuda_workspace_bytes(size_t *bytes);

/* The calling CUDA worker's context: its stream, handles, kernel state and
 * CUDA state.  All NULL outside a CUDA worker (or one whose start-up
 * failed). */
struct sc_cuda_ctx sc_cuda_ctx_self(void);
/* The calling worker's verdict; NULL outside a CUDA worker. */
struct sc_cuda_verdict *sc_cuda_worker_verdict(void);
/* A device int of the calling worker (beside the cross-entropy's
 * accumulators in its SC_CUDA_BUF_SMALL buffer); NULL on failure. */
int *sc_cuda_small_int(void);

#endif
