/* The two ends of a bf16 transfer of a partial sum (--grad-dtype bf16):
 * pack an fp32 vector into bf16 before its send, and add a received bf16
 * vector into an fp32 one.  CPU only: the vectors are the collectives'
 * pieces, which StarPU-MPI sends from main memory anyway. */
#include "cl_common.h"
#include "kernels/bf16.h"

static void cl_pack_bf16_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_bf16_from_f32((uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                     STARPU_VECTOR_GET_NX(buffers[0]));
}

SC_PERFMODEL(pack_bf16_model, "sc_pack_bf16", NULL);

SC_CODELET(cl_pack_bf16, "pack_bf16", &pack_bf16_model, cl_pack_bf16_cpu_func, NULL, 2, STARPU_R, STARPU_W);

static void cl_accumulate_bf16_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    sc_accumulate_bf16((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const uint16_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
                       STARPU_VECTOR_GET_NX(buffers[0]));
}

SC_PERFMODEL(accumulate_bf16_model, "sc_accumulate_bf16", NULL);

SC_CODELET(cl_accumulate_bf16, "accumulate_bf16", &accumulate_bf16_model, cl_accumulate_bf16_cpu_func, NULL, 2,
           STARPU_RW, STARPU_R);

/* src and dst: as many elements, of 4 and 2 bytes. */
static int check_pair(const char *op, starpu_data_handle_t f32, const char *nf, starpu_data_handle_t bf16,
                      const char *nb)
{
    int ret;
    if ((ret = sc_check_vec(f32, 0, sizeof(float), op, nf)) || (ret = sc_check_vec(bf16, 0, sizeof(uint16_t), op, nb)))
        return ret;
    if (starpu_vector_get_nx(f32) != starpu_vector_get_nx(bf16))
        return sc_error(SC_ERR_SHAPE, "%s: %s has %zu elements, %s %zu", op, nf, (size_t)starpu_vector_get_nx(f32), nb,
                        (size_t)starpu_vector_get_nx(bf16));
    return 0;
}

int sc_insert_pack_bf16(const struct sc_task_opts *opts, starpu_data_handle_t src, starpu_data_handle_t dst,
                        const char *name)
{
    int ret = check_pair("pack_bf16", src, "src", dst, "dst");
    if (ret)
        return ret;
    return sc_insert_result(
        starpu_task_insert(&cl_pack_bf16, STARPU_R, src, STARPU_W, dst, SC_TASK_ATTRS(opts, name), 0), "pack_bf16");
}

int sc_insert_accumulate_bf16(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                              const char *name)
{
    int ret = check_pair("accumulate_bf16", dst, "dst", src, "src");
    if (ret)
        return ret;
    return sc_insert_result(
        starpu_task_insert(&cl_accumulate_bf16, STARPU_RW, dst, STARPU_R, src, SC_TASK_ATTRS(opts, name), 0),
        "accumulate_bf16");
}
