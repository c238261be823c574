/* The fully connected layer's products through cuBLAS, for the CUDA
 * workers (cuda_ctx.h), as sc_fc_compute.  Built with SC_USE_CUDA only.
 *
 * cuBLAS is column-major: a row-major M[r][c] is its c x r matrix M^T,
 * so each row-major product C = A B below is computed as C^T = B^T A^T. */
#include "cuda_ctx.h"

#include <stddef.h>

void sc_fc_compute_cuda(const struct sc_cuda_ctx *c, enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0,
                        const float *in1, float *out)
{
    static const char *const ops[3] = {"fc_fwd", "fc_bwd_data", "fc_bwd_weights"};
    static const float one = 1.0f, zero = 0.0f;
    const char *op = ops[dir];
    cublasHandle_t h = c->cublas;
    if (!h) {
        sc_fail_record(op, "no cuBLAS handle on this worker");
        return;
    }
    switch (dir) {
    case SC_FC_FWD: /* y^T (out x n) = W (out x in, stored as in x out) ^T . x^T (in x n) + b */
        if (sc_cuda_check(sc_cuda_fill_rows(out, in1 + (size_t)a->out * a->in, a->n, a->out, c->stream), op) ||
            sc_cublas_check(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, a->out, a->n, a->in, &one, in1, a->in, in0, a->in,
                                        &one, out, a->out),
                            op))
            return;
        if (a->relu)
            sc_cuda_check(sc_cuda_relu(out, (size_t)a->n * a->out, c->stream), op);
        break;
    case SC_FC_BWD_DATA: /* dx^T (in x n) = W^T (in x out, as stored) . dy^T (out x n) */
        sc_cublas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, a->in, a->n, a->out, &one, in1, a->in, in0, a->out,
                                    &zero, out, a->in),
                        op);
        break;
    case SC_FC_BWD_WEIGHTS: /* dW^T (in x out) = x^T (in x n) . dy (n x out, stored as out x n) */
        if (sc_cublas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, a->in, a->out, a->n, &one, in0, a->in, in1, a->out,
                                        &zero, out, a->in),
                            op))
            return;
        sc_cuda_check(sc_cuda_col_sums(out + (size_t)a->out * a->in, in1, a->n, a->out, c->stream), op);
        break;
    }
}
