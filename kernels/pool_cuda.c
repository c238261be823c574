/* Pooling on the GPU (cuda_ctx.h), through our own kernels rather than
 * cuDNN's pooling: the backward pass has only dy and the workspace (no x,
 * y), and the workspace must be oneDNN's, so that a forward and a backward
 * may run on different kinds of workers (cuda/sc_kernels_nn.cu).  Built
 * only with SC_USE_CUDA. */
#include "cuda_ctx.h"

void sc_pool_compute_cuda(const struct sc_cuda_ctx *c, enum sc_pool_dir dir, const struct sc_pool_args *a,
                          const float *in, float *out, void *ws)
{
    struct sc_cuda_pool p = {a->n,  a->c,  a->h,  a->w,  a->kh, a->kw,  a->sh,
                             a->sw, a->ph, a->pw, a->oh, a->ow, a->max, a->include_pad};
    cudaStream_t s = c->stream;
    if (dir == SC_POOL_BWD)
        sc_cuda_check(sc_cuda_pool_bwd(&p, in, ws, out, s), "pool_bwd");
    else
        sc_cuda_check(sc_cuda_pool_fwd(&p, in, out, ws, s), "pool_fwd");
}
