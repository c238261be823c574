/* SGD with momentum and weight decay, as torch.optim.SGD
 * (kernels/vector.c), with the non-finite watch (--nonfinite) and the
 * whole-batch gate. */
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

static void cl_sgd_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_sgd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    if (a.gate && *(const float *)STARPU_VECTOR_GET_PTR(buffers[3]) != 0) {
        if (a.watch)
            sc_nonfinite_record(a.watch, a.iteration);
        return;
    }
    if (a.watch) {
        if (a.watch->freeze && __atomic_load_n(&a.watch->first_iteration, __ATOMIC_SEQ_CST))
            return;
        if (!sc_all_finite((const float *)STARPU_VECTOR_GET_PTR(buffers[2]), STARPU_VECTOR_GET_NX(buffers[2]))) {
            sc_nonfinite_record(a.watch, a.iteration);
            return;
        }
    }
    sc_sgd_update((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                  (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), STARPU_VECTOR_GET_NX(buffers[0]), a.lr, a.momentum,
                  a.weight_decay);
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

/* As cl_sgd_cpu_func: the gate, then (with a watch) the
 * finiteness check decide on the device whether the update happens; a
 * host function on the stream records a refused update in the watch. */
static void cl_sgd_cuda_func(void *buffers[], void *cl_arg)
{
    struct sc_sgd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    cudaStream_t s = starpu_cuda_get_local_stream();
    struct sc_cuda_verdict *verdict = sc_cuda_worker_verdict();
    const float *gate = a.gate ? (const float *)STARPU_VECTOR_GET_PTR(buffers[3]) : NULL;
    const float *g = (const float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    size_t n = STARPU_VECTOR_GET_NX(buffers[0]);
    int *flag = NULL;
    /* Frozen: no update, but a closed gate is still recorded (the CPU
     * function looks at the gate first). */
    int frozen = a.watch && a.watch->freeze && __atomic_load_n(&a.watch->first_iteration, __ATOMIC_SEQ_CST);
    if (a.watch) {
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
    if (!frozen && sc_cuda_check(sc_cuda_sgd((float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                                             (float *)STARPU_VECTOR_GET_PTR(buffers[1]), g, n, a.lr, a.momentum,
                                             a.weight_decay, flag, gate, s),
                                 "sgd"))
        return;
    if (!a.watch)
        return;
    struct sgd_record *r = malloc(sizeof *r);
    if (!r) {
        sc_fail_record("sgd", "out of memory");
        return;
    }
    *r = (struct sgd_record){a.watch, a.iteration, !frozen, gate != NULL, verdict};
    if ((!frozen &&
         sc_cuda_check(cudaMemcpyAsync(&verdict->flag, flag, sizeof(int), cudaMemcpyDeviceToHost, s), "sgd")) ||
        (gate &&
         sc_cuda_check(cudaMemcpyAsync(&verdict->gate, gate, sizeof(float), cudaMemcpyDeviceToHost, s), "sgd")) ||
        sc_cuda_check(cudaLaunchHostFunc(s, sgd_record_cb, r), "sgd"))
        free(r);
}
#endif

SC_PERFMODEL(sgd_model, "sc_sgd", NULL);

SC_CODELET(cl_sgd, "sgd", &sgd_model, cl_sgd_cpu_func, cl_sgd_cuda_func, 3, STARPU_RW, STARPU_RW, STARPU_R);

/* The same kernel, after a whole-batch verdict (sc_sgd_args.gate). */
SC_CODELET(cl_sgd_gated, "sgd", &sgd_model, cl_sgd_cpu_func, cl_sgd_cuda_func, 4, STARPU_RW, STARPU_RW, STARPU_R,
           STARPU_R);

int sc_insert_sgd(const struct sc_task_opts *opts, const struct sc_sgd_args *a, starpu_data_handle_t w,
                  starpu_data_handle_t v, starpu_data_handle_t g, const char *name)
{
    int ret;
    if ((ret = sc_check_same_length("sgd", w, "w", v, "v")) || (ret = sc_check_same_length("sgd", w, "w", g, "g")))
        return ret;
    if (a->gate) {
        if ((ret = sc_check_vec(a->gate, 1, sizeof(float), "sgd", "gate")))
            return ret;
        return sc_insert_result(starpu_task_insert(&cl_sgd_gated, STARPU_VALUE, a, sizeof *a, STARPU_RW, w, STARPU_RW,
                                                   v, STARPU_R, g, STARPU_R, a->gate, SC_TASK_ATTRS(opts, name), 0),
                                "sgd");
    }
    return sc_insert_result(starpu_task_insert(&cl_sgd, STARPU_VALUE, a, sizeof *a, STARPU_RW, w, STARPU_RW, v,
                                               STARPU_R, g, SC_TASK_ATTRS(opts, name), 0),
                            "sgd");
}
