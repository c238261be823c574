/* A tile read from a data source that the layer above owns (the HDF5
 * reader of src/data/hdf5.c): the task calls the source's read function
 * on its buffers, and knows nothing of files.  The request and the index
 * array travel inside the task's argument block, which StarPU frees with
 * the task, so the caller may reuse its array at once. */
#include "cl_common.h"

#include <stdlib.h>
#include <string.h>

struct read_args {
    sc_load_read_fn fn;
    void *source;
    struct sc_load_read req;
    int has_x, has_labels;
    int32_t idx[];
};

static void cl_load_read_cpu_func(void *buffers[], void *cl_arg)
{
    const struct read_args *a = cl_arg;
    float *x = a->has_x ? (float *)STARPU_VECTOR_GET_PTR(buffers[0]) : NULL;
    int32_t *labels = a->has_labels ? (int32_t *)STARPU_VECTOR_GET_PTR(buffers[a->has_x]) : NULL;
    a->fn(a->source, &a->req, a->idx, x, labels);
}

/* The indices and the block's origin change from task to task; only the
 * block's shape and what is read decide the cost. */
static uint32_t read_footprint(struct starpu_task *task)
{
    const struct read_args *a = task->cl_arg;
    const struct sc_load_read *r = &a->req;
    uint32_t h = starpu_hash_crc32c_be(a->has_x | a->has_labels << 1, 0);
    h = starpu_hash_crc32c_be(r->nch, h);
    h = starpu_hash_crc32c_be(r->r1 - r->r0, h);
    h = starpu_hash_crc32c_be(r->c1 - r->c0, h);
    h = starpu_hash_crc32c_be(r->label_pixels, h);
    return starpu_hash_crc32c_be(r->n, h);
}

SC_PERFMODEL(load_read_model, "sc_load_read", read_footprint);

SC_CODELET(cl_load_read, "load_read", &load_read_model, cl_load_read_cpu_func, NULL, STARPU_VARIABLE_NBUFFERS);

int sc_insert_load_read(const struct sc_task_opts *opts, sc_load_read_fn fn, void *source,
                        const struct sc_load_read *req, const int32_t *idx, starpu_data_handle_t x,
                        starpu_data_handle_t labels, const char *name)
{
    int ret;
    if (!fn || !req || !idx || req->n < 1 || (!x && !labels))
        return sc_error(SC_ERR_ARG, "load_read: bad arguments");
    if (x && (req->nch < 1 || req->r0 < 0 || req->r0 >= req->r1 || req->c0 < 0 || req->c0 >= req->c1))
        return sc_error(SC_ERR_ARG, "load_read: bad block (%d channels, rows %d..%d, columns %d..%d)", req->nch,
                        req->r0, req->r1, req->c0, req->c1);
    if (labels && req->label_pixels < 1)
        return sc_error(SC_ERR_ARG, "load_read: %d labels per sample", req->label_pixels);
    size_t per = x ? (size_t)req->nch * (req->r1 - req->r0) * (req->c1 - req->c0) : 0;
    if ((x && (ret = sc_check_vec(x, (size_t)req->n * per, sizeof(float), "load_read", "x"))) ||
        (labels &&
         (ret = sc_check_vec(labels, (size_t)req->n * req->label_pixels, sizeof(int32_t), "load_read", "labels"))))
        return ret;
    size_t size = sizeof(struct read_args) + (size_t)req->n * sizeof(int32_t);
    struct read_args *a = malloc(size);
    if (!a)
        return sc_error(SC_ERR_NOMEM, "load_read: cannot allocate %zu bytes", size);
    memset(a, 0, sizeof *a);
    a->fn = fn, a->source = source, a->req = *req, a->has_x = x != NULL, a->has_labels = labels != NULL;
    memcpy(a->idx, idx, (size_t)req->n * sizeof(int32_t));
    struct starpu_data_descr d[2];
    int nd = 0;
    if (x)
        d[nd++] = (struct starpu_data_descr){x, STARPU_W};
    if (labels)
        d[nd++] = (struct starpu_data_descr){labels, STARPU_W};
    ret = starpu_task_insert(&cl_load_read, STARPU_CL_ARGS, a, size, STARPU_DATA_MODE_ARRAY, d, nd,
                             SC_TASK_ATTRS(opts, name), 0);
    return sc_insert_result(ret, "load_read");
}
