/* Gathers a batch of uint8 samples into a float tile.  The index array
 * travels inside the task's argument block, which StarPU frees with the
 * task, so the caller may reuse its array at once. */
#include "cl_common.h"

#include <stdlib.h>
#include <string.h>

struct load_args {
    const uint8_t *images, *labels;
    int pixels, n;
    int32_t idx[];
};

static void cl_load_batch_cpu_func(void *buffers[], void *cl_arg)
{
    const struct load_args *a = cl_arg;
    float *x = (float *)STARPU_VECTOR_GET_PTR(buffers[0]);
    int32_t *labels = (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]);
    for (int i = 0; i < a->n; i++) {
        const uint8_t *src = a->images + (size_t)a->idx[i] * a->pixels;
        float *dst = x + (size_t)i * a->pixels;
        for (int p = 0; p < a->pixels; p++)
            dst[p] = src[p] / 255.0f;
        labels[i] = a->labels[a->idx[i]];
    }
}

/* The argument block holds pointers and indices that change every batch;
 * only the shape decides the cost. */
static uint32_t load_footprint(struct starpu_task *task)
{
    const struct load_args *a = task->cl_arg;
    return starpu_hash_crc32c_be(a->pixels, starpu_hash_crc32c_be(a->n, 0));
}

static struct starpu_perfmodel load_batch_model = {
    .type = STARPU_HISTORY_BASED, .symbol = "sc_load_batch", .footprint = load_footprint};

static struct starpu_codelet cl_load_batch = {
    .cpu_funcs = {cl_load_batch_cpu_func},
    .nbuffers = 2,
    .modes = {STARPU_W, STARPU_W},
    .model = &load_batch_model,
    .name = "load_batch",
};

int sc_insert_load_batch(const uint8_t *images, const uint8_t *src_labels, int pixels, int n,
                         const int32_t *idx, starpu_data_handle_t x, starpu_data_handle_t labels,
                         const char *name)
{
    int ret;
    if (!images || !src_labels || !idx || pixels < 1 || n < 1)
        return sc_error(SC_ERR_ARG, "load_batch: bad arguments (pixels %d, n %d)", pixels, n);
    if ((ret = sc_check_vec(x, (size_t)n * pixels, sizeof(float), "load_batch", "x")) ||
        (ret = sc_check_vec(labels, n, sizeof(int32_t), "load_batch", "labels")))
        return ret;
    size_t size = sizeof(struct load_args) + (size_t)n * sizeof(int32_t);
    struct load_args *a = malloc(size);
    if (!a)
        return sc_error(SC_ERR_NOMEM, "load_batch: cannot allocate %zu bytes", size);
    *a = (struct load_args){images, src_labels, pixels, n};
    memcpy(a->idx, idx, (size_t)n * sizeof(int32_t));
    ret = starpu_task_insert(&cl_load_batch, STARPU_CL_ARGS, a, size, STARPU_W, x, STARPU_W, labels,
                             SC_TASK_ATTRS(name), 0);
    return sc_insert_result(ret, "load_batch");
}
