/* Distributed tensors: their tiles made, registered and ended together
 * (tensor.h). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tasks/tasks.h"
#include "tasks/tensor.h"

int sc_tensor_vectors(struct sc_tensor *t, int ntiles, size_t count, size_t elem)
{
    *t = (struct sc_tensor){.ntiles = ntiles, .count = count, .elem = elem};
    size_t n = ntiles > 0 ? (size_t)ntiles : 1;
    t->buf = calloc(n, sizeof(*t->buf));
    t->handle = calloc(n, sizeof(*t->handle));
    if (!t->buf || !t->handle) {
        free(t->buf), free(t->handle);
        *t = (struct sc_tensor){0};
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

int sc_tensor_alloc_tile(struct sc_tensor *t, int i)
{
    return sc_vector_new(&t->handle[i], &t->buf[i], t->count, t->elem);
}

int sc_tensor_alloc_vectors(struct sc_tensor *t, int ntiles, size_t count, size_t elem)
{
    int err = sc_tensor_vectors(t, ntiles, count, elem);
    for (int i = 0; i < ntiles && !err; i++)
        err = sc_tensor_alloc_tile(t, i);
    return err;
}

int sc_tensor_alloc(struct sc_tensor *t, const struct sc_layout *L, int rank)
{
    int most = 0, first, n, ch0, nch;
    for (int i = 0; i < L->ntiles; i++) {
        sc_layout_tile_samples(L, rank, i, &first, &n);
        if (n > most)
            most = n;
    }
    sc_layout_channels(L, rank, &ch0, &nch);
    size_t count = (size_t)most * nch * sc_box_area(sc_layout_box(L, rank));
    int err = sc_tensor_alloc_vectors(t, L->ntiles, count, sizeof(float));
    t->layout = *L;
    return err;
}

void sc_tensor_free(struct sc_tensor *t)
{
    if (!t->view) {
        for (int i = 0; t->handle && i < t->ntiles; i++)
            sc_vector_free(t->handle[i], t->buf[i]);
        free(t->buf), free(t->handle);
    }
    *t = (struct sc_tensor){0};
}

void sc_tensor_view(struct sc_tensor *t, const struct sc_tensor *src)
{
    *t = *src;
    t->view = 1;
}

size_t sc_tensor_bytes(const struct sc_tensor *t)
{
    size_t n = 0;
    if (t->view)
        return 0;
    for (int i = 0; t->handle && i < t->ntiles; i++)
        n += t->handle[i] ? (t->count ? t->count : 1) * t->elem : 0;
    return n;
}

int sc_tile_pieces_plan(struct sc_tile_pieces *p, const struct sc_tensor *t, int i, int nsamples, size_t per_sample,
                        int npieces)
{
    *p = (struct sc_tile_pieces){0};
    size_t room = t->count ? t->count : 1;
    if (i < 0 || i >= t->ntiles || !sc_tensor_handle(t, i) || npieces < 1 || npieces > nsamples ||
        (size_t)nsamples * per_sample > room || room > UINT32_MAX)
        return sc_error(SC_ERR_ARG, "tile %d: %d pieces of %d samples of %zu elements in %zu", i, npieces, nsamples,
                        per_sample, room);
    p->s0 = calloc((size_t)npieces, sizeof(*p->s0));
    p->n = calloc((size_t)npieces, sizeof(*p->n));
    p->piece = calloc((size_t)npieces, sizeof(*p->piece));
    uint32_t *len = calloc((size_t)npieces, sizeof(*len));
    if (!p->s0 || !p->n || !p->piece || !len) {
        free(len);
        sc_tile_pieces_destroy(p);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    for (int k = 0, s = 0; k < npieces; k++) {
        p->s0[k] = s;
        p->n[k] = nsamples / npieces + (k < nsamples % npieces);
        s += p->n[k];
        len[k] = (uint32_t)(k + 1 < npieces ? p->n[k] * per_sample : room - (size_t)p->s0[k] * per_sample);
    }
    struct starpu_data_filter f = {
        .filter_func = starpu_vector_filter_list,
        .nchildren = (unsigned)npieces,
        .filter_arg_ptr = len,
    };
    p->tile = sc_tensor_handle(t, i);
    p->npieces = npieces;
    starpu_data_partition_plan(p->tile, &f, p->piece);
    free(len);
    return 0;
}

void sc_tile_pieces_split(struct sc_tile_pieces *p)
{
    starpu_data_partition_submit(p->tile, (unsigned)p->npieces, p->piece);
}

void sc_tile_pieces_join(struct sc_tile_pieces *p)
{
    starpu_data_unpartition_submit(p->tile, (unsigned)p->npieces, p->piece, STARPU_MAIN_RAM);
}

void sc_tile_pieces_destroy(struct sc_tile_pieces *p)
{
    if (p->tile && p->piece)
        starpu_data_partition_clean(p->tile, (unsigned)p->npieces, p->piece);
    free(p->s0), free(p->n), free(p->piece);
    *p = (struct sc_tile_pieces){0};
}
