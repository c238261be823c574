/* dst += src, for the vectors of floats of gradient sums and collectives,
 * and for the vectors of doubles of batch-normalization statistics. */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static void cl_accumulate_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_accumulate((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                  STARPU_VECTOR_GET_NX(buffers[0]));
}

#ifdef SC_USE_CUDA
static void cl_accumulate_cuda_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_cuda_check(sc_cuda_accumulate((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                     (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), STARPU_VECTOR_GET_NX(buffers[0]),
                                     starpu_cuda_get_local_stream()),
                  "accumulate");
}
#endif

SC_PERFMODEL(accumulate_model, "sc_accumulate", NULL);

SC_CODELET(cl_accumulate, "accumulate", &accumulate_model, cl_accumulate_cpu_func, cl_accumulate_cuda_func, 2,
           STARPU_RW, STARPU_R);

int sc_insert_accumulate(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                         const char *name)
{
    int ret = sc_check_same_length("accumulate", dst, "dst", src, "src");
    if (ret)
        return ret;
    return sc_insert_result(
        starpu_task_insert(&cl_accumulate, STARPU_RW, dst, STARPU_R, src, SC_TASK_ATTRS(opts, name), 0), "accumulate");
}

/* ---- dst += src over double vectors ---- */

static void cl_accumulate_f64_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_accumulate_f64((double *)STARPU_VECTOR_GET_PTR(buffers[0]), (const double *)STARPU_VECTOR_GET_PTR(buffers[1]),
                      STARPU_VECTOR_GET_NX(buffers[0]));
}

#ifdef SC_USE_CUDA
static void cl_accumulate_f64_cuda_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_cuda_check(sc_cuda_accumulate_f64((double *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                         (const double *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                         STARPU_VECTOR_GET_NX(buffers[0]), starpu_cuda_get_local_stream()),
                  "accumulate_f64");
}
#endif

SC_PERFMODEL(accumulate_f64_model, "sc_accumulate_f64", NULL);

SC_CODELET(cl_accumulate_f64, "accumulate_f64", &accumulate_f64_model, cl_accumulate_f64_cpu_func,
           cl_accumulate_f64_cuda_func, 2, STARPU_RW, STARPU_R);

int sc_insert_accumulate_f64(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                             const char *name)
{
    const char *op = "accumulate_f64";
    int ret;
    if ((ret = sc_check_vec(dst, 0, sizeof(double), op, "dst")) ||
        (ret = sc_check_vec(src, 0, sizeof(double), op, "src")))
        return ret;
    if (starpu_vector_get_nx(dst) != starpu_vector_get_nx(src))
        return sc_error(SC_ERR_SHAPE, "%s: dst has %zu elements, src %zu", op, (size_t)starpu_vector_get_nx(dst),
                        (size_t)starpu_vector_get_nx(src));
    return sc_insert_result(
        starpu_task_insert(&cl_accumulate_f64, STARPU_RW, dst, STARPU_R, src, SC_TASK_ATTRS(opts, name), 0), op);
}
