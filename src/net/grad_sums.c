/* The sums of the gradients of outputs that several layers read
 * (sc_net_setup's plan of them, after the tiles): which reader writes the
 * gradient itself, where the others write their parts, and which
 * gradients are a shortcut's own buffer. */
#include <stdlib.h>

#include "src/net/net_private.h"

/* Whether layer s's dy may be the dy of the one [shortcut] r that reads
 * it, instead of a copy: s never writes its dy (its activation's backward
 * would change r's, which r's other source reads too), and the two lie
 * alike. */
static int dy_may_alias(struct sc_net *net, int s)
{
    struct sc_net_dist *D = net->dist;
    const struct layer_data *ds = &D->ld[s];
    const struct sc_layer *L = share_of(net, s);
    if (ds->dysum.direct || ds->dysum.ncontrib != 1 || !L->reads_dy_only || L->post_relu)
        return 0;
    int r = ds->dysum.from[0];
    const struct sc_tensor *mine = &ds->tiles.dy, *theirs = &D->ld[r].tiles.dy;
    return net->layers[r].dx_is_dy && sc_layout_equal(&ds->xch.lout, &D->ld[r].xch.lout) &&
           mine->ntiles == theirs->ntiles && mine->count == theirs->count;
}

/* Which reader of each output writes its gradient directly, where the
 * others write theirs (see layer_data), and which outputs' gradients are
 * a shortcut's own (from the last layer down, so that a layer takes the
 * dy its shortcut ends up with). */
int sc_net_plan_gradient_sums(struct sc_net *net)
{
    struct sc_net_dist *D = net->dist;
    int most = 2 * net->nlayers, err;
    for (int l = 0; l < net->nlayers; l++) {
        struct sc_layer *L = &net->layers[l];
        struct layer_data *d = &D->ld[l];
        for (int k = 0; k < L->nsrc && !L->alias; k++) {
            int s = L->src[k];
            if (s < 0)
                continue;
            struct layer_dy_sum *sum = &D->ld[s].dysum;
            if (!sum->contrib) {
                ALLOC_ARRAY(sum->contrib, most);
                ALLOC_ARRAY(sum->from, most);
            }
            if (!L->dx_is_dy && !sum->direct) {
                sum->direct = 1;
                continue;
            }
            if (!L->dx_is_dy && (err = sc_tensor_alloc(&d->dysum.dx_own, &D->ld[s].xch.lout, D->rt->rank)))
                return err;
            sum->from[sum->ncontrib++] = l;
        }
    }
    for (int s = net->nlayers - 1; s >= 0; s--) {
        struct layer_data *ds = &D->ld[s];
        if (net->layers[s].alias || !dy_may_alias(net, s))
            continue;
        sc_tensor_free(&ds->tiles.dy);
        sc_tensor_view(&ds->tiles.dy, &D->ld[ds->dysum.from[0]].tiles.dy);
        ds->dysum.alias = 1;
        ds->dysum.ncontrib = 0;
    }
    for (int s = 0; s < net->nlayers; s++)
        for (int i = 0; i < D->ld[s].dysum.ncontrib; i++) {
            int r = D->ld[s].dysum.from[i];
            D->ld[s].dysum.contrib[i] =
                sc_tensor_handles(net->layers[r].dx_is_dy ? &D->ld[r].tiles.dy : &D->ld[r].dysum.dx_own);
        }
    return 0;
}
