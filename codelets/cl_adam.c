/* Adam and AdamW as torch.optim's (kernels/adam.c) over several vectors
 * and their one state vector, with the non-finite watch (--nonfinite) and
 * the whole-batch gate.  CPU only (a CUDA build runs it on a CPU worker,
 * the vectors copied back to main memory for it). */
#include "cl_common.h"
#include "kernels/adam.h"
#include "kernels/vector.h"

/* Buffers: pairs (w, g), the state, then the gate when a.gate. */
static int adam_pairs(const struct sc_sgd_args *a)
{
    return (STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) - 1 - (a->gate != NULL)) / 2;
}

static void cl_adam_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_sgd_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    int k = adam_pairs(&a);
    if (a.gate && *(const float *)STARPU_VECTOR_GET_PTR(buffers[2 * k + 1]) != 0) {
        if (a.watch)
            sc_nonfinite_record(a.watch, a.iteration);
        return;
    }
    /* A step is taken by all the vectors or none: they share the count. */
    if (a.watch) {
        if (a.watch->freeze && __atomic_load_n(&a.watch->first_iteration, __ATOMIC_SEQ_CST))
            return;
        for (int i = 0; i < k; i++)
            if (!sc_all_finite((const float *)STARPU_VECTOR_GET_PTR(buffers[2 * i + 1]),
                               STARPU_VECTOR_GET_NX(buffers[2 * i + 1]))) {
                sc_nonfinite_record(a.watch, a.iteration);
                return;
            }
    }
    size_t n = 0;
    for (int i = 0; i < k; i++)
        n += STARPU_VECTOR_GET_NX(buffers[2 * i]);
    float *m = (float *)STARPU_VECTOR_GET_PTR(buffers[2 * k]), *v = m + n, *step = v + n;
    *step += 1.0f;
    struct sc_adam_step s;
    sc_adam_step_scalars(&s, a.lr, a.beta1, a.beta2, a.eps, a.weight_decay, a.optimizer == SC_OPT_ADAMW, *step);
    size_t off = 0;
    for (int i = 0; i < k; i++) {
        size_t ni = STARPU_VECTOR_GET_NX(buffers[2 * i]);
        sc_adam_update((float *)STARPU_VECTOR_GET_PTR(buffers[2 * i]), m + off, v + off,
                       (const float *)STARPU_VECTOR_GET_PTR(buffers[2 * i + 1]), ni, &s);
        off += ni;
    }
}

SC_PERFMODEL(adam_model, "sc_adam", NULL);

SC_CODELET(cl_adam, "adam", &adam_model, cl_adam_cpu_func, NULL, STARPU_VARIABLE_NBUFFERS);

int sc_insert_adam(const struct sc_task_opts *opts, const struct sc_sgd_args *a, int count,
                   const starpu_data_handle_t *w, const starpu_data_handle_t *g, starpu_data_handle_t state,
                   const char *name)
{
    int ret;
    if (a->optimizer != SC_OPT_ADAM && a->optimizer != SC_OPT_ADAMW)
        return sc_error(SC_ERR_ARG, "adam: the arguments are not Adam's or AdamW's");
    if (count < 1 || count > SC_SGD_MULTI_MAX)
        return sc_error(SC_ERR_ARG, "adam: %d vectors, not in [1, %d]", count, SC_SGD_MULTI_MAX);
    if (!w || !g || !state)
        return sc_error(SC_ERR_ARG, "adam: no vectors");
    struct starpu_data_descr d[2 * SC_SGD_MULTI_MAX + 2];
    int nd = 0;
    size_t n = 0;
    for (int i = 0; i < count; i++) {
        if ((ret = sc_check_same_length("adam", w[i], "w", g[i], "g")))
            return ret;
        n += starpu_vector_get_nx(w[i]);
        d[nd++] = (struct starpu_data_descr){w[i], STARPU_RW};
        d[nd++] = (struct starpu_data_descr){g[i], STARPU_R};
    }
    if ((ret = sc_check_vec(state, sc_adam_state_floats(n), sizeof(float), "adam", "state")))
        return ret;
    d[nd++] = (struct starpu_data_descr){state, STARPU_RW};
    if (a->gate) {
        if ((ret = sc_check_vec(a->gate, 1, sizeof(float), "adam", "gate")))
            return ret;
        d[nd++] = (struct starpu_data_descr){a->gate, STARPU_R};
    }
    /* CPU only, whatever worker kind the caller's tasks prefer */
    struct sc_task_opts cpu = {opts ? opts->priority : 0, SC_WHERE_CPU};
    return sc_insert_result(starpu_task_insert(&cl_adam, STARPU_VALUE, a, sizeof *a, STARPU_DATA_MODE_ARRAY, d, nd,
                                               SC_TASK_ATTRS(&cpu, name), 0),
                            "adam");
}
