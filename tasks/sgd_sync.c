/* The optimizer step of data-parallel training over a gradient ring
 * (tasks.h, sc_sgd_sync): the reduce-scatter, the update of the owned
 * chunk (SGD, or Adam with its state of that chunk only), the allgather of
 * the weights. */
#include <stdio.h>
#include <stdlib.h>

#include "base/error.h"
#include "tasks/ring_private.h"
#include "tasks/tasks.h"

struct sc_sgd_sync {
    struct sc_ring *ring;
    starpu_data_handle_t weights, momentum; /* momentum: NULL under Adam */
    starpu_data_handle_t *wpiece, *vpiece;
    struct sc_nccl *nccl; /* NULL: the ring's tasks */
    /* Adam's state (sc_adam_state_floats) of the range of the vector this
     * rank updates: the owned chunk of a ring, the whole on one rank or
     * under NCCL, the whole on rank 0 of a chain or a direct collective,
     * nothing (no handle) on the others. */
    int adam;
    starpu_data_handle_t state;
    float *state_mem;
    size_t state_first, state_count;
    char name[80];
};

/* Adam's state of the range this rank updates (struct sc_sgd_sync). */
static int state_alloc(struct sc_sgd_sync *s)
{
    struct sc_ring *r = s->ring;
    size_t n = starpu_vector_get_nx(r->vec);
    sc_vector_free(s->state, s->state_mem);
    s->state = NULL, s->state_mem = NULL;
    if (r->size == 1 || s->nccl)
        s->state_first = 0, s->state_count = n;
    else
        sc_ring_owned_range(r, &s->state_first, &s->state_count);
    if ((r->chain || r->use_direct) && !s->nccl && r->rank != 0)
        return 0;
    return sc_vector_new(&s->state, (void **)&s->state_mem, sc_adam_state_floats(s->state_count), sizeof(float));
}

void sc_sgd_sync_use_nccl(struct sc_sgd_sync *s, struct sc_nccl *n)
{
    s->nccl = n;
    /* every rank now updates the whole vector */
    if (s->adam && state_alloc(s))
        sc_log(0, "%s", sc_last_error());
}

int sc_sgd_sync_create(struct sc_sgd_sync **out, struct sc_ring *ring, starpu_data_handle_t weights,
                       starpu_data_handle_t momentum, enum sc_optimizer optimizer)
{
    struct sc_sgd_sync *s = calloc(1, sizeof(*s));
    if (!s)
        return sc_error(SC_ERR_NOMEM, "out of memory for an optimizer plan");
    s->ring = ring;
    s->weights = weights;
    s->momentum = momentum;
    s->adam = optimizer != SC_OPT_SGD;
    snprintf(s->name, sizeof(s->name), "%s.%s", ring->name, s->adam ? "adam" : "sgd");
    int err = s->adam ? state_alloc(s) : 0;
    if (!err && ring->size > 1 && !ring->chain && !ring->use_direct) {
        int pieces = ring->size * ring->nseg;
        s->wpiece = calloc(pieces, sizeof(*s->wpiece));
        s->vpiece = calloc(pieces, sizeof(*s->vpiece));
        if (!s->wpiece || !s->vpiece)
            err = sc_error(SC_ERR_NOMEM, "out of memory for an optimizer plan");
        else {
            sc_ring_partition_plan(weights, pieces, s->wpiece);
            if (!s->adam)
                sc_ring_partition_plan(momentum, pieces, s->vpiece);
        }
    }
    if (err) {
        sc_sgd_sync_destroy(s);
        return err;
    }
    *out = s;
    return 0;
}

void sc_sgd_sync_destroy(struct sc_sgd_sync *s)
{
    if (!s)
        return;
    int pieces = s->ring->size * s->ring->nseg;
    if (s->wpiece && s->wpiece[0])
        starpu_data_partition_clean(s->weights, pieces, s->wpiece);
    if (s->vpiece && s->vpiece[0])
        starpu_data_partition_clean(s->momentum, pieces, s->vpiece);
    sc_vector_free(s->state, s->state_mem);
    free(s->wpiece);
    free(s->vpiece);
    free(s);
}

starpu_data_handle_t sc_sgd_sync_state(const struct sc_sgd_sync *s, float **mem, size_t *first, size_t *count)
{
    *mem = s->state_mem;
    *first = s->state_first;
    *count = s->state ? s->state_count : 0;
    return s->state;
}

int sc_sgd_sync_reduce_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, struct sc_gate *gate)
{
    struct sc_ring *r = s->ring;
    int err = 0;
    if (r->size == 1)
        return gate ? sc_gate_check_submit(gate, opts, r->vec) : 0;
    if (s->nccl) {
        err = sc_nccl_allreduce_submit(s->nccl, opts, r->vec, r->comm_name);
        return !err && gate ? sc_gate_check_submit(gate, opts, r->vec) : err;
    }
    if (r->chain || r->use_direct) {
        r->sent += r->use_direct && r->rank ? starpu_vector_get_nx(r->vec) * sizeof(float) : 0;
        r->sent_partial += r->use_direct && r->rank ? starpu_vector_get_nx(r->vec) * sizeof(float) : 0;
        err = r->use_direct ? sc_direct_reduce_submit(r->direct, r->vec) : sc_ring_chain_reduce(r, opts);
        return !err && gate && r->rank == 0 ? sc_gate_check_submit(gate, opts, r->vec) : err;
    }
    int pieces = r->size * r->nseg, own = sc_ring_mod(r->rank + 1, r->size) * r->nseg;
    starpu_data_partition_submit(r->vec, pieces, r->piece);
    err = sc_ring_reduce_scatter(r, opts);
    for (int j = 0; j < r->nseg && gate && !err; j++)
        err = sc_gate_check_submit(gate, opts, r->piece[own + j]);
    return err;
}

int sc_sgd_sync_update_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd)
{
    struct sc_ring *r = s->ring;
    if (s->adam != (sgd->optimizer != SC_OPT_SGD))
        return sc_error(SC_ERR_ARG, "%s: the plan was made for another optimizer", s->name);
    /* Adam's state takes the momentum's place in the whole-vector updates */
    starpu_data_handle_t v = s->adam ? s->state : s->momentum;
    if (r->size == 1 || s->nccl)
        return sc_insert_sgd(opts, sgd, s->weights, v, r->vec, s->name);
    if (r->chain || r->use_direct) {
        int err = r->rank == 0 ? sc_insert_sgd(opts, sgd, s->weights, v, r->vec, s->name) : 0;
        r->sent += r->use_direct && !r->rank ? starpu_vector_get_nx(r->vec) * sizeof(float) : 0;
        return err             ? err
               : r->use_direct ? sc_direct_bcast_submit(r->direct, s->weights)
                               : sc_ring_chain_broadcast(r, opts, s->weights);
    }
    int pieces = r->size * r->nseg, own = sc_ring_mod(r->rank + 1, r->size) * r->nseg, err = 0;
    starpu_data_partition_submit(s->weights, pieces, s->wpiece);
    if (!s->adam)
        starpu_data_partition_submit(s->momentum, pieces, s->vpiece);
    /* the owned chunk's segments in one task */
    err = s->adam ? sc_insert_adam(opts, sgd, r->nseg, &s->wpiece[own], &r->piece[own], s->state, s->name)
                  : sc_insert_sgd_multi(opts, sgd, r->nseg, &s->wpiece[own], &s->vpiece[own], &r->piece[own], s->name);
    if (!err)
        err = sc_ring_allgather(r, opts, s->wpiece);
    if (!s->adam)
        starpu_data_unpartition_submit(s->momentum, pieces, s->vpiece, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(s->weights, pieces, s->wpiece, STARPU_MAIN_RAM);
    starpu_data_unpartition_submit(r->vec, pieces, r->piece, STARPU_MAIN_RAM);
    return err;
}

int sc_sgd_sync_is_local(const struct sc_sgd_sync *s)
{
    return s->ring->size == 1;
}

int sc_sgd_sync_submit(struct sc_sgd_sync *s, const struct sc_task_opts *opts, const struct sc_sgd_args *sgd)
{
    int err = sc_sgd_sync_reduce_submit(s, opts, NULL);
    return err ? err : sc_sgd_sync_update_submit(s, opts, sgd);
}
