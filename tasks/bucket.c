/* A gradient bucket (tasks.h): three vectors, the slices of the layers
 * in them, the ring and the optimizer plan over them, and every change
 * between the two partitions of each vector. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tasks/tasks.h"

struct sc_bucket {
    int nslices;
    size_t n;
    float *w, *v, *g;
    starpu_data_handle_t hw, hv, hg;
    starpu_data_handle_t *sw, *sg; /* slices when nslices > 1; else hw, hg themselves */
    struct sc_ring *ring;
    struct sc_sgd_sync *sgd;
};

int sc_bucket_create(struct sc_bucket **out, int nslices, const size_t *sizes, MPI_Comm comm, struct sc_nccl *nccl,
                     const struct sc_ring_opts *ring, const char *name)
{
    struct sc_bucket *b = calloc(1, sizeof(*b));
    if (!b)
        return sc_error(SC_ERR_NOMEM, "out of memory for a gradient bucket");
    *out = b;
    b->nslices = nslices;
    for (int i = 0; i < nslices; i++)
        b->n += sizes[i];
    int err;
    if ((err = sc_vector_new(&b->hw, (void **)&b->w, b->n, sizeof(float))) ||
        (err = sc_vector_new(&b->hv, (void **)&b->v, b->n, sizeof(float))) ||
        (err = sc_vector_new(&b->hg, (void **)&b->g, b->n, sizeof(float))) ||
        (err = sc_ring_create(&b->ring, b->hg, comm, ring, name)) ||
        (err = sc_sgd_sync_create(&b->sgd, b->ring, b->hw, b->hv)))
        return err;
    if (nccl)
        sc_sgd_sync_use_nccl(b->sgd, nccl);
    if (nslices == 1)
        return 0;
    b->sw = calloc(nslices, sizeof(*b->sw));
    b->sg = calloc(nslices, sizeof(*b->sg));
    uint32_t *counts = calloc(nslices, sizeof(*counts));
    if (!b->sw || !b->sg || !counts) {
        free(counts);
        return sc_error(SC_ERR_NOMEM, "out of memory for a gradient bucket");
    }
    for (int i = 0; i < nslices; i++)
        counts[i] = (uint32_t)sizes[i];
    struct starpu_data_filter f = {
        .filter_func = starpu_vector_filter_list,
        .nchildren = (unsigned)nslices,
        .filter_arg_ptr = counts,
    };
    starpu_data_partition_plan(b->hw, &f, b->sw);
    starpu_data_partition_plan(b->hg, &f, b->sg);
    free(counts);
    starpu_data_partition_submit(b->hw, nslices, b->sw);
    starpu_data_partition_submit(b->hg, nslices, b->sg);
    return 0;
}

void sc_bucket_destroy(struct sc_bucket *b)
{
    if (!b)
        return;
    sc_sgd_sync_destroy(b->sgd);
    sc_ring_destroy(b->ring);
    if (b->sw && b->sw[0]) {
        starpu_data_unpartition_submit(b->hw, b->nslices, b->sw, STARPU_MAIN_RAM);
        starpu_data_partition_clean(b->hw, b->nslices, b->sw);
    }
    if (b->sg && b->sg[0]) {
        starpu_data_unpartition_submit(b->hg, b->nslices, b->sg, STARPU_MAIN_RAM);
        starpu_data_partition_clean(b->hg, b->nslices, b->sg);
    }
    sc_vector_free(b->hw, b->w);
    sc_vector_free(b->hv, b->v);
    sc_vector_free(b->hg, b->g);
    free(b->sw), free(b->sg);
    free(b);
}

float *sc_bucket_weights(const struct sc_bucket *b)
{
    return b->w;
}
float *sc_bucket_momentum(const struct sc_bucket *b)
{
    return b->v;
}
float *sc_bucket_grads(const struct sc_bucket *b)
{
    return b->g;
}
starpu_data_handle_t sc_bucket_momentum_handle(const struct sc_bucket *b)
{
    return b->hv;
}

starpu_data_handle_t sc_bucket_weight_slice(const struct sc_bucket *b, int i)
{
    return b->sw ? b->sw[i] : b->hw;
}

starpu_data_handle_t sc_bucket_grad_slice(const struct sc_bucket *b, int i)
{
    return b->sg ? b->sg[i] : b->hg;
}

void sc_bucket_owned_range(const struct sc_bucket *b, size_t *first, size_t *count)
{
    sc_ring_owned_range(b->ring, first, count);
}

int sc_bucket_reduce_submit(struct sc_bucket *b, const struct sc_task_opts *opts, struct sc_gate *gate)
{
    if (b->sw) {
        starpu_data_unpartition_submit(b->hg, b->nslices, b->sg, STARPU_MAIN_RAM);
        starpu_data_unpartition_submit(b->hw, b->nslices, b->sw, STARPU_MAIN_RAM);
    }
    return sc_sgd_sync_reduce_submit(b->sgd, opts, gate);
}

int sc_bucket_update_submit(struct sc_bucket *b, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd)
{
    int err = sc_sgd_sync_update_submit(b->sgd, opts, sgd);
    if (b->sw) {
        starpu_data_partition_submit(b->hw, b->nslices, b->sw);
        starpu_data_partition_submit(b->hg, b->nslices, b->sg);
    }
    return err;
}

int sc_bucket_is_local(const struct sc_bucket *b)
{
    return sc_sgd_sync_is_local(b->sgd);
}

int sc_buckets_update_submit(struct sc_bucket *const *b, int count, const struct sc_task_opts *opts,
                             const struct sc_sgd_args *sgd, const char *name)
{
    if (count < 1 || count > SC_SGD_MULTI_MAX)
        return sc_error(SC_ERR_ARG, "%s: %d buckets in one update, not in [1, %d]", name, count, SC_SGD_MULTI_MAX);
    starpu_data_handle_t w[SC_SGD_MULTI_MAX], v[SC_SGD_MULTI_MAX], g[SC_SGD_MULTI_MAX];
    for (int i = 0; i < count; i++) {
        if (!sc_bucket_is_local(b[i]))
            return sc_error(SC_ERR_ARG, "%s: bucket %d of the update is reduced over several ranks", name, i);
        w[i] = b[i]->hw, v[i] = b[i]->hv, g[i] = b[i]->hg;
    }
    int err = sc_insert_sgd_multi(opts, sgd, count, w, v, g, name);
    for (int i = 0; i < count; i++)
        if (b[i]->sw) {
            starpu_data_partition_submit(b[i]->hw, b[i]->nslices, b[i]->sw);
            starpu_data_partition_submit(b[i]->hg, b[i]->nslices, b[i]->sg);
        }
    return err;
}

uint64_t sc_bucket_bytes_sent(const struct sc_bucket *b)
{
    return sc_ring_bytes_sent(b->ring);
}

uint64_t sc_bucket_partial_bytes_sent(const struct sc_bucket *b)
{
    return sc_ring_partial_bytes_sent(b->ring);
}
