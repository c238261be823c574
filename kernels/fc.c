/* The fully connected layer's products through CBLAS (kernels.h):
 * x[n][in], params = [W[out][in] | b[out]], all row-major. */
#include "kernels.h"

#include <cblas.h>
#include <stddef.h>

void sc_fc_compute(enum sc_fc_dir dir, const struct sc_fc_args *a, const float *in0, const float *in1, float *out)
{
    switch (dir) {
    case SC_FC_FWD: { /* y = relu?(x W^T + b): in0 x, in1 params, out y */
        const float *b = in1 + (size_t)a->out * a->in;
        for (int i = 0; i < a->n; i++)
            for (int o = 0; o < a->out; o++)
                out[(size_t)i * a->out + o] = b[o];
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a->n, a->out, a->in, 1.0f, in0, a->in, in1, a->in, 1.0f,
                    out, a->out);
        if (a->relu)
            sc_relu_inplace(out, (size_t)a->n * a->out);
        break;
    }
    case SC_FC_BWD_DATA: /* dx = dy W: in0 dy, in1 params, out dx */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a->n, a->in, a->out, 1.0f, in0, a->out, in1, a->in, 0.0f,
                    out, a->in);
        break;
    case SC_FC_BWD_WEIGHTS: { /* dW = dy^T x, db = column sums of dy: in0 x, in1 dy, out dparams */
        float *db = out + (size_t)a->out * a->in;
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a->out, a->in, a->n, 1.0f, in1, a->out, in0, a->in, 0.0f,
                    out, a->in);
        for (int o = 0; o < a->out; o++)
            db[o] = 0.0f;
        for (int i = 0; i < a->n; i++)
            for (int o = 0; o < a->out; o++)
                db[o] += in1[(size_t)i * a->out + o];
        break;
    }
    }
}
