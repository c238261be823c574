/* SGD with momentum and weight decay, as torch.optim.SGD
 * (kernels/vector.c), with the non-finite watch (--nonfinite) and the
 * whole-batch gate; of one vector, or of several in one task. */
#include "cl_common.h"
#include "kernels/vector.h"
#ifdef SC_USE_CUDA
#include "cuda_worker.h"

#include <starpu_cuda.h>
#endif

#include <string.h>

void sc_nonfinite_record(struct sc_nonfinite *w, int64_t it)
{
    int64_t first = 0;
    __atomic_compare_exchange_n(&w->first_iteration, &first, it, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
    int64_t last = __atomic_load_n(&w->last_iteration, __ATOMIC_SEQ_CST);
    while (last < it)
        if (__atomic_compare_exchange_n(&w->last_iteration, &last, it, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST)) {
            __atomic_add_fetch(&w->iterations, 1, __ATOMIC_SEQ_CST);
            break;
        }
}

/* One vector's update, with its own finiteness check. */
static void sgd_one(const struct sc_sgd_args *a, void *w, void *v, void *g)
{
    if (a->watch) {
        if (a->watch->freeze && __atomic_load_n(&a->watch->first_iteration, __ATOMIC_SEQ_CST))
            return;
        if (!sc_all_finite((const float *)STARPU_VECTOR_GET_PTR(g), STARPU_VECTOR_GET_NX(g))) {
            sc_nonfinite_record(a->watch, a->iteration);
            return;
        }
    }
    sc_sgd_update((float *)STARPU_VECTOR_GET_PTR(w), (float *)STARPU_VECTOR_GET_PTR(v),
                  (const float *)STARPU_VECTOR_GET_PTR(g), STARPU_VECTOR_GET_NX(w), a->lr, a->momentum,
                  a->weight_decay);
}

/* Buffers: triples (w, v, g), then the gate when a.gate; each triple is
 * updated as a task of its own would be, in order. */
static int sgd_triples(const struct sc_sgd_args *a)
{
    return (STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - (a->gate != NULL)) / 3;
}

static void cl_sgd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_sgd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    int k = sgd_triples(&a);
    if (a.gate && *(const float *)STARPU_VECTOR_GET_PTR(buffers[3 * k]) != 0) {
        if (a.watch)
            sc_nonfinite_record(a.watch, a.iteration);
        return;
    }
    for (int i = 0; i < k; i++)
        sgd_one(&a, buffers[3 * i], buffers[3 * i + 1], buffers[3 * i + 2]);
}

#ifdef SC_USE_CUDA
struct sgd_record {
    struct sc_nonfinite *watch;
    int64_t iteration;
    int flagged, gated;
    const struct sc_cuda_verdict *v;
};

/* Host function on the worker's stream, after the verdict's copies. */
static void CUDART_CB sgd_record_cb(void *arg)
{
    struct sgd_record *r = arg;
    if ((r->flagged && r->v->flag) || (r->gated && r->v->gate != 0.0f))
        sc_nonfinite_record(r->watch, r->iteration);
    free(r);
}

/* As sgd_one after the gate: the gate, then (with a watch) the
 * finiteness check decide on the device whether the update happens; a
 * host function on the stream records a refused update in the watch.  The
 * stream runs the host function before the next vector's copies of the
 * verdict. */
static void sgd_cuda_one(const struct sc_sgd_args *a, void *wb, void *vb, void *gb, const float *gate)
{
    cudaStream_t s = starpu_cuda_get_local_stream();
    struct sc_cuda_verdict *verdict = sc_cuda_worker_verdict();
    const float *g = (const float *)STARPU_VECTOR_GET_PTR(gb);
    size_t n = STARPU_VECTOR_GET_NX(wb);
    int *flag = NULL;
    /* Frozen: no update, but a closed gate is still recorded (the CPU
     * function looks at the gate first). */
    int frozen = a->watch && a->watch->freeze && __atomic_load_n(&a->watch->first_iteration, __ATOMIC_SEQ_CST);
    if (a->watch) {
        if (!verdict || !(flag = sc_cuda_small_int())) {
            sc_fail_record("sgd", "no device buffer for the finiteness flag");
            return;
        }
        if (frozen && !gate)
            return;
        if (!frozen && (sc_cuda_check(cudaMemsetAsync(flag, 0, sizeof *flag, s), "sgd") ||
                        sc_cuda_check(sc_cuda_find_nonfinite(flag, g, n, s), "sgd")))
            return;
    }
    if (!frozen && sc_cuda_check(sc_cuda_sgd((float *)STARPU_VECTOR_GET_PTR(wb), (float *)STARPU_VECTOR_GET_PTR(vb), g,
                                             n, a->lr, a->momentum, a->weight_decay, flag, gate, s),
                                 "sgd"))
        return;
    if (!a->watch)
        return;
    struct sgd_record *r = malloc(sizeof *r);
    if (!r) {
        sc_fail_record("sgd", "out of memory");
        return;
    }
    *r = (struct sgd_record){a->watch, a->iteration, !frozen, gate != NULL, verdict};
    if ((!frozen &&
         sc_cuda_check(cudaMemcpyAsync(&verdict->flag, flag, sizeof(int), cudaMemcpyDeviceToHost, s), "sgd")) ||
        (gate &&
         sc_cuda_check(cudaMemcpyAsync(&verdict->gate, gate, sizeof(float), cudaMemcpyDeviceToHost, s), "sgd")) ||
        sc_cuda_check(cudaLaunchHostFunc(s, sgd_record_cb, r), "sgd"))
        free(r);
}

static void cl_sgd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_sgd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    int k = sgd_triples(&a);
    const float *gate = a.gate ? (const float *)STARPU_VECTOR_GET_PTR(buffers[3 * k]) : NULL;
    for (int i = 0; i < k; i++)
        sgd_cuda_one(&a, buffers[3 * i], buffers[3 * i + 1], buffers[3 * i + 2], gate);
}
#endif

SC_PERFMODEL(sgd_model, "sc_sgd", NULL);

SC_CODELET(cl_sgd, "sgd", &sgd_model, cl_sgd_cpu_func, cl_sgd_cuda_func, 3, STARPU_RW, STARPU_RW, STARPU_R);

/* The same kernel, after a whole-batch verdict (sc_sgd_args.gate). */
SC_CODELET(cl_sgd_gated, "sgd", &sgd_model, cl_sgd_cpu_func, cl_sgd_cuda_func, 4, STARPU_RW, STARPU_RW, STARPU_R,
           STARPU_R);

/* Several vectors' updates in one task (sc_insert_sgd_multi). */
SC_PERFMODEL(sgd_multi_model, "sc_sgd_multi", NULL);

SC_CODELET(cl_sgd_multi, "sgd_multi", &sgd_multi_model, cl_sgd_cpu_func, cl_sgd_cuda_func, STARPU_VARIABLE_NBUFFERS);

static int sgd_check(const struct sc_sgd_args *a, starpu_data_handle_t w, starpu_data_handle_t v,
                     starpu_data_handle_t g)
{
    int ret;
    if ((ret = sc_check_same_length("sgd", w, "w", v, "v")) || (ret = sc_check_same_length("sgd", w, "w", g, "g")))
        return ret;
    return a->gate ? sc_check_vec(a->gate, 1, sizeof(float), "sgd", "gate") : 0;
}

int sc_insert_sgd(const struct sc_task_opts *opts, const struct sc_sgd_args *a, starpu_data_handle_t w,
                  starpu_data_handle_t v, starpu_data_handle_t g, const char *name)
{
    int ret;
    if (a->optimizer != SC_OPT_SGD) /* v: the state of w (sc_insert_adam) */
        return sc_insert_adam(opts, a, 1, &w, &g, v, name);
    if ((ret = sgd_check(a, w, v, g)))
        return ret;
    if (a->gate)
        return sc_insert_result(starpu_task_insert(&cl_sgd_gated, STARPU_VALUE, a, sizeof *a, STARPU_RW, w, STARPU_RW,
                                                   v, STARPU_R, g, STARPU_R, a->gate, SC_TASK_ATTRS(opts, name), 0),
                                "sgd");
    return sc_insert_result(starpu_task_insert(&cl_sgd, STARPU_VALUE, a, sizeof *a, STARPU_RW, w, STARPU_RW, v,
                                               STARPU_R, g, SC_TASK_ATTRS(opts, name), 0),
                            "sgd");
}

int sc_insert_sgd_multi(const struct sc_task_opts *opts, const struct sc_sgd_args *a, int count,
                        const starpu_data_handle_t *w, const starpu_data_handle_t *v, const starpu_data_handle_t *g,
                        const char *name)
{
    int ret;
    if (count < 1 || count > SC_SGD_MULTI_MAX)
        return sc_error(SC_ERR_ARG, "sgd_multi: %d vectors, not in [1, %d]", count, SC_SGD_MULTI_MAX);
    if (!w || !v || !g)
        return sc_error(SC_ERR_ARG, "sgd_multi: no vectors");
    if (a->optimizer != SC_OPT_SGD)
        return sc_error(SC_ERR_ARG, "sgd_multi: Adam's vectors share one state (sc_insert_adam)");
    if (count == 1)
        return sc_insert_sgd(opts, a, w[0], v[0], g[0], name);
    struct starpu_data_descr d[3 * SC_SGD_MULTI_MAX + 1];
    int nd = 0;
    for (int i = 0; i < count; i++) {
        if ((ret = sgd_check(a, w[i], v[i], g[i])))
            return ret;
        d[nd++] = (struct starpu_data_descr){w[i], STARPU_RW};
        d[nd++] = (struct starpu_data_descr){v[i], STARPU_RW};
        d[nd++] = (struct starpu_data_descr){g[i], STARPU_R};
    }
    if (a->gate)
        d[nd++] = (struct starpu_data_descr){a->gate, STARPU_R};
    return sc_insert_result(starpu_task_insert(&cl_sgd_multi, STARPU_VALUE, a, sizeof *a, STARPU_DATA_MODE_ARRAY, d, nd,
                                               SC_TASK_ATTRS(opts, name), 0),
                            "sgd_multi");
}
