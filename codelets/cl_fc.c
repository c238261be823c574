/* Fully connected layer: x[n][in], params = [W[out][in] | b[out]]; the
 * products through CBLAS on CPU workers (kernels/fc.c), cuBLAS on CUDA
 * workers (kernels/fc_cublas.c). */
#include "cl_common.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"
#endif

static int fc_check(const struct sc_fc_args *a, const char *op, starpu_data_handle_t in, size_t nin,
                    const char *in_name, starpu_data_handle_t h1, size_t n1, const char *name1,
                    starpu_data_handle_t out, size_t nout, const char *out_name)
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
    sc_fc_compute(sc_kernel_worker_self(), SC_FC_FWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

#ifdef SC_USE_CUDA
static void cl_fc_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_fc_compute_cuda(&c, SC_FC_FWD, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}
#endif

SC_PERFMODEL(fc_fwd_model, "sc_fc_fwd", sc_footprint_args);

SC_CODELET(cl_fc_fwd, "fc_fwd", &fc_fwd_model, cl_fc_fwd_cpu_func, cl_fc_fwd_cuda_func, 3, STARPU_R, STARPU_R,
           STARPU_W);

int sc_insert_fc_fwd(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t x,
                     starpu_data_handle_t params, starpu_data_handle_t y, const char *name)
{
    int ret = fc_check(a, "fc_fwd", x, (size_t)a->n * a->in, "x", params, (size_t)a->out * a->in + a->out, "params", y,
                       (size_t)a->n * a->out, "y");
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
    sc_fc_compute(sc_kernel_worker_self(), SC_FC_BWD_DATA, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

#ifdef SC_USE_CUDA
static void cl_fc_bwd_data_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_fc_compute_cuda(&c, SC_FC_BWD_DATA, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}
#endif

SC_PERFMODEL(fc_bwd_data_model, "sc_fc_bwd_data", sc_footprint_args);

SC_CODELET(cl_fc_bwd_data, "fc_bwd_data", &fc_bwd_data_model, cl_fc_bwd_data_cpu_func, cl_fc_bwd_data_cuda_func, 3,
           STARPU_R, STARPU_R, STARPU_W);

int sc_insert_fc_bwd_data(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t dy,
                          starpu_data_handle_t params, starpu_data_handle_t dx, const char *name)
{
    int ret = fc_check(a, "fc_bwd_data", dy, (size_t)a->n * a->out, "dy", params, (size_t)a->out * a->in, "params", dx,
                       (size_t)a->n * a->in, "dx");
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
    sc_fc_compute(sc_kernel_worker_self(), SC_FC_BWD_WEIGHTS, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

#ifdef SC_USE_CUDA
static void cl_fc_bwd_weights_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_fc_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_fc_compute_cuda(&c, SC_FC_BWD_WEIGHTS, &a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                       (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}
#endif

SC_PERFMODEL(fc_bwd_weights_model, "sc_fc_bwd_weights", sc_footprint_args);

SC_CODELET(cl_fc_bwd_weights, "fc_bwd_weights", &fc_bwd_weights_model, cl_fc_bwd_weights_cpu_func,
           cl_fc_bwd_weights_cuda_func, 3, STARPU_R, STARPU_R, STARPU_W);

int sc_insert_fc_bwd_weights(const struct sc_task_opts *opts, const struct sc_fc_args *a, starpu_data_handle_t x,
                             starpu_data_handle_t dy, starpu_data_handle_t dparams, const char *name)
{
    int ret = fc_check(a, "fc_bwd_weights", x, (size_t)a->n * a->in, "x", dy, (size_t)a->n * a->out, "dy", dparams,
                       (size_t)a->out * a->in + a->out, "dparams");
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_fc_bwd_weights, STARPU_VALUE, a, sizeof *a, STARPU_R, x, STARPU_R,
                                               dy, STARPU_W, dparams, SC_TASK_ATTRS(opts, name), 0),
                            "fc_bwd_weights");
}
