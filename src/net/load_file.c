/* The load tasks of a data set read by tile from a file (src/data/hdf5.h):
 * each tile's task reads the block of its samples that the first layer's
 * input layout gives this rank (rows, columns and channels), and the loss
 * tile's labels; nothing else of a sample is read here.  A first layer
 * split spatially gets its halo from its neighbours' tiles, as with every
 * other data set (its fetch plan, src/net/exchanges.c). */
#include "src/data/hdf5.h"
#include "src/net/net_private.h"

int sc_net_submit_file_load(struct sc_net *net, const struct sc_dataset *ds, const int32_t *idx,
                            const struct sc_tensor *x, const struct sc_tensor *labels, const struct sc_task_opts *opts,
                            const char *name)
{
    struct sc_net_dist *D = net->dist;
    struct layer_data *first = &D->ld[0], *last = &D->ld[net->nlayers - 1];
    struct sc_box in = first->xch.in_box, lb = last->xch.in_box;
    int per_pixel = !net->layers[net->nlayers - 1].whole_sample, err;
    struct sc_load_read req = {.ch0 = first->xch.in_ch0,
                               .nch = first->xch.in_nch,
                               .r0 = in.r0,
                               .r1 = in.r1,
                               .c0 = in.c0,
                               .c1 = in.c1,
                               .lr0 = per_pixel ? lb.r0 : 0,
                               .lr1 = per_pixel ? lb.r1 : 1,
                               .lc0 = per_pixel ? lb.c0 : 0,
                               .lc1 = per_pixel ? lb.c1 : 1,
                               .label_pixels = per_pixel ? (int)sc_box_area(lb) : 1};
    for (int t = 0; t < D->ntiles; t++) {
        starpu_data_handle_t hx = sc_tensor_handle(x, t), hl = sc_tensor_handle(labels, t);
        if (!D->spatial) { /* the same samples in both: one task */
            req.n = first->tiles.n[t];
            if (req.n && (err = sc_insert_load_read(opts, sc_data_file_read, ds->file, &req, idx + first->tiles.s0[t],
                                                    hx, hl, name)))
                return err;
            continue;
        }
        req.n = first->tiles.n[t];
        if (req.n && (err = sc_insert_load_read(opts, sc_data_file_read, ds->file, &req, idx + first->tiles.s0[t], hx,
                                                NULL, name)))
            return err;
        req.n = last->tiles.n[t];
        if (req.n && (err = sc_insert_load_read(opts, sc_data_file_read, ds->file, &req, idx + last->tiles.s0[t], NULL,
                                                hl, name)))
            return err;
    }
    return 0;
}
