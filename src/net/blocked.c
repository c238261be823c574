/* The layouts of the activations (net_private.h, sc_net_plan_blocks):
 * where oneDNN's convolutions prefer channels in blocks (nChw8c on AVX2),
 * the activations and their gradients stay blocked from one layer to the
 * next, so that no reorder runs around each convolution, and are NCHW
 * wherever a layer, an exchange or the input needs them so. */
#include <stdlib.h>

#include "kernels/kernels.h"
#include "src/net/net_private.h"

/* Whether layer l's kernels may read or write a blocked layout here: a
 * layer that takes one, running on whole samples with no split of its
 * channels, no exchange of its input and no replica.  (A blocked input
 * has a whole number of blocks: its source's output was checked.) */
static int may_block(const struct sc_net *net, int l)
{
    const struct sc_layer *L = &net->layers[l];
    const struct layer_data *d = &net->dist->ld[l];
    return !L->alias && L->layouts != SC_LAYOUTS_NCHW && !d->xch.split && !d->chan.local && !d->replica.on &&
           !d->xch.gsum[0] && !sc_tensor_exists(&d->xch.xin) && !sc_tensor_exists(&d->xch.dxin);
}

/* The block of the layout oneDNN prefers, from the network's first
 * convolution with a whole block of input channels (0: none). */
static int preferred_block(const struct sc_net *net)
{
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_layer *L = &net->layers[l];
        if (L->alias || !L->ops->work || L->layouts != SC_LAYOUTS_ANY || L->in.c % 8)
            continue;
        struct sc_layer_work w = {0};
        L->ops->work(L, net->dist->tile_max, L->in.c, L->out.c, L->in.h, L->in.w, L->out.h, L->out.w, &w);
        if (w.kind == SC_WORK_CONV)
            return sc_conv_act_block(&w.conv);
    }
    return 0;
}

int sc_net_plan_blocks(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int blk = D->comm.plain_layouts || D->rt->ncuda > 0 ? 0 : preferred_block(net);
    for (int l = 0; l < net->nlayers; l++) {
        const struct sc_layer *L = &net->layers[l];
        /* a 1x1 output is the same bytes in both layouts: NCHW */
        D->ld[l].tiles.blk =
            blk && may_block(net, l) && L->layouts != SC_LAYOUTS_IN && L->out.c % blk == 0 && L->out.h * L->out.w > 1
                ? blk
                : 0;
    }
    /* Each reader's needs turn its sources to NCHW, and a layer that keeps
     * one layout turns its sources and itself to NCHW when they differ;
     * each pass only turns blocked layouts to NCHW, so this ends. */
    for (int changed = blk; changed;) {
        changed = 0;
        for (int l = 0; l < net->nlayers; l++) {
            const struct sc_layer *L = &net->layers[l];
            int *out = &D->ld[l].tiles.blk, reads_blocked = blk && may_block(net, l);
            for (int k = 0; k < L->nsrc && !L->alias; k++) {
                int s = L->src[k], *in = s >= 0 ? &D->ld[s].tiles.blk : NULL;
                if (in && *in && !reads_blocked)
                    *in = 0, changed = 1;
                if (L->layouts == SC_LAYOUTS_SAME && *out != (in ? *in : 0)) {
                    if (in)
                        *in = 0;
                    *out = 0, changed = 1;
                }
            }
        }
    }
    return 0;
}

int sc_net_x_block(const struct sc_net *net, int l)
{
    const struct sc_net_dist *D = net->dist;
    int s = net->layers[l].src[0];
    return s < 0 || sc_tensor_exists(&D->ld[l].xch.xin) ? 0 : D->ld[s].tiles.blk;
}
