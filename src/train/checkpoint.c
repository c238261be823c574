/* Checkpoints as safetensors files with PyTorch's state_dict names and
 * layouts for the nn.Sequential equivalent of the cfg (batch
 * normalization's running statistics and num_batches_tracked included),
 * plus the momentum buffers and the iteration counter. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/io/safetensors.h"
#include "src/train/train.h"

#define MOMENTUM_FMT   "optimizer.%d.%s.momentum_buffer"
#define ITERATION_NAME "optimizer.iteration"
#define BATCHES_FMT    "%d.num_batches_tracked"
/* --accumulate's K, written only when it is not 1, so that a run without
 * it writes the same file as before it existed. */
#define ACCUMULATE_NAME "optimizer.accumulate"

/* The data order (struct sc_data_order), as I64 scalars. */
static const char *const order_names[4] = {"optimizer.seed", "optimizer.global_batch", "optimizer.train_samples",
                                           "optimizer.shuffle"};

static int64_t *order_field(struct sc_data_order *o, int i)
{
    int64_t *f[4] = {&o->seed, &o->global_batch, &o->train_samples, &o->shuffle};
    return f[i];
}

/* An optional I64 scalar: *out stays as it is when the file has none. */
static int take_i64(const struct sc_st_file *f, const char *path, const char *name, int64_t *out)
{
    const struct sc_st_tensor *st = sc_st_find(f, name);
    if (!st)
        return 0;
    if (strcmp(st->dtype, "I64") || st->nbytes != 8)
        return sc_error(SC_ERR_PARSE, "%s: '%s' must be one I64", path, name);
    memcpy(out, f->data + st->offset, 8);
    return 0;
}

static void tensor_name(char *buf, size_t size, const struct sc_layer *l, const struct sc_param_tensor *t, int momentum)
{
    if (momentum)
        snprintf(buf, size, MOMENTUM_FMT, l->torch_index, t->suffix);
    else
        snprintf(buf, size, "%d.%s", l->torch_index, t->suffix);
}

static void shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
    int len = snprintf(buf, size, "[");
    for (int i = 0; i < ndim && len < (int)size; i++)
        len += snprintf(buf + len, size - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (len < (int)size)
        snprintf(buf + len, size - len, "]");
}

void sc_checkpoint_free(const struct sc_net *net, struct sc_checkpoint *ck)
{
    if (!ck)
        return;
    for (int l = 0; l < net->nlayers; l++) {
        if (ck->w)
            free(ck->w[l]);
        if (ck->v)
            free(ck->v[l]);
        if (ck->b)
            free(ck->b[l]);
    }
    free(ck->w);
    free(ck->v);
    free(ck->b);
    free(ck);
}

static struct sc_checkpoint *checkpoint_alloc(const struct sc_net *net)
{
    struct sc_checkpoint *ck = calloc(1, sizeof(*ck));
    if (!ck || !(ck->w = calloc(net->nlayers, sizeof(float *))) || !(ck->v = calloc(net->nlayers, sizeof(float *))) ||
        !(ck->b = calloc(net->nlayers, sizeof(float *)))) {
        sc_checkpoint_free(net, ck);
        return NULL;
    }
    for (int l = 0; l < net->nlayers; l++) {
        size_t n = net->layers[l].nparams;
        size_t nb = net->layers[l].nbuffer_values;
        if ((n && (!(ck->w[l] = calloc(n, sizeof(float))) || !(ck->v[l] = calloc(n, sizeof(float))))) ||
            (nb && !(ck->b[l] = calloc(nb, sizeof(float))))) {
            sc_checkpoint_free(net, ck);
            return NULL;
        }
    }
    return ck;
}

/* Copy tensor name's data into dst after checking dtype and shape. */
static int take_tensor(const struct sc_st_file *f, const char *path, const char *name, const struct sc_param_tensor *t,
                       float *dst, int required)
{
    const struct sc_st_tensor *st = sc_st_find(f, name);
    if (!st)
        return required
                   ? sc_error(SC_ERR_MISMATCH, "%s: no tensor '%s': the checkpoint is from another model", path, name)
                   : 0;
    int same = st->ndim == t->ndim && !strcmp(st->dtype, "F32");
    for (int i = 0; same && i < t->ndim; i++)
        same = st->shape[i] == t->shape[i];
    if (!same) {
        char want[96], got[96];
        shape_str(want, sizeof(want), t->ndim, t->shape);
        shape_str(got, sizeof(got), st->ndim, st->shape);
        return sc_error(SC_ERR_MISMATCH,
                        "%s: tensor '%s' is %s %s but the model wants F32 %s: the checkpoint is from another model",
                        path, name, st->dtype, got, want);
    }
    memcpy(dst, f->data + st->offset, t->count * sizeof(float));
    return 0;
}

/* The buffers of a layer: all or none (a checkpoint from before they were
 * saved; *b is then freed, and the net keeps its own).  num_batches_tracked
 * is checked and counted, not used: it is the iteration. */
static int take_buffers(const struct sc_st_file *f, const char *path, const struct sc_layer *layer, float **b,
                        int *expected)
{
    char name[96];
    int found = 0, err;
    for (int i = 0; i < layer->nbuffers; i++) {
        tensor_name(name, sizeof(name), layer, &layer->buffers[i], 0);
        found += sc_st_find(f, name) != NULL;
    }
    if (found == 0) {
        free(*b);
        *b = NULL;
    } else {
        for (int i = 0; i < layer->nbuffers; i++) {
            tensor_name(name, sizeof(name), layer, &layer->buffers[i], 0);
            if ((err = take_tensor(f, path, name, &layer->buffers[i], *b + layer->buffers[i].offset, 1)))
                return err;
        }
        *expected += found;
    }
    snprintf(name, sizeof(name), BATCHES_FMT, layer->torch_index);
    const struct sc_st_tensor *st = sc_st_find(f, name);
    if (st && (strcmp(st->dtype, "I64") || st->nbytes != 8))
        return sc_error(SC_ERR_MISMATCH, "%s: '%s' must be one I64", path, name);
    *expected += st != NULL;
    return 0;
}

int sc_checkpoint_read(const struct sc_net *net, const char *path, struct sc_checkpoint **out)
{
    struct sc_st_file *f;
    int err = sc_st_read(path, &f);
    if (err)
        return err;
    struct sc_checkpoint *ck = checkpoint_alloc(net);
    if (!ck) {
        sc_st_free(f);
        return sc_error(SC_ERR_NOMEM, "out of memory reading %s", path);
    }
    int expected = 0;
    char name[96];
    for (int l = 0; l < net->nlayers && !err; l++) {
        const struct sc_layer *layer = &net->layers[l];
        for (int i = 0; i < layer->ntensors && !err; i++) {
            const struct sc_param_tensor *t = &layer->tensors[i];
            tensor_name(name, sizeof(name), layer, t, 0);
            err = take_tensor(f, path, name, t, ck->w[l] + t->offset, 1);
            expected++;
            tensor_name(name, sizeof(name), layer, t, 1);
            if (!err)
                err = take_tensor(f, path, name, t, ck->v[l] + t->offset, 0);
        }
        if (!err && layer->nbuffers)
            err = take_buffers(f, path, layer, &ck->b[l], &expected);
    }
    for (int i = 0; i < f->ntensors && !err; i++)
        if (strncmp(f->tensors[i].name, "optimizer.", 10) && --expected < 0)
            err = sc_error(SC_ERR_MISMATCH, "%s: tensor '%s' is not in the model: the checkpoint is from another model",
                           path, f->tensors[i].name);
    if (!err)
        err = take_i64(f, path, ITERATION_NAME, &ck->iteration);
    for (int i = 0; i < 4 && !err; i++) {
        *order_field(&ck->order, i) = -1;
        err = take_i64(f, path, order_names[i], order_field(&ck->order, i));
    }
    ck->order.accumulate = 1;
    if (!err && !(err = take_i64(f, path, ACCUMULATE_NAME, &ck->order.accumulate)) &&
        (ck->order.accumulate < 1 || ck->order.accumulate > SC_ACCUMULATE_MAX))
        err = sc_error(SC_ERR_PARSE, "%s: '%s' is %lld, not in [1, %d]", path, ACCUMULATE_NAME,
                       (long long)ck->order.accumulate, SC_ACCUMULATE_MAX);
    if (!err && ck->iteration < 0)
        err = sc_error(SC_ERR_PARSE, "%s: '%s' is negative", path, ITERATION_NAME);
    sc_st_free(f);
    if (err) {
        sc_checkpoint_free(net, ck);
        return err;
    }
    *out = ck;
    return 0;
}

int sc_checkpoint_apply(struct sc_net *net, const struct sc_checkpoint *ck)
{
    net->iteration = ck->iteration;
    int err = sc_net_write_state(net, ck->w, ck->v);
    return err ? err : sc_net_write_buffers(net, ck->b);
}

static int write_file(const struct sc_net *net, struct sc_checkpoint *ck, const char *path, int with_order)
{
    int n = 5;
    for (int l = 0; l < net->nlayers; l++)
        n += 2 * net->layers[l].ntensors + (net->layers[l].nbuffers ? net->layers[l].nbuffers + 1 : 0);
    struct sc_st_out *out = calloc(n + 1, sizeof(*out));
    char(*names)[96] = calloc(n + 1, sizeof(*names));
    if (!out || !names) {
        free(out), free(names);
        return sc_error(SC_ERR_NOMEM, "out of memory writing %s", path);
    }
    int k = 0;
    /* PyTorch counts a batch normalization's batches per forward pass: K
     * an iteration */
    int64_t batches = ck->iteration * (with_order ? ck->order.accumulate : 1);
    for (int momentum = 0; momentum < 2; momentum++)
        for (int l = 0; l < net->nlayers; l++) {
            const struct sc_layer *layer = &net->layers[l];
            for (int i = 0; i < layer->ntensors; i++, k++) {
                const struct sc_param_tensor *t = &layer->tensors[i];
                tensor_name(names[k], sizeof(names[k]), layer, t, momentum);
                out[k].name = names[k];
                out[k].dtype = "F32";
                out[k].ndim = t->ndim;
                memcpy(out[k].shape, t->shape, sizeof(t->shape));
                out[k].data = (momentum ? ck->v[l] : ck->w[l]) + t->offset;
            }
        }
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_layer *layer = &net->layers[l];
        for (int i = 0; i < layer->nbuffers; i++, k++) {
            const struct sc_param_tensor *t = &layer->buffers[i];
            tensor_name(names[k], sizeof(names[k]), layer, t, 0);
            out[k] =
                (struct sc_st_out){.name = names[k], .dtype = "F32", .ndim = t->ndim, .data = ck->b[l] + t->offset};
            memcpy(out[k].shape, t->shape, sizeof(t->shape));
        }
        if (layer->nbuffers) {
            snprintf(names[k], sizeof(names[k]), BATCHES_FMT, layer->torch_index);
            out[k++] = (struct sc_st_out){.name = names[k - 1], .dtype = "I64", .ndim = 0, .data = &batches};
        }
    }
    out[k++] = (struct sc_st_out){.name = ITERATION_NAME, .dtype = "I64", .ndim = 0, .data = &ck->iteration};
    for (int i = 0; i < 4 && with_order; i++)
        out[k++] =
            (struct sc_st_out){.name = order_names[i], .dtype = "I64", .ndim = 0, .data = order_field(&ck->order, i)};
    if (with_order && ck->order.accumulate != 1)
        out[k++] =
            (struct sc_st_out){.name = ACCUMULATE_NAME, .dtype = "I64", .ndim = 0, .data = &ck->order.accumulate};
    int err = sc_st_write(path, out, k);
    free(out);
    free(names);
    return err;
}

int sc_checkpoint_save(struct sc_net *net, struct sc_runtime *rt, const char *path, const struct sc_data_order *order)
{
    struct sc_checkpoint *ck = checkpoint_alloc(net);
    int err = ck ? 0 : sc_error(SC_ERR_NOMEM, "out of memory saving %s", path);
    if (sc_runtime_agree(rt, err)) {
        sc_checkpoint_free(net, ck);
        return err ? err : sc_error(SC_ERR_NOMEM, "another rank ran out of memory saving %s", path);
    }
    ck->iteration = net->iteration;
    if (order)
        ck->order = *order;
    err = sc_net_read_state(net, ck->w, ck->v);
    if (!err)
        err = sc_net_read_buffers(net, ck->b);
    if (!err && rt->rank == 0)
        err = write_file(net, ck, path, order != NULL);
    sc_checkpoint_free(net, ck);
    char msg[512];
    snprintf(msg, sizeof(msg), "%s", sc_last_error());
    MPI_Bcast(&err, 1, MPI_INT, 0, rt->ctl);
    MPI_Bcast(msg, sizeof(msg), MPI_CHAR, 0, rt->ctl);
    return err ? sc_error(err, "%s", msg) : 0;
}
