/* Fetch plans over split tensors: halo exchange and redistribution (see
 * tasks.h).  Every rank enumerates all (consumer rank, tile) x (source
 * rank, tile) pairs in the same order, so piece k has tag base + k on both
 * sides without any negotiation. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "tasks.h"

struct piece {
    int peer;                  /* the other rank */
    int tile;                  /* sends: the source tile; receives: the consumer tile */
    struct sc_region_src desc; /* samples and box it holds */
    struct sc_region_src from; /* sends: the whole source tile it is cut from */
    float *mem;
    starpu_data_handle_t h;
    int64_t tag;
};

struct local { /* a consumer tile's part held by one of our own source tiles */
    int tile, src_tile;
    struct sc_region_src desc; /* the whole source tile */
};

struct sc_fetch {
    MPI_Comm comm;
    int sum, ntiles;
    int nsend, nrecv, nlocal;
    struct piece *send, *recv;
    struct local *local;
    size_t bytes;
    char pack_name[64], comm_name[64];
};

static int sample_overlap(int a0, int an, int b0, int bn, int *s0, int *n)
{
    *s0 = a0 > b0 ? a0 : b0;
    int e = a0 + an < b0 + bn ? a0 + an : b0 + bn;
    *n = e - *s0;
    return *n > 0;
}

static int add_piece(struct piece **v, int *n, struct piece p)
{
    struct piece *nv = realloc(*v, (size_t)(*n + 1) * sizeof(**v));
    if (!nv)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    *v = nv;
    (*v)[(*n)++] = p;
    return 0;
}

static int alloc_piece(struct sc_fetch *f, struct piece *p)
{
    size_t n = (size_t)p->desc.n * p->desc.nch * sc_box_area(p->desc.box);
    int err = sc_vector_new(&p->h, (void **)&p->mem, n, sizeof(float));
    if (err)
        return err;
    f->bytes += n * sizeof(float);
    return 0;
}

/* Whether holder q's copy is the one consumer r takes from a replicated
 * source: the same coordinates along the replicated dimensions. */
static int replica_of(const struct sc_layout *src, unsigned replicated, int q, int r)
{
    int cq[SC_NDIMS], cr[SC_NDIMS];
    sc_grid_coords(&src->grid, q, cq);
    sc_grid_coords(&src->grid, r, cr);
    for (int d = 0; d < SC_NDIMS; d++)
        if ((replicated & (1u << d)) && cq[d] != cr[d])
            return 0;
    return 1;
}

int sc_fetch_create(struct sc_fetch **out, const struct sc_layout *src, const struct sc_layout *dst, sc_need_fn need,
                    void *ctx, enum sc_fetch_mode mode, int rank, MPI_Comm comm, const char *name)
{
    struct sc_fetch *f = calloc(1, sizeof(*f));
    if (!f)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    f->comm = comm;
    f->sum = mode == SC_FETCH_SUM;
    unsigned replicated = f->sum ? 0 : sc_layout_replicated(src);
    f->ntiles = dst->ntiles;
    snprintf(f->pack_name, sizeof(f->pack_name), "%s.pack", name);
    snprintf(f->comm_name, sizeof(f->comm_name), "%s", name);
    int P = dst->grid.size, err = 0;
    int64_t k = 0;
    for (int r = 0; r < P; r++)
        for (int t = 0; t < dst->ntiles; t++) {
            int ts0, tn;
            sc_layout_tile_samples(dst, r, t, &ts0, &tn);
            struct sc_block want = need(ctx, r, t);
            for (int q = 0; q < P; q++) {
                struct sc_block have = sc_layout_block(src, q);
                struct sc_block part = sc_block_intersect(want, have);
                if (sc_block_empty(part) || tn < 1 || !replica_of(src, replicated, q, r))
                    continue;
                for (int u = 0; u < src->ntiles; u++) {
                    int us0, un, s0, n;
                    sc_layout_tile_samples(src, q, u, &us0, &un);
                    if (!sample_overlap(ts0, tn, us0, un, &s0, &n))
                        continue;
                    if (q == r) {
                        if (r != rank)
                            continue;
                        struct local *nl = realloc(f->local, (size_t)(f->nlocal + 1) * sizeof(*nl));
                        if (!nl) {
                            err = sc_error(SC_ERR_NOMEM, "out of memory");
                            goto done;
                        }
                        f->local = nl;
                        f->local[f->nlocal++] =
                            (struct local){t, u, {us0, un, have.box, have.ch0, have.ch1 - have.ch0}};
                        continue;
                    }
                    struct piece p = {.desc = {s0, n, part.box, part.ch0, part.ch1 - part.ch0}, .tag = k++};
                    if (q == rank) {
                        p.peer = r, p.tile = u;
                        p.from = (struct sc_region_src){us0, un, have.box, have.ch0, have.ch1 - have.ch0};
                        err = add_piece(&f->send, &f->nsend, p);
                    } else if (r == rank) {
                        p.peer = q, p.tile = t;
                        err = add_piece(&f->recv, &f->nrecv, p);
                    }
                    if (err)
                        goto done;
                }
            }
        }
    int64_t base = sc_tags_reserve(k ? k : 1);
    for (int i = 0; i < f->nsend && !err; i++) {
        f->send[i].tag += base;
        err = alloc_piece(f, &f->send[i]);
    }
    for (int i = 0; i < f->nrecv && !err; i++) {
        f->recv[i].tag += base;
        err = alloc_piece(f, &f->recv[i]);
    }
done:
    if (err) {
        sc_fetch_destroy(f);
        return err;
    }
    *out = f;
    return 0;
}

void sc_fetch_destroy(struct sc_fetch *f)
{
    if (!f)
        return;
    for (int i = 0; i < f->nsend + f->nrecv; i++) {
        struct piece *p = i < f->nsend ? &f->send[i] : &f->recv[i - f->nsend];
        sc_vector_free(p->h, p->mem);
    }
    free(f->send);
    free(f->recv);
    free(f->local);
    free(f);
}

int sc_fetch_submit(struct sc_fetch *f, const struct sc_task_opts *opts, starpu_data_handle_t *src_tiles)
{
    int err;
    for (int i = 0; i < f->nrecv; i++) {
        struct piece *p = &f->recv[i];
        if ((err = sc_recv_piece(p->h, p->peer, p->tag, f->comm, f->comm_name)))
            return err;
    }
    for (int i = 0; i < f->nsend; i++) {
        struct piece *p = &f->send[i];
        struct sc_region_args a = {.op = SC_REGION_COPY,
                                   .s0 = p->desc.s0,
                                   .n = p->desc.n,
                                   .c = p->desc.nch,
                                   .dst_ch0 = p->desc.ch0,
                                   .region = p->desc.box,
                                   .dst_s0 = p->desc.s0,
                                   .dst_n = p->desc.n,
                                   .dst_box = p->desc.box,
                                   .na = 1};
        a.src[0] = p->from;
        if ((err = sc_insert_region(opts, &a, &src_tiles[p->tile], NULL, p->h, f->pack_name)) ||
            (err = sc_send_piece(opts, p->h, p->peer, p->tag, f->comm, f->comm_name)))
            return err;
    }
    return 0;
}

int sc_fetch_sources(const struct sc_fetch *f, starpu_data_handle_t *src_tiles, int t, const struct sc_box *win,
                     struct sc_region_src *desc, starpu_data_handle_t *h, int max)
{
    int n = 0;
    for (int i = 0; i < f->nlocal + f->nrecv; i++) {
        const struct sc_region_src *d = i < f->nlocal ? &f->local[i].desc : &f->recv[i - f->nlocal].desc;
        int tile = i < f->nlocal ? f->local[i].tile : f->recv[i - f->nlocal].tile;
        if (tile != t || (win && sc_box_empty(sc_box_intersect(*win, d->box))))
            continue;
        if (n == max)
            return sc_error(SC_ERR_SHAPE,
                            "%s: a tile needs more than %d source blocks; use fewer ranks or "
                            "workers for this layer",
                            f->comm_name, max);
        desc[n] = *d;
        h[n++] = i < f->nlocal ? src_tiles[f->local[i].src_tile] : f->recv[i - f->nlocal].h;
    }
    return n;
}

int sc_fetch_sums(const struct sc_fetch *f)
{
    return f->sum;
}

size_t sc_fetch_bytes(const struct sc_fetch *f)
{
    return f ? f->bytes : 0;
}

/* ---- sums over a group of ranks ---- */

struct sc_group_sum {
    MPI_Comm comm;
    int n, me; /* members, this rank's index among them */
    int *members;
    double **buf; /* one per member (this rank's unused) */
    starpu_data_handle_t *h;
    int64_t tag;
    char name[64], sum_name[64];
};

int sc_group_sum_create(struct sc_group_sum **out, MPI_Comm comm, const int *members, int nmembers, int rank,
                        size_t len, const char *name)
{
    struct sc_group_sum *g = calloc(1, sizeof(*g));
    if (!g || !(g->members = calloc(nmembers, sizeof(int))) || !(g->buf = calloc(nmembers, sizeof(double *))) ||
        !(g->h = calloc(nmembers, sizeof(*g->h)))) {
        sc_group_sum_destroy(g);
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    g->comm = comm;
    g->n = nmembers;
    g->me = -1;
    snprintf(g->name, sizeof(g->name), "%s", name);
    snprintf(g->sum_name, sizeof(g->sum_name), "%s.sum", name);
    for (int i = 0; i < nmembers; i++) {
        g->members[i] = members[i];
        if (members[i] == rank) {
            g->me = i;
            continue;
        }
        if (!(g->buf[i] = calloc(len, sizeof(double)))) {
            sc_group_sum_destroy(g);
            return sc_error(SC_ERR_NOMEM, "out of memory");
        }
        starpu_vector_data_register(&g->h[i], STARPU_MAIN_RAM, (uintptr_t)g->buf[i], (uint32_t)len, sizeof(double));
    }
    g->tag = sc_tags_reserve(nmembers);
    if (g->me < 0) {
        sc_group_sum_destroy(g);
        return sc_error(SC_ERR_ARG, "%s: rank %d is not in its group", name, rank);
    }
    *out = g;
    return 0;
}

void sc_group_sum_destroy(struct sc_group_sum *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++) {
        if (g->h && g->h[i])
            starpu_data_unregister(g->h[i]);
        free(g->buf ? g->buf[i] : NULL);
    }
    free(g->members), free(g->buf), free(g->h);
    free(g);
}

int sc_group_sum_submit(struct sc_group_sum *g, const struct sc_task_opts *opts, starpu_data_handle_t h)
{
    int err;
    starpu_data_handle_t src[g->n];
    /* member i sends with tag + i */
    for (int i = 0; i < g->n; i++) {
        if (i == g->me)
            continue;
        if ((err = sc_recv_piece(g->h[i], g->members[i], g->tag + i, g->comm, g->name)) ||
            (err = sc_send_piece(opts, h, g->members[i], g->tag + g->me, g->comm, g->name)))
            return err;
    }
    for (int i = 0; i < g->n; i++)
        src[i] = i == g->me ? h : g->h[i];
    return sc_insert_sum_ordered(opts, g->n, src, h, g->sum_name);
}
