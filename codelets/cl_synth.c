/* Synthetic data sets generated on the fly, as tasks: the generator is
 * kernels/synth.c. */
#include "cl_common.h"
#include "kernels/synth.h"

#include <stdlib.h>
#include <string.h>

struct synth_task_args {
    struct sc_synth_args a;
    int32_t idx[];
};

static void cl_synth_load_cpu_func(void *buffers[], void *cl_arg)
{
    const struct synth_task_args *ta = cl_arg;
    /* without a labels handle, the loss's tiles get theirs from
     * synth_labels */
    int own = STARPU_TASK_GET_NBUFFERS(starpu_task_get_current()) > 1;
    sc_synth_load(&ta->a, ta->idx, (float *)STARPU_VECTOR_GET_PTR(buffers[0]),
                  own ? (int32_t *)STARPU_VECTOR_GET_PTR(buffers[1]) : NULL);
}

/* The seed, block origin and indices change from task to task; only the
 * kind and the block's shape decide the cost. */
static uint32_t synth_footprint(struct starpu_task *task)
{
    const struct sc_synth_args *a = &((const struct synth_task_args *)task->cl_arg)->a;
    uint32_t h = starpu_hash_crc32c_be(a->kind, 0);
    h = starpu_hash_crc32c_be(a->c, h);
    h = starpu_hash_crc32c_be(a->r1 - a->r0, h);
    h = starpu_hash_crc32c_be(a->c1 - a->c0, h);
    return starpu_hash_crc32c_be(a->n, h);
}

SC_PERFMODEL(synth_load_model, "sc_synth_load", synth_footprint);

SC_CODELET(cl_synth_load, "synth_load", &synth_load_model, cl_synth_load_cpu_func, NULL, STARPU_VARIABLE_NBUFFERS);

int sc_insert_synth_load(const struct sc_task_opts *opts, const struct sc_synth_args *a, const int32_t *idx,
                         starpu_data_handle_t x, starpu_data_handle_t labels, const char *name)
{
    int ret;
    if ((ret = sc_synth_check(a, "synth_load")))
        return ret;
    if (a->n < 1)
        return sc_error(SC_ERR_SHAPE, "synth_load: %d samples in the tile", a->n);
    if (!idx)
        return sc_error(SC_ERR_ARG, "synth_load: no sample indices");
    for (int s = 0; s < a->n; s++)
        if (idx[s] < -1)
            return sc_error(SC_ERR_ARG, "synth_load: negative sample index %d at %d", (int)idx[s], s);
    if ((ret = sc_check_vec(x, (size_t)a->n * sc_synth_x_count(a), sizeof(float), "synth_load", "x")) ||
        (labels &&
         (ret = sc_check_vec(labels, (size_t)a->n * sc_synth_label_count(a), sizeof(int32_t), "synth_load", "labels"))))
        return ret;
    size_t size = sizeof(struct synth_task_args) + (size_t)a->n * sizeof(int32_t);
    struct synth_task_args *ta = malloc(size);
    if (!ta)
        return sc_error(SC_ERR_NOMEM, "synth_load: cannot allocate %zu bytes", size);
    ta->a = *a;
    memcpy(ta->idx, idx, (size_t)a->n * sizeof(int32_t));
    struct starpu_data_descr d[2] = {{x, STARPU_W}, {labels, STARPU_W}};
    ret = starpu_task_insert(&cl_synth_load, STARPU_CL_ARGS, ta, size, STARPU_DATA_MODE_ARRAY, d, labels ? 2 : 1,
                             SC_TASK_ATTRS(opts, name), 0);
    return sc_insert_result(ret, "synth_load");
}

/* ---- labels at another resolution ---- */

struct synth_labels_args {
    struct sc_synth_args a; /* the input's shape; n */
    int oh, ow;             /* the loss's resolution */
    struct sc_box box;      /* the loss tile's block */
    int32_t idx[];
};

static void cl_synth_labels_cpu_func(void *buffers[], void *cl_arg)
{
    const struct synth_labels_args *ta = cl_arg;
    sc_synth_labels(&ta->a, ta->oh, ta->ow, ta->box, ta->idx, (int32_t *)STARPU_VECTOR_GET_PTR(buffers[0]));
}

SC_CODELET(cl_synth_labels, "synth_labels", NULL, cl_synth_labels_cpu_func, NULL, 1, STARPU_W);

int sc_insert_synth_labels(const struct sc_task_opts *opts, const struct sc_synth_args *a, int oh, int ow,
                           struct sc_box box, const int32_t *idx, starpu_data_handle_t labels, const char *name)
{
    int ret;
    if ((ret = sc_synth_check(a, "synth_labels")))
        return ret;
    if (a->n < 1 || !idx || oh < 1 || ow < 1 || oh > a->h || ow > a->w || box.r0 < 0 || box.r1 > oh || box.c0 < 0 ||
        box.c1 > ow || sc_box_empty(box))
        return sc_error(SC_ERR_ARG, "synth_labels: bad arguments (n %d, %dx%d)", a->n, oh, ow);
    size_t per = a->kind == SC_SYNTH_MESH ? (size_t)sc_box_area(box) : 1;
    if ((ret = sc_check_vec(labels, (size_t)a->n * per, sizeof(int32_t), "synth_labels", "labels")))
        return ret;
    size_t size = sizeof(struct synth_labels_args) + (size_t)a->n * sizeof(int32_t);
    struct synth_labels_args *ta = malloc(size);
    if (!ta)
        return sc_error(SC_ERR_NOMEM, "synth_labels: cannot allocate %zu bytes", size);
    memset(ta, 0, sizeof *ta);
    ta->a = *a, ta->oh = oh, ta->ow = ow, ta->box = box;
    memcpy(ta->idx, idx, (size_t)a->n * sizeof(int32_t));
    ret =
        starpu_task_insert(&cl_synth_labels, STARPU_CL_ARGS, ta, size, STARPU_W, labels, SC_TASK_ATTRS(opts, name), 0);
    return sc_insert_result(ret, "synth_labels");
}
