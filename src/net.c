/* The network: cfg -> layers; the plan of this rank (tiles, handles, fetch
 * plans, gradient buckets, priorities); the submission of whole iterations
 * (the layers' tasks, the exchanges, the accumulation of gradients and the
 * buckets' collectives); sync points and checkpoint state.  Issue 17 splits
 * it by these responsibilities (docs/ARCHITECTURE.md). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "net.h"
#include "tasks/tasks.h"

static const struct sc_layer_ops *const layer_types[] = {
    &sc_layer_conv_ops, &sc_layer_maxpool_ops, &sc_layer_avgpool_ops, &sc_layer_fc_ops, &sc_layer_softmax_ops,
    &sc_layer_batchnorm_ops, &sc_layer_route_ops, &sc_layer_shortcut_ops, &sc_layer_gap_ops,
};

#define NTYPES (sizeof(layer_types) / sizeof(layer_types[0]))

/* ---- parsing ---- */

/* Bounds that keep a hostile cfg from costing unbounded time or memory
 * before training starts: every layer costs StarPU handles and plans (a
 * 10^5-layer file of [batchnorm] needed 20 GB), and the kernels count a
 * sample's values in ints.  The deepest models in use have a few hundred
 * layers. */
#define SC_NET_MAX_LAYERS 4096
#define SC_NET_MAX_SAMPLE_VALUES 2147483647LL

/* c*h*w of s, or -1 when it is not positive or above the bound. */
static long long shape_values(const struct sc_shape *s)
{
    if (s->c < 1 || s->h < 1 || s->w < 1)
        return -1;
    long long hw = (long long)s->h * s->w; /* each factor < 2^31: no overflow */
    if (hw > SC_NET_MAX_SAMPLE_VALUES / s->c)
        return -1;
    return hw * s->c;
}

static const struct sc_layer_ops *find_type(const char *section)
{
    for (size_t i = 0; i < sizeof(layer_types) / sizeof(layer_types[0]); i++)
        if (!strcmp(layer_types[i]->section, section))
            return layer_types[i];
    return NULL;
}

static int parse_input(struct sc_net *net, const struct sc_cfg *cfg, struct sc_cfg_section *s)
{
    int err;
    if ((err = sc_cfg_get_int(cfg, s, "channels", 1, 1, 1 << 16, &net->input.c)) ||
        (err = sc_cfg_get_int(cfg, s, "height", -1, 1, 1 << 16, &net->input.h)) ||
        (err = sc_cfg_get_int(cfg, s, "width", -1, 1, 1 << 16, &net->input.w)) ||
        (err = sc_cfg_get_int(cfg, s, "classes", 10, 2, 1 << 20, &net->classes)))
        return err;
    if (net->input.h < 0 || net->input.w < 0)
        return sc_error(SC_ERR_PARSE, "%s:%d: [net] needs 'height' and 'width'", cfg->path, s->line);
    if (shape_values(&net->input) < 0)
        return sc_error(SC_ERR_PARSE, "%s:%d: [net] input %dx%dx%d has more than %lld values per sample",
                        cfg->path, s->line, net->input.c, net->input.h, net->input.w, SC_NET_MAX_SAMPLE_VALUES);
    return sc_cfg_check_unused(cfg, s);
}

static int build_layers(struct sc_net *net, const struct sc_cfg *cfg)
{
    if (cfg->nsections == 0 || strcmp(cfg->sections[0].name, "net"))
        return sc_error(SC_ERR_PARSE, "%s:%d: the first section must be [net]", cfg->path,
                        cfg->nsections ? cfg->sections[0].line : 1);
    int err = parse_input(net, cfg, &cfg->sections[0]);
    if (err)
        return err;
    if (cfg->nsections - 1 > SC_NET_MAX_LAYERS)
        return sc_error(SC_ERR_PARSE, "%s:%d: more than %d layers (this is layer %d)", cfg->path,
                        cfg->sections[SC_NET_MAX_LAYERS + 1].line, SC_NET_MAX_LAYERS, SC_NET_MAX_LAYERS);
    net->nlayers = cfg->nsections - 1;
    net->layers = calloc(net->nlayers ? net->nlayers : 1, sizeof(*net->layers));
    if (!net->layers)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    int torch_index = 0, flat = 0, nseen[NTYPES] = {0};
    for (int i = 0; i < net->nlayers; i++) {
        struct sc_cfg_section *s = &cfg->sections[i + 1];
        struct sc_layer *l = &net->layers[i];
        l->ops = find_type(s->name);
        l->index = i;
        l->line = s->line;
        if (!l->ops)
            return sc_error(SC_ERR_PARSE,
                            "%s:%d: unknown section [%s] (known: net convolutional batchnorm maxpool avgpool "
                            "global_avgpool connected shortcut route softmax)",
                            cfg->path, s->line, s->name);
        if (i > 0 && net->layers[i - 1].is_loss)
            return sc_error(SC_ERR_PARSE, "%s:%d: [%s] after [softmax]: the loss must be the last layer", cfg->path,
                            s->line, s->name);
        const char *par;
        if ((err = sc_cfg_get_str(cfg, s, "parallel", "", &par)))
            return err;
        snprintf(l->parallel, sizeof(l->parallel), "%s", par);
        l->src[0] = i - 1;
        l->src[1] = -1;
        l->nsrc = 1;
        if ((err = l->ops->parse(l, cfg, s)) || (err = sc_cfg_check_unused(cfg, s)))
            return err;
        if (l->alias && l->parallel[0])
            return sc_error(SC_ERR_PARSE, "%s:%d: [%s] takes no parallel= (it is layer %d's output)", cfg->path,
                            s->line, s->name, l->src[0]);
        /* a route is its source: read through it */
        for (int k = 0; k < l->nsrc; k++)
            if (l->src[k] >= 0 && net->layers[l->src[k]].alias)
                l->src[k] = net->layers[l->src[k]].src[0];
        /* Numbered per prefix (maxpool and avgpool share "pool"), from
         * counts kept as we go: rescanning the earlier layers is quadratic,
         * minutes for a hostile cfg of 10^5 layers. */
        int same = 1;
        for (size_t t = 0; t < NTYPES; t++)
            if (!strcmp(layer_types[t]->prefix, l->ops->prefix)) {
                same += nseen[t];
                nseen[t] += layer_types[t] == l->ops;
            }
        snprintf(l->name, sizeof(l->name), "%s%d", l->ops->prefix, same);
        if (l->ops == &sc_layer_fc_ops) {
            if (!flat)
                torch_index++; /* nn.Flatten */
            flat = 1;
        } else if (flat && !l->is_loss) {
            return sc_error(SC_ERR_SHAPE, "%s:%d: [%s] after [connected] is not supported", cfg->path, s->line,
                            s->name);
        }
        l->torch_index = torch_index;
        torch_index += l->torch_modules;
        l->in = l->src[0] >= 0 ? net->layers[l->src[0]].out : net->input;
        if (l->nsrc > 1)
            l->in2 = net->layers[l->src[1]].out;
        if ((err = l->ops->shapes(l, 1)))
            return sc_error(err, "%s:%d: %s", cfg->path, s->line, sc_last_error());
        if (shape_values(&l->out) < 0)
            return sc_error(SC_ERR_SHAPE, "%s:%d: [%s] output %dx%dx%d: more than %lld values per sample",
                            cfg->path, s->line, s->name, l->out.c, l->out.h, l->out.w, SC_NET_MAX_SAMPLE_VALUES);
    }
    /* every output feeds some layer (or is the loss); marked in one pass,
     * as a search for each layer's readers is quadratic */
    char *is_read = calloc(net->nlayers > 0 ? (size_t)net->nlayers : 1, 1);
    if (!is_read)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    for (int j = 0; j < net->nlayers; j++)
        for (int k = 0; k < net->layers[j].nsrc && !net->layers[j].alias; k++)
            if (net->layers[j].src[k] >= 0)
                is_read[net->layers[j].src[k]] = 1;
    for (int i = 0; i < net->nlayers; i++) {
        struct sc_layer *l = &net->layers[i];
        if (!(l->is_loss || l->alias || is_read[i])) {
            free(is_read);
            return sc_error(SC_ERR_PARSE, "%s:%d: the output of [%s] (%s) feeds no layer", cfg->path, l->line,
                            l->ops->section, l->name);
        }
    }
    free(is_read);
    if (net->nlayers == 0 || !net->layers[net->nlayers - 1].is_loss)
        return sc_error(SC_ERR_PARSE, "%s: the last layer must be [softmax]", cfg->path);
    struct sc_layer *loss = &net->layers[net->nlayers - 1];
    if (!loss->whole_sample) { /* per pixel */
        if (loss->in.c != net->classes)
            return sc_error(SC_ERR_SHAPE, "%s:%d: [softmax] per_pixel=1 gets %d channels but [net] has classes=%d",
                            cfg->path, loss->line, loss->in.c, net->classes);
    } else if (net->nlayers < 2 || sc_shape_size(&loss->in) != (size_t)net->classes)
        return sc_error(SC_ERR_SHAPE, "%s:%d: [softmax] gets %zu values per sample but [net] has classes=%d",
                        cfg->path, loss->line, sc_shape_size(&loss->in), net->classes);
    return 0;
}

int sc_net_parse(const char *cfg_path, struct sc_net **out)
{
    struct sc_cfg *cfg;
    int err = sc_cfg_load(cfg_path, &cfg);
    if (err)
        return err;
    struct sc_net *net = calloc(1, sizeof(*net));
    if (!net) {
        sc_cfg_free(cfg);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    err = build_layers(net, cfg);
    sc_cfg_free(cfg);
    if (err) {
        sc_net_destroy(net);
        return err;
    }
    *out = net;
    return 0;
}

size_t sc_net_nparams(const struct sc_net *net)
{
    size_t n = 0;
    for (int i = 0; i < net->nlayers; i++)
        n += net->layers[i].nparams;
    return n;
}

/* ---- how gradients travel ---- */

void sc_comm_opts_default(struct sc_comm_opts *o)
{
    *o = (struct sc_comm_opts){.grad_comm = SC_GRAD_LAYER, .chunk_layers = 1, .bucket_mb = 25,
                               .fc_replicate = 0, .priorities = 1};
}

int sc_comm_opts_parse_grad(const char *s, struct sc_comm_opts *o)
{
    char *end;
    if (!strcmp(s, "layer")) {
        o->grad_comm = SC_GRAD_LAYER;
    } else if (!strcmp(s, "end")) {
        o->grad_comm = SC_GRAD_END;
    } else if (!strncmp(s, "chunks:", 7)) {
        long k = strtol(s + 7, &end, 10);
        if (end == s + 7 || *end || k < 1 || k > 1 << 20)
            return sc_error(SC_ERR_ARG, "--grad-comm %s: K in chunks:K must be a positive integer", s);
        o->grad_comm = SC_GRAD_CHUNKS;
        o->chunk_layers = (int)k;
    } else if (!strncmp(s, "bucket:", 7)) {
        double mb = strtod(s + 7, &end);
        if (end == s + 7 || *end || !(mb > 0) || mb > 1e6)
            return sc_error(SC_ERR_ARG, "--grad-comm %s: MB in bucket:MB must be a positive number", s);
        o->grad_comm = SC_GRAD_BUCKET;
        o->bucket_mb = mb;
    } else {
        return sc_error(SC_ERR_ARG, "--grad-comm '%s': expected layer, chunks:K, bucket:MB or end", s);
    }
    return 0;
}

/* ---- this rank's share ---- */

/* The parameters, momentum and gradients of the layers that are reduced
 * together live in one vector per bucket, so that one collective covers
 * them without copies.  Between collectives the vectors are partitioned
 * into the layers' slices (StarPU's asynchronous partitioning), which the
 * layers' tasks use; a collective switches to its own partition. */
struct bucket {
    int nlayers, *layer;             /* in backward order */
    size_t n;
    float *w, *v, *g;
    starpu_data_handle_t hw, hv, hg;
    starpu_data_handle_t *lw, *lg;   /* per-layer slices when nlayers > 1 */
    struct sc_ring *ring;
    struct sc_sgd_sync *sgd;
    int priority;
    char name[64];
};

struct layer_data {
    float *w, *v, *g;                /* parameters, momentum, reduced gradient (in a bucket, or own) */
    starpu_data_handle_t hw, hg;     /* the layer's slice of the bucket's, or its own */
    int bucket;                      /* -1: replicated or no parameters */
    size_t offset;                   /* in the bucket */
    float **tile_g;                  /* partial gradients of tiles 1.. */
    starpu_data_handle_t *htile_g;
    float **y, **dy;                 /* per tile: output and its gradient */
    void **scratch;
    starpu_data_handle_t *hy, *hdy, *hscratch;
    int grad_priority, comm_priority;
    /* --fc-replicate: every rank's inputs and errors, the partial gradient
     * of each (rank, tile), the momentum (whole on every rank) */
    int replicated;
    float **xr, **dyr, **pg, *own_v;
    starpu_data_handle_t *hxr, *hdyr, *hpg, hv;
    int64_t tag_x, tag_dy;
    char gather_x[48], gather_dy[48], sgd_name[48], acc_name[48];
    /* How its input and output are split (see layout.h): this rank's
     * blocks, and the samples of each tile */
    struct sc_layout lin, lout;
    struct sc_box in_box, out_box;
    int *tile_s0, *tile_n, tile_max;
    struct sc_tile_split *split;     /* per tile; NULL: whole samples */
    struct split_ctx *split_ctx;
    /* input in another layout than the previous layer's output: its copy
     * in this layer's layout, the gradient too, and the two fetches */
    float **xin, **dxin;
    starpu_data_handle_t *hxin, *hdxin;
    struct sc_fetch *redist_fwd, *redist_bwd, *halo_x, *halo_dy;
    struct sc_group_sum *gsum[2];    /* sums over the ranks of the same samples */
    /* Layers whose output feeds several: dy is the sum of the readers'
     * gradients.  One reader writes dy itself (dy_direct); the others'
     * parts (contrib: per-tile handles, in the output's layout) are added
     * before the layer's backward.  A reader that does not write dy itself
     * writes dx_own (in its source's output layout). */
    int dy_direct, ncontrib;
    starpu_data_handle_t **contrib;
    float **dx_own;
    starpu_data_handle_t *hdx_own;
    char redist_name[48], halo_x_name[48], halo_dy_name[48], assemble_name[48], dy_sum_name[48];
};

struct split_ctx {
    struct sc_net *net;
    int l, t;
};

struct sc_net_dist {
    struct sc_runtime *rt;
    struct sc_comm_opts comm;
    int spatial;                     /* some layer is not split like the batch over all ranks */
    int loss_pixels;                 /* per-pixel loss: pixels per sample; else 1 */
    int global_batch, local_batch, ntiles, tile_max;
    int *tile_n;                     /* samples per tile for a full batch */
    float **x0;                      /* per tile: input */
    int32_t **labels;
    float **stats, **eval_acc;       /* 2 floats each */
    starpu_data_handle_t *hx0, *hlabels, *hstats, *heval_acc;
    struct layer_data *ld;
    struct bucket *buckets;
    int nbuckets;
    struct sc_gate *gate;            /* comm.gate_updates: the batch's verdict */
    struct sc_nccl *nccl;            /* comm.nccl on more than one rank */
    enum sc_where replicated_where;  /* the workers of replicated layers' gradients */
    int critical_priority;
    char load_name[16], acc_name[24], summary[96];
};

#define ALLOC_ARRAY(p, n)                                                                                         \
    do {                                                                                                          \
        if (!((p) = calloc((n) ? (n) : 1, sizeof(*(p)))))                                                        \
            return sc_error(SC_ERR_NOMEM, "out of memory");                                                       \
    } while (0)

/* ---- how each layer is split ---- */

/* A layer's grid: its cfg's parallel=, else the command line's, else
 * sample parallelism; layers that need whole samples take sample
 * parallelism whatever the command line says. */
static int choose_grid(struct sc_net *net, struct sc_layer *l, struct sc_grid *g)
{
    struct sc_net_dist *D = net->dist;
    int P = D->rt->size, err;
    const char *spec = l->parallel[0] ? l->parallel : D->comm.parallel ? D->comm.parallel : "";
    if ((err = sc_grid_parse(spec, P, g)))
        return sc_error(err, "%s: %s", l->name, sc_last_error());
    int spatial = g->extent[SC_DIM_H] * g->extent[SC_DIM_W] > 1;
    if (g->extent[SC_DIM_C] > 1 || g->extent[SC_DIM_F] > 1)
        return sc_error(SC_ERR_ARG, "%s: parallel '%s': channel and filter splitting are not implemented; "
                        "use n, h and w", l->name, spec);
    if (spatial && l->whole_sample) {
        if (l->parallel[0])
            return sc_error(SC_ERR_ARG, "%s: parallel=%s: a [%s] layer needs whole samples (use n%d)", l->name,
                            l->parallel, l->ops->section, P);
        sc_grid_parse("", P, g);
    }
    int gn = g->extent[SC_DIM_N], gh = g->extent[SC_DIM_H], gw = g->extent[SC_DIM_W];
    if (D->global_batch % gn)
        return sc_error(SC_ERR_ARG, "global batch %d does not split evenly over %d ranks (use a multiple of "
                        "%d; layer %s is split n%d)", D->global_batch, gn, gn, l->name, gn);
    if (spatial && (l->out.h < gh || l->out.w < gw || l->in.h < gh || l->in.w < gw))
        return sc_error(SC_ERR_ARG, "%s: %dx%d input, %dx%d output cannot be split over h%d w%d (every rank "
                        "needs a row and a column); give it parallel= with fewer spatial ranks",
                        l->name, l->in.h, l->in.w, l->out.h, l->out.w, gh, gw);
    return 0;
}

static int plan_layouts(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int T = D->rt->ncpu, me = D->rt->rank, err;
    struct sc_grid g[net->nlayers];
    for (int l = 0; l < net->nlayers; l++) {
        if (net->layers[l].alias)
            continue;
        if ((err = choose_grid(net, &net->layers[l], &g[l])))
            return err;
        int per_rank = D->global_batch / g[l].extent[SC_DIM_N];
        if (per_rank < T)
            T = per_rank;
        D->spatial |= g[l].extent[SC_DIM_N] != D->rt->size;
    }
    /* Tiles travel between ranks (halos, redistribution, replicated
     * layers), so every rank cuts its samples alike. */
    if (D->rt->size > 1)
        MPI_Allreduce(MPI_IN_PLACE, &T, 1, MPI_INT, MPI_MIN, D->rt->ctl);
    D->ntiles = T;
    for (int l = 0; l < net->nlayers; l++) {
        struct sc_layer *L = &net->layers[l];
        struct layer_data *d = &D->ld[l];
        if (L->alias)
            continue;
        d->lin = (struct sc_layout){g[l], D->global_batch, L->in.h, L->in.w, T};
        d->lout = (struct sc_layout){g[l], D->global_batch, L->out.h, L->out.w, T};
        d->in_box = sc_layout_box(&d->lin, me);
        d->out_box = sc_layout_box(&d->lout, me);
        ALLOC_ARRAY(d->tile_s0, T);
        ALLOC_ARRAY(d->tile_n, T);
        d->tile_max = 0;
        for (int t = 0; t < T; t++) {
            sc_layout_tile_samples(&d->lout, me, t, &d->tile_s0[t], &d->tile_n[t]);
            if (d->tile_n[t] > d->tile_max)
                d->tile_max = d->tile_n[t];
        }
        if (g[l].extent[SC_DIM_H] * g[l].extent[SC_DIM_W] > 1) {
            ALLOC_ARRAY(d->split, T);
            ALLOC_ARRAY(d->split_ctx, T);
        }
    }
    return 0;
}

/* NCCL kernels wait on the GPU for every rank to join, on the stream of the
 * worker that also runs compute tasks.  That is safe only when every
 * transfer between ranks is an NCCL call in the one order: a StarPU-MPI
 * transfer (a halo, a redistribution, a group sum) whose source task sits
 * behind an NCCL kernel on that stream can be what another rank needs to
 * reach the same NCCL call, and both wait for ever.  So NCCL takes only
 * grids that split samples alone. */
static int check_nccl_grids(const struct sc_net *net)
{
    const struct sc_net_dist *D = net->dist;
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_grid *g = &D->ld[l].lin.grid;
        if (net->layers[l].alias || g->extent[SC_DIM_N] == D->rt->size)
            continue;
        char spec[64];
        sc_grid_format(g, spec, sizeof spec);
        return sc_error(SC_ERR_ARG, "--collectives nccl: layer %s is split as %s; NCCL takes only sample "
                        "parallelism (n%d for every layer), as the halo exchanges and redistributions of other grids "
                        "are StarPU-MPI transfers that could wait behind an NCCL call on the GPU; use --collectives "
                        "tasks", net->layers[l].name, spec, D->rt->size);
    }
    return 0;
}

static int setup_tiles(struct sc_net *net, struct sc_layer *l, struct layer_data *d)
{
    struct sc_net_dist *D = net->dist;
    int T = D->ntiles, err;
    d->bucket = -1;
    if (l->alias)
        return 0;
    snprintf(d->dy_sum_name, sizeof(d->dy_sum_name), "%s.grad_sum", l->name);
    ALLOC_ARRAY(d->y, T);
    ALLOC_ARRAY(d->dy, T);
    ALLOC_ARRAY(d->scratch, T);
    ALLOC_ARRAY(d->hy, T);
    ALLOC_ARRAY(d->hdy, T);
    ALLOC_ARRAY(d->hscratch, T);
    if ((err = l->ops->shapes(l, d->tile_max)))
        return err;
    size_t out = (size_t)d->tile_max * l->out.c * sc_box_area(d->out_box);
    for (int t = 0; t < T && !l->is_loss; t++) {
        if ((err = sc_vector_new(&d->hy[t], (void **)&d->y[t], out, sizeof(float))) ||
            (err = sc_vector_new(&d->hdy[t], (void **)&d->dy[t], out, sizeof(float))))
            return err;
        if (l->scratch_bytes && (err = sc_vector_new(&d->hscratch[t], &d->scratch[t], l->scratch_bytes, 1)))
            return err;
    }
    if (!l->nparams || d->replicated)
        return 0;
    ALLOC_ARRAY(d->tile_g, T);
    ALLOC_ARRAY(d->htile_g, T);
    for (int t = 1; t < T; t++)
        if ((err = sc_vector_new(&d->htile_g[t], (void **)&d->tile_g[t], l->nparams, sizeof(float))))
            return err;
    return 0;
}

/* Which reader of each output writes its gradient directly, and where the
 * others write theirs (see layer_data). */
static int plan_gradient_sums(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int T = D->ntiles, most = 2 * net->nlayers, err;
    for (int l = 0; l < net->nlayers; l++) {
        struct sc_layer *L = &net->layers[l];
        struct layer_data *d = &D->ld[l];
        for (int k = 0; k < L->nsrc && !L->alias; k++) {
            int s = L->src[k];
            if (s < 0)
                continue;
            struct layer_data *ds = &D->ld[s];
            if (!ds->contrib)
                ALLOC_ARRAY(ds->contrib, most);
            if (L->dx_is_dy) {
                ds->contrib[ds->ncontrib++] = d->hdy;
                continue;
            }
            if (!ds->dy_direct) {
                ds->dy_direct = 1;
                continue;
            }
            size_t n = (size_t)ds->tile_max * net->layers[s].out.c * sc_box_area(ds->out_box);
            ALLOC_ARRAY(d->dx_own, T);
            ALLOC_ARRAY(d->hdx_own, T);
            for (int t = 0; t < T; t++)
                if ((err = sc_vector_new(&d->hdx_own[t], (void **)&d->dx_own[t], n, sizeof(float))))
                    return err;
            ds->contrib[ds->ncontrib++] = d->hdx_own;
        }
    }
    return 0;
}

/* dy of layer l = the sum of its readers' parts, in a fixed order. */
static int submit_gradient_sum(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    const struct sc_layer *L = &net->layers[l];
    int n = (int)((size_t)d->tile_max * L->out.c * sc_box_area(d->out_box)), err;
    for (int i = 0; i < d->ncontrib; i++)
        for (int t = 0; t < D->ntiles; t++) {
            if (!d->tile_n[t])
                continue;
            if (i == 0 && !d->dy_direct)
                err = sc_insert_copy(n, d->contrib[i][t], d->hdy[t], d->dy_sum_name);
            else
                err = sc_insert_accumulate(d->hdy[t], d->contrib[i][t], d->dy_sum_name);
            if (err)
                return err;
        }
    return 0;
}

/* ---- exchanges between split layers ---- */

/* The tiles layer l reads as x and writes as dx. */
static starpu_data_handle_t *x_tiles(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    int s = net->layers[l].src[0];
    return D->ld[l].hxin ? D->ld[l].hxin : s >= 0 ? D->ld[s].hy : D->hx0;
}

/* Where the gradient of layer l's input goes, in its source's layout. */
static starpu_data_handle_t *input_grad_tiles(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    int s = net->layers[l].src[0];
    return s < 0 ? NULL : D->ld[l].hdx_own ? D->ld[l].hdx_own : D->ld[s].hdy;
}

static starpu_data_handle_t *dx_tiles(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    return D->ld[l].hdxin ? D->ld[l].hdxin : input_grad_tiles(net, l);
}

static int tile_sources(void *ctx, int which, const struct sc_box *win, struct sc_region_src *desc,
                        starpu_data_handle_t *h, int max)
{
    struct split_ctx *c = ctx;
    struct layer_data *d = &c->net->dist->ld[c->l];
    struct sc_fetch *f = which == SC_SRC_X ? d->halo_x : d->halo_dy;
    starpu_data_handle_t *tiles = which == SC_SRC_X ? x_tiles(c->net, c->l) : d->hdy;
    if (f)
        return sc_fetch_sources(f, tiles, c->t, win, desc, h, max);
    if (max < 1)
        return sc_error(SC_ERR_SHAPE, "too many source blocks");
    desc[0] = (struct sc_region_src){d->tile_s0[c->t], d->tile_n[c->t], which == SC_SRC_X ? d->in_box : d->out_box};
    h[0] = tiles[c->t];
    return 1;
}

struct need_ctx {
    struct sc_net *net;
    int l;
};

static struct sc_box box_union(struct sc_box a, struct sc_box b)
{
    if (sc_box_empty(a))
        return b;
    if (sc_box_empty(b))
        return a;
    return (struct sc_box){a.r0 < b.r0 ? a.r0 : b.r0, a.r1 > b.r1 ? a.r1 : b.r1, a.c0 < b.c0 ? a.c0 : b.c0,
                           a.c1 > b.c1 ? a.c1 : b.c1};
}

/* What rank r's tiles of layer l read of x: the windows of its outputs,
 * and for max pooling those of the outputs its backward reads. */
static struct sc_box need_x(void *ctx, int r, int t)
{
    struct need_ctx *c = ctx;
    struct sc_layer *L = &c->net->layers[c->l];
    struct layer_data *d = &c->net->dist->ld[c->l];
    (void)t;
    struct sc_box b = sc_windows_inputs(&L->win_r, &L->win_c, sc_layout_box(&d->lout, r));
    if (L->bwd_reads_x)
        b = box_union(b, sc_windows_inputs(&L->win_r, &L->win_c,
                                           sc_windows_outputs(&L->win_r, &L->win_c, sc_layout_box(&d->lin, r))));
    return b;
}

/* What rank r's backward of layer l reads of dy: the outputs touching its
 * input block. */
static struct sc_box need_dy(void *ctx, int r, int t)
{
    struct need_ctx *c = ctx;
    struct sc_layer *L = &c->net->layers[c->l];
    struct layer_data *d = &c->net->dist->ld[c->l];
    (void)t;
    return sc_windows_outputs(&L->win_r, &L->win_c, sc_layout_box(&d->lin, r));
}

static struct sc_box need_in(void *ctx, int r, int t)
{
    struct need_ctx *c = ctx;
    (void)t;
    return sc_layout_box(&c->net->dist->ld[c->l].lin, r);
}

static struct sc_box need_prev_out(void *ctx, int r, int t)
{
    struct need_ctx *c = ctx;
    (void)t;
    return sc_layout_box(&c->net->dist->ld[c->net->layers[c->l].src[0]].lout, r);
}

static int g_spatial(const struct sc_layout *L)
{
    return L->grid.extent[SC_DIM_H] * L->grid.extent[SC_DIM_W] > 1;
}

static int net_group_sum(void *ctx, int which, starpu_data_handle_t h)
{
    struct layer_data *d = ctx;
    return sc_group_sum_submit(d->gsum[which], h);
}

/* Redistribution into layer l when its input layout is not the previous
 * layer's output layout, and halo exchanges of split windowed layers. */
static int plan_exchanges(struct sc_net *net, int l)
{
    struct sc_net_dist *D = net->dist;
    struct sc_layer *L = &net->layers[l];
    struct layer_data *d = &D->ld[l];
    struct need_ctx ctx = {net, l};
    int T = D->ntiles, me = D->rt->rank, err, s = L->src[0];
    if (L->alias)
        return 0;
    for (int k = 0; k < L->nsrc && (L->dx_is_dy || k > 0); k++)
        if (!sc_layout_equal(&D->ld[L->src[k]].lout, &d->lin))
            return sc_error(SC_ERR_ARG, "%s adds the outputs of %s and %s, which must be split like it: give "
                            "the three the same parallel=", L->name, net->layers[L->src[0]].name,
                            net->layers[L->src[1]].name);
    if (s >= 0 && !sc_layout_equal(&D->ld[s].lout, &d->lin)) {
        size_t n = (size_t)d->tile_max * L->in.c * sc_box_area(d->in_box);
        ALLOC_ARRAY(d->xin, T);
        ALLOC_ARRAY(d->dxin, T);
        ALLOC_ARRAY(d->hxin, T);
        ALLOC_ARRAY(d->hdxin, T);
        for (int t = 0; t < T; t++)
            if ((err = sc_vector_new(&d->hxin[t], (void **)&d->xin[t], n, sizeof(float))) ||
                (err = sc_vector_new(&d->hdxin[t], (void **)&d->dxin[t], n, sizeof(float))))
                return err;
        snprintf(d->redist_name, sizeof(d->redist_name), "%s.redistribute", L->name);
        snprintf(d->assemble_name, sizeof(d->assemble_name), "%s.assemble", L->name);
        if ((err = sc_fetch_create(&d->redist_fwd, &D->ld[s].lout, L->in.c, &d->lin, need_in, &ctx, me,
                                   D->rt->comm, d->redist_name)) ||
            (err = sc_fetch_create(&d->redist_bwd, &d->lin, L->in.c, &D->ld[s].lout, need_prev_out, &ctx, me,
                                   D->rt->comm, d->redist_name)))
            return err;
    }
    if (L->group_sum_len && g_spatial(&d->lin)) {
        int members[D->rt->size];
        int n = sc_grid_segment(&d->lin.grid, me, (1u << SC_DIM_H) | (1u << SC_DIM_W), members);
        for (int i = 0; i < 2; i++)
            if ((err = sc_group_sum_create(&d->gsum[i], D->rt->comm, members, n, me, L->group_sum_len, L->name)))
                return err;
    }
    if (!d->split)
        return 0;
    for (int t = 0; t < T; t++) {
        d->split_ctx[t] = (struct split_ctx){net, l, t};
        d->split[t] = (struct sc_tile_split){d->tile_s0[t], d->in_box, d->out_box, tile_sources, &d->split_ctx[t]};
    }
    if (L->win_r.k == 0)
        return 0; /* pointwise */
    snprintf(d->halo_x_name, sizeof(d->halo_x_name), "%s.halo_x", L->name);
    snprintf(d->halo_dy_name, sizeof(d->halo_dy_name), "%s.halo_dy", L->name);
    if ((err = sc_fetch_create(&d->halo_x, &d->lin, L->in.c, &d->lin, need_x, &ctx, me, D->rt->comm,
                               d->halo_x_name)) ||
        (s >= 0 && (err = sc_fetch_create(&d->halo_dy, &d->lout, L->out.c, &d->lin, need_dy, &ctx, me, D->rt->comm,
                                         d->halo_dy_name))))
        return err;
    return 0;
}

/* Copy tiles: assemble each of this rank's tiles of dst (samples and
 * block of its layout) from the fetch's sources. */
static int submit_assemble(struct sc_fetch *f, starpu_data_handle_t *src_tiles, const struct layer_data *dst_d,
                           int out_side, int channels, starpu_data_handle_t *dst_tiles, const char *name)
{
    int err;
    if ((err = sc_fetch_submit(f, src_tiles)))
        return err;
    for (int t = 0; t < dst_d->lin.ntiles; t++) {
        struct sc_region_args a = {.op = SC_REGION_COPY, .c = channels};
        a.s0 = a.dst_s0 = dst_d->tile_s0[t];
        a.n = a.dst_n = dst_d->tile_n[t];
        a.region = a.dst_box = out_side ? dst_d->out_box : dst_d->in_box;
        starpu_data_handle_t h[SC_REGION_MAX_SRC];
        int ns = sc_fetch_sources(f, src_tiles, t, NULL, a.src, h, SC_REGION_MAX_SRC);
        if (ns < 0)
            return ns;
        a.na = ns;
        if (a.n > 0 && (err = sc_insert_region(&a, h, NULL, dst_tiles[t], name)))
            return err;
    }
    return 0;
}

/* A replicated layer keeps whole copies of everything on every rank, plus
 * room for the other ranks' inputs and errors and one partial gradient per
 * (rank, tile), summed in the same order everywhere so that every rank
 * computes the same bits. */
static int setup_replicated(struct sc_net *net, struct sc_layer *l, struct layer_data *d, uint64_t seed)
{
    struct sc_net_dist *D = net->dist;
    int P = D->rt->size, T = D->ntiles, PT = P * T, err;
    size_t in = (size_t)D->tile_max * sc_shape_size(&l->in), out = (size_t)D->tile_max * sc_shape_size(&l->out);
    if ((err = sc_vector_new(&d->hw, (void **)&d->w, l->nparams, sizeof(float))) ||
        (err = sc_vector_new(&d->hv, (void **)&d->own_v, l->nparams, sizeof(float))) ||
        (err = sc_vector_new(&d->hg, (void **)&d->g, l->nparams, sizeof(float))))
        return err;
    d->v = d->own_v;
    l->ops->init(l, d->w, seed);
    ALLOC_ARRAY(d->xr, PT);
    ALLOC_ARRAY(d->dyr, PT);
    ALLOC_ARRAY(d->pg, PT);
    ALLOC_ARRAY(d->hxr, PT);
    ALLOC_ARRAY(d->hdyr, PT);
    ALLOC_ARRAY(d->hpg, PT);
    for (int i = 0; i < PT; i++) {
        if (i / T != D->rt->rank && ((err = sc_vector_new(&d->hxr[i], (void **)&d->xr[i], in, sizeof(float))) ||
                                     (err = sc_vector_new(&d->hdyr[i], (void **)&d->dyr[i], out, sizeof(float)))))
            return err;
        if (i > 0 && (err = sc_vector_new(&d->hpg[i], (void **)&d->pg[i], l->nparams, sizeof(float))))
            return err;
    }
    d->hpg[0] = d->hg;
    d->tag_x = sc_tags_reserve((int64_t)P * T);
    d->tag_dy = sc_tags_reserve((int64_t)P * T);
    snprintf(d->gather_x, sizeof(d->gather_x), "%s.act_allgather", l->name);
    snprintf(d->gather_dy, sizeof(d->gather_dy), "%s.err_allgather", l->name);
    snprintf(d->sgd_name, sizeof(d->sgd_name), "%s.sgd", l->name);
    snprintf(d->acc_name, sizeof(d->acc_name), "%s.grad_sum", l->name);
    return 0;
}

/* Which layers share a collective: walk the layers with parameters (and no
 * replication) in backward order and cut buckets by the policy. */
static int plan_buckets(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    const struct sc_comm_opts *c = &D->comm;
    int order[net->nlayers], n = 0;
    for (int l = net->nlayers - 1; l >= 0; l--)
        if (net->layers[l].nparams && !D->ld[l].replicated)
            order[n++] = l;
    ALLOC_ARRAY(D->buckets, n);
    size_t cap = (size_t)(c->bucket_mb * (1 << 20));
    for (int i = 0; i < n; i++) {
        struct bucket *b = D->nbuckets ? &D->buckets[D->nbuckets - 1] : NULL;
        int fresh = !b;
        if (b)
            switch (c->grad_comm) {
            case SC_GRAD_LAYER: fresh = 1; break;
            case SC_GRAD_END: fresh = 0; break;
            case SC_GRAD_CHUNKS: fresh = i == c->chunk_layers; break;
            case SC_GRAD_BUCKET: fresh = b->n * sizeof(float) >= cap; break;
            }
        if (fresh) {
            b = &D->buckets[D->nbuckets++];
            ALLOC_ARRAY(b->layer, n);
        }
        struct layer_data *d = &D->ld[order[i]];
        d->bucket = (int)(b - D->buckets);
        d->offset = b->n;
        b->layer[b->nlayers++] = order[i];
        b->n += net->layers[order[i]].nparams;
    }
    return 0;
}

static int setup_bucket(struct sc_net *net, struct bucket *b, uint64_t seed)
{
    struct sc_net_dist *D = net->dist;
    int err;
    const struct sc_layer *lo = &net->layers[b->layer[b->nlayers - 1]], *hi = &net->layers[b->layer[0]];
    if (b->nlayers == 1)
        snprintf(b->name, sizeof(b->name), "%s", lo->name);
    else
        snprintf(b->name, sizeof(b->name), "%s-%s", lo->name, hi->name);
    if ((err = sc_vector_new(&b->hw, (void **)&b->w, b->n, sizeof(float))) ||
        (err = sc_vector_new(&b->hv, (void **)&b->v, b->n, sizeof(float))) ||
        (err = sc_vector_new(&b->hg, (void **)&b->g, b->n, sizeof(float))))
        return err;
    for (int i = 0; i < b->nlayers; i++) {
        struct sc_layer *l = &net->layers[b->layer[i]];
        struct layer_data *d = &D->ld[b->layer[i]];
        d->w = b->w + d->offset;
        d->v = b->v + d->offset;
        d->g = b->g + d->offset;
        l->ops->init(l, d->w, seed);
    }
    if ((err = sc_ring_create(&b->ring, b->hg, D->rt->comm, b->name)) ||
        (err = sc_sgd_sync_create(&b->sgd, b->ring, b->hw, b->hv)))
        return err;
    if (D->nccl)
        sc_sgd_sync_use_nccl(b->sgd, D->nccl);
    if (b->nlayers == 1) {
        D->ld[b->layer[0]].hw = b->hw;
        D->ld[b->layer[0]].hg = b->hg;
        return 0;
    }
    ALLOC_ARRAY(b->lw, b->nlayers);
    ALLOC_ARRAY(b->lg, b->nlayers);
    uint32_t sizes[b->nlayers];
    for (int i = 0; i < b->nlayers; i++)
        sizes[i] = (uint32_t)net->layers[b->layer[i]].nparams;
    struct starpu_data_filter f = {
        .filter_func = starpu_vector_filter_list,
        .nchildren = (unsigned)b->nlayers,
        .filter_arg_ptr = sizes,
    };
    starpu_data_partition_plan(b->hw, &f, b->lw);
    starpu_data_partition_plan(b->hg, &f, b->lg);
    starpu_data_partition_submit(b->hw, b->nlayers, b->lw);
    starpu_data_partition_submit(b->hg, b->nlayers, b->lg);
    for (int i = 0; i < b->nlayers; i++) {
        D->ld[b->layer[i]].hw = b->lw[i];
        D->ld[b->layer[i]].hg = b->lg[i];
    }
    return 0;
}

/* Priorities from the critical path.  Forward and backward-data tasks form
 * the chain every later task waits for: highest.  Then, as the next
 * iteration's forward needs them (from the input), each layer's parameter
 * gradient and its collective: the gradient above its collective, since
 * it feeds it, and a layer above the ones after it. */
/* Level k of [0, levels] as a priority in the scheduler's range [lo, hi]:
 * k itself from 0 up when the range has room, else scaled into it. */
static int priority_level(int k, int levels, int lo, int hi)
{
    long long width = (long long)hi - lo;
    if (width >= levels)
        return (int)(lo > 0 ? lo + k : hi - levels < 0 ? hi - levels + k : k);
    return (int)(lo + ((long long)k * width + levels / 2) / (levels ? levels : 1));
}

static void plan_priorities(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int nparam = 0, j = 0;
    for (int l = 0; l < net->nlayers; l++)
        nparam += net->layers[l].nparams > 0;
    int lo = starpu_sched_get_min_priority(), hi = starpu_sched_get_max_priority(), levels = 2 * nparam + 1;
#define LEVEL(k) priority_level(k, levels, lo, hi)
    D->critical_priority = D->comm.priorities ? LEVEL(levels) : 0;
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        if (!net->layers[l].nparams)
            continue;
        d->grad_priority = D->comm.priorities ? LEVEL(levels - 1 - 2 * j) : 0;
        d->comm_priority = D->comm.priorities ? LEVEL(levels - 2 - 2 * j) : 0;
        j++;
    }
#undef LEVEL
    if (D->rt->rank == 0)
        SC_LOG(2, "task priorities: scheduler range [%d, %d], %d levels used%s", lo, hi, levels + 1,
               D->comm.priorities ? "" : " (off)");
    for (int i = 0; i < D->nbuckets; i++) {
        struct bucket *b = &D->buckets[i];
        b->priority = D->ld[b->layer[b->nlayers - 1]].comm_priority;
    }
}

static void summarize(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    const struct sc_comm_opts *c = &D->comm;
    char policy[32];
    switch (c->grad_comm) {
    case SC_GRAD_LAYER: snprintf(policy, sizeof(policy), "layer"); break;
    case SC_GRAD_END: snprintf(policy, sizeof(policy), "end"); break;
    case SC_GRAD_CHUNKS: snprintf(policy, sizeof(policy), "chunks:%d", c->chunk_layers); break;
    case SC_GRAD_BUCKET: snprintf(policy, sizeof(policy), "bucket:%g", c->bucket_mb); break;
    }
    int nrep = 0;
    for (int l = 0; l < net->nlayers; l++)
        nrep += D->ld[l].replicated;
    snprintf(D->summary, sizeof(D->summary), "grad-comm %s (%d collective%s per iteration)%s", policy,
             D->nbuckets, D->nbuckets == 1 ? "" : "s", nrep ? ", replicated gradients:" : "");
    for (int l = 0; l < net->nlayers; l++)
        if (D->ld[l].replicated) {
            size_t len = strlen(D->summary);
            snprintf(D->summary + len, sizeof(D->summary) - len, " %s", net->layers[l].name);
        }
}

void sc_net_memory(const struct sc_net *net, struct sc_mem_report *r)
{
    const struct sc_net_dist *D = net->dist;
    int T = D->ntiles, P = D->rt->size;
    const struct layer_data *first = &D->ld[0];
    size_t F = sizeof(float), window = 0;
    *r = (struct sc_mem_report){0, 0, 0};
    r->activations = (size_t)T * first->tile_max * net->input.c * sc_box_area(first->in_box) * F;
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_layer *L = &net->layers[l];
        const struct layer_data *d = &D->ld[l];
        if (L->alias)
            continue;
        size_t out = (size_t)d->tile_max * L->out.c * sc_box_area(d->out_box) * F;
        size_t in = (size_t)d->tile_max * L->in.c * sc_box_area(d->in_box) * F;
        if (!L->is_loss)
            r->activations += 2 * T * out;
        if (d->hdx_own) {
            const struct layer_data *ds = &D->ld[L->src[0]];
            r->activations += (size_t)T * ds->tile_max * L->in.c * sc_box_area(ds->out_box) * F;
        }
        if (d->hxin)
            r->activations += 2 * T * in;
        r->activations += sc_fetch_bytes(d->redist_fwd) + sc_fetch_bytes(d->redist_bwd) +
                          sc_fetch_bytes(d->halo_x) + sc_fetch_bytes(d->halo_dy);
        if (d->replicated)
            r->activations += (size_t)(P - 1) * T * (in + out);
        if (L->scratch_bytes > 1 && !L->is_loss)
            r->workspaces += (size_t)T * L->scratch_bytes;
        size_t halo_in = in;
        if (d->halo_x) { /* the window with its halo */
            struct need_ctx c = {(struct sc_net *)net, l};
            halo_in = (size_t)d->tile_max * L->in.c * sc_box_area(need_x(&c, D->rt->rank, 0)) * F;
        }
        if (halo_in + out > window)
            window = halo_in + out;
        if (!L->nparams)
            continue;
        size_t p = L->nparams * F;
        r->parameters += 3 * p; /* weights, momentum, reduced gradient */
        if (d->htile_g)
            r->parameters += (size_t)(T - 1) * p;
        if (d->replicated)
            r->parameters += (size_t)(P * T - 1) * p;
    }
    r->workspaces += (size_t)D->rt->ncpu * window;
}

const char *sc_net_comm_summary(const struct sc_net *net)
{
    return net->dist ? net->dist->summary : "";
}

int sc_net_setup(struct sc_net *net, struct sc_runtime *rt, int global_batch, uint64_t seed,
                 const struct sc_comm_opts *comm)
{
    if (global_batch < 1)
        return sc_error(SC_ERR_ARG, "global batch %d: must be at least 1", global_batch);
    struct sc_net_dist *D = calloc(1, sizeof(*D));
    if (!D)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    net->dist = D;
    D->rt = rt;
    if (comm)
        D->comm = *comm;
    else
        sc_comm_opts_default(&D->comm);
    D->global_batch = global_batch;
    int err;
    ALLOC_ARRAY(D->ld, net->nlayers);
    if ((err = plan_layouts(net)))
        return err;
    int replicate = rt->size > 1 ? D->comm.fc_replicate : 0;
    if (replicate && D->spatial)
        return sc_error(SC_ERR_ARG, "--fc-replicate works with sample parallelism only (not with --parallel or "
                        "parallel=)");
    int T = D->ntiles;
    struct layer_data *first = &D->ld[0], *last = &D->ld[net->nlayers - 1];
    /* the sample layout's tiles, which replicated layers exchange */
    D->local_batch = global_batch / rt->size;
    D->tile_n = last->tile_n;
    D->tile_max = last->tile_max;
    ALLOC_ARRAY(D->x0, T);
    ALLOC_ARRAY(D->labels, T);
    ALLOC_ARRAY(D->stats, T);
    ALLOC_ARRAY(D->eval_acc, T);
    ALLOC_ARRAY(D->hx0, T);
    ALLOC_ARRAY(D->hlabels, T);
    ALLOC_ARRAY(D->hstats, T);
    ALLOC_ARRAY(D->heval_acc, T);
    size_t pixels = (size_t)net->input.c * sc_box_area(first->in_box);
    struct sc_layer *loss = &net->layers[net->nlayers - 1];
    size_t labels = (size_t)last->tile_max * (loss->whole_sample ? 1 : sc_box_area(last->in_box));
    D->loss_pixels = loss->whole_sample ? 1 : loss->in.h * loss->in.w;
    for (int t = 0; t < T; t++)
        if ((err = sc_vector_new(&D->hx0[t], (void **)&D->x0[t], (size_t)first->tile_max * pixels, sizeof(float))) ||
            (err = sc_vector_new(&D->hlabels[t], (void **)&D->labels[t], labels, sizeof(int32_t))) ||
            (err = sc_vector_new(&D->hstats[t], (void **)&D->stats[t], 2, sizeof(float))) ||
            (err = sc_vector_new(&D->heval_acc[t], (void **)&D->eval_acc[t], 2, sizeof(float))))
            return err;
    for (int l = 0; l < net->nlayers && replicate; l++)
        if (net->layers[l].ops->param_grad && net->layers[l].nparams) {
            D->ld[l].replicated = 1;
            replicate--;
        }
    /* Every rank computes a replicated layer's gradient for itself and must
     * get the same bits: on CUDA workers where every rank has one, else on
     * CPU workers, never some pieces on either. */
    if (rt->size > 1 && D->comm.fc_replicate) {
        int all_cuda = rt->ncuda > 0;
        MPI_Allreduce(MPI_IN_PLACE, &all_cuda, 1, MPI_INT, MPI_MIN, rt->ctl);
        D->replicated_where = all_cuda ? SC_WHERE_CUDA : SC_WHERE_CPU;
    }
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        struct sc_layer *L = &net->layers[l];
        if ((err = setup_tiles(net, L, d)) || (d->replicated && (err = setup_replicated(net, L, d, seed))) ||
            (L->ops->setup && (err = L->ops->setup(L, T))))
            return err;
    }
    if ((err = plan_gradient_sums(net)))
        return err;
    for (int l = 0; l < net->nlayers; l++)
        if ((err = plan_exchanges(net, l)))
            return err;
    if ((err = plan_buckets(net)))
        return err;
    if (D->comm.nccl && rt->size > 1 && ((err = check_nccl_grids(net)) || (err = sc_nccl_create(&D->nccl, rt->comm))))
        return err;
    for (int i = 0; i < D->nbuckets; i++)
        if ((err = setup_bucket(net, &D->buckets[i], seed)))
            return err;
    if (D->comm.gate_updates && (err = sc_gate_create(&D->gate, rt->comm, "nonfinite")))
        return err;
    if (D->gate && D->nccl) /* D->nccl is made above */
        sc_gate_use_nccl(D->gate, D->nccl);
    plan_priorities(net);
    summarize(net);
    snprintf(D->load_name, sizeof(D->load_name), "input.load");
    snprintf(D->acc_name, sizeof(D->acc_name), "eval.accumulate");
    return 0;
}

static void destroy_layer(struct sc_net_dist *D, struct layer_data *d)
{
    int T = D->ntiles, PT = D->rt->size * T;
    for (int t = 0; t < T; t++) {
        if (d->hy)
            sc_vector_free(d->hy[t], d->y[t]);
        if (d->hdy)
            sc_vector_free(d->hdy[t], d->dy[t]);
        if (d->hscratch)
            sc_vector_free(d->hscratch[t], d->scratch[t]);
        if (d->htile_g && t > 0)
            sc_vector_free(d->htile_g[t], d->tile_g[t]);
    }
    for (int i = 0; i < PT; i++) {
        if (d->hxr)
            sc_vector_free(d->hxr[i], d->xr[i]);
        if (d->hdyr)
            sc_vector_free(d->hdyr[i], d->dyr[i]);
        if (d->hpg && i > 0)
            sc_vector_free(d->hpg[i], d->pg[i]);
    }
    if (d->replicated) {
        sc_vector_free(d->hw, d->w);
        sc_vector_free(d->hv, d->own_v);
        sc_vector_free(d->hg, d->g);
    }
    for (int t = 0; d->hxin && t < T; t++) {
        sc_vector_free(d->hxin[t], d->xin[t]);
        sc_vector_free(d->hdxin[t], d->dxin[t]);
    }
    for (int t = 0; d->hdx_own && t < T; t++)
        sc_vector_free(d->hdx_own[t], d->dx_own[t]);
    free(d->contrib), free(d->dx_own), free(d->hdx_own);
    sc_fetch_destroy(d->redist_fwd);
    sc_fetch_destroy(d->redist_bwd);
    sc_fetch_destroy(d->halo_x);
    sc_fetch_destroy(d->halo_dy);
    sc_group_sum_destroy(d->gsum[0]);
    sc_group_sum_destroy(d->gsum[1]);
    free(d->xin), free(d->dxin), free(d->hxin), free(d->hdxin), free(d->split), free(d->split_ctx);
    free(d->tile_s0), free(d->tile_n);
    free(d->y), free(d->dy), free(d->scratch), free(d->hy), free(d->hdy), free(d->hscratch);
    free(d->tile_g), free(d->htile_g);
    free(d->xr), free(d->dyr), free(d->pg), free(d->hxr), free(d->hdyr), free(d->hpg);
}

static void destroy_bucket(struct bucket *b)
{
    sc_sgd_sync_destroy(b->sgd);
    sc_ring_destroy(b->ring);
    if (b->lw && b->lw[0]) {
        starpu_data_unpartition_submit(b->hw, b->nlayers, b->lw, STARPU_MAIN_RAM);
        starpu_data_partition_clean(b->hw, b->nlayers, b->lw);
    }
    if (b->lg && b->lg[0]) {
        starpu_data_unpartition_submit(b->hg, b->nlayers, b->lg, STARPU_MAIN_RAM);
        starpu_data_partition_clean(b->hg, b->nlayers, b->lg);
    }
    sc_vector_free(b->hw, b->w);
    sc_vector_free(b->hv, b->v);
    sc_vector_free(b->hg, b->g);
    free(b->lw), free(b->lg), free(b->layer);
}

void sc_net_destroy(struct sc_net *net)
{
    if (!net)
        return;
    struct sc_net_dist *D = net->dist;
    if (D) {
        sc_tasks_wait_all(D->rt->comm);
        for (int i = 0; D->ld && i < net->nlayers; i++) {
            if (net->layers[i].ops->teardown)
                net->layers[i].ops->teardown(&net->layers[i]);
            destroy_layer(D, &D->ld[i]);
        }
        for (int i = 0; D->buckets && i < D->nbuckets; i++)
            destroy_bucket(&D->buckets[i]);
        sc_gate_destroy(D->gate);
        sc_nccl_destroy(D->nccl);
        for (int t = 0; t < D->ntiles; t++) {
            if (D->hx0)
                sc_vector_free(D->hx0[t], D->x0[t]);
            if (D->hlabels)
                sc_vector_free(D->hlabels[t], D->labels[t]);
            if (D->hstats)
                sc_vector_free(D->hstats[t], D->stats[t]);
            if (D->heval_acc)
                sc_vector_free(D->heval_acc[t], D->eval_acc[t]);
        }
        free(D->x0), free(D->labels), free(D->stats), free(D->eval_acc);
        free(D->hx0), free(D->hlabels), free(D->hstats), free(D->heval_acc), free(D->ld), free(D->buckets);
        free(D);
    }
    for (int i = 0; net->layers && i < net->nlayers; i++)
        free(net->layers[i].priv);
    free(net->layers);
    free(net);
}

/* ---- iterations ---- */

static struct sc_tile_io tile_io(struct sc_net *net, int l, int t, int train)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *d = &D->ld[l];
    struct sc_tile_io io = {
        .n = d->tile_n[t],
        .x = x_tiles(net, l)[t],
        .x2 = net->layers[l].nsrc > 1 ? D->ld[net->layers[l].src[1]].hy[t] : NULL,
        .y = d->hy[t],
        .dx = dx_tiles(net, l) ? dx_tiles(net, l)[t] : NULL,
        .dy = d->hdy[t],
        .scratch = d->hscratch[t],
        .params = d->hw,
        .dparams = d->replicated ? NULL : t ? (d->htile_g ? d->htile_g[t] : NULL) : d->hg,
        .labels = D->hlabels[t],
        .stats = D->hstats[t],
        .loss_scale = 1.0f / (float)D->global_batch,
        .train = train,
        .grad_priority = d->grad_priority,
        .split = d->split ? &d->split[t] : NULL,
        .group_sum = d->gsum[0] ? net_group_sum : NULL,
        .group_ctx = d,
        .gate = train && D->gate ? sc_gate_handle(D->gate) : NULL,
    };
    return io;
}

/* Load the tiles' samples of global batch idx (B entries; -1: padding),
 * then run the forward pass (and the loss) of every tile, with the
 * redistributions and halo exchanges between layers. */
static int submit_forward(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, int train)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *first = &D->ld[0], *last = &D->ld[net->nlayers - 1];
    int err;
    sc_task_set_priority(D->critical_priority);
    struct sc_load_block blk = {ds->c, ds->h, ds->w, first->in_box.r0, first->in_box.r1, first->in_box.c0,
                                first->in_box.c1};
    for (int t = 0; t < D->ntiles && ds->synthetic; t++) {
        struct sc_layer *loss = &net->layers[net->nlayers - 1];
        struct sc_box lb = loss->whole_sample ? (struct sc_box){0, 1, 0, 1} : last->in_box;
        struct sc_synth_args a = {.seed = ds->seed, .kind = ds->synthetic - 1, .c = ds->c, .h = ds->h, .w = ds->w,
                                  .classes = ds->classes, .r0 = first->in_box.r0, .r1 = first->in_box.r1,
                                  .c0 = first->in_box.c0, .c1 = first->in_box.c1, .n = first->tile_n[t],
                                  .nan_sample = ds->nan_sample};
        if (a.n && (err = sc_insert_synth_load(&a, idx + first->tile_s0[t], D->hx0[t], NULL, D->load_name)))
            return err;
        a.n = last->tile_n[t];
        if (a.n && (err = sc_insert_synth_labels(&a, loss->whole_sample ? 1 : loss->in.h,
                                                 loss->whole_sample ? 1 : loss->in.w, lb,
                                                 idx + last->tile_s0[t], D->hlabels[t], D->load_name)))
            return err;
    }
    for (int t = 0; t < D->ntiles && !ds->synthetic; t++) {
        if (!D->spatial) { /* one task for both when the tiles are alike */
            if ((err = sc_insert_load_batch(ds->images, ds->labels, (int)sc_shape_size(&net->input), first->tile_n[t],
                                            idx + first->tile_s0[t], D->hx0[t], D->hlabels[t], D->load_name)))
                return err;
            continue;
        }
        if ((err = sc_insert_load_images(ds->images, &blk, first->tile_n[t], idx + first->tile_s0[t], D->hx0[t],
                                         D->load_name)) ||
            (err = sc_insert_load_labels(ds->labels, last->tile_n[t], idx + last->tile_s0[t], D->hlabels[t],
                                         D->load_name)))
            return err;
    }
    for (int l = 0; l < net->nlayers; l++) {
        struct layer_data *d = &D->ld[l];
        struct sc_layer *L = &net->layers[l];
        if (L->alias)
            continue;
        if (d->redist_fwd && (err = submit_assemble(d->redist_fwd, D->ld[L->src[0]].hy, d, 0, L->in.c, d->hxin,
                                                    d->assemble_name)))
            return err;
        if (d->halo_x && (err = sc_fetch_submit(d->halo_x, x_tiles(net, l))))
            return err;
        if (L->ops->forward_tiles) {
            struct sc_tile_io io[D->ntiles];
            for (int t = 0; t < D->ntiles; t++)
                io[t] = tile_io(net, l, t, train);
            if ((err = L->ops->forward_tiles(L, io, D->ntiles)))
                return err;
        }
        for (int t = 0; t < D->ntiles && !L->ops->forward_tiles; t++) {
            struct sc_tile_io io = tile_io(net, l, t, train);
            if (io.n && (err = L->ops->forward(L, &io)))
                return err;
        }
        if (train && d->replicated) {
            sc_task_set_priority(d->comm_priority);
            err = D->nccl ? sc_nccl_tiles_allgather_submit(D->nccl, D->ntiles, x_tiles(net, l), d->hxr, d->gather_x)
                          : sc_tiles_allgather_submit(D->rt->comm, D->ntiles, d->tag_x, x_tiles(net, l), d->hxr,
                                                      d->gather_x);
            sc_task_set_priority(D->critical_priority);
            if (err)
                return err;
        }
    }
    return 0;
}

/* The whole gradient of a replicated layer from every rank's inputs and
 * errors, all local; then its update, unless a gate defers it. */
static int submit_replicated_grad(struct sc_net *net, int l, const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    struct sc_layer *layer = &net->layers[l];
    struct layer_data *d = &D->ld[l];
    int P = D->rt->size, T = D->ntiles, me = D->rt->rank, err;
    sc_task_set_priority(d->comm_priority);
    err = D->nccl ? sc_nccl_tiles_allgather_submit(D->nccl, T, d->hdy, d->hdyr, d->gather_dy)
                  : sc_tiles_allgather_submit(D->rt->comm, T, d->tag_dy, d->hdy, d->hdyr, d->gather_dy);
    if (err)
        return err;
    sc_task_set_where(D->replicated_where);
    for (int q = 0; q < P && !err; q++)
        for (int t = 0; t < T && !err; t++) {
            struct sc_tile_io io = tile_io(net, l, t, 1);
            if (q != me) {
                io.x = d->hxr[q * T + t];
                io.dy = d->hdyr[q * T + t];
            }
            io.dparams = d->hpg[q * T + t];
            err = layer->ops->param_grad(layer, &io);
        }
    sc_task_set_where(SC_WHERE_ANY);
    if (err)
        return err;
    sc_task_set_priority(d->grad_priority);
    for (int i = 1; i < P * T; i++)
        if ((err = sc_insert_accumulate(d->hg, d->hpg[i], d->acc_name)))
            return err;
    if (D->gate)
        return sc_gate_check_submit(D->gate, d->hg);
    return sc_insert_sgd(sgd, d->hw, d->hv, d->hg, d->sgd_name);
}

/* The collective of a bucket, once the gradients of all its layers are
 * submitted: switch from the layers' slices to the collective's pieces
 * (reduce), and back after the update.  A gate puts its verdict between
 * the two halves. */
static int submit_bucket_reduce(struct bucket *b, struct sc_gate *gate)
{
    sc_task_set_priority(b->priority);
    if (b->lw) {
        starpu_data_unpartition_submit(b->hg, b->nlayers, b->lg, STARPU_MAIN_RAM);
        starpu_data_unpartition_submit(b->hw, b->nlayers, b->lw, STARPU_MAIN_RAM);
    }
    return sc_sgd_sync_reduce_submit(b->sgd, gate);
}

static int submit_bucket_update(struct bucket *b, const struct sc_sgd_args *sgd)
{
    sc_task_set_priority(b->priority);
    int err = sc_sgd_sync_update_submit(b->sgd, sgd);
    if (b->lw) {
        starpu_data_partition_submit(b->hw, b->nlayers, b->lw);
        starpu_data_partition_submit(b->hg, b->nlayers, b->lg);
    }
    return err;
}

/* With a gate: the verdict over the whole batch, then every update, in
 * the order the gradients came (backward). */
static int submit_gated_updates(struct sc_net *net, const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    struct sc_sgd_args gated = *sgd;
    gated.gate = sc_gate_handle(D->gate);
    int err = sc_gate_close_submit(D->gate);
    for (int l = 0; l < net->nlayers && !err; l++) {
        struct sc_layer *layer = &net->layers[l];
        if (layer->alias || !layer->ops->update_buffers)
            continue;
        struct sc_tile_io io[D->ntiles];
        for (int t = 0; t < D->ntiles; t++)
            io[t] = tile_io(net, l, t, 1);
        err = layer->ops->update_buffers(layer, io, D->ntiles);
    }
    for (int l = net->nlayers - 1; l >= 0 && !err; l--) {
        struct layer_data *d = &D->ld[l];
        if (net->layers[l].alias || !net->layers[l].nparams)
            continue;
        if (d->replicated) {
            sc_task_set_priority(d->grad_priority);
            err = sc_insert_sgd(&gated, d->hw, d->hv, d->hg, d->sgd_name);
        } else {
            struct bucket *b = &D->buckets[d->bucket];
            if (b->layer[b->nlayers - 1] == l)
                err = submit_bucket_update(b, &gated);
        }
    }
    return err;
}

int sc_net_train_batch(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx,
                       const struct sc_sgd_args *sgd)
{
    struct sc_net_dist *D = net->dist;
    int err;
    if ((D->gate && (err = sc_gate_open_submit(D->gate))) || (err = submit_forward(net, ds, idx, 1)))
        return err;
    for (int l = net->nlayers - 1; l >= 0; l--) {
        struct sc_layer *layer = &net->layers[l];
        struct layer_data *d = &D->ld[l];
        if (layer->alias)
            continue;
        sc_task_set_priority(D->critical_priority);
        if ((err = submit_gradient_sum(net, l)))
            return err;
        for (int t = 0; t < D->ntiles && layer->ops->act_backward; t++) {
            struct sc_tile_io io = tile_io(net, l, t, 1);
            if (io.n && (err = layer->ops->act_backward(layer, &io)))
                return err;
        }
        if (d->halo_dy && (err = sc_fetch_submit(d->halo_dy, d->hdy)))
            return err;
        if (layer->ops->backward_tiles) {
            struct sc_tile_io io[D->ntiles];
            for (int t = 0; t < D->ntiles; t++)
                io[t] = tile_io(net, l, t, 1);
            if ((err = layer->ops->backward_tiles(layer, io, D->ntiles)))
                return err;
        }
        for (int t = 0; t < D->ntiles && layer->ops->backward; t++) {
            struct sc_tile_io io = tile_io(net, l, t, 1);
            if (io.n && (err = layer->ops->backward(layer, &io)))
                return err;
        }
        if (d->redist_bwd && (err = submit_assemble(d->redist_bwd, d->hdxin, &D->ld[layer->src[0]], 1, layer->in.c,
                                                    input_grad_tiles(net, l), d->assemble_name)))
            return err;
        if (!layer->nparams)
            continue;
        if (d->replicated) {
            if ((err = submit_replicated_grad(net, l, sgd)))
                return err;
            continue;
        }
        sc_task_set_priority(d->grad_priority);
        for (int t = 1; t < D->ntiles; t++)
            if ((err = sc_insert_accumulate(d->hg, d->htile_g[t], layer->name)))
                return err;
        /* A bucket's collective right after the gradient of its last layer,
         * so that it overlaps the backward pass of the layers below. */
        struct bucket *b = &D->buckets[d->bucket];
        if (b->layer[b->nlayers - 1] != l)
            continue;
        if ((err = submit_bucket_reduce(b, D->gate)) || (!D->gate && (err = submit_bucket_update(b, sgd))))
            return err;
    }
    if (D->gate && (err = submit_gated_updates(net, sgd)))
        return err;
    net->iteration++;
    /* Bounded lookahead: tasks are small, but an epoch of them is not. */
    sc_tasks_throttle(4096);
    return 0;
}

static void sum_stats(struct sc_net *net, starpu_data_handle_t *h, float **mem, double out[2])
{
    struct sc_net_dist *D = net->dist;
    double local[2] = {0, 0};
    for (int t = 0; t < D->ntiles; t++) {
        starpu_data_acquire(h[t], STARPU_R);
        local[0] += mem[t][0];
        local[1] += mem[t][1];
        starpu_data_release(h[t]);
    }
    MPI_Allreduce(local, out, 2, MPI_DOUBLE, MPI_SUM, D->rt->ctl);
}

double sc_net_last_loss(struct sc_net *net)
{
    double s[2];
    sum_stats(net, net->dist->hstats, net->dist->stats, s);
    return s[0] / net->dist->global_batch / net->dist->loss_pixels;
}

int sc_net_evaluate(struct sc_net *net, const struct sc_dataset *ds, double *accuracy, double *loss)
{
    struct sc_net_dist *D = net->dist;
    int B = D->global_batch, err;
    for (int t = 0; t < D->ntiles; t++) {
        starpu_data_acquire(D->heval_acc[t], STARPU_W);
        D->eval_acc[t][0] = D->eval_acc[t][1] = 0;
        starpu_data_release(D->heval_acc[t]);
    }
    /* Whole batches only, so that every tile and exchange keeps its shape:
     * the last one is padded with samples the loss ignores. */
    int32_t *idx = malloc((size_t)B * sizeof(*idx));
    if (!idx)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    struct layer_data *last = &D->ld[net->nlayers - 1];
    for (int start = 0; start < ds->n; start += B) {
        for (int i = 0; i < B; i++)
            idx[i] = start + i < ds->n ? start + i : -1;
        if ((err = submit_forward(net, ds, idx, 0))) {
            free(idx);
            return err;
        }
        for (int t = 0; t < D->ntiles; t++)
            if (last->tile_n[t] && (err = sc_insert_accumulate(D->heval_acc[t], D->hstats[t], D->acc_name))) {
                free(idx);
                return err;
            }
        sc_tasks_throttle(4096);
    }
    free(idx);
    double s[2];
    sum_stats(net, D->heval_acc, D->eval_acc, s);
    *loss = s[0] / ds->n / D->loss_pixels;
    *accuracy = s[1] / ds->n / D->loss_pixels;
    return 0;
}

void sc_net_wait(struct sc_net *net)
{
    sc_tasks_wait_all(net->dist->rt->comm);
}

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

static int tiles_nonfinite(struct sc_net *net, starpu_data_handle_t *h, float **p)
{
    int bad = 0;
    for (int t = 0; h && p && t < net->dist->ntiles && !bad; t++)
        bad = has_nonfinite(h[t], p[t]);
    return bad;
}

int sc_net_find_nonfinite(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx, char *where,
                          size_t size)
{
    struct sc_net_dist *D = net->dist;
    int L = net->nlayers;
    /* A frozen watch: the SGD tasks change nothing. */
    struct sc_nonfinite frozen = {.first_iteration = 1, .freeze = 1};
    struct sc_sgd_args none = {.watch = &frozen};
    int64_t iteration = net->iteration;
    int err = sc_net_train_batch(net, ds, idx, &none);
    sc_net_wait(net);
    net->iteration = iteration;
    if (err)
        return err;
    /* The first place in the order of computation: the input (-1), outputs
     * in forward order (0..L-1), the loss (L), output errors in backward order, then
     * weight gradients in backward order. */
    int first = 3 * L + 1;
    for (int t = 0; t < D->ntiles && first > 3 * L; t++)
        if (has_nonfinite(D->hx0[t], D->x0 ? D->x0[t] : NULL))
            first = -1;
    for (int l = 0; l < L && first > 3 * L; l++)
        if (!net->layers[l].alias && tiles_nonfinite(net, D->ld[l].hy, D->ld[l].y))
            first = l;
    for (int t = 0; t < D->ntiles && first > 3 * L; t++)
        if (has_nonfinite(D->hstats[t], D->stats[t]))
            first = L;
    for (int l = L - 1; l >= 0 && first > 3 * L; l--)
        if (!net->layers[l].alias && tiles_nonfinite(net, D->ld[l].hdy, D->ld[l].dy))
            first = L + 1 + (L - 1 - l);
    for (int l = L - 1; l >= 0 && first > 3 * L; l--)
        if (net->layers[l].nparams && has_nonfinite(D->ld[l].hg, D->ld[l].g))
            first = 2 * L + 1 + (L - 1 - l);
    int all;
    MPI_Allreduce(&first, &all, 1, MPI_INT, MPI_MIN, D->rt->ctl);
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
        snprintf(where, size, "%s layer %d (%s, [%s] at line %d)", what, layer->index, layer->name,
                 layer->ops->section, layer->line);
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
    size_t n = net->layers[l].nparams;
    if (d->replicated) { /* whole on every rank; rank 0 speaks for them */
        *first = 0;
        *count = D->rt->rank == 0 ? n : 0;
        return;
    }
    size_t bf, bc;
    sc_ring_owned_range(D->buckets[d->bucket].ring, &bf, &bc);
    size_t lo = bf > d->offset ? bf : d->offset, hi = bf + bc < d->offset + n ? bf + bc : d->offset + n;
    *first = hi > lo ? lo - d->offset : 0;
    *count = hi > lo ? hi - lo : 0;
}

static starpu_data_handle_t momentum_handle(struct sc_net *net, int l)
{
    struct layer_data *d = &net->dist->ld[l];
    return d->replicated ? d->hv : net->dist->buckets[d->bucket].hv;
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
        starpu_data_acquire(d->hw, STARPU_R);
        memcpy(w[l], d->w, n * sizeof(float));
        starpu_data_release(d->hw);
        /* Each rank's owned momentum range goes to rank 0. */
        starpu_data_handle_t hv = momentum_handle(net, l);
        starpu_data_acquire(hv, STARPU_R);
        int counts[rt->size], displs[rt->size];
        size_t first, count;
        owned_momentum(net, l, &first, &count);
        int c = (int)count, f = (int)first;
        MPI_Gather(&c, 1, MPI_INT, counts, 1, MPI_INT, 0, rt->ctl);
        MPI_Gather(&f, 1, MPI_INT, displs, 1, MPI_INT, 0, rt->ctl);
        MPI_Gatherv(d->v + first, c, MPI_FLOAT, rt->rank == 0 ? v[l] : NULL, counts, displs, MPI_FLOAT, 0,
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
        size_t n = net->layers[l].nparams;
        if (!n)
            continue;
        starpu_data_acquire(d->hw, STARPU_W);
        memcpy(d->w, w[l], n * sizeof(float));
        starpu_data_release(d->hw);
        starpu_data_handle_t hv = momentum_handle(net, l);
        starpu_data_acquire(hv, STARPU_RW);
        memcpy(d->v, v[l], n * sizeof(float));
        starpu_data_release(hv);
    }
    return 0;
}

static void copy_buffers(struct sc_net *net, float *const *b, int to_net)
{
    sc_net_wait(net);
    for (int l = 0; l < net->nlayers; l++) {
        struct sc_layer *L = &net->layers[l];
        if (!L->nbuffers || !b[l])
            continue;
        starpu_data_handle_t h = L->ops->buffer_handle(L);
        starpu_data_acquire(h, to_net ? STARPU_W : STARPU_R);
        float *mem = (float *)starpu_vector_get_local_ptr(h);
        if (to_net)
            memcpy(mem, b[l], L->nbuffer_values * sizeof(float));
        else
            memcpy(b[l], mem, L->nbuffer_values * sizeof(float));
        starpu_data_release(h);
    }
}

int sc_net_read_buffers(struct sc_net *net, float **b)
{
    copy_buffers(net, b, 0);
    return 0;
}

int sc_net_write_buffers(struct sc_net *net, float *const *b)
{
    copy_buffers(net, b, 1);
    return 0;
}
