/* count += 1 when a vector of floats holds a NaN or an Inf: the gate's
 * check of one gradient piece. */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

static void cl_count_nonfinite_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_count_nonfinite((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                       STARPU_VECTOR_GET_NX(buffers[1]));
}

#ifdef SC_USE_CUDA
static void cl_count_nonfinite_cuda_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    int *flag = sc_cuda_small_int();
    if (!flag) {
        sc_fail_record("count_nonfinite", "no device buffer for the count");
        return;
    }
    sc_cuda_check(sc_cuda_count_nonfinite((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                          (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                          STARPU_VECTOR_GET_NX(buffers[1]), flag, starpu_cuda_get_local_stream()),
                  "count_nonfinite");
}
#endif

SC_PERFMODEL(count_nonfinite_model, "sc_count_nonfinite", NULL);

SC_CODELET(cl_count_nonfinite, "count_nonfinite", &count_nonfinite_model, cl_count_nonfinite_cpu_func,
           cl_count_nonfinite_cuda_func, 2, STARPU_RW | STARPU_COMMUTE, STARPU_R);

int sc_insert_count_nonfinite(const struct sc_task_opts *opts, starpu_data_handle_t count, starpu_data_handle_t g,
                              const char *name)
{
    int ret;
    if ((ret = sc_check_vec(count, 1, sizeof(float), "count_nonfinite", "count")) ||
        (ret = sc_check_vec(g, 0, sizeof(float), "count_nonfinite", "g")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_count_nonfinite, STARPU_RW | STARPU_COMMUTE, count, STARPU_R, g,
                                               SC_TASK_ATTRS(opts, name), 0),
                            "count_nonfinite");
}
