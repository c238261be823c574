/* The network's input: the samples of a batch loaded into this rank's
 * input tiles, and their labels into the loss's, in one or two slots that
 * take turns.  A batch's slot is read until the first layer's parameter
 * gradient, the last task of its backward pass; with one slot the next
 * batch's load waits for that task, so loading never overlaps computation.
 * With two, the next batch is loaded into the other slot while this one
 * computes: submitted before its backward pass, at the lowest priority,
 * so that it fills the time a worker would otherwise wait (a collective
 * in flight, a worker with no task of the chain).  The second slot costs
 * its bytes at the peak, when every activation is held: it is taken
 * where it is a small share of the rank's memory (input_slots_auto), or
 * as --input-slots says. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/net/net_private.h"

/* A tile's load is cut into pieces of whole samples when it would take
 * more than this share of the time its worker computes an iteration: a
 * task cannot be interrupted, so a chain task that becomes ready while its
 * worker loads waits for the piece, and pieces of one tile run on several
 * workers at once. */
#define INPUT_PIECE_SHARE 0.01

/* What loading one input value costs, in FLOPs of the network's kernels
 * (the time the convolutions and products take for that many FLOPs): a
 * byte gathered and converted, a generated image pixel (three sinusoids
 * and a hash), a generated mesh value (four sinusoids; the label's
 * fields at four shifts).  Only the pieces' count depends on it, never a
 * result. */
#define INPUT_LOAD_FLOPS_IDX   50.0
#define INPUT_LOAD_FLOPS_IMAGE 150.0
#define INPUT_LOAD_FLOPS_MESH  200.0

/* --input-slots auto: a second slot where its bytes are at most this share
 * of the rank's memory (sc_net_memory).  An input that rivals the
 * activations (a mesh model's 18-channel fields) raises the rank's peak
 * by its size, while its load, in pieces over the workers, is mostly
 * hidden with one slot already; a small one costs nothing that the
 * process's resident memory shows. */
#define INPUT_SPARE_SHARE 0.02

static double load_flops_per_value(const struct sc_dataset *ds)
{
    if (!ds->synthetic)
        return INPUT_LOAD_FLOPS_IDX;
    return ds->synthetic - 1 == SC_SYNTH_MESH ? INPUT_LOAD_FLOPS_MESH : INPUT_LOAD_FLOPS_IMAGE;
}

/* The input values of one sample in this rank's tiles (its block and
 * channels of the first layer's input). */
static size_t values_per_sample(const struct sc_net *net)
{
    const struct layer_data *first = &net->dist->ld[0];
    return (size_t)first->xch.in_nch * sc_box_area(first->xch.in_box);
}

/* A tile of n samples' load as a share of its worker's part of an
 * iteration (the network's FLOPs over the ranks' workers). */
static double load_share(const struct sc_net *net, const struct sc_dataset *ds, int n)
{
    const struct sc_net_dist *D = net->dist;
    double worker = sc_net_flops(net, D->global_batch) / ((double)D->rt->size * D->ntiles);
    double load = (double)n * values_per_sample(net) * load_flops_per_value(ds);
    return worker > 0 ? load / worker : 0;
}

/* The pieces of a tile's load: one unless one piece would take more than
 * INPUT_PIECE_SHARE of its worker's iteration; at most one per sample. */
static int load_pieces(const struct sc_net *net, const struct sc_dataset *ds, int n)
{
    if (ds->file) /* a file's reads are serialized in the process: no gain in pieces */
        return 1;
    double pieces = ceil(load_share(net, ds, n) / INPUT_PIECE_SHARE);
    return pieces < 1 ? 1 : pieces > n ? n : (int)pieces;
}

/* Slot s's input and label tiles. */
static int alloc_slot(struct sc_net *net, int s)
{
    struct sc_net_dist *D = net->dist;
    struct net_input *in = &D->in;
    const struct layer_data *first = &D->ld[0], *last = &D->ld[net->nlayers - 1];
    const struct sc_layer *loss = &net->layers[net->nlayers - 1];
    size_t labels = (size_t)last->tiles.max * (loss->whole_sample ? 1 : sc_box_area(last->xch.in_box));
    int err;
    if ((err = sc_tensor_alloc(&in->x[s], &first->xch.lin, D->rt->rank)) ||
        (err = sc_tensor_alloc_vectors(&in->labels[s], D->ntiles, labels, sizeof(int32_t))))
        return err;
    in->nslots = s + 1;
    return 0;
}

int sc_net_input_setup(struct sc_net *net)
{
    struct net_input *in = &net->dist->in;
    ALLOC_ARRAY(in->ahead_idx, net->dist->global_batch);
    snprintf(in->name, sizeof in->name, "input.load");
    return alloc_slot(net, 0);
}

/* Whether a second slot is a small share of the rank's memory. */
static int input_slots_auto(const struct sc_net *net)
{
    const struct net_input *in = &net->dist->in;
    struct sc_mem_report r;
    sc_net_memory(net, &r);
    double slot = (double)sc_tensor_bytes(&in->x[0]) + (double)sc_tensor_bytes(&in->labels[0]);
    double total = (double)r.activations + (double)r.parameters + (double)r.workspaces;
    return slot <= INPUT_SPARE_SHARE * total ? 2 : 1;
}

int sc_net_input_add_slots(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int want = D->comm.input_slots ? D->comm.input_slots : input_slots_auto(net), err;
    if (want < 1 || want > SC_INPUT_SLOTS)
        return sc_error(SC_ERR_ARG, "--input-slots %d: want 1 to %d", want, SC_INPUT_SLOTS);
    for (int s = D->in.nslots; s < want; s++)
        if ((err = alloc_slot(net, s)))
            return err;
    return 0;
}

static void forget_pieces(struct net_input *in, int ntiles)
{
    for (int s = 0; s < SC_INPUT_SLOTS; s++) {
        for (int t = 0; in->pieces[s] && t < ntiles; t++)
            sc_tile_pieces_destroy(&in->pieces[s][t]);
        free(in->pieces[s]);
        in->pieces[s] = NULL;
    }
}

void sc_net_input_destroy(struct sc_net_dist *D)
{
    struct net_input *in = &D->in;
    forget_pieces(in, D->ntiles);
    for (int s = 0; s < SC_INPUT_SLOTS; s++) {
        sc_tensor_free(&in->x[s]);
        sc_tensor_free(&in->labels[s]);
    }
    free(in->ahead_idx);
}

/* The pieces of every slot's tiles, planned on the first load: their count
 * depends on what the data set's values cost. */
static int plan_pieces(struct sc_net *net, const struct sc_dataset *ds)
{
    struct sc_net_dist *D = net->dist;
    struct net_input *in = &D->in;
    const struct layer_data *first = &D->ld[0];
    int most = 0;
    in->planned = 1;
    for (int s = 0; s < in->nslots; s++) {
        ALLOC_ARRAY(in->pieces[s], D->ntiles);
        for (int t = 0; t < D->ntiles; t++) {
            int n = first->tiles.n[t], k = n ? load_pieces(net, ds, n) : 0, err;
            if (k > 1 && (err = sc_tile_pieces_plan(&in->pieces[s][t], &in->x[s], t, n, values_per_sample(net), k)))
                return err;
            most = k > most ? k : most;
        }
    }
    if (D->rt->rank == 0)
        SC_LOG(2, "input: %d slot%s; a tile's load in up to %d piece%s (about %.2f%% of its worker's iteration)",
               in->nslots, in->nslots == 1 ? "" : "s", most, most == 1 ? "" : "s",
               100 * load_share(net, ds, first->tiles.max));
    return 0;
}

/* Samples [s0, s0 + n) of a tile of idx into x: generated or gathered. */
static int load_x(struct sc_net *net, const struct sc_dataset *ds, const struct sc_task_opts *opts, const int32_t *idx,
                  int n, starpu_data_handle_t x)
{
    const struct layer_data *first = &net->dist->ld[0];
    const char *name = net->dist->in.name;
    if (ds->synthetic) {
        struct sc_synth_args a = sc_dataset_synth_args(ds, first->xch.in_box, n);
        return sc_insert_synth_load(opts, &a, idx, x, NULL, name);
    }
    struct sc_box b = first->xch.in_box;
    struct sc_load_block blk = {ds->c, ds->h, ds->w, b.r0, b.r1, b.c0, b.c1};
    return sc_insert_load_images(opts, ds->images, &blk, n, idx, x, name);
}

/* The labels of tile t of idx into labels. */
static int load_labels(struct sc_net *net, const struct sc_dataset *ds, const struct sc_task_opts *opts,
                       const int32_t *idx, int t, starpu_data_handle_t labels)
{
    const struct layer_data *first = &net->dist->ld[0], *last = &net->dist->ld[net->nlayers - 1];
    const struct sc_layer *loss = &net->layers[net->nlayers - 1];
    const char *name = net->dist->in.name;
    int n = last->tiles.n[t];
    if (!n)
        return 0;
    if (ds->synthetic) {
        int oh, ow;
        sc_net_label_shape(net, &oh, &ow);
        struct sc_box lb = loss->whole_sample ? (struct sc_box){0, 1, 0, 1} : last->xch.in_box;
        struct sc_synth_args a = sc_dataset_synth_args(ds, first->xch.in_box, n);
        return sc_insert_synth_labels(opts, &a, oh, ow, lb, idx + last->tiles.s0[t], labels, name);
    }
    return sc_insert_load_labels(opts, ds->labels, n, idx + last->tiles.s0[t], labels, name);
}

/* Batch idx (global_batch entries, -1: padding) into slot s. */
static int load_slot(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, int s,
                     const struct sc_task_opts *opts)
{
    struct sc_net_dist *D = net->dist;
    struct net_input *in = &D->in;
    const struct layer_data *first = &D->ld[0];
    int err;
    if (!in->planned && (err = plan_pieces(net, ds)))
        return err;
    if (ds->file)
        return sc_net_submit_file_load(net, ds, idx, &in->x[s], &in->labels[s], opts, in->name);
    for (int t = 0; t < D->ntiles; t++) {
        int n = first->tiles.n[t];
        err = 0;
        const int32_t *ti = idx + first->tiles.s0[t];
        starpu_data_handle_t x = sc_tensor_handle(&in->x[s], t), labels = sc_tensor_handle(&in->labels[s], t);
        struct sc_tile_pieces *p = &in->pieces[s][t];
        if (n && p->npieces < 2 && !ds->synthetic && !D->spatial) { /* one task for both when the tiles are alike */
            if ((err = sc_insert_load_batch(opts, ds->images, ds->labels, (int)sc_shape_size(&net->input), n, ti, x,
                                            labels, in->name)))
                return err;
            continue;
        }
        if (n && p->npieces > 1) {
            sc_tile_pieces_split(p);
            for (int k = 0; k < p->npieces && !err; k++)
                err = load_x(net, ds, opts, ti + p->s0[k], p->n[k], p->piece[k]);
            sc_tile_pieces_join(p);
        } else if (n) {
            err = load_x(net, ds, opts, ti, n, x);
        }
        if (!err)
            err = load_labels(net, ds, opts, idx, t, labels);
        if (err)
            return err;
    }
    return 0;
}

int sc_net_input_load(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx)
{
    struct sc_net_dist *D = net->dist;
    struct net_input *in = &D->in;
    int next = (in->cur + 1) % in->nslots;
    if (in->ahead && in->ahead_ds == ds && !memcmp(in->ahead_idx, idx, (size_t)D->global_batch * sizeof(*idx))) {
        in->ahead = 0;
        in->cur = next;
        return 0;
    }
    /* Not the batch loaded ahead (or none was): into a slot of its own,
     * whose last readers are the oldest; a batch loaded ahead keeps its
     * slot, and is used when it comes. */
    if (!in->ahead)
        in->cur = next;
    return load_slot(net, ds, idx, in->cur, &in->now);
}

int sc_net_input_load_ahead(struct sc_net *net, const struct sc_dataset *ds, const int32_t *next)
{
    struct sc_net_dist *D = net->dist;
    struct net_input *in = &D->in;
    /* with one slot, a load submitted now would overwrite the input that
     * this iteration's backward pass, submitted after it, reads */
    if (in->nslots < 2 || in->ahead)
        return 0;
    memcpy(in->ahead_idx, next, (size_t)D->global_batch * sizeof(*next));
    in->ahead_ds = ds;
    in->ahead = 1;
    /* in the trace, the load belongs to the iteration of its batch */
    int64_t it = sc_trace_iteration();
    sc_trace_set_iteration(it + 1);
    int err = load_slot(net, ds, next, (in->cur + 1) % in->nslots, &in->later);
    sc_trace_set_iteration(it);
    if (err)
        in->ahead = 0;
    return err;
}
