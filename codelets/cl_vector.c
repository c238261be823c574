/* Element-wise vector kernels of the gradient collectives and the optimizer. */
#include "cl_common.h"
#ifdef SC_USE_CUDA
#include "cuda/sc_cuda.h"
/* The CUDA versions (codelets/cl_cuda.c) take the same buffers and
 * arguments. */
#define SC_CUDA_FUNC(f) .cuda_funcs = {f}, .cuda_flags = {STARPU_CUDA_ASYNC},
#else
#define SC_CUDA_FUNC(f)
#endif

/* The loops run over fixed-length blocks of restrict pointers so that they
 * vectorize at -O2: the optimizer update of a large layer is otherwise a
 * visible part of an iteration. */
#define BLOCK 16

/* Sizes come from the handles, so the default footprint (data sizes) is
 * right, and a learning-rate schedule does not split the history. */

static int same_length(const char *op, starpu_data_handle_t h0, const char *n0, starpu_data_handle_t h1,
                       const char *n1)
{
    int ret;
    if ((ret = sc_check_vec(h0, 0, sizeof(float), op, n0)) ||
        (ret = sc_check_vec(h1, 0, sizeof(float), op, n1)))
        return ret;
    if (starpu_vector_get_nx(h0) != starpu_vector_get_nx(h1))
        return sc_error(SC_ERR_SHAPE, "%s: %s has %zu elements, %s %zu", op, n0,
                        (size_t)starpu_vector_get_nx(h0), n1, (size_t)starpu_vector_get_nx(h1));
    return 0;
}

/* ---- dst += src ---- */

static void accumulate(float *restrict dst, const float *restrict src, size_t n)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        float *d = dst + i;
        const float *s = src + i;
        for (int j = 0; j < BLOCK; j++)
            d[j] += s[j];
    }
    for (; i < n; i++)
        dst[i] += src[i];
}

static void cl_accumulate_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    accumulate((float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const float *)STARPU_VECTOR_GET_PTR(buffers[1]),
               STARPU_VECTOR_GET_NX(buffers[0]));
}

static struct starpu_perfmodel accumulate_model = {.type = STARPU_HISTORY_BASED,
                                                   .symbol = "sc_accumulate"};

static struct starpu_codelet cl_accumulate = {
    .cpu_funcs = {cl_accumulate_cpu_func},
    SC_CUDA_FUNC(sc_cuda_cl_accumulate_func)
    .nbuffers = 2,
    .modes = {STARPU_RW, STARPU_R},
    .model = &accumulate_model,
    .name = "accumulate",
};

int sc_insert_accumulate(const struct sc_task_opts *opts, starpu_data_handle_t dst, starpu_data_handle_t src,
                         const char *name)
{
    int ret = same_length("accumulate", dst, "dst", src, "src");
    if (ret)
        return ret;
    return sc_insert_result(
        starpu_task_insert(&cl_accumulate, STARPU_RW, dst, STARPU_R, src, SC_TASK_ATTRS(opts, name), 0), "accumulate");
}

/* ---- SGD with momentum and weight decay, as torch.optim.SGD ---- */

static inline void sgd1(const struct sc_sgd_args *a, float *w, float *v, float g)
{
    *v = a->momentum * *v + (g + a->weight_decay * *w);
    *w -= a->lr * *v;
}

static void sgd(const struct sc_sgd_args *a, float *restrict w, float *restrict v, const float *restrict g,
                size_t n)
{
    size_t i = 0;
    for (; i + BLOCK <= n; i += BLOCK) {
        float *wb = w + i, *vb = v + i;
        const float *gb = g + i;
        for (int j = 0; j < BLOCK; j++)
            sgd1(a, &wb[j], &vb[j], gb[j]);
    }
    for (; i < n; i++)
        sgd1(a, &w[i], &v[i], g[i]);
}

/* 1 when every value is finite; integer tests of the exponent bits, so
 * that the loop vectorizes and stays exact whatever the FP flags. */
static int all_finite(const float *g, size_t n)
{
    uint32_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &g[i], sizeof u);
        bad |= (u & 0x7f800000u) == 0x7f800000u;
    }
    return !bad;
}

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
        if (!all_finite((const float *)STARPU_VECTOR_GET_PTR(buffers[2]), STARPU_VECTOR_GET_NX(buffers[2]))) {
            sc_nonfinite_record(a.watch, a.iteration);
            return;
        }
    }
    sgd(&a, (float *)STARPU_VECTOR_GET_PTR(buffers[0]), (float *)STARPU_VECTOR_GET_PTR(buffers[1]),
        (const float *)STARPU_VECTOR_GET_PTR(buffers[2]), STARPU_VECTOR_GET_NX(buffers[0]));
}

static struct starpu_perfmodel sgd_model = {.type = STARPU_HISTORY_BASED, .symbol = "sc_sgd"};

static struct starpu_codelet cl_sgd = {
    .cpu_funcs = {cl_sgd_cpu_func},
    SC_CUDA_FUNC(sc_cuda_cl_sgd_func)
    .nbuffers = 3,
    .modes = {STARPU_RW, STARPU_RW, STARPU_R},
    .model = &sgd_model,
    .name = "sgd",
};

/* The same kernel, after a whole-batch verdict (sc_sgd_args.gate). */
static struct starpu_codelet cl_sgd_gated = {
    .cpu_funcs = {cl_sgd_cpu_func},
    SC_CUDA_FUNC(sc_cuda_cl_sgd_func)
    .nbuffers = 4,
    .modes = {STARPU_RW, STARPU_RW, STARPU_R, STARPU_R},
    .model = &sgd_model,
    .name = "sgd",
};

int sc_insert_sgd(const struct sc_task_opts *opts, const struct sc_sgd_args *a, starpu_data_handle_t w,
                  starpu_data_handle_t v, starpu_data_handle_t g, const char *name)
{
    int ret;
    if ((ret = same_length("sgd", w, "w", v, "v")) || (ret = same_length("sgd", w, "w", g, "g")))
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

/* ---- the whole-batch verdict: zero, then count the non-finite pieces ---- */

static void cl_zero_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    memset((void *)STARPU_VECTOR_GET_PTR(buffers[0]), 0,
           STARPU_VECTOR_GET_NX(buffers[0]) * STARPU_VECTOR_GET_ELEMSIZE(buffers[0]));
}

static struct starpu_codelet cl_zero = {
    .cpu_funcs = {cl_zero_cpu_func},
    SC_CUDA_FUNC(sc_cuda_cl_zero_func)
    .nbuffers = 1,
    .modes = {STARPU_W},
    .name = "zero",
};

int sc_insert_zero(const struct sc_task_opts *opts, starpu_data_handle_t h, const char *name)
{
    return sc_insert_result(starpu_task_insert(&cl_zero, STARPU_W, h, SC_TASK_ATTRS(opts, name), 0), "zero");
}

static void cl_count_nonfinite_cpu_func(void *buffers[], void *cl_arg)
{
    (void)cl_arg;
    if (!all_finite((const float *)STARPU_VECTOR_GET_PTR(buffers[1]), STARPU_VECTOR_GET_NX(buffers[1])))
        *(float *)STARPU_VECTOR_GET_PTR(buffers[0]) += 1;
}

static struct starpu_perfmodel count_nonfinite_model = {.type = STARPU_HISTORY_BASED,
                                                        .symbol = "sc_count_nonfinite"};

static struct starpu_codelet cl_count_nonfinite = {
    .cpu_funcs = {cl_count_nonfinite_cpu_func},
    SC_CUDA_FUNC(sc_cuda_cl_count_nonfinite_func)
    .nbuffers = 2,
    .modes = {STARPU_RW | STARPU_COMMUTE, STARPU_R},
    .model = &count_nonfinite_model,
    .name = "count_nonfinite",
};

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
