/* Fully connected layer through CBLAS: x[n][in], params = [W[out][in] | b[out]]. */
#include "cl_common.h"

#include <cblas.h>
#ifdef SC_USE_CUDA
#include "cuda/sc_cuda.h"

#include <starpu_cuda.h>
#endif

#ifdef SC_USE_CUDA
/* cuBLAS is column-major: a row-major M[r][c] is its c x r matrix M^T,
 * so each row-major product C = A B below is computed as C^T = B^T A^T. */
static const float one = 1.0f, zero = 0.0f;
#endif

static int fc_check(const struct sc_fc_args *a, const char *op, starpu_data_handle_t in,
                    size_t nin, const char *in_name, starpu_data_handle_t h1, size_t n1,
                    const char *name1, starpu_data_handle_t out, size_t nout, const char *out_name)
{
    int ret;
    if (a->n < 1 || a->in < 1 || a->out < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d in%d out%d", op, a->n, a->in, a->out);
    if ((ret = sc_check_vec(in, nin, sizeof(float), op, in_name)) ||
        (ret = sc_check_vec(h1, n1, sizeof(float), op, name1)) ||
        (ret = sc_check_vec(out, nout, sizeof(float), op, out_name)))
        return ret;
    return 0;
}

/* ---- forward: y = relu?(x W^T + b) ---- */

static void cl_fc_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *w = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), *b = w + (size_t)a.out * a.in;
    float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    for (int i = 0; i < a.n; i++)
        for (int o = 0; o < a.out; o++)
            y[(size_t)i * a.out + o] = b[o];
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, a.n, a.out, a.in, 1.0f, x, a.in, w, a.in,
                1.0f, y, a.out);
    if (a.relu)
        for (size_t i = 0; i < (size_t)a.n * a.out; i++)
            y[i] = y[i] > 0.0f ? y[i] : 0.0f;
}

#ifdef SC_USE_CUDA
static void cl_fc_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *w = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), *b = w + (size_t)a.out * a.in;
    float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    cudaStream_t s = starpu_cuda_get_local_stream();
    cublasHandle_t h = sc_cublas_handle();
    if (!h) {
        sc_kernel_failed("fc_fwd");
        return;
    }
    /* y^T (out x n) = W (out x in, stored as in x out) ^T . x^T (in x n) + b */
    if (sc_cuda_check(sc_cuda_fill_rows(y, b, a.n, a.out, s), "fc_fwd") ||
        sc_cublas_check(cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, a.out, a.n, a.in, &one, w, a.in, x, a.in, &one, y,
                                    a.out),
                        "fc_fwd"))
        return;
    if (a.relu)
        sc_cuda_check(sc_cuda_relu(y, (size_t)a.n * a.out, s), "fc_fwd");
}
#endif

SC_PERFMODEL(fc_fwd_model, "sc_fc_fwd", sc_footprint_args);

SC_CODELET(cl_fc_fwd, "fc_fwd", &fc_fwd_model, cl_fc_fwd_cpu_func, cl_fc_fwd_cuda_func, 3, STARPU_R, STARPU_R,
           STARPU_W);

int sc_insert_fc_fwd(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t x,
                     starpu_data_handle_t params, starpu_data_handle_t y, const char *name)
{
    int ret = fc_check(a, "fc_fwd", x, (size_t)a->n * a->in, "x", params,
                       (size_t)a->out * a->in + a->out, "params", y, (size_t)a->n * a->out, "y");
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_fc_fwd, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R, params,
                                               STARPU_W, y, SC_TASK_ATTRS(opts, name), 0),
                            "fc_fwd");
}

/* ---- backward data: dx = dy W ---- */

static void cl_fc_bwd_data_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *w = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, a.n, a.in, a.out, 1.0f, dy, a.out, w, a.in,
                0.0f, dx, a.in);
}

#ifdef SC_USE_CUDA
static void cl_fc_bwd_data_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    cublasHandle_t h = sc_cublas_handle();
    if (!h) {
        sc_kernel_failed("fc_bwd_data");
        return;
    }
    /* dx^T (in x n) = W^T (in x out, as stored) . dy^T (out x n) */
    sc_cublas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_N, a.in, a.n, a.out, &one,
                                (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), a.in,
                                (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), a.out, &zero,
                                (float *)STARPU_VECTOR_GET_PTR(buffers[2]), a.in),
                    "fc_bwd_data");
}
#endif

SC_PERFMODEL(fc_bwd_data_model, "sc_fc_bwd_data", sc_footprint_args);

SC_CODELET(cl_fc_bwd_data, "fc_bwd_data", &fc_bwd_data_model, cl_fc_bwd_data_cpu_func, cl_fc_bwd_data_cuda_func, 3,
           STARPU_R, STARPU_R, STARPU_W);

int sc_insert_fc_bwd_data(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t dy,
                          starpu_data_handle_t params, starpu_data_handle_t dx, const char *name)
{
    int ret = fc_check(a, "fc_bwd_data", dy, (size_t)a->n * a->out, "dy", params,
                       (size_t)a->out * a->in, "params", dx, (size_t)a->n * a->in, "dx");
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_fc_bwd_data, STARPU_VALUE, a, sizeof *a, STARPU_R, dy, STARPU_R,
                                               params, STARPU_W, dx, SC_TASK_ATTRS(opts, name), 0),
                            "fc_bwd_data");
}

/* ---- backward weights: dW = dy^T x, db = column sums of dy ---- */

static void cl_fc_bwd_weights_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    float *dw = (float *)STARPU_VECTOR_GET_PTR(buffers[2]), *db = dw + (size_t)a.out * a.in;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, a.out, a.in, a.n, 1.0f, dy, a.out, x, a.in,
                0.0f, dw, a.in);
    for (int o = 0; o < a.out; o++)
        db[o] = 0.0f;
    for (int i = 0; i < a.n; i++)
        for (int o = 0; o < a.out; o++)
            db[o] += dy[(size_t)i * a.out + o];
}

#ifdef SC_USE_CUDA
static void cl_fc_bwd_weights_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    float *dw = (float *)STARPU_VECTOR_GET_PTR(buffers[2]), *db = dw + (size_t)a.out * a.in;
    cublasHandle_t h = sc_cublas_handle();
    if (!h) {
        sc_kernel_failed("fc_bwd_weights");
        return;
    }
    /* dW^T (in x out) = x^T (in x n) . dy (n x out, stored as out x n) */
    if (sc_cublas_check(cublasSgemm(h, CUBLAS_OP_N, CUBLAS_OP_T, a.in, a.out, a.n, &one, x, a.in, dy, a.out, &zero,
                                    dw, a.in),
                        "fc_bwd_weights"))
        return;
    sc_cuda_check(sc_cuda_col_sums(db, dy, a.n, a.out, starpu_cuda_get_local_stream()), "fc_bwd_weights");
}
#endif

SC_PERFMODEL(fc_bwd_weights_model, "sc_fc_bwd_weights", sc_footprint_args);

SC_CODELET(cl_fc_bwd_weights, "fc_bwd_weights", &fc_bwd_weights_model, cl_fc_bwd_weights_cpu_func,
           cl_fc_bwd_weights_cuda_func, 3, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_fc_bwd_weights(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t x,
                             starpu_data_handle_t dy, starpu_data_handle_t dparams, const char *name)
{
    int ret = fc_check(a, "fc_bwd_weights", x, (size_t)a->n * a->in, "x", dy, (size_t)a->n * a->out,
                       "dy", dparams, (size_t)a->out * a->in + a->out, "dparams");
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_fc_bwd_weights, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R,
                                               dy, STARPU_W, dparams, SC_TASK_ATTRS(opts, name), 0),
                            "fc_bwd_weights");
}
