/* The network from its cfg: layer types, shapes, sources; and the
 * command line's communication options. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <starpu.h>

#include "src/net/net_private.h"

static const struct sc_layer_ops *const layer_types[] = {
    &sc_layer_conv_ops,      &sc_layer_maxpool_ops, &sc_layer_avgpool_ops,  &sc_layer_fc_ops,  &sc_layer_softmax_ops,
    &sc_layer_batchnorm_ops, &sc_layer_route_ops,   &sc_layer_shortcut_ops, &sc_layer_gap_ops,
};

#define NTYPES (sizeof(layer_types) / sizeof(layer_types[0]))

/* ---- parsing ---- */

/* Bounds that keep a hostile cfg from costing unbounded time or memory
 * before training starts: every layer costs StarPU handles and plans (a
 * 10^5-layer file of [batchnorm] needed 20 GB), and the kernels count a
 * sample's values in ints.  The deepest models in use have a few hundred
 * layers. */
#define SC_NET_MAX_LAYERS        4096
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
        return sc_error(SC_ERR_PARSE, "%s:%d: [net] input %dx%dx%d has more than %lld values per sample", cfg->path,
                        s->line, net->input.c, net->input.h, net->input.w, SC_NET_MAX_SAMPLE_VALUES);
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
        if (l->flattens) {
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
            return sc_error(SC_ERR_SHAPE, "%s:%d: [%s] output %dx%dx%d: more than %lld values per sample", cfg->path,
                            s->line, s->name, l->out.c, l->out.h, l->out.w, SC_NET_MAX_SAMPLE_VALUES);
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
        return sc_error(SC_ERR_SHAPE, "%s:%d: [softmax] gets %zu values per sample but [net] has classes=%d", cfg->path,
                        loss->line, sc_shape_size(&loss->in), net->classes);
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

double sc_net_flops(const struct sc_net *net, int batch)
{
    double total = 0;
    for (int i = 0; i < net->nlayers; i++) {
        const struct sc_layer *l = &net->layers[i];
        if (l->alias || !l->ops->work)
            continue;
        struct sc_layer_work w;
        double f[3];
        l->ops->work(l, batch, l->in.c, l->out.c, l->in.h, l->in.w, l->out.h, l->out.w, &w);
        sc_layer_work_flops(&w, f);
        int reads_input_only = 1;
        for (int s = 0; s < l->nsrc; s++)
            reads_input_only &= l->src[s] < 0;
        total += f[0] + f[2] + (reads_input_only ? 0 : f[1]);
    }
    return total;
}

int sc_net_conv_impl(const struct sc_net *net, int batch, enum sc_precision precision, char *buf, size_t n)
{
    struct sc_layer_work best;
    double best_macs = 0;
    for (int i = 0; i < net->nlayers; i++) {
        const struct sc_layer *l = &net->layers[i];
        if (l->alias || !l->ops->work)
            continue;
        struct sc_layer_work w;
        double f[3];
        l->ops->work(l, batch, l->in.c, l->out.c, l->in.h, l->in.w, l->out.h, l->out.w, &w);
        sc_layer_work_flops(&w, f);
        if (w.kind == SC_WORK_CONV && f[0] > best_macs) {
            best = w;
            best_macs = f[0];
        }
    }
    if (best_macs <= 0)
        return -1;
    best.conv.precision = precision;
    return sc_conv_impl_name(&best.conv, buf, n);
}

/* ---- how gradients travel ---- */

/* The entry of list at *p: name [n0, n1), grid [g0, g1); *p moves past it. */
static int list_entry(const char **p, const char **n0, const char **n1, const char **g0, const char **g1)
{
    if (!**p)
        return 0;
    *n0 = *p;
    const char *e = strchr(*p, ',');
    if (!e)
        e = *p + strlen(*p);
    const char *eq = memchr(*p, '=', e - *p);
    *n1 = eq ? eq : e;
    *g0 = eq ? eq + 1 : e;
    *g1 = e;
    *p = *e ? e + 1 : e;
    return 1;
}

int sc_parallel_list_find(const char *list, const char *name, char *buf, size_t len)
{
    const char *p = list, *n0, *n1, *g0, *g1;
    while (list_entry(&p, &n0, &n1, &g0, &g1))
        if ((size_t)(n1 - n0) == strlen(name) && !strncmp(n0, name, n1 - n0)) {
            snprintf(buf, len, "%.*s", (int)(g1 - g0), g0);
            return 1;
        }
    return 0;
}

int sc_parallel_list_check(const struct sc_net *net, const char *list)
{
    const char *p = list, *n0, *n1, *g0, *g1;
    while (list_entry(&p, &n0, &n1, &g0, &g1)) {
        int found = -1;
        for (int l = 0; l < net->nlayers && found < 0; l++)
            if ((size_t)(n1 - n0) == strlen(net->layers[l].name) && !strncmp(n0, net->layers[l].name, n1 - n0))
                found = l;
        if (g0 == g1 || n0 == n1)
            return sc_error(SC_ERR_ARG, "--parallel: '%.*s' is not LAYER=GRID (e.g. conv1=h2w2)", (int)(g1 - n0), n0);
        if (found < 0)
            return sc_error(SC_ERR_ARG, "--parallel: the model has no layer '%.*s'", (int)(n1 - n0), n0);
        if (net->layers[found].alias)
            return sc_error(SC_ERR_ARG, "--parallel: %s is a [route] (no tasks): it takes no grid",
                            net->layers[found].name);
        char again[32];
        const char *rest = p;
        if (sc_parallel_list_find(rest, net->layers[found].name, again, sizeof again))
            return sc_error(SC_ERR_ARG, "--parallel: %s is given twice", net->layers[found].name);
    }
    return 0;
}

void sc_comm_opts_default(struct sc_comm_opts *o)
{
    *o = (struct sc_comm_opts){.grad_comm = SC_GRAD_LAYER,
                               .chunk_layers = 1,
                               .bucket_mb = 25,
                               .fc_replicate = 0,
                               .priorities = 1,
                               .window = 2,
                               .segment_kb = 0,
                               .accumulate = 1};
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
