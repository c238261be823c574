/* What is read from or written into a set-up network outside
 * iterations: the diagnosis of non-finite values, and the parameters,
 * momentum and buffers of checkpoints. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "src/net/net_private.h"

/* 1 when the float data of h (p in main memory) has a NaN or an Inf. */
static int has_nonfinite(starpu_data_handle_t h, const float *p)
{
    if (!h || !p)
        return 0;
    starpu_data_acquire(h, STARPU_R);
    size_t n = starpu_data_get_size(h) / sizeof(float);
    int bad = 0;
    for (size_t i = 0; i < n && !bad; i++)
        bad = !isfinite(p[i]);
    starpu_data_release(h);
    return bad;
}

/* 1 when some tile of the float tensor t has a NaN or an Inf. */
static int tiles_nonfinite(const struct sc_tensor *t)
{
    int bad = 0;
    for (int i = 0; i < t->ntiles && !bad; i++)
        bad = has_nonfinite(sc_tensor_handle(t, i), sc_tensor_buf(t, i));
    return bad;
}

/* The first place in the order of computation of the last micro-batch
 * computed with a value that is not finite, over all ranks: the input
 * (-1), outputs in forward order (0..L-1), the loss (L), output errors in
 * backward order, then weight gradients in backward order; 3 L + 1: none. */
static int first_nonfinite(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int L = net->nlayers;
    int first = 3 * L + 1;
    if (tiles_nonfinite(input_x(D)))
        first = -1;
    for (int l = 0; l < L && first > 3 * L; l++)
        if (!net->layers[l].alias && tiles_nonfinite(&D->ld[l].tiles.y))
            first = l;
    if (first > 3 * L && tiles_nonfinite(&D->stats))
        first = L;
    for (int l = L - 1; l >= 0 && first > 3 * L; l--)
        if (!net->layers[l].alias && tiles_nonfinite(&D->ld[l].tiles.dy))
            first = L + 1 + (L - 1 - l);
    for (int l = L - 1; l >= 0 && first > 3 * L; l--)
        if (net->layers[l].nparams && has_nonfinite(D->ld[l].params.hg, D->ld[l].params.g))
            first = 2 * L + 1 + (L - 1 - l);
    int all;
    MPI_Allreduce(&first, &all, 1, MPI_INT, MPI_MIN, D->rt->ctl);
    return all;
}

int sc_net_find_nonfinite(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, char *where, size_t size)
{
    struct sc_net_dist *D = net->dist;
    int L = net->nlayers, all = 3 * L + 1, err = 0;
    /* A frozen watch: the SGD tasks change nothing. */
    struct sc_nonfinite frozen = {.first_iteration = 1, .freeze = 1};
    struct sc_sgd_args none = {.watch = &frozen};
    int64_t iteration = net->iteration;
    /* each micro-batch as an iteration of its own, until one shows it */
    for (int m = 0; m < D->comm.accumulate && all > 3 * L && !err; m++) {
        err = sc_net_submit_step(net, ds, idx + (size_t)m * D->global_batch, 1, NULL, &none);
        sc_net_wait(net);
        net->iteration = iteration;
        if (!err)
            all = first_nonfinite(net);
    }
    if (err)
        return err;
    const struct sc_layer *layer = NULL;
    const char *what = "";
    if (all >= 0 && all < L)
        layer = &net->layers[all], what = "the output of";
    else if (all > L && all <= 2 * L)
        layer = &net->layers[L - 1 - (all - L - 1)], what = "the error (gradient) at the output of";
    else if (all > 2 * L && all <= 3 * L)
        layer = &net->layers[L - 1 - (all - 2 * L - 1)], what = "the weight gradient of";
    if (all < 0)
        snprintf(where, size, "the input samples (--data)");
    else if (layer)
        snprintf(where, size, "%s layer %d (%s, [%s] at line %d)", what, layer->index, layer->name, layer->ops->section,
                 layer->line);
    else if (all == L)
        snprintf(where, size, "the loss");
    else
        snprintf(where, size, "no layer when the batch was computed again (the weights had changed since)");
    return 0;
}

/* The range of layer l's momentum that this rank keeps up to date:
 * [*first, *first + *count) within the layer. */
static void owned_momentum(struct sc_net *net, int l, size_t *first, size_t *count)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    size_t n = share_of(net, l)->nparams;
    if (d->replica.on) { /* whole on every rank; rank 0 speaks for them */
        *first = 0;
        *count = D->rt->rank == 0 ? n : 0;
        return;
    }
    size_t bf, bc;
    sc_bucket_owned_range(D->buckets[d->params.bucket].vectors, &bf, &bc);
    size_t lo = bf > d->params.offset ? bf : d->params.offset,
           hi = bf + bc < d->params.offset + n ? bf + bc : d->params.offset + n;
    *first = hi > lo ? lo - d->params.offset : 0;
    *count = hi > lo ? hi - lo : 0;
}

static starpu_data_handle_t momentum_handle(struct sc_net *net, int l)
{
    struct layer_data *d = &net->dist->ld[l];
    return d->replica.on ? sc_tensor_handle(&d->replica.own_v, 0)
                         : sc_bucket_momentum_handle(net->dist->buckets[d->params.bucket].vectors);
}

/* Rank 0's dst[index[i]] = src[i] for the count entries each rank gives
 * (a share's values into the whole layer's). */
static int gather_indexed(struct sc_runtime *rt, const size_t *index, const float *src, int count, float *dst)
{
    int counts[rt->size], displs[rt->size], total = 0, err = 0;
    MPI_Gather(&count, 1, MPI_INT, counts, 1, MPI_INT, 0, rt->ctl);
    for (int r = 0; r < rt->size; r++) {
        displs[r] = total;
        total += rt->rank == 0 ? counts[r] : 0;
    }
    uint64_t *idx = malloc(((size_t)count + 1) * sizeof(*idx)), *all_idx = malloc(((size_t)total + 1) * sizeof(*idx));
    float *all = malloc(((size_t)total + 1) * sizeof(float));
    if (!idx || !all_idx || !all)
        err = sc_error(SC_ERR_NOMEM, "out of memory gathering a checkpoint");
    for (int i = 0; !err && i < count; i++)
        idx[i] = index[i];
    /* every rank takes part whatever happened, so that none waits for ever */
    MPI_Gatherv(err ? NULL : idx, err ? 0 : count, MPI_UINT64_T, all_idx, counts, displs, MPI_UINT64_T, 0, rt->ctl);
    MPI_Gatherv(err ? NULL : src, err ? 0 : count, MPI_FLOAT, all, counts, displs, MPI_FLOAT, 0, rt->ctl);
    for (int i = 0; !err && rt->rank == 0 && i < total; i++)
        dst[all_idx[i]] = all[i];
    free(idx), free(all_idx), free(all);
    return err;
}

/* A channel-split layer: each rank's owned range of its share's weights and
 * momentum, into rank 0's whole-layer arrays. */
static int read_share_state(struct sc_net *net, int l, float *w, float *v)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    size_t first, count;
    owned_momentum(net, l, &first, &count);
    starpu_data_handle_t hv = momentum_handle(net, l);
    starpu_data_acquire(d->params.hw, STARPU_R);
    starpu_data_acquire(hv, STARPU_R);
    int err = gather_indexed(D->rt, d->chan.index + first, d->params.w + first, (int)count, w);
    if (!err)
        err = gather_indexed(D->rt, d->chan.index + first, d->params.v + first, (int)count, v);
    starpu_data_release(hv);
    starpu_data_release(d->params.hw);
    return err;
}

int sc_net_read_state(struct sc_net *net, float **w, float **v)
{
    struct sc_net_dist *D = net->dist;
    struct sc_runtime *rt = D->rt;
    sc_net_wait(net);
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        size_t n = net->layers[l].nparams;
        if (!n)
            continue;
        if (d->chan.local) {
            int err = read_share_state(net, l, w[l], v[l]);
            if (err)
                return err;
            continue;
        }
        starpu_data_acquire(d->params.hw, STARPU_R);
        memcpy(w[l], d->params.w, n * sizeof(float));
        starpu_data_release(d->params.hw);
        /* Each rank's owned momentum range goes to rank 0. */
        starpu_data_handle_t hv = momentum_handle(net, l);
        starpu_data_acquire(hv, STARPU_R);
        int counts[rt->size], displs[rt->size];
        size_t first, count;
        owned_momentum(net, l, &first, &count);
        int c = (int)count, f = (int)first;
        MPI_Gather(&c, 1, MPI_INT, counts, 1, MPI_INT, 0, rt->ctl);
        MPI_Gather(&f, 1, MPI_INT, displs, 1, MPI_INT, 0, rt->ctl);
        MPI_Gatherv(d->params.v + first, c, MPI_FLOAT, rt->rank == 0 ? v[l] : NULL, counts, displs, MPI_FLOAT, 0,
                    rt->ctl);
        starpu_data_release(hv);
    }
    return 0;
}

int sc_net_write_state(struct sc_net *net, float *const *w, float *const *v)
{
    struct sc_net_dist *D = net->dist;
    sc_net_wait(net);
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        size_t n = share_of(net, l)->nparams;
        if (!n)
            continue;
        const size_t *index = d->chan.index;
        starpu_data_acquire(d->params.hw, STARPU_W);
        for (size_t i = 0; i < n; i++)
            d->params.w[i] = w[l][index ? index[i] : i];
        starpu_data_release(d->params.hw);
        starpu_data_handle_t hv = momentum_handle(net, l);
        starpu_data_acquire(hv, STARPU_RW);
        for (size_t i = 0; i < n; i++)
            d->params.v[i] = v[l][index ? index[i] : i];
        starpu_data_release(hv);
    }
    return 0;
}

/* Buffers (BN's running statistics) are laid out like the parameters
 * (layers.h, param_index).  Rank 0 reads its own; a channel-split layer's
 * shares come from the ranks at N, H and W coordinate 0 (one per share). */
static int copy_buffers(struct sc_net *net, float *const *b, int to_net)
{
    struct sc_net_dist *D = net->dist;
    int err = 0;
    sc_net_wait(net);
    for (int l = 0; l < net->nlayers && !err; l++) {
        struct sc_layer *L = share_of(net, l);
        const size_t *index = D->ld[l].chan.index;
        if (!L->nbuffers || !b[l])
            continue;
        starpu_data_handle_t h = L->ops->buffer_handle(L);
        starpu_data_acquire(h, to_net ? STARPU_W : STARPU_R);
        float *mem = (float *)starpu_vector_get_local_ptr(h);
        size_t n = L->nbuffer_values;
        if (to_net) {
            for (size_t i = 0; i < n; i++)
                mem[i] = b[l][index ? index[i] : i];
        } else if (!index) {
            memcpy(b[l], mem, n * sizeof(float));
        } else {
            int c[SC_NDIMS];
            sc_grid_coords(&D->ld[l].xch.lin.grid, D->rt->rank, c);
            int first = c[SC_DIM_N] == 0 && c[SC_DIM_H] == 0 && c[SC_DIM_W] == 0;
            err = gather_indexed(D->rt, index, mem, first ? (int)n : 0, b[l]);
        }
        starpu_data_release(h);
    }
    return err;
}

int sc_net_read_buffers(struct sc_net *net, float **b)
{
    return copy_buffers(net, b, 0);
}

int sc_net_write_buffers(struct sc_net *net, float *const *b)
{
    return copy_buffers(net, b, 1);
}
