/* Ordered sum: dst = ((src[0] + src[1]) + ...) + src[count-1], the same
 * bits on every rank (the group sums of split batch normalization). */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#include <stdio.h>

/* Buffers: the count sources, then dst. */

static void cl_sum_ordered_cpu_func(void *buffers[], void *cl_arg)
{
    int count, elemsize;
    starpu_codelet_unpack_args(cl_arg, &count, &elemsize);
    const void *src[SC_SUM_ORDERED_MAX];
    for (int k = 0; k < count; k++)
        src[k] = (const void *)STARPU_VECTOR_GET_PTR(buffers[k]);
    sc_sum_ordered(count, src, (void *)STARPU_VECTOR_GET_PTR(buffers[count]), STARPU_VECTOR_GET_NX(buffers[count]),
                   elemsize == (int)sizeof(double));
}

#ifdef SC_USE_CUDA
_Static_assert(SC_SUM_ORDERED_MAX <= SC_CUDA_SUM_MAX, "the CUDA ordered sum takes fewer sources");

static void cl_sum_ordered_cuda_func(void *buffers[], void *cl_arg)
{
    int count, elemsize;
    starpu_codelet_unpack_args(cl_arg, &count, &elemsize);
    const void *src[SC_SUM_ORDERED_MAX];
    for (int k = 0; k < count; k++)
        src[k] = (const void *)STARPU_VECTOR_GET_PTR(buffers[k]);
    sc_cuda_check(sc_cuda_sum_ordered(count, src, (void *)STARPU_VECTOR_GET_PTR(buffers[count]),
                                      STARPU_VECTOR_GET_NX(buffers[count]), elemsize == (int)sizeof(double),
                                      starpu_cuda_get_local_stream()),
                  "sum_ordered");
}
#endif

SC_PERFMODEL(sum_ordered_model, "sc_sum_ordered", NULL);

SC_CODELET(cl_sum_ordered, "sum_ordered", &sum_ordered_model, cl_sum_ordered_cpu_func, cl_sum_ordered_cuda_func,
           STARPU_VARIABLE_NBUFFERS);

int sc_insert_sum_ordered(const struct sc_task_opts *opts, int count, starpu_data_handle_t *src,
                          starpu_data_handle_t dst, const char *name)
{
    const char *op = "sum_ordered";
    int ret;
    if (count < 1 || count > SC_SUM_ORDERED_MAX)
        return sc_error(SC_ERR_ARG, "%s: %d sources, not in [1, %d]", op, count, SC_SUM_ORDERED_MAX);
    if (!src)
        return sc_error(SC_ERR_ARG, "%s: no sources", op);
    if (!dst || starpu_data_get_interface_id(dst) != STARPU_VECTOR_INTERFACE_ID)
        return sc_error(SC_ERR_SHAPE, "%s: dst is not a vector handle", op);
    size_t es = starpu_vector_get_elemsize(dst), nx = starpu_vector_get_nx(dst);
    if (es != sizeof(float) && es != sizeof(double))
        return sc_error(SC_ERR_SHAPE, "%s: dst has elements of %zu bytes, not float or double", op, es);
    struct starpu_data_descr descr[SC_SUM_ORDERED_MAX + 1];
    for (int k = 0; k < count; k++) {
        char what[32];
        snprintf(what, sizeof what, "src[%d]", k);
        if ((ret = sc_check_vec(src[k], nx, es, op, what)))
            return ret;
        if (starpu_vector_get_nx(src[k]) != nx)
            return sc_error(SC_ERR_SHAPE, "%s: %s has %zu elements, dst %zu", op, what,
                            (size_t)starpu_vector_get_nx(src[k]), nx);
        descr[k].handle = src[k];
        descr[k].mode = STARPU_R;
    }
    descr[count].handle = dst;
    descr[count].mode = STARPU_W;
    int elemsize = (int)es;
    return sc_insert_result(starpu_task_insert(&cl_sum_ordered, STARPU_VALUE, &count, sizeof count, STARPU_VALUE,
                                               &elemsize, sizeof elemsize, STARPU_DATA_MODE_ARRAY, descr, count + 1,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}
