/* What the layer files share, below the network: PyTorch's default
 * initialization from the counter-based rng, and the activation key of
 * their cfg sections (declared in layers.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "src/layers/layers.h"

float sc_uniform(uint64_t seed, uint64_t stream, uint64_t i, float bound)
{
    uint64_t r = sc_splitmix64(sc_splitmix64(seed ^ sc_splitmix64(stream + 0x51ed27)) + i);
    float u = (float)(r >> 40) * (1.0f / 16777216.0f); /* 24 bits: [0, 1) */
    return (2.0f * u - 1.0f) * bound;
}

void sc_layer_init_uniform(const struct sc_layer *l, float *params, uint64_t seed, size_t fan_in)
{
    float bound = 1.0f / sqrtf((float)fan_in);
    for (size_t i = 0; i < l->nparams; i++)
        params[i] = sc_uniform(seed, (uint64_t)l->index, i, bound);
}

int sc_layer_parse_activation(const struct sc_cfg *cfg, struct sc_cfg_section *s, int *relu)
{
    const char *act;
    int err = sc_cfg_get_str(cfg, s, "activation", "linear", &act);
    if (err)
        return err;
    if (!strcmp(act, "relu"))
        *relu = 1;
    else if (!strcmp(act, "linear"))
        *relu = 0;
    else
        return sc_error(SC_ERR_PARSE, "%s:%d: unknown activation '%s' in [%s] (relu or linear)", cfg->path, s->line,
                        act, s->name);
    return 0;
}

int sc_layer_split_copy(const struct sc_layer *l, struct sc_layer *local, int cin, size_t priv_size)
{
    *local = *l;
    local->priv = NULL;
    if (priv_size) {
        if (!(local->priv = malloc(priv_size)))
            return sc_error(SC_ERR_NOMEM, "out of memory");
        memcpy(local->priv, l->priv, priv_size);
    }
    local->in.c = cin;
    if (local->nsrc > 1)
        local->in2.c = cin;
    return local->ops->shapes(local, 0);
}

void sc_layer_channel_index(const struct sc_layer *l, const struct sc_layer *local, int nvec, int ch0, size_t *index)
{
    int n = local->in.c;
    for (int v = 0; v < nvec; v++)
        for (int i = 0; i < n; i++)
            index[(size_t)v * n + i] = (size_t)v * l->in.c + ch0 + i;
}

void sc_layer_work_flops(const struct sc_layer_work *w, double flops[3])
{
    double macs = 0;
    if (w->kind == SC_WORK_CONV) {
        const struct sc_conv_args *a = &w->conv;
        macs = (double)a->n * a->f * a->oh * a->ow * a->c * a->kh * a->kw;
    } else if (w->kind == SC_WORK_FC) {
        macs = (double)w->fc.n * w->fc.in * w->fc.out;
    }
    flops[0] = flops[1] = flops[2] = 2 * macs;
}
