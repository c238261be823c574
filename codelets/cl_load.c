/* Gathers a batch of uint8 samples into a float tile (kernels/load.c).
 * The index array travels inside the task's argument block, which StarPU
 * frees with the task, so the caller may reuse its array at once. */
#include "cl_common.h"
#include "kernels/load.h"

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
    sc_load_batch(a->images, a->labels, a->pixels, a->n, a->idx, (float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]));
}

/* The argument block holds pointers and indices that change every batch;
 * only the shape decides the cost. */
static uint32_t load_footprint(struct starpu_task *task)
{
    const struct load_args *a = task->cl_arg;
    return starpu_hash_crc32c_be(a->pixels, starpu_hash_crc32c_be(a->n, 0));
}

SC_PERFMODEL(load_batch_model, "sc_load_batch", load_footprint);

SC_CODELET(cl_load_batch, "load_batch", &load_batch_model, cl_load_batch_cpu_func, NULL, 2, STARPU_W, STARPU_W);

int sc_insert_load_batch(const struct sc_task_opts *opts, const uint8_t *images, const uint8_t *src_labels, int pixels,
                         int n, const int32_t *idx, starpu_data_handle_t x, starpu_data_handle_t labels,
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
                             SC_TASK_ATTRS(opts, name), 0);
    return sc_insert_result(ret, "load_batch");
}

/* ---- blocks and labels ---- */

struct block_args {
    const uint8_t *src;
    struct sc_load_block b;
    int n;
    int32_t idx[];
};

static void cl_load_images_cpu_func(void *buffers[], void *cl_arg)
{
    const struct block_args *a = cl_arg;
    sc_load_images(a->src, &a->b, a->n, a->idx, (float *)STARPU_VECTOR_GET_PTR(buffers[0]));
}

static void cl_load_labels_cpu_func(void *buffers[], void *cl_arg)
{
    const struct block_args *a = cl_arg;
    sc_load_labels(a->src, a->n, a->idx, (int32_t *)STARPU_VECTOR_GET_PTR(buffers[0]));
}

static uint32_t block_footprint(struct starpu_task *task)
{
    const struct block_args *a = task->cl_arg;
    return starpu_hash_crc32c_be_n(&a->b, sizeof a->b, starpu_hash_crc32c_be(a->n, 0));
}

SC_PERFMODEL(load_images_model, "sc_load_images", block_footprint);
SC_PERFMODEL(load_labels_model, "sc_load_labels", block_footprint);

SC_CODELET(cl_load_images, "load_images", &load_images_model, cl_load_images_cpu_func, NULL, 1, STARPU_W);
SC_CODELET(cl_load_labels, "load_labels", &load_labels_model, cl_load_labels_cpu_func, NULL, 1, STARPU_W);

static int insert_block(const struct sc_task_opts *opts, struct starpu_codelet *cl, const uint8_t *src,
                        const struct sc_load_block *b, int n, const int32_t *idx, starpu_data_handle_t h,
                        const char *name)
{
    size_t size = sizeof(struct block_args) + (size_t)n * sizeof(int32_t);
    struct block_args *a = malloc(size);
    if (!a)
        return sc_error(SC_ERR_NOMEM, "%s: cannot allocate %zu bytes", cl->name, size);
    memset(a, 0, sizeof *a);
    a->src = src;
    if (b)
        a->b = *b;
    a->n = n;
    memcpy(a->idx, idx, (size_t)n * sizeof(int32_t));
    return sc_insert_result(starpu_task_insert(cl, STARPU_CL_ARGS, a, size, STARPU_W, h, SC_TASK_ATTRS(opts, name), 0),
                            cl->name);
}

int sc_insert_load_images(const struct sc_task_opts *opts, const uint8_t *images, const struct sc_load_block *b, int n,
                          const int32_t *idx, starpu_data_handle_t x, const char *name)
{
    int ret;
    if (!images || !b || !idx || n < 1 || b->c < 1 || b->r0 < 0 || b->r1 > b->h || b->r0 >= b->r1 || b->c0 < 0 ||
        b->c1 > b->w || b->c0 >= b->c1)
        return sc_error(SC_ERR_ARG, "load_images: bad arguments (n %d)", n);
    if ((ret =
             sc_check_vec(x, (size_t)n * b->c * (b->r1 - b->r0) * (b->c1 - b->c0), sizeof(float), "load_images", "x")))
        return ret;
    return insert_block(opts, &cl_load_images, images, b, n, idx, x, name);
}

int sc_insert_load_labels(const struct sc_task_opts *opts, const uint8_t *src_labels, int n, const int32_t *idx,
                          starpu_data_handle_t labels, const char *name)
{
    int ret;
    if (!src_labels || !idx || n < 1)
        return sc_error(SC_ERR_ARG, "load_labels: bad arguments (n %d)", n);
    if ((ret = sc_check_vec(labels, n, sizeof(int32_t), "load_labels", "labels")))
        return ret;
    return insert_block(opts, &cl_load_labels, src_labels, NULL, n, idx, labels, name);
}
