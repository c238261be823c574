/* Element-wise and small reduction kernels of the deeper networks: residual
 * add, copy, global average pooling, per-pixel softmax cross-entropy and the
 * ordered sum of the group reductions. */
#include "cl_common.h"
#ifdef SC_USE_CUDA
#include "cuda/sc_cuda.h"

#include <starpu_cuda.h>
#endif

#include <math.h>
#include <stdio.h>
#include <string.h>

/* ---- residual add: y = a + b, then ReLU ---- */

struct add_args {
    int n, relu;
};

static void cl_add_cpu_func(void *buffers[], void *cl_arg)
{
    struct add_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *restrict x0 = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    const float *restrict x1 = (const float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    float *restrict y = (float *)STARPU_VECTOR_GET_PTR(buffers[2]);
    if (a.relu)
        for (int i = 0; i < a.n; i++) {
            float v = x0[i] + x1[i];
            y[i] = v > 0.0f ? v : 0.0f;
        }
    else
        for (int i = 0; i < a.n; i++)
            y[i] = x0[i] + x1[i];
}

#ifdef SC_USE_CUDA
static void cl_add_cuda_func(void *buffers[], void *cl_arg)
{
    struct add_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_add((float *)STARPU_VECTOR_GET_PTR(buffers[2]), (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                              (const float *)STARPU_VECTOR_GET_PTR(buffers[1]), (size_t)a.n, a.relu,
                              starpu_cuda_get_local_stream()),
                  "add");
}
#endif

static struct starpu_perfmodel add_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_add", .footprint = sc_footprint_args};

static struct starpu_codelet cl_add = {
    .cpu_funcs = {cl_add_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_add_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &add_model,
    .name = "add",
};

int sc_insert_add(const struct sc_task_opts *opts, int n, int relu, starpu_data_handle_t a, starpu_data_handle_t b,
                  starpu_data_handle_t y, const char *name)
{
    const char *op = "add";
    int ret;
    if (n < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad length %d", op, n);
    if (relu != 0 && relu != 1)
        return sc_error(SC_ERR_ARG, "%s: relu must be 0 or 1, not %d", op, relu);
    if ((ret = sc_check_vec(a, (size_t)n, sizeof(float), op, "a")) ||
        (ret = sc_check_vec(b, (size_t)n, sizeof(float), op, "b")) ||
        (ret = sc_check_vec(y, (size_t)n, sizeof(float), op, "y")))
        return ret;
    struct add_args args = {n, relu};
    return sc_insert_result(starpu_task_insert(&cl_add, STARPU_VALUE, &args, sizeof args, STARPU_R, a, STARPU_R, b,
                                               STARPU_W, y, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- copy of the first n floats ---- */

static void cl_copy_cpu_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    memmove((void *)STARPU_VECTOR_GET_PTR(buffers[1]), (const void *)STARPU_VECTOR_GET_PTR(buffers[0]),
           (size_t)n * sizeof(float));
}

#ifdef SC_USE_CUDA
static void cl_copy_cuda_func(void *buffers[], void *cl_arg)
{
    int n;
    starpu_codelet_unpack_args(cl_arg, &n);
    sc_cuda_check(cudaMemcpyAsync((void *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                  (const void *)STARPU_VECTOR_GET_PTR(buffers[0]), (size_t)n * sizeof(float),
                                  cudaMemcpyDeviceToDevice, starpu_cuda_get_local_stream()),
                  "copy");
}
#endif

static struct starpu_perfmodel copy_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_copy", .footprint = sc_footprint_args};

static struct starpu_codelet cl_copy = {
    .cpu_funcs = {cl_copy_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_copy_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &copy_model,
    .name = "copy",
};

int sc_insert_copy(const struct sc_task_opts *opts, int n, starpu_data_handle_t src, starpu_data_handle_t dst,
                   const char *name)
{
    const char *op = "copy";
    int ret;
    if (n < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad length %d", op, n);
    if ((ret = sc_check_vec(src, (size_t)n, sizeof(float), op, "src")) ||
        (ret = sc_check_vec(dst, (size_t)n, sizeof(float), op, "dst")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_copy, STARPU_VALUE, &n, sizeof n, STARPU_R, src, STARPU_W, dst,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- global average pooling ---- */

struct gap_args {
    int n, c, hw;
    float scale;
};

static int gap_check(const struct gap_args *a, const char *op)
{
    if (a->n < 1 || a->c < 1 || a->hw < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d c%d hw%d", op, a->n, a->c, a->hw);
    if (!isfinite(a->scale))
        return sc_error(SC_ERR_ARG, "%s: bad scale %g", op, (double)a->scale);
    return 0;
}

static void cl_gap_fwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *x = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    float *y = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    size_t rows = (size_t)a.n * a.c;
    for (size_t r = 0; r < rows; r++) {
        const float *p = x + r * a.hw;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
        int i = 0;
        for (; i + 4 <= a.hw; i += 4)
            s0 += p[i], s1 += p[i + 1], s2 += p[i + 2], s3 += p[i + 3];
        for (; i < a.hw; i++)
            s0 += p[i];
        y[r] = (float)(a.scale * ((s0 + s1) + (s2 + s3)));
    }
}

#ifdef SC_USE_CUDA
static void cl_gap_fwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_gap_fwd((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (size_t)a.n * a.c, a.hw, a.scale,
                                  starpu_cuda_get_local_stream()),
                  "gap_fwd");
}
#endif

static struct starpu_perfmodel gap_fwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_gap_fwd", .footprint = sc_footprint_args};

static struct starpu_codelet cl_gap_fwd = {
    .cpu_funcs = {cl_gap_fwd_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_gap_fwd_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &gap_fwd_model,
    .name = "gap_fwd",
};

int sc_insert_gap_fwd(const struct sc_task_opts *opts, int n, int c, int hw, float scale, starpu_data_handle_t x,
                      starpu_data_handle_t y, const char *name)
{
    const char *op = "gap_fwd";
    struct gap_args a = {n, c, hw, scale};
    int ret;
    if ((ret = gap_check(&a, op)) ||
        (ret = sc_check_vec(x, (size_t)n * c * hw, sizeof(float), op, "x")) ||
        (ret = sc_check_vec(y, (size_t)n * c, sizeof(float), op, "y")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_gap_fwd, STARPU_VALUE, &a, sizeof a, STARPU_R, x, STARPU_W, y,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

static void cl_gap_bwd_cpu_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    const float *dy = (const float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    float *dx = (float *)STARPU_VECTOR_GET_PTR(buffers[1]);
    size_t rows = (size_t)a.n * a.c;
    for (size_t r = 0; r < rows; r++) {
        float v = a.scale * dy[r];
        float *p = dx + r * a.hw;
        for (int i = 0; i < a.hw; i++)
            p[i] = v;
    }
}

#ifdef SC_USE_CUDA
static void cl_gap_bwd_cuda_func(void *buffers[], void *cl_arg)
{
    struct gap_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_check(sc_cuda_gap_bwd((float *)STARPU_VECTOR_GET_PTR(buffers[1]),
                                  (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (size_t)a.n * a.c, a.hw, a.scale,
                                  starpu_cuda_get_local_stream()),
                  "gap_bwd");
}
#endif

static struct starpu_perfmodel gap_bwd_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_gap_bwd", .footprint = sc_footprint_args};

static struct starpu_codelet cl_gap_bwd = {
    .cpu_funcs = {cl_gap_bwd_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_gap_bwd_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 2,
    .modes = {STARPU_R, STARPU_W},
    .model = &gap_bwd_model,
    .name = "gap_bwd",
};

int sc_insert_gap_bwd(const struct sc_task_opts *opts, int n, int c, int hw, float scale, starpu_data_handle_t dy,
                      starpu_data_handle_t dx, const char *name)
{
    const char *op = "gap_bwd";
    struct gap_args a = {n, c, hw, scale};
    int ret;
    if ((ret = gap_check(&a, op)) ||
        (ret = sc_check_vec(dy, (size_t)n * c, sizeof(float), op, "dy")) ||
        (ret = sc_check_vec(dx, (size_t)n * c * hw, sizeof(float), op, "dx")))
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_gap_bwd, STARPU_VALUE, &a, sizeof a, STARPU_R, dy, STARPU_W, dx,
                                               SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- per-pixel softmax cross-entropy ----
 * The classes of a pixel are hw apart, so pixels go in blocks of PIX: each
 * pass over the classes then reads PIX consecutive floats per class. */

#define PIX 64

static void pixel_xent(const struct sc_pixel_xent_args *a, const float *logits, const int32_t *labels,
                       float *dlogits, float *stats)
{
    double loss = 0.0;
    long correct = 0, bad = 0;
    size_t hw = (size_t)a->hw;
    for (int i = 0; i < a->n; i++) {
        const float *l = logits + (size_t)i * a->classes * hw;
        float *d = dlogits ? dlogits + (size_t)i * a->classes * hw : NULL;
        const int32_t *lab = labels + (size_t)i * hw;
        for (size_t p0 = 0; p0 < hw; p0 += PIX) {
            int np = hw - p0 < PIX ? (int)(hw - p0) : PIX;
            float mx[PIX];
            int arg[PIX];
            double sum[PIX];
            for (int q = 0; q < np; q++) {
                mx[q] = l[p0 + q];
                arg[q] = 0;
                sum[q] = 0.0;
            }
            for (int k = 1; k < a->classes; k++) {
                const float *lk = l + (size_t)k * hw + p0;
                for (int q = 0; q < np; q++)
                    if (lk[q] > mx[q]) { /* first maximum wins ties */
                        mx[q] = lk[q];
                        arg[q] = k;
                    }
            }
            for (int k = 0; k < a->classes; k++) {
                const float *lk = l + (size_t)k * hw + p0;
                for (int q = 0; q < np; q++)
                    sum[q] += exp((double)lk[q] - mx[q]);
            }
            for (int q = 0; q < np; q++) {
                int y = lab[p0 + q];
                if (y < 0 || y >= a->classes) {
                    bad++;
                    continue;
                }
                loss += log(sum[q]) - ((double)l[(size_t)y * hw + p0 + q] - mx[q]);
                correct += arg[q] == y;
            }
            if (!d)
                continue;
            for (int k = 0; k < a->classes; k++) {
                const float *lk = l + (size_t)k * hw + p0;
                float *dk = d + (size_t)k * hw + p0;
                const int32_t *lb = lab + p0;
                for (int q = 0; q < np; q++)
                    dk[q] = a->scale * (float)(exp((double)lk[q] - mx[q]) / sum[q] - (lb[q] == k));
            }
        }
    }
    if (bad)
        fprintf(stderr, "starconv: pixel_xent: %ld labels outside [0, %d)\n", bad, a->classes);
    stats[0] = (float)loss;
    stats[1] = (float)correct;
}

static int pixel_xent_check(const struct sc_pixel_xent_args *a, const char *op, starpu_data_handle_t logits,
                            starpu_data_handle_t labels, starpu_data_handle_t dlogits,
                            starpu_data_handle_t stats)
{
    int ret;
    if (!a)
        return sc_error(SC_ERR_ARG, "%s: no arguments", op);
    if (a->n < 1 || a->classes < 1 || a->hw < 1)
        return sc_error(SC_ERR_SHAPE, "%s: bad shape n%d classes%d hw%d", op, a->n, a->classes, a->hw);
    if (!isfinite(a->scale))
        return sc_error(SC_ERR_ARG, "%s: bad scale %g", op, (double)a->scale);
    size_t nl = (size_t)a->n * a->classes * a->hw;
    if ((ret = sc_check_vec(logits, nl, sizeof(float), op, "logits")) ||
        (ret = sc_check_vec(labels, (size_t)a->n * a->hw, sizeof(int32_t), op, "labels")) ||
        (dlogits && (ret = sc_check_vec(dlogits, nl, sizeof(float), op, "dlogits"))) ||
        (ret = sc_check_vec(stats, 2, sizeof(float), op, "stats")))
        return ret;
    return 0;
}

static void cl_pixel_xent_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_pixel_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    pixel_xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
               (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), (float *)STARPU_VECTOR_GET_PTR(buffers[2]),
               (float *)STARPU_VECTOR_GET_PTR(buffers[3]));
}

#ifdef SC_USE_CUDA
static void pixel_xent_cuda(void *buffers[], void *cl_arg, int train)
{
    struct sc_pixel_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    sc_cuda_run_xent(train ? "pixel_xent" : "pixel_xent_eval", a.n, a.classes, a.hw, a.scale, 0,
                     (const float *)STARPU_VECTOR_GET_PTR(buffers[0]), (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]),
                     train ? (float *)STARPU_VECTOR_GET_PTR(buffers[2]) : NULL,
                     (float *)STARPU_VECTOR_GET_PTR(buffers[train ? 3 : 2]));
}

static void cl_pixel_xent_cuda_func(void *buffers[], void *cl_arg)
{
    pixel_xent_cuda(buffers, cl_arg, 1);
}

static void cl_pixel_xent_eval_cuda_func(void *buffers[], void *cl_arg)
{
    pixel_xent_cuda(buffers, cl_arg, 0);
}
#endif

static struct starpu_perfmodel pixel_xent_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_pixel_xent", .footprint = sc_footprint_args};

static struct starpu_codelet cl_pixel_xent = {
    .cpu_funcs = {cl_pixel_xent_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_pixel_xent_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 4,
    .modes = {STARPU_R, STARPU_R, STARPU_W, STARPU_W},
    .model = &pixel_xent_model,
    .name = "pixel_xent",
};

int sc_insert_pixel_xent(const struct sc_task_opts *opts, const struct sc_pixel_xent_args *a,
                         starpu_data_handle_t logits, starpu_data_handle_t labels, starpu_data_handle_t dlogits,
                         starpu_data_handle_t stats, const char *name)
{
    const char *op = "pixel_xent";
    int ret = pixel_xent_check(a, op, logits, labels, dlogits, stats);
    if (!ret && !dlogits)
        ret = sc_error(SC_ERR_ARG, "%s: no dlogits handle", op);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_pixel_xent, STARPU_VALUE, a, sizeof *a, STARPU_R, logits, STARPU_R,
                                               labels, STARPU_W, dlogits, STARPU_W, stats, SC_TASK_ATTRS(opts, name),
                                               0),
                            op);
}

static void cl_pixel_xent_eval_cpu_func(void *buffers[], void *cl_arg)
{
    struct sc_pixel_xent_args a;
    starpu_codelet_unpack_args(cl_arg, &a);
    pixel_xent(&a, (const float *)STARPU_VECTOR_GET_PTR(buffers[0]),
               (const int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]), NULL,
               (float *)STARPU_VECTOR_GET_PTR(buffers[2]));
}

static struct starpu_perfmodel pixel_xent_eval_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_pixel_xent_eval", .footprint = sc_footprint_args};

static struct starpu_codelet cl_pixel_xent_eval = {
    .cpu_funcs = {cl_pixel_xent_eval_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_pixel_xent_eval_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = 3,
    .modes = {STARPU_R, STARPU_R, STARPU_W},
    .model = &pixel_xent_eval_model,
    .name = "pixel_xent_eval",
};

int sc_insert_pixel_xent_eval(const struct sc_task_opts *opts, const struct sc_pixel_xent_args *a,
                              starpu_data_handle_t logits, starpu_data_handle_t labels, starpu_data_handle_t stats,
                              const char *name)
{
    const char *op = "pixel_xent_eval";
    int ret = pixel_xent_check(a, op, logits, labels, NULL, stats);
    if (ret)
        return ret;
    return sc_insert_result(starpu_task_insert(&cl_pixel_xent_eval, STARPU_VALUE, a, sizeof *a, STARPU_R, logits,
                                               STARPU_R, labels, STARPU_W, stats, SC_TASK_ATTRS(opts, name), 0),
                            op);
}

/* ---- ordered sum: dst = ((src[0] + src[1]) + ...) + src[count-1] ----
 * Buffers: the count sources, then dst.  Element blocks are summed in a
 * local array and then stored, so dst may alias a source. */

#define SUM_BLOCK 256

#define SUM_ORDERED(T, count, buffers, n)                                                          \
    do {                                                                                           \
        T *dst_ = (T *)STARPU_VECTOR_GET_PTR((buffers)[count]);                                    \
        for (size_t b0 = 0; b0 < (n); b0 += SUM_BLOCK) {                                           \
            size_t nb = (n) - b0 < SUM_BLOCK ? (n) - b0 : SUM_BLOCK;                               \
            T acc[SUM_BLOCK];                                                                      \
            const T *s0 = (const T *)STARPU_VECTOR_GET_PTR((buffers)[0]) + b0;                     \
            for (size_t j = 0; j < nb; j++)                                                        \
                acc[j] = s0[j];                                                                    \
            for (int k = 1; k < (count); k++) {                                                    \
                const T *sk = (const T *)STARPU_VECTOR_GET_PTR((buffers)[k]) + b0;                 \
                for (size_t j = 0; j < nb; j++)                                                    \
                    acc[j] += sk[j];                                                               \
            }                                                                                      \
            memcpy(dst_ + b0, acc, nb * sizeof(T));                                                \
        }                                                                                          \
    } while (0)

static void cl_sum_ordered_cpu_func(void *buffers[], void *cl_arg)
{
    int count, elemsize;
    starpu_codelet_unpack_args(cl_arg, &count, &elemsize);
    size_t n = STARPU_VECTOR_GET_NX(buffers[count]);
    if (elemsize == (int)sizeof(double))
        SUM_ORDERED(double, count, buffers, n);
    else
        SUM_ORDERED(float, count, buffers, n);
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

static struct starpu_perfmodel sum_ordered_model = {.type = STARPU_HISTORY_BASED,
                                                    .symbol = "sc_sum_ordered"};

static struct starpu_codelet cl_sum_ordered = {
    .cpu_funcs = {cl_sum_ordered_cpu_func},
#ifdef SC_USE_CUDA
    .cuda_funcs = {cl_sum_ordered_cuda_func},
    .cuda_flags = {STARPU_CUDA_ASYNC},
#endif
    .nbuffers = STARPU_VARIABLE_NBUFFERS,
    .model = &sum_ordered_model,
    .name = "sum_ordered",
};

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
