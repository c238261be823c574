/* Region kernels (see codelets_region.h) as one codelet: the window work
 * is in kernels/region.c, on the CPU and on CUDA workers alike. */
#include "cl_common.h"
#include "kernels/region.h"

#include <stdlib.h>
#ifdef SC_USE_CUDA
#include "cuda_worker.h"
#endif

/* The buffers' pointers, in the task's order (the sources, params if any,
 * the destination); a convolution's task names the scratch handle last,
 * cuDNN's workspace. */
static void region_buffers(void *buffers[], const struct sc_region_args *a, float **ptr, struct sc_workspace *ws)
{
    int nbuf = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current());
    for (int i = 0; i < nbuf; i++)
        ptr[i] = (float *)STARPU_VECTOR_GET_PTR(buffers[i]);
    *ws = (struct sc_workspace){NULL, 0};
    if (a->op == SC_REGION_CONV_FWD || a->op == SC_REGION_CONV_BWD_DATA || a->op == SC_REGION_CONV_BWD_FILTER)
        *ws = sc_workspace_of(buffers[nbuf - 1]);
}

static void cl_region_cpu_func(void *buffers[], void *cl_arg)
{
    const struct sc_region_args *a = cl_arg;
    float *ptr[SC_REGION_MAX_SRC + 3];
    struct sc_workspace ws;
    region_buffers(buffers, a, ptr, &ws);
    sc_region_compute(sc_kernel_worker_self(), a, ptr, &ws);
}

#ifdef SC_USE_CUDA
static void cl_region_cuda_func(void *buffers[], void *cl_arg)
{
    const struct sc_region_args *a = cl_arg;
    float *ptr[SC_REGION_MAX_SRC + 3];
    struct sc_workspace ws;
    region_buffers(buffers, a, ptr, &ws);
    struct sc_cuda_ctx c = sc_cuda_ctx_self();
    sc_region_compute_cuda(&c, a, ptr, &ws);
}
#endif

/* Cost follows the op, the sizes and the region's shape, not where the
 * region lies or which samples it holds. */
static uint32_t region_footprint(struct starpu_task *task)
{
    const struct sc_region_args *a = task->cl_arg;
    int key[8] = {a->op,
                  a->n,
                  a->c,
                  a->region.r1 - a->region.r0,
                  a->region.c1 - a->region.c0,
                  a->na,
                  a->nb,
                  a->op == SC_REGION_POOL_FWD || a->op == SC_REGION_POOL_BWD ? a->pool.c : a->conv.f};
    uint32_t h = starpu_hash_crc32c_be_n(key, sizeof key, 0);
    return a->op == SC_REGION_COPY || a->op == SC_REGION_SUM ? h : starpu_hash_crc32c_be_n(&a->conv, sizeof a->conv, h);
}

SC_PERFMODEL(region_model, "sc_region", region_footprint);

SC_CODELET(cl_region, "region", &region_model, cl_region_cpu_func, cl_region_cuda_func, STARPU_VARIABLE_NBUFFERS);

/* Channels of the a and b sources and of the destination. */
static void channels(const struct sc_region_args *a, int *ca, int *cb, int *cd)
{
    switch (a->op) {
    case SC_REGION_COPY:
    case SC_REGION_SUM:
        *ca = *cb = *cd = a->c;
        break;
    case SC_REGION_CONV_FWD:
        *ca = a->conv.c, *cb = 0, *cd = a->conv.f;
        break;
    case SC_REGION_CONV_BWD_DATA:
        *ca = a->conv.f, *cb = 0, *cd = a->conv.c;
        break;
    case SC_REGION_CONV_BWD_FILTER:
        *ca = a->conv.c, *cb = a->conv.f, *cd = 0;
        break;
    default:
        *ca = *cb = *cd = a->pool.c;
        break;
    }
}

int sc_insert_region(const struct sc_task_opts *opts, const struct sc_region_args *a, starpu_data_handle_t *srcs,
                     starpu_data_handle_t params, starpu_data_handle_t dst, const char *name)
{
    static const char *const ops[] = {
        "region_copy",     "conv_fwd region", "conv_bwd_data region", "conv_bwd_filter region", "pool_fwd region",
        "pool_bwd region", "region_sum"};
    if (a->op < SC_REGION_COPY || a->op > SC_REGION_SUM)
        return sc_error(SC_ERR_ARG, "region: unknown op %d", a->op);
    const char *op = ops[a->op];
    int ca, cb, cd, ret, conv = a->op >= SC_REGION_CONV_FWD && a->op <= SC_REGION_CONV_BWD_FILTER;
    int pool = a->op == SC_REGION_POOL_FWD || a->op == SC_REGION_POOL_BWD, assemble = !conv && !pool;
    channels(a, &ca, &cb, &cd);
    if (a->na < 1 || a->nb < 0 || a->na + a->nb > SC_REGION_MAX_SRC || a->n < 1 || ca < 1 || sc_box_empty(a->region) ||
        (a->op == SC_REGION_POOL_BWD && a->pool.max && a->nb < 1))
        return sc_error(SC_ERR_ARG, "%s: bad arguments (n %d, %d+%d sources, c %d)", op, a->n, a->na, a->nb, ca);
    if (conv && (ret = sc_conv_args_check(&a->conv, op)))
        return ret;
    if (pool && (a->pool.c < 1 || a->pool.kh < 1 || a->pool.sh < 1 || a->pool.ph >= a->pool.kh || a->pool.oh < 1 ||
                 a->pool.ow < 1))
        return sc_error(SC_ERR_SHAPE, "%s: bad pooling geometry", op);
    for (int i = 0; i < a->na + a->nb; i++) {
        const struct sc_region_src *s = &a->src[i];
        if (s->n < 1 || sc_box_empty(s->box))
            return sc_error(SC_ERR_ARG, "%s: source %d is empty", op, i);
        int sc = assemble && s->nch ? s->nch : i < a->na ? ca : cb;
        if ((ret = sc_check_vec(srcs[i], (size_t)s->n * sc * sc_box_area(s->box), sizeof(float), op, "source")))
            return ret;
    }
    if (a->op == SC_REGION_CONV_BWD_FILTER) {
        if ((ret = sc_check_vec(
                 dst, (size_t)a->conv.f * a->conv.c * a->conv.kh * a->conv.kw + (a->conv.nobias ? 0 : a->conv.f),
                 sizeof(float), op, "dparams")))
            return ret;
    } else {
        int in_dst =
            a->s0 >= a->dst_s0 && a->s0 + a->n <= a->dst_s0 + a->dst_n && sc_box_contains(a->dst_box, a->region);
        if (!in_dst || (ret = sc_check_vec(dst, (size_t)a->dst_n * cd * sc_box_area(a->dst_box), sizeof(float), op,
                                           "destination")))
            return in_dst ? ret : sc_error(SC_ERR_ARG, "%s: the region is not within the destination", op);
    }
    if (conv && a->op != SC_REGION_CONV_BWD_FILTER &&
        (ret = sc_check_vec(params, (size_t)a->conv.f * a->conv.c * a->conv.kh * a->conv.kw, sizeof(float), op,
                            "params")))
        return ret;
    struct starpu_data_descr d[SC_REGION_MAX_SRC + 3];
    int nd = 0;
    for (int i = 0; i < a->na + a->nb; i++)
        d[nd++] = (struct starpu_data_descr){srcs[i], STARPU_R};
    if (conv && a->op != SC_REGION_CONV_BWD_FILTER)
        d[nd++] = (struct starpu_data_descr){params, STARPU_R};
    d[nd++] = (struct starpu_data_descr){dst, assemble || a->op == SC_REGION_CONV_BWD_FILTER ? STARPU_W : STARPU_RW};
    if (conv && !sc_workspace_handle())
        return sc_error(SC_ERR_RUNTIME, "%s: the codelets are not initialised (sc_codelets_init)", op);
    if (conv)
        d[nd++] = (struct starpu_data_descr){sc_workspace_handle(), STARPU_SCRATCH};
    struct sc_region_args *copy = malloc(sizeof *copy);
    if (!copy)
        return sc_error(SC_ERR_NOMEM, "%s: out of memory", op);
    *copy = *a;
    struct sc_task_opts cpu = {opts ? opts->priority : 0, SC_WHERE_CPU};
    if (a->op == SC_REGION_SUM) /* its additions have no CUDA kernel */
        opts = &cpu;
    ret = starpu_task_insert(&cl_region, STARPU_CL_ARGS, copy, sizeof *copy, STARPU_DATA_MODE_ARRAY, d, nd,
                             SC_TASK_ATTRS(opts, name), 0);
    return sc_insert_result(ret, op);
}
