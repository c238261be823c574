/* The planner's performance model and search (see plan.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/layout.h"
#include "base/spgraph.h"
#include "src/planner/plan.h"

#define MAXP 1024

/* ---- candidates: grids whose extents multiply to P ---- */

/* Every grid of P ranks, in a fixed order (n first, so that ties go to
 * sample parallelism). */
static int all_grids(int P, struct sc_grid *out, int cap)
{
    int n = 0;
    for (int gn = P; gn >= 1; gn--) {
        if (P % gn)
            continue;
        for (int gc = 1; gc <= P / gn; gc++) {
            if ((P / gn) % gc)
                continue;
            for (int gf = 1; gf <= P / gn / gc; gf++) {
                if ((P / gn / gc) % gf)
                    continue;
                for (int gh = 1; gh <= P / gn / gc / gf; gh++) {
                    int rest = P / gn / gc / gf;
                    if (rest % gh)
                        continue;
                    if (n == cap)
                        return n;
                    struct sc_grid *g = &out[n++];
                    g->extent[SC_DIM_N] = gn;
                    g->extent[SC_DIM_C] = gc;
                    g->extent[SC_DIM_F] = gf;
                    g->extent[SC_DIM_H] = gh;
                    g->extent[SC_DIM_W] = rest / gh;
                    g->size = P;
                }
            }
        }
    }
    return n;
}

static int ext(const struct sc_grid *g, enum sc_dim d)
{
    return g->extent[d];
}

/* The layouts of layer l's input and output under g, as src/net/setup.c
 * makes them (plan_layouts; tiles do not matter to volumes). */
/* The network's first layer reads the input: it computes no dx, and so
 * has no dy halo (src/net/setup.c). */
static int first_layer(const struct sc_layer *l)
{
    return l->src[0] < 0;
}

static struct sc_layout layout_in(const struct sc_layer *l, const struct sc_grid *g, int batch)
{
    return (struct sc_layout){*g, batch, l->in.h, l->in.w, 1, l->in.c, l->mixes_channels ? SC_CDIMS_C : SC_CDIMS_CF};
}
static struct sc_layout layout_out(const struct sc_layer *l, const struct sc_grid *g, int batch)
{
    return (struct sc_layout){*g, batch, l->out.h, l->out.w, 1, l->out.c, SC_CDIMS_CF};
}

/* Whether the network can run layer l under g (what choose_grid and
 * plan_channels of src/net/setup.c accept). */
static int grid_valid(const struct sc_layer *l, const struct sc_grid *g, int batch)
{
    int gn = ext(g, SC_DIM_N), gc = ext(g, SC_DIM_C), gf = ext(g, SC_DIM_F);
    int gh = ext(g, SC_DIM_H), gw = ext(g, SC_DIM_W);
    if (batch % gn)
        return 0;
    if (gc * gf > 1 && !l->ops->split_channels)
        return 0;
    if (gh * gw > 1 && (l->whole_sample || l->out.h < gh || l->out.w < gw || l->in.h < gh || l->in.w < gw))
        return 0;
    struct sc_layout in = layout_in(l, g, batch), out = layout_out(l, g, batch);
    int pin = sc_layout_channel_parts(&in), pout = sc_layout_channel_parts(&out);
    if (first_layer(l) && pin > 1)
        return 0;
    return l->in.c % pin == 0 && l->out.c % pout == 0;
}

/* ---- the model of one layer under one grid ---- */

struct cand {
    struct sc_grid g;
    double fwd, bwd; /* compute, with halo and channel collectives */
    double msgs_b;   /* of bwd: the halo and channel collectives */
    int rounds;      /* exchanges of messages between ranks it makes (halo,
                      * statistics, channel collectives; forward and back) */
    double compute, halo, channels;
    double ar_time, ar_bytes; /* the gradient allreduce, unhidden */
    double task_f, task_b;    /* a tile's forward task and its longer backward
                               * one (data or filter gradient): what a message
                               * may wait behind (m->busy) */
    int group;                /* ranks it runs over */
    double update, memory;
    double filter; /* of bwd: the weight gradient's kernels (--fc-replicate
                    * has every rank compute them for every rank's samples) */
};

struct model {
    const struct sc_net *net;
    const struct sc_calib *c;
    int P, B, W;
    double oversub; /* ranks x workers over cores */
    int steal;      /* more workers than cores: collectives take turns with them */
    int copying;    /* messages are copies made by the cores (shared memory), and
                     * every core has a worker: a collective cannot hide */
    double busy;    /* every core has a worker: the longest a message waits
                     * for the workers' tasks (the calibration's busy; 0
                     * unknown or cores to spare) */
    int one_link;   /* every message of every rank crosses one wire (one
                     * level, not copies in memory): gradient collectives
                     * and the exchanges between layers share it */
    const char *missing_layer;
    int replicate; /* --fc-replicate: the first this many [connected] layers */
    int rpn; /* ranks per node: > 0, two levels (the calibration's node record);
              * 0, one level */
};

struct exch {
    double seconds; /* the slowest rank's */
    double bytes;   /* the busiest rank's */
};

static double p2p(const struct model *m, int msgs, double bytes)
{
    return msgs * m->c->p2p_alpha + bytes * m->c->p2p_beta;
}

/* Two levels: what a rank receives from ranks of its node (in_msgs
 * messages, in_bytes) over the within-node link, and from the others
 * over the between-node link.  The two are separate links (NVLink or
 * shared memory, and the network adapter), which carry their messages at
 * the same time: the exchange waits for the slower of them, not for
 * their sum. */
static double p2p_levels(const struct model *m, int in_msgs, double in_bytes, int out_msgs, double out_bytes)
{
    double ti = in_msgs ? in_msgs * m->c->p2p_node_alpha + in_bytes * m->c->p2p_node_beta : 0;
    double to = out_msgs ? out_msgs * m->c->p2p_alpha + out_bytes * m->c->p2p_beta : 0;
    return ti > to ? ti : to;
}

static int same_node(const struct model *m, int r, int q)
{
    return q >= 0 && q / m->rpn == r / m->rpn;
}

/* Ranks that stand for all of a grid: its first, its middle and its last
 * along every dimension (an edge rank has one neighbour, a middle one
 * two), so that the model costs O(sum of extents), not O(P^2), per
 * exchange and plans for 1024 ranks stay quick.  With two levels (rpn >
 * 0, fewer than the grid's ranks), also the last rank of the first node
 * and the first of the second: ranks at a node's edge are those whose
 * pieces come partly from another node. */
#define MAXREPS 5
static int representatives(const struct sc_grid *g, int rpn, int out[MAXREPS])
{
    int c[3][SC_NDIMS], r[MAXREPS], n = 0, k = 0;
    for (int d = 0; d < SC_NDIMS; d++)
        c[0][d] = 0, c[1][d] = g->extent[d] / 2, c[2][d] = g->extent[d] - 1;
    for (; k < 3; k++)
        r[k] = sc_grid_rank(g, c[k]);
    if (rpn > 0 && rpn < g->size)
        r[k++] = rpn - 1, r[k++] = rpn;
    for (int j = 0; j < k; j++) {
        int dup = 0;
        for (int i = 0; i < n; i++)
            dup |= out[i] == r[j];
        if (!dup)
            out[n++] = r[j];
    }
    return n;
}

static int overlap(int a0, int an, int b0, int bn)
{
    int lo = a0 > b0 ? a0 : b0, hi = a0 + an < b0 + bn ? a0 + an : b0 + bn;
    return hi > lo ? hi - lo : 0;
}

/* Along one dimension of L's grid (extent e) splitting n elements: the
 * elements of [w0, w0 + wn) its coordinates hold, summed (*sum), how many
 * coordinates hold some (*count), what coordinate own holds (*mine), and,
 * when each is not NULL, what each coordinate k holds (each[k]). */
static void along(int n, int e, int w0, int wn, int own, double *sum, int *count, double *mine, int *each)
{
    *sum = *mine = 0, *count = 0;
    for (int k = 0; k < e; k++) {
        int f, c;
        sc_block_range(n, e, k, &f, &c);
        int o = overlap(f, c, w0, wn);
        *sum += o, *count += o > 0;
        if (k == own)
            *mine = o;
        if (each)
            each[k] = o;
    }
}

/* The channels of L held at coordinates (cc, ff) along C and F. */
static void channels_at(const struct sc_layout *L, int cc, int ff, int *ch0, int *nch)
{
    /* sc_layout_channels' part index, F-major, without the rank's
     * coordinates (this runs for every pair of candidates). */
    int gc = ext(&L->grid, SC_DIM_C), gf = ext(&L->grid, SC_DIM_F);
    int split_c = (L->cdims & SC_CDIMS_C) && gc > 1, split_f = (L->cdims & SC_CDIMS_F) && gf > 1;
    int part = split_f ? ff : 0, parts = (split_c ? gc : 1) * (split_f ? gf : 1);
    if (split_c)
        part = part * gc + cc;
    sc_block_range(L->c, parts, part, ch0, nch);
}

/* Moving a tensor from layout src to layout dst (the same tensor), as
 * sc_fetch does: every rank receives the parts of its block it does not
 * hold, from one replica of src (copy: the one with the receiver's
 * coordinates along src's replicated dimensions) or from every replica
 * (partial sums, summed on arrival); the pieces are packed by a task at
 * each sender and copied or summed into place by one at the receiver.  A
 * layout is a product of block distributions (samples over N, rows over
 * H, columns over W, channel parts over C and F), so the pieces' volume
 * is a product of sums along each.
 *
 * With two levels, the part of it from the receiver's own node is summed
 * over the node's ranks (at most ranks-per-node of them, each piece a
 * product of the overlaps along each dimension at the sender's
 * coordinates), and the rest comes from other nodes. */
static struct exch exchange(const struct model *m, const struct sc_layout *src, const struct sc_layout *dst, int copy)
{
    struct exch e = {0, 0};
    if (sc_layout_equal(src, dst))
        return e;
    unsigned rep = copy ? sc_layout_replicated(src) : 0;
    const struct sc_grid *g = &src->grid;
    int gc = ext(g, SC_DIM_C), gf = ext(g, SC_DIM_F);
    int reps[MAXREPS], nrep = representatives(&dst->grid, m->rpn, reps);
    /* Two levels: what each coordinate of src's grid holds of the
     * receiver's block, along N, H, W, and C x F (F fastest). */
    int two = m->rpn > 0;
    int on[two ? ext(g, SC_DIM_N) : 1], oh[two ? ext(g, SC_DIM_H) : 1], ow[two ? ext(g, SC_DIM_W) : 1];
    int ocf[two ? gc * gf : 1];
    for (int i = 0; i < nrep; i++) {
        /* r's block of dst (sc_layout_rank_samples, _box and _channels
         * from its coordinates, converted once) */
        int r = reps[i], cs[SC_NDIMS], cd[SC_NDIMS], s0, sn, c0, cn, r0, rn, k0, kn;
        sc_grid_coords(g, r, cs);
        sc_grid_coords(&dst->grid, r, cd);
        sc_block_range(dst->batch, ext(&dst->grid, SC_DIM_N), cd[SC_DIM_N], &s0, &sn);
        sc_block_range(dst->h, ext(&dst->grid, SC_DIM_H), cd[SC_DIM_H], &r0, &rn);
        sc_block_range(dst->w, ext(&dst->grid, SC_DIM_W), cd[SC_DIM_W], &k0, &kn);
        struct sc_box need = {r0, r0 + rn, k0, k0 + kn};
        channels_at(dst, cd[SC_DIM_C], cd[SC_DIM_F], &c0, &cn);
        double S[4], own[4];
        int cnt[4];
        along(src->batch, ext(g, SC_DIM_N), s0, sn, cs[SC_DIM_N], &S[0], &cnt[0], &own[0], two ? on : NULL);
        along(src->h, ext(g, SC_DIM_H), need.r0, need.r1 - need.r0, cs[SC_DIM_H], &S[1], &cnt[1], &own[1],
              two ? oh : NULL);
        along(src->w, ext(g, SC_DIM_W), need.c0, need.c1 - need.c0, cs[SC_DIM_W], &S[2], &cnt[2], &own[2],
              two ? ow : NULL);
        S[3] = own[3] = 0, cnt[3] = 0;
        for (int cc = 0; cc < gc; cc++)
            for (int ff = 0; ff < gf; ff++) {
                if (two)
                    ocf[cc * gf + ff] = 0;
                if (((rep & SC_CDIMS_C) && cc != cs[SC_DIM_C]) || ((rep & SC_CDIMS_F) && ff != cs[SC_DIM_F]))
                    continue;
                int h0, hn;
                channels_at(src, cc, ff, &h0, &hn);
                int o = overlap(h0, hn, c0, cn);
                S[3] += o, cnt[3] += o > 0;
                if (cc == cs[SC_DIM_C] && ff == cs[SC_DIM_F])
                    own[3] = o;
                if (two)
                    ocf[cc * gf + ff] = o;
            }
        double mine = own[0] * own[1] * own[2] * own[3];
        double bytes = 4 * (S[0] * S[1] * S[2] * S[3] - mine);
        int msgs = cnt[0] * cnt[1] * cnt[2] * cnt[3] - (mine > 0);
        double assembled = 4.0 * sn * sc_box_area(need) * cn;
        double comm;
        if (two) {
            /* The pieces from the other ranks of r's node (the source of
             * a piece at coordinates cq is the rank sc_grid_rank(g, cq)). */
            int q0 = r / m->rpn * m->rpn, q1 = q0 + m->rpn < g->size ? q0 + m->rpn : g->size, in_msgs = 0;
            int cq[SC_NDIMS];
            double in_bytes = 0;
            sc_grid_coords(g, q0, cq);
            for (int q = q0; q < q1; q++) {
                double piece = (double)on[cq[SC_DIM_N]] * oh[cq[SC_DIM_H]] * ow[cq[SC_DIM_W]] *
                               ocf[cq[SC_DIM_C] * gf + cq[SC_DIM_F]];
                if (q != r)
                    in_bytes += 4 * piece, in_msgs += piece > 0;
                /* the next rank's coordinates: W fastest (base/grid.h) */
                for (int d = SC_NDIMS - 1; d >= 0 && ++cq[d] == g->extent[d]; d--)
                    cq[d] = 0;
            }
            comm = p2p_levels(m, in_msgs, in_bytes, msgs - in_msgs, bytes - in_bytes);
        } else {
            comm = p2p(m, msgs, bytes);
        }
        double t = comm + (msgs + 1) * m->c->task + (bytes + assembled) / m->c->stream;
        if (t > e.seconds)
            e.seconds = t;
        if (bytes > e.bytes)
            e.bytes = bytes;
    }
    return e;
}

/* The rank's block of layer l under g: samples per tile, channels and
 * rows x columns (those of a middle rank: the most halo). */
struct block {
    int nr, nt, tiles, cin, cout;
    struct sc_box ib, ob;
};
static struct block block_of(int B, int W, const struct sc_layer *l, const struct sc_grid *g)
{
    struct block b;
    struct sc_layout in = layout_in(l, g, B), out = layout_out(l, g, B);
    int gc = ext(g, SC_DIM_C), gf = ext(g, SC_DIM_F), reps[MAXREPS];
    b.nr = B / ext(g, SC_DIM_N);
    b.tiles = b.nr < W ? b.nr : W;
    b.nt = (b.nr + b.tiles - 1) / b.tiles;
    b.cin = l->in.c / sc_layout_channel_parts(&in);
    b.cout = l->mixes_channels ? l->out.c / gf : l->out.c / (gc * gf);
    int r = reps[representatives(g, 0, reps) > 1 ? 1 : 0];
    b.ib = sc_layout_box(&in, r);
    b.ob = sc_layout_box(&out, r);
    return b;
}

static int rows(struct sc_box b)
{
    return b.r1 - b.r0;
}
static int cols(struct sc_box b)
{
    return b.c1 - b.c0;
}

/* The input window of outputs [o0, o1) along w, clipped to the image:
 * its length and the padding before it. */
static void window(const struct sc_window *w, int o0, int o1, int *len, int *pad)
{
    int lo = sc_window_lo(w, o0), hi = sc_window_hi(w, o1 - 1);
    int clo = lo < 0 ? 0 : lo, chi = hi > w->n ? w->n : hi;
    *len = chi - clo;
    *pad = clo - lo;
}

/* The kernels one tile of layer l under g runs, each with the role in
 * which it runs (forward, backward data, backward filter), and the bytes
 * its tasks copy around them.  A spatially split layer runs region tasks
 * (src/layers/region.c, kernels/region.c): forward, the interior of
 * its output block and up to four boundary strips, each over its input
 * window; backward data, the same cut of its input block, over the
 * outputs touching each part (a convolution without padding, pooling with
 * the image's); backward filter, the whole output block. */
enum role { FWD, BWD_DATA, BWD_FILTER, BWD_FORWARD /* a forward pass run again in backward */ };
struct works {
    /* interior: the work of a spatially split layer's interior region,
     * which runs while the halo travels */
    int (*fn)(void *ctx, const struct sc_layer_work *w, enum role role, int interior);
    void *ctx;
    double copied[2]; /* bytes gathered and scattered by region tasks: forward, backward */
    double rows[2];   /* and the rows they copy them in (one memcpy each) */
};

static int region_work(struct works *ws, const struct sc_layer *l, const struct block *b, struct sc_box win, int pt,
                       int pl, struct sc_box out, enum role role, int interior)
{
    struct sc_layer_work w;
    l->ops->work(l, b->nt, b->cin, b->cout, rows(win), cols(win), rows(out), cols(out), &w);
    if (w.kind == SC_WORK_CONV)
        w.conv.ph = pt, w.conv.pw = pl;
    else if (w.kind == SC_WORK_POOL)
        w.pool.ph = pt, w.pool.pw = pl;
    ws->copied[role != FWD] += 4.0 * b->nt * (b->cin * (double)sc_box_area(win) + b->cout * (double)sc_box_area(out));
    ws->rows[role != FWD] += (double)b->nt * (b->cin * rows(win) + b->cout * rows(out));
    /* A max-pooling region learns which input won each output by running
     * its window forward again (kernels/region.c, pool_bwd). */
    int err = 0;
    if (role == BWD_DATA && w.kind == SC_WORK_POOL && w.pool.max)
        err = ws->fn(ws->ctx, &w, BWD_FORWARD, interior);
    return err ? err : ws->fn(ws->ctx, &w, role, interior);
}

static int cut(struct sc_box block, struct sc_box inner, struct sc_box parts[5])
{
    int n = 0;
    if (!sc_box_empty(inner))
        parts[n++] = inner;
    return n + sc_box_minus(block, inner, parts + n);
}

static int layer_works(const struct sc_layer *l, const struct sc_grid *g, const struct block *b, struct works *ws)
{
    int err = 0, conv = l->nparams != 0, first = first_layer(l);
    if (ext(g, SC_DIM_H) * ext(g, SC_DIM_W) == 1 || l->win_r.k <= 0) {
        struct sc_layer_work w;
        l->ops->work(l, b->nt, b->cin, b->cout, rows(b->ib), cols(b->ib), rows(b->ob), cols(b->ob), &w);
        if ((err = ws->fn(ws->ctx, &w, FWD, 0)) || (!first && (err = ws->fn(ws->ctx, &w, BWD_DATA, 0))) ||
            (conv && (err = ws->fn(ws->ctx, &w, BWD_FILTER, 0))))
            return err;
        return 0;
    }
    const struct sc_window *wr = &l->win_r, *wc = &l->win_c;
    struct sc_box inner, parts[5], win;
    int pt, pl;
    sc_window_interior(wr, b->ob.r0, b->ob.r1, b->ib.r0, b->ib.r1, &inner.r0, &inner.r1);
    sc_window_interior(wc, b->ob.c0, b->ob.c1, b->ib.c0, b->ib.c1, &inner.c0, &inner.c1);
    int n = cut(b->ob, inner, parts);
    for (int i = 0; i < n && !err; i++) {
        window(wr, parts[i].r0, parts[i].r1, &win.r1, &pt);
        window(wc, parts[i].c0, parts[i].c1, &win.c1, &pl);
        win.r0 = win.c0 = 0;
        err = region_work(ws, l, b, win, pt, pl, parts[i], FWD, i == 0 && !sc_box_empty(inner));
    }
    if (!first) {
        sc_window_interior_bwd(wr, b->ib.r0, b->ib.r1, b->ob.r0, b->ob.r1, &inner.r0, &inner.r1);
        sc_window_interior_bwd(wc, b->ib.c0, b->ib.c1, b->ob.c0, b->ob.c1, &inner.c0, &inner.c1);
        n = cut(b->ib, inner, parts);
        for (int i = 0; i < n && !err; i++) {
            struct sc_box o = sc_windows_outputs(wr, wc, parts[i]);
            if (sc_box_empty(o))
                continue;
            if (conv) { /* the whole window, unpadded */
                win = (struct sc_box){0, (rows(o) - 1) * wr->s + wr->k, 0, (cols(o) - 1) * wc->s + wc->k};
                pt = pl = 0;
            } else {
                window(wr, o.r0, o.r1, &win.r1, &pt);
                window(wc, o.c0, o.c1, &win.c1, &pl);
                win.r0 = win.c0 = 0;
            }
            err = region_work(ws, l, b, win, pt, pl, o, BWD_DATA, i == 0 && !sc_box_empty(inner));
        }
    }
    if (conv && !err) {
        window(wr, b->ob.r0, b->ob.r1, &win.r1, &pt);
        window(wc, b->ob.c0, b->ob.c1, &win.c1, &pl);
        win.r0 = win.c0 = 0;
        err = region_work(ws, l, b, win, pt, pl, b->ob, BWD_FILTER, 0);
    }
    return err;
}

struct timing {
    const struct model *m;
    const struct sc_layer *l;
    double fwd, bwd, fwd_in, bwd_in; /* all, and the interior's */
    double data, filter;             /* of bwd: the two gradients' kernels */
    int tasks, relu;
};

static int add_time(void *ctx, const struct sc_layer_work *w, enum role role, int interior)
{
    struct timing *t = ctx;
    char key[SC_CALIB_KEY_LEN];
    sc_calib_kernel_key(w, key, sizeof key);
    const struct sc_calib_kernel *k = sc_calib_find(t->m->c, key);
    if (!k)
        return sc_error(SC_ERR_PARSE, "the calibration has no time for %s's kernel (%s)", t->l->name, key);
    t->relu |= w->kind == SC_WORK_CONV && w->conv.relu;
    double time = role == BWD_DATA ? k->bwd_data : role == BWD_FILTER ? k->bwd_filter : k->fwd;
    *(role == FWD ? &t->fwd : &t->bwd) += time;
    if (role == BWD_DATA)
        t->data += time;
    if (role == BWD_FILTER)
        t->filter += time;
    if (interior)
        *(role == FWD ? &t->fwd_in : &t->bwd_in) += time;
    t->tasks++;
    return 0;
}

/* The time of one tile of layer l's forward and backward under g, of
 * their interior regions (fwd_in, bwd_in: 0 unless spatially split), the
 * share of backward its longer task takes (one_bwd: a convolution's data
 * and filter gradients are two tasks, 1 for a single one), and how many
 * tasks they take. */
static int kernel_times(const struct model *m, const struct sc_layer *l, const struct sc_grid *g, const struct block *b,
                        double *fwd, double *bwd, double *fwd_in, double *bwd_in, double *one_bwd, double *filter,
                        int *tasks)
{
    *fwd_in = *bwd_in = *filter = 0;
    *one_bwd = 1;
    double in = (double)b->cin * sc_box_area(b->ib), out = (double)b->cout * sc_box_area(b->ob);
    if (!l->ops->work) {
        /* Memory-bound layers: read the input, write the output, and in
         * backward about twice that (batch normalization a half more). */
        double bytes = 4.0 * b->nt * (in + out);
        if (l->group_sum_len)
            bytes *= 1.5;
        *fwd = bytes / m->c->stream;
        *bwd = l->dx_is_dy ? 0 : 2 * bytes / m->c->stream;
        *tasks = l->dx_is_dy ? 1 : 2;
        return 0;
    }
    struct timing t = {.m = m, .l = l};
    struct works ws = {add_time, &t, {0, 0}, {0, 0}};
    int err = layer_works(l, g, b, &ws);
    if (err)
        return err;
    double row = m->c->rowcopy > 0 ? m->c->rowcopy : 0;
    *fwd = t.fwd + ws.copied[0] / m->c->stream + ws.rows[0] * row;
    *bwd = t.bwd + ws.copied[1] / m->c->stream + ws.rows[1] * row;
    if (t.relu) /* ReLU's backward: read y and dy, write dy */
        *bwd += 12.0 * b->nt * out / m->c->stream;
    *fwd_in = t.fwd_in;
    *bwd_in = t.bwd_in;
    *filter = t.filter;
    if (t.data > 0 && t.filter > 0)
        *one_bwd = (t.data > t.filter ? t.data : t.filter) / (t.data + t.filter);
    *tasks = t.tasks;
    return 0;
}

/* Parameters of the rank's share of l under g. */
static double share_params(const struct sc_layer *l, const struct sc_grid *g)
{
    int gc = ext(g, SC_DIM_C), gf = ext(g, SC_DIM_F);
    if (!l->mixes_channels || l->ntensors < 2)
        return (double)l->nparams / (gc * gf);
    return (double)l->tensors[0].count / (gc * gf) + (double)l->tensors[1].count / gf;
}

/* A halo's rows above, beside and below own (rl), and its columns left,
 * beside and right (cl). */
static void halo_spans(struct sc_box need, struct sc_box own, int rl[3], int cl[3])
{
    rl[0] = overlap(need.r0, need.r1 - need.r0, need.r0, own.r0 - need.r0);
    rl[1] = overlap(need.r0, need.r1 - need.r0, own.r0, own.r1 - own.r0);
    rl[2] = overlap(need.r0, need.r1 - need.r0, own.r1, need.r1 - own.r1);
    cl[0] = overlap(need.c0, need.c1 - need.c0, need.c0, own.c0 - need.c0);
    cl[1] = overlap(need.c0, need.c1 - need.c0, own.c0, own.c1 - own.c0);
    cl[2] = overlap(need.c0, need.c1 - need.c0, own.c1, need.c1 - own.c1);
}

/* Two levels: the messages of a halo of rank r under g (need around its
 * block own, per_cell bytes per row x column) on each link.  Each piece
 * comes from the neighbour holding it (sc_grid_neighbor along H, W, and
 * both for a corner).  The messages are those the one-level model counts
 * (a side per border the halo crosses; the corners on their own only
 * when it crosses all four): with fewer, a corner travels with its side
 * along H. */
static double halo_levels(const struct model *m, const struct sc_grid *g, int r, struct sc_box need, struct sc_box own,
                          double per_cell)
{
    int rl[3], cl[3];
    halo_spans(need, own, rl, cl);
    int side[4] = {(need.r0 < own.r0), (need.r1 > own.r1), (need.c0 < own.c0), (need.c1 > own.c1)};
    int corners = side[0] && side[1] && side[2] && side[3], in_msgs = 0, out_msgs = 0;
    double in_bytes = 0, out_bytes = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++) {
            if (i == 1 && j == 1)
                continue;
            double area = (double)rl[i] * cl[j];
            int msg, q;
            if (i == 1) { /* left or right */
                msg = side[2 + j / 2];
                q = sc_grid_neighbor(g, r, SC_DIM_W, j - 1);
            } else { /* above or below, a corner with it unless on its own */
                msg = side[i / 2] && (j == 1 || corners);
                q = sc_grid_neighbor(g, r, SC_DIM_H, i - 1);
                if (j != 1 && corners && q >= 0)
                    q = sc_grid_neighbor(g, q, SC_DIM_W, j - 1);
            }
            if (same_node(m, r, q))
                in_msgs += msg, in_bytes += per_cell * area;
            else
                out_msgs += msg, out_bytes += per_cell * area;
        }
    return p2p_levels(m, in_msgs, in_bytes, out_msgs, out_bytes);
}

/* The rows (per sample and channel) of the pieces a halo of own needs
 * around it: the pack task copies each piece row by row (kernels/
 * region.c), so a piece a column or two wide costs a copy per row
 * (the calibration's rowcopy), not its bytes.  Traced, wide w2 on 2
 * ranks: its halos' packs took 2.1 ms an iteration against h2's 0.7. */
static double halo_rows(struct sc_box need, struct sc_box own)
{
    int rl[3], cl[3];
    halo_spans(need, own, rl, cl);
    double rows = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if ((i != 1 || j != 1) && rl[i] > 0 && cl[j] > 0)
                rows += rl[i];
    return rows;
}

/* On cores the workers fill (m->busy > 0), StarPU-MPI's thread shares a
 * core with its rank's worker and moves a message when the worker's task
 * ends (or its time slice, the calibration's busy time).  It moves it on
 * shared memory (Open MPI's copies) and over a wire alike: Open MPI's TCP
 * transport sends only while the thread is in MPI, so a message waits
 * there too (docs/planner-model.md, "Messages behind busy workers").  The rank that
 * comes later to an exchange finds the other's data and computes on while
 * its own message waits, so a message waits for the task its sender runs
 * next (task, stretched by the oversubscription in the model's times, its
 * own time here: with workers sharing cores another rank has the core
 * meanwhile). */
static double behind(const struct model *m, double task)
{
    return m->busy > 0 ? (task / m->oversub < m->busy ? task / m->oversub : m->busy) : 0;
}

/* Halo exchange of x (forward) and dy (backward) of a spatially split
 * windowed layer, for the busiest rank; what the interior's computation
 * does not hide.  fwd and bwd: the layer's compute; fwd_in and bwd_in:
 * its interior regions'. */
static void halo(const struct model *m, const struct sc_layer *l, const struct sc_grid *g, const struct block *b,
                 double fwd, double bwd, double fwd_in, double bwd_in, double *hf, double *hb)
{
    *hf = *hb = 0;
    if (ext(g, SC_DIM_H) * ext(g, SC_DIM_W) == 1 || l->win_r.k <= 0)
        return;
    int first = first_layer(l);
    struct sc_layout in = layout_in(l, g, m->B), out = layout_out(l, g, m->B);
    int reps[MAXREPS], nrep = representatives(g, m->rpn, reps);
    double row = m->c->rowcopy > 0 ? m->c->rowcopy * m->oversub : 0; /* a pack's row, on a shared core */
    for (int i = 0; i < nrep; i++) {
        int r = reps[i];
        struct sc_box ib = sc_layout_box(&in, r), ob = sc_layout_box(&out, r);
        struct sc_box need = sc_windows_inputs(&l->win_r, &l->win_c, ob);
        struct sc_box need_dy = sc_windows_outputs(&l->win_r, &l->win_c, ib);
        double ax = sc_box_area(need) - sc_box_area(sc_box_intersect(need, ib));
        double ady = sc_box_area(need_dy) - sc_box_area(sc_box_intersect(need_dy, ob));
        int nx = (need.r0 < ib.r0) + (need.r1 > ib.r1) + (need.c0 < ib.c0) + (need.c1 > ib.c1);
        int ndy = (need_dy.r0 < ob.r0) + (need_dy.r1 > ob.r1) + (need_dy.c0 < ob.c0) + (need_dy.c1 > ob.c1);
        if (nx == 4)
            nx = 8; /* the corners come from the diagonal neighbours */
        if (ndy == 4)
            ndy = 8;
        /* The interior (outputs whose windows stay in the block) runs
         * while the halo travels; behind busy workers (m->busy) the
         * message waits first, and the interior hides that wait (below). */
        int i0, i1, j0, j1;
        sc_window_interior(&l->win_r, ob.r0, ob.r1, ib.r0, ib.r1, &i0, &i1);
        sc_window_interior(&l->win_c, ob.c0, ob.c1, ib.c0, ib.c1, &j0, &j1);
        double inner = sc_box_area(ob) && m->busy <= 0
                           ? (double)(i1 > i0 ? i1 - i0 : 0) * (j1 > j0 ? j1 - j0 : 0) / sc_box_area(ob)
                           : 0;
        double bx = 4.0 * b->nr * b->cin * ax, bdy = 4.0 * b->nr * b->cout * ady;
        double cx = m->rpn > 0 ? halo_levels(m, g, r, need, ib, 4.0 * b->nr * b->cin) : p2p(m, nx, bx);
        double cdy = m->rpn > 0 ? halo_levels(m, g, r, need_dy, ob, 4.0 * b->nr * b->cout) : p2p(m, ndy, bdy);
        double px = (double)b->nr * b->cin * halo_rows(need, ib) * row;
        double pdy = (double)b->nr * b->cout * halo_rows(need_dy, ob) * row;
        double tf = cx + nx * m->c->task + 2 * bx / m->c->stream + px - inner * fwd;
        double tb = cdy + ndy * m->c->task + 2 * bdy / m->c->stream + pdy - inner * bwd;
        if (first) /* no dy halo */
            tb = 0;
        if (tf > *hf)
            *hf = tf;
        if (tb > *hb)
            *hb = tb;
    }
    /* Behind busy workers a halo message, like any exchange between
     * layers, waits for the task running where it goes (this layer's,
     * forward and backward), while the receiver runs its interior: only
     * the wait beyond the interior shows.  Traced (lenet h2, 2 ranks):
     * conv2's dy halo arrived 4.6 ms after its pack, the interior took 2.4
     * ms, and the boundary waited 2.2 ms; wide's conv2 and conv4, with
     * interiors longer than the wait, did not wait. */
    double wf = behind(m, fwd / b->tiles) - fwd_in, wb = behind(m, bwd / b->tiles) - bwd_in;
    if (*hf > 0 && wf > 0)
        *hf += wf;
    if (*hb > 0 && wb > 0)
        *hb += wb;
}

static int model_candidate(struct model *m, const struct sc_layer *l, const struct sc_grid *g, struct cand *c)
{
    memset(c, 0, sizeof *c);
    c->g = *g;
    struct block b = block_of(m->B, m->W, l, g);
    double kf = 0, kb = 0, kf_in = 0, kb_in = 0, one_bwd = 1, filter = 0;
    int err, tasks = 0;
    if ((err = kernel_times(m, l, g, &b, &kf, &kb, &kf_in, &kb_in, &one_bwd, &filter, &tasks)))
        return err;
    c->filter = filter * m->oversub;
    /* The input block each rank loads (src/net/step.c): a task of its
     * own, before the layer's, so no message of the layer waits for it */
    double load = first_layer(l) && m->c->load > 0 ? (double)b.nr * l->in.c * sc_box_area(b.ib) * m->c->load : 0;
    /* Ranks x workers beyond the cores share them; each tile's tasks pay
     * the runtime's overhead. */
    double ovh = (double)tasks * b.tiles / m->W * m->c->task;
    kf = kf * m->oversub + ovh / 2;
    kb = kb * m->oversub + ovh / 2;
    c->compute = kf + kb + load * m->oversub;
    c->task_f = kf / b.tiles;
    /* A message waits for one task, not a layer's whole backward
     * (behind): traced, wide c4 on 4 ranks sharing 2 cores, the dy
     * allgathers of conv2, conv3 and conv4 held the worker 7.5, 6.4 and
     * about 4 ms; the model gives 8.4, 4.3 and 6.3 ms, and gave 13.5, 6.7
     * and 10.6 with the whole backward as the task. */
    c->task_b = kb / b.tiles * one_bwd;
    double hf, hb;
    halo(m, l, g, &b, kf, kb, kf_in * m->oversub, kb_in * m->oversub, &hf, &hb);
    int hw = ext(g, SC_DIM_H) * ext(g, SC_DIM_W);
    if (hw > 1 && l->win_r.k > 0)
        c->rounds += first_layer(l) ? 1 : 2; /* x's halo forward, dy's backward (none on the first layer) */
    if (l->group_sum_len && hw > 1) {
        c->rounds += 2;
        /* Batch normalization split over rows or columns sums its
         * statistics over those ranks, forward and backward, before it
         * can go on (sc_group_sum: every member's vector to every other,
         * a task to send and one to add). */
        double stats = p2p(m, hw - 1, 8.0 * (double)l->group_sum_len * (hw - 1)) + 2 * m->c->task;
        hf += stats;
        hb += stats;
    }
    c->halo = hf + hb;
    int gc = ext(g, SC_DIM_C);
    double cf = 0, cb = 0;
    if (l->mixes_channels && gc > 1) {
        /* Partial sums over C, reduce-scattered into the output; dy
         * gathered back (src/net/setup.c, plan_exchanges). */
        struct sc_layout out = layout_out(l, g, m->B), part = out;
        part.cdims = SC_CDIMS_F;
        cf = exchange(m, &part, &out, 0).seconds + behind(m, c->task_f);
        cb = exchange(m, &out, &part, 1).seconds + behind(m, c->task_b);
        c->rounds += 2;
    }
    c->channels = cf + cb;
    c->fwd = kf + load * m->oversub + hf + cf;
    c->bwd = kb + hb + cb;
    c->msgs_b = hb + cb;
    double np = share_params(l, g);
    c->group = ext(g, SC_DIM_N) * ext(g, SC_DIM_H) * ext(g, SC_DIM_W);
    c->ar_bytes = 4 * np;
    if (np > 0 && c->group > 1) {
        c->ar_time = sc_calib_allreduce(m->c, c->group, c->ar_bytes);
        if (c->ar_time < 0)
            return sc_error(SC_ERR_PARSE, "the calibration has no allreduce over %d ranks (%s)", c->group,
                            "calibrate with as many ranks as you plan for");
    }
    /* SGD: read weight, gradient and momentum, write two. */
    c->update = 20.0 * np / m->c->stream;
    /* The output and its gradient per sample, partial sums too, and the
     * weights, momentum, gradient and one partial gradient per tile. */
    double act = 8.0 * b.nr * b.cout * sc_box_area(b.ob);
    if (l->mixes_channels && gc > 1)
        act *= 2;
    if (first_layer(l))
        act += 4.0 * b.nr * l->in.c * l->in.h * l->in.w;
    c->memory = act + 4.0 * np * (3 + b.tiles);
    return 0;
}

/* ---- the network as a graph ---- */

struct node {
    int layer;
    int ncand;
    struct cand *cand;
    double hide; /* backward compute before this layer's gradient is needed:
                  * what its allreduce can hide behind */
};

struct edge {
    int u, v;
    double *cost;      /* K_u x K_v: redistribution forward and back */
    double *fwd, *bwd; /* K_u x K_v each, in cost's allocation: its parts */
    int *rounds;       /* K_u x K_v: exchanges with messages (edge_cost) */
};

struct graph {
    int n;
    struct node *node;
    int *node_of; /* layer -> node, -1 for aliases */
    struct edge *edge;
    int nedges;
};

static int resolve(const struct sc_net *net, int s)
{
    while (s >= 0 && net->layers[s].alias)
        s = net->layers[s].src[0];
    return s;
}

static void graph_free(struct graph *G)
{
    for (int v = 0; G->node && v < G->n; v++)
        free(G->node[v].cand);
    for (int e = 0; G->edge && e < G->nedges; e++) {
        free(G->edge[e].cost);
        free(G->edge[e].rounds);
    }
    free(G->edge);
    free(G->node);
    free(G->node_of);
}

static int build_nodes(struct model *m, const struct sc_plan_opts *o, struct graph *G)
{
    const struct sc_net *net = m->net;
    G->node = calloc(net->nlayers, sizeof *G->node);
    G->node_of = malloc(net->nlayers * sizeof *G->node_of);
    if (!G->node || !G->node_of)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    struct sc_grid grids[512], whole;
    int ng = all_grids(m->P, grids, 512), err;
    int list = o->grid && strchr(o->grid, '=');
    if (list && (err = sc_parallel_list_check(net, o->grid)))
        return err;
    sc_grid_parse("", m->P, &whole);
    G->n = 0;
    for (int li = 0; li < net->nlayers; li++) {
        const struct sc_layer *l = &net->layers[li];
        G->node_of[li] = -1;
        if (l->alias)
            continue;
        struct node *v = &G->node[G->n];
        G->node_of[li] = G->n++;
        v->layer = li;
        if (!(v->cand = calloc(ng, sizeof *v->cand)))
            return sc_error(SC_ERR_NOMEM, "out of memory");
        /* A grid given for the layer: the cfg's parallel= (kept as it
         * is), else --parallel's, one grid or a per-layer list, applied as
         * choose_grid (src/net/setup.c) applies it: the first layer takes
         * f for c, whole-sample layers take n. */
        char listed[32];
        int from_cfg = l->parallel[0] != 0;
        const char *spec = from_cfg ? l->parallel : o->grid;
        if (!from_cfg && list)
            spec = sc_parallel_list_find(o->grid, l->name, listed, sizeof listed) ? listed : "";
        if (spec) {
            struct sc_grid g;
            if ((err = sc_grid_parse(spec, m->P, &g)))
                return sc_error(err, "%s: %s", l->name, sc_last_error());
            if (!from_cfg && first_layer(l) && l->mixes_channels && ext(&g, SC_DIM_C) > 1) {
                g.extent[SC_DIM_F] *= g.extent[SC_DIM_C];
                g.extent[SC_DIM_C] = 1;
            }
            if (!from_cfg && ((ext(&g, SC_DIM_C) * ext(&g, SC_DIM_F) > 1 && !l->ops->split_channels) ||
                              (ext(&g, SC_DIM_H) * ext(&g, SC_DIM_W) > 1 && l->whole_sample)))
                g = whole;
            if (!grid_valid(l, &g, m->B))
                return sc_error(SC_ERR_ARG, "%s cannot run under %s (batch %d)", l->name, spec, m->B);
            if ((err = model_candidate(m, l, &g, &v->cand[0])))
                return err;
            v->ncand = 1;
            continue;
        }
        for (int k = 0; k < ng; k++)
            if (grid_valid(l, &grids[k], m->B)) {
                if ((err = model_candidate(m, l, &grids[k], &v->cand[v->ncand])))
                    return err;
                v->ncand++;
            }
        if (!v->ncand)
            return sc_error(SC_ERR_ARG, "%s: no grid of %d ranks splits it (batch %d)", l->name, m->P, m->B);
    }
    return 0;
}

/* The cost of an edge u -> v: the redistribution of u's output into v's
 * input and of v's input error back; a [shortcut] must read its inputs as
 * they are (infinite otherwise). */
static double edge_cost(const struct model *m, const struct sc_layer *lu, const struct cand *a,
                        const struct sc_layer *lv, const struct cand *b, double *fwd, double *bwd, int *rounds)
{
    struct sc_layout out = layout_out(lu, &a->g, m->B), in = layout_in(lv, &b->g, m->B);
    *fwd = *bwd = 0;
    if (sc_layout_equal(&out, &in))
        return 0;
    if (lv->dx_is_dy)
        return INFINITY;
    /* Messages wait behind the task their sender runs next: forward the
     * consumer's forward, backward its backward (behind).  Not after a
     * channel collective of u's: its reduce-scatter (forward) has just
     * brought the ranks together, so no rank computes on while its
     * message waits, and backward u's dy allgather follows at once and
     * waits for both.  Traced, wide c2f2 on 4 ranks sharing 2 cores:
     * conv3 -> conv4 waited 0.1 ms forward and none backward (the model
     * had 12.8 ms), pool1 -> conv3 2.7 and 1.5 ms. */
    struct exch f = exchange(m, &out, &in, 1),
                k = exchange(m, &in, &out, !(lv->mixes_channels && ext(&b->g, SC_DIM_F) > 1));
    int synced = lu->mixes_channels && ext(&a->g, SC_DIM_C) > 1;
    *fwd = f.seconds + (f.bytes > 0 && !synced ? behind(m, b->task_f) : 0);
    *bwd = k.seconds + (k.bytes > 0 && !synced ? behind(m, b->task_b) : 0);
    if (rounds) /* exchanges with messages, not local copies */
        *rounds += (f.bytes > 0) + (k.bytes > 0);
    return *fwd + *bwd;
}

/* Whether edges e and f cost the same: what edge_cost reads of their
 * layers (u's output shape, v's input shape and kind) and the same
 * candidate grids and task times at each end (a ResNet's blocks repeat
 * their edges). */
static int same_edge(const struct model *m, const struct graph *G, const struct edge *e, const struct edge *f)
{
    const struct sc_layer *ue = &m->net->layers[G->node[e->u].layer], *uf = &m->net->layers[G->node[f->u].layer];
    const struct sc_layer *ve = &m->net->layers[G->node[e->v].layer], *vf = &m->net->layers[G->node[f->v].layer];
    if (memcmp(&ue->out, &uf->out, sizeof ue->out) || memcmp(&ve->in, &vf->in, sizeof ve->in) ||
        ue->mixes_channels != uf->mixes_channels || ve->mixes_channels != vf->mixes_channels ||
        ve->dx_is_dy != vf->dx_is_dy)
        return 0;
    const struct node *ends[2][2] = {{&G->node[e->u], &G->node[f->u]}, {&G->node[e->v], &G->node[f->v]}};
    for (int k = 0; k < 2; k++) {
        const struct node *a = ends[k][0], *b = ends[k][1];
        if (a->ncand != b->ncand)
            return 0;
        for (int i = 0; i < a->ncand; i++)
            if (memcmp(a->cand[i].g.extent, b->cand[i].g.extent, sizeof a->cand[i].g.extent) ||
                a->cand[i].task_f != b->cand[i].task_f || a->cand[i].task_b != b->cand[i].task_b)
                return 0;
    }
    return 1;
}

/* Every edge's cost matrix, once: the searches under different memory
 * prices and hiding budgets reuse them, and an edge like one before it
 * copies its matrix. */
static int build_edges(const struct model *m, struct graph *G)
{
    const struct sc_net *net = m->net;
    if (!(G->edge = calloc(2 * (size_t)G->n, sizeof *G->edge)))
        return sc_error(SC_ERR_NOMEM, "out of memory");
    for (int v = 0; v < G->n; v++) {
        const struct sc_layer *lv = &net->layers[G->node[v].layer];
        for (int k = 0; k < lv->nsrc; k++) {
            int s = resolve(net, lv->src[k]);
            if (s < 0)
                continue;
            int u = G->node_of[s];
            struct node *nu = &G->node[u], *nv = &G->node[v];
            struct edge *e = &G->edge[G->nedges++];
            e->u = u, e->v = v;
            size_t K = (size_t)nu->ncand * nv->ncand;
            if (!(e->cost = malloc(3 * sizeof(double) * K)) || !(e->rounds = calloc(K, sizeof(int))))
                return sc_error(SC_ERR_NOMEM, "out of memory");
            e->fwd = e->cost + K, e->bwd = e->cost + 2 * K;
            int like = 0;
            while (like < G->nedges - 1 && !same_edge(m, G, &G->edge[like], e))
                like++;
            if (like < G->nedges - 1) {
                memcpy(e->cost, G->edge[like].cost, 3 * sizeof(double) * K);
                memcpy(e->rounds, G->edge[like].rounds, sizeof(int) * K);
                continue;
            }
            for (int a = 0; a < nu->ncand; a++)
                for (int b = 0; b < nv->ncand; b++) {
                    size_t k = (size_t)a * nv->ncand + b;
                    e->cost[k] = edge_cost(m, &net->layers[nu->layer], &nu->cand[a], lv, &nv->cand[b], &e->fwd[k],
                                           &e->bwd[k], &e->rounds[k]);
                }
        }
    }
    return 0;
}

/* ---- the iteration's timeline under a gradient-communication policy ---- */

enum policy { POL_LAYER, POL_BUCKET, POL_END };
static const char *policy_name[] = {"layer", "bucket:25", "end"};

/* A collective of bytes over group ranks, issued at *t (its gradients
 * ready): it adds a to the channel's work (*chan: when the channel has
 * done all it was given; when each collective ends, share_wire says);
 * task is a backward task of the layer that issues it.  While the
 * backward pass goes on (during):
 * - where messages are copies in memory and every core has a worker
 *   (m->copying), the collective's whole time is the cores' (copying,
 *   reducing, handing messages between threads), so it delays the compute
 *   by all of it: on this machine's shared memory, a gradient allreduce
 *   issued during backward measured slower than one at the end
 *   (bench/plan-validate, docs/results.md); with more workers than cores it also
 *   waits once behind a backward task of its layer, its own time
 *   (behind): measured on 4 ranks sharing 2 cores, per-layer collectives
 *   cost 0.6-2.5 ms each beyond their calibrated time (lenet, wide,
 *   mesh128, resnet50), about one such task (the cause is not traced
 *   further); on a core each they did not;
 * - else, with more workers than cores (m->steal), the part of it that
 *   needs a core (its tasks, about 4 per step of the ring) takes turns with
 *   the workers there, and delays the compute by as much times the
 *   oversubscription. */
static void collective(const struct model *m, double *t, double *chan, int group, double bytes, double a, int during,
                       double task)
{
    *chan = (*chan > *t ? *chan : *t) + a;
    if (!during)
        return;
    if (m->copying) {
        *t += a + (m->steal ? behind(m, task) : 0);
        *chan = *t;
    } else if (m->steal) {
        double cpu = 4.0 * (group - 1) * m->c->task + bytes * 3 / m->c->stream;
        *t += (cpu < a ? cpu : a) * m->oversub;
    }
}

/* The wire shared by flows (collectives, a layer's messages) that arrive
 * at arr[i] (in any order) and need work[i] seconds of it alone: it
 * serves every flow in flight at once, each at 1/n of its speed
 * (processor sharing, not first come first served, since issue 18's
 * window lets a later collective pass: traced at 1 Gbit/s on 2 ranks,
 * mesh128's allreduces of conv13-18 travel at once, each 22-80 ms from
 * its first transfer to its last where alone it takes 5.4-11.1, and
 * conv1's, issued after them, takes 0.2 ms).  Sets done[i]. */
static void share_wire(int n, const double *arr, const double *work, double *done)
{
    int order[n > 0 ? n : 1], flying[n > 0 ? n : 1], nfly = 0, next = 0;
    double left[n > 0 ? n : 1], now = 0;
    for (int i = 0; i < n; i++) { /* by arrival; they come nearly sorted */
        int j = i;
        for (; j > 0 && arr[order[j - 1]] > arr[i]; j--)
            order[j] = order[j - 1];
        order[j] = i;
    }
    while (next < n || nfly > 0) {
        if (!nfly && arr[order[next]] > now)
            now = arr[order[next]];
        while (next < n && arr[order[next]] <= now) {
            int i = order[next++];
            left[i] = work[i];
            flying[nfly++] = i;
        }
        double least = INFINITY;
        for (int j = 0; j < nfly; j++)
            least = left[flying[j]] < least ? left[flying[j]] : least;
        double step = least * nfly; /* until the least one ends, or the next arrives */
        if (next < n && arr[order[next]] - now < step)
            step = arr[order[next]] - now;
        double each = step / nfly;
        now += step;
        int still = 0;
        for (int j = 0; j < nfly; j++) {
            int i = flying[j];
            if ((left[i] -= each) <= 1e-9 * work[i])
                done[i] = now;
            else
                flying[still++] = i;
        }
        nfly = still;
    }
}

/* A layer --fc-replicate can replicate, as the runtime picks them
 * (src/net/setup.c): one with a weight gradient task of its own
 * ([connected]). */
static int replicable(const struct sc_layer *l)
{
    return l->ops->param_grad && l->nparams > 0;
}

/* The layers --fc-replicate replicates: the first m->replicate
 * replicable ones.  Sets rep[v] for each node; returns how many. */
static int replicated(const struct model *m, const struct graph *G, int *rep)
{
    int left = m->replicate;
    for (int v = 0; v < G->n; v++) {
        rep[v] = left > 0 && replicable(&m->net->layers[G->node[v].layer]);
        left -= rep[v];
    }
    return m->replicate - left;
}

/* A replicated layer's collectives over group ranks instead of its
 * gradient's allreduce: the allgathers of the whole batch's inputs and
 * errors (*bytes in all).  An allgather moves what the second half of a
 * ring allreduce of the same bytes moves: half the calibrated
 * allreduce, each. */
static double gather_time(const struct model *m, const struct sc_layer *l, int group, double *bytes)
{
    double x = 4.0 * m->B * l->in.c * l->in.h * l->in.w, dy = 4.0 * m->B * l->out.c * l->out.h * l->out.w;
    *bytes = x + dy;
    return 0.5 * (sc_calib_allreduce(m->c, group, x) + sc_calib_allreduce(m->c, group, dy));
}

/* Forward, then backward layer by layer from the last (rounds: the
 * redistributions between layers that send messages); each layer's
 * gradient allreduce queues on one channel from the moment its gradient
 * is ready (layer), fills 25 MB buckets in backward order (bucket), or
 * waits for the whole backward pass (end); the update follows each.
 * The iteration is not a barrier: the next one's forward runs each layer
 * as soon as that layer is updated, over the tail of this one's
 * collectives, so an iteration takes the longest of its compute chain,
 * the wire's work, and for every layer, the time its collective ends less
 * the forward before that layer. */
static double timeline(const struct model *m, const struct graph *G, const int *choice, const double *efwd,
                       const double *ebwd, int rounds, enum policy pol)
{
    double t = 0, chain = 0, wire = 0, fstart[G->n];
    for (int v = 0; v < G->n; v++) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        fstart[v] = t;
        t += c->fwd + efwd[v];
        chain += c->fwd + efwd[v] + c->bwd + ebwd[v];
        rounds += c->rounds;
    }
    /* The flows on the wire (2 per node at most, and the last bucket),
     * and which flow carries each node's gradient (-1: none). */
    double arr[2 * G->n + 1], work[2 * G->n + 1], done[2 * G->n + 1];
    int flow_of[G->n], bucket[G->n], nflows = 0, nbucket = 0;
    double chan = 0, upd = 0, pending = 0;
    int group = 0, rep[G->n];
    replicated(m, G, rep);
#define FLOW(at, w) (arr[nflows] = (at), work[nflows] = (w), nflows++)
/* The collective of the bucket's pending bytes over group, issued now:
 * one flow on the wire for every layer in the bucket. */
#define ISSUE_BUCKET(during, task)                                                                                     \
    do {                                                                                                               \
        double a_ = sc_calib_allreduce(m->c, group, pending);                                                          \
        int f_ = FLOW(t, a_);                                                                                          \
        for (int i = 0; i < nbucket; i++)                                                                              \
            flow_of[bucket[i]] = f_;                                                                                   \
        nbucket = 0;                                                                                                   \
        collective(m, &t, &chan, group, pending, a_, during, task);                                                    \
        wire += a_;                                                                                                    \
        pending = 0;                                                                                                   \
    } while (0)
    for (int v = G->n - 1; v >= 0; v--) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        flow_of[v] = -1;
        /* On one wire, the layer's messages and the collectives still in
         * flight share it: each goes at half speed while both run, so
         * both end later by the shorter of the two (measured at 1 Gbit/s
         * on 4 ranks: resnet50's n2c2 and n2f2 took 1.33 and 1.35 times
         * the prediction that let the collectives' traffic overlap the
         * channel collectives'). */
        double msgs = c->msgs_b + ebwd[v], rest = chan - (t + c->bwd - c->msgs_b);
        if (m->one_link && msgs > 0) {
            FLOW(t + c->bwd - c->msgs_b, msgs);
            if (rest > 0) {
                double d = rest < msgs ? rest : msgs;
                t += d;
                chan += d;
            }
        }
        t += c->bwd + ebwd[v];
        if (c->ar_bytes <= 0)
            continue;
        upd += c->update;
        if (c->group <= 1)
            continue;
        if (rep[v]) {
            /* Both allgathers priced where the errors' starts: the inputs'
             * one, issued in forward, has only the layers after it to hide
             * behind, few after a network's [connected] layers.  Then
             * every rank computes the other ranks' shares of the weight
             * gradient too, beside the next iteration's forward like the
             * update. */
            double bytes, a = gather_time(m, &m->net->layers[G->node[v].layer], c->group, &bytes);
            flow_of[v] = FLOW(t, a);
            collective(m, &t, &chan, c->group, bytes, a, v > 0, c->task_b);
            wire += a;
            upd += (c->group - 1) * c->filter;
            continue;
        }
        if (pol == POL_LAYER) {
            flow_of[v] = FLOW(t, c->ar_time);
            collective(m, &t, &chan, c->group, c->ar_bytes, c->ar_time, v > 0, c->task_b);
            wire += c->ar_time;
            continue;
        }
        /* bucket, end: one collective per group size and bucket.  Where
         * the group changes the runtime cuts a bucket under end too, and
         * starts its collective as soon as its gradients are ready
         * (src/net/step.c): during backward, as a bucket's. */
        if (group && group != c->group)
            ISSUE_BUCKET(v > 0, c->task_b);
        group = c->group;
        pending += c->ar_bytes;
        bucket[nbucket++] = v;
        if (pol == POL_BUCKET && pending >= 25e6) {
            ISSUE_BUCKET(v > 0, c->task_b);
            group = 0;
        }
    }
    if (group && pending > 0)
        ISSUE_BUCKET(0, 0);
#undef FLOW
#undef ISSUE_BUCKET
    share_wire(nflows, arr, work, done);
    double first = t; /* the next iteration's first forward task starts */
    for (int v = 0; v < G->n; v++)
        if (flow_of[v] >= 0 && done[flow_of[v]] - fstart[v] > first)
            first = done[flow_of[v]] - fstart[v];
    double time = first + upd;
    if (wire > time)
        time = wire;
    /* Steady state on one wire (m->one_link) with the gradients' collectives
     * issued during backward (layer, bucket; not end, whose one collective
     * runs alone after backward): iteration after iteration they keep the
     * wire busy wire seconds of every T, the next forward running over the
     * tail of the last.  A round of messages between the layers' ranks (a
     * halo, batch normalization's statistics, a channel collective, a
     * redistribution between layers: rounds, forward and backward) that
     * finds collective bytes queued in the link waits behind them, FIFO:
     * what the other P - 1 ranks have in flight, about one ring segment
     * each (512 KiB, the default; the ring keeps at most 2 per step in
     * flight, tasks/tasks.h), at the wire's time per byte (p2p_beta / P:
     * the calibration's p2p has every rank sending at once).  A round
     * finds the wire busy with probability wire / T and then waits half of
     * that queue on average, so the chain of compute and messages takes
     * chain + rounds x wait / 2 x wire / T = T; solved,
     * T = (chain + sqrt(chain^2 + 2 rounds wait wire)) / 2.  Measured at
     * 1 Gbit/s: a small message sent during an 8 MiB allreduce waited
     * 4.5 ms more on 2 ranks and 13.3 ms on 4 (this gives 4.2 and 12.6);
     * mesh128's spatial splits took 1.19-1.35 times the one-iteration
     * timeline, which lets those waits hide behind the wire. */
    if (m->one_link && pol != POL_END && wire > 0 && rounds > 0) {
        const double segment = 512 * 1024;
        double wait = (m->P - 1) * segment * m->c->p2p_beta / m->P, c = chain + upd;
        double steady = 0.5 * (c + sqrt(c * c + 2 * rounds * wait * wire));
        if (steady > time)
            time = steady;
    }
    return time;
}

/* ---- search ---- */

/* What each node's allreduce can hide behind: the backward compute of
 * the layers before it, under the assignment choice. */
static void set_hide(const struct model *m, struct graph *G, const int *choice)
{
    double acc = 0;
    for (int v = 0; v < G->n; v++) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        G->node[v].hide = acc;
        if (!m->copying) /* on one wire, the messages cannot hide a collective */
            acc += c->bwd - (m->one_link ? c->msgs_b : 0);
    }
}

static int solve(struct graph *G, double lambda, int *choice, double *chain_time)
{
    struct sc_spgraph *sg;
    int err = sc_spgraph_create(G->n, &sg);
    if (err)
        return err;
    for (int v = 0; v < G->n && !err; v++) {
        struct node *nd = &G->node[v];
        double cost[nd->ncand];
        for (int k = 0; k < nd->ncand; k++) {
            const struct cand *c = &nd->cand[k];
            double exposed = c->ar_time - nd->hide;
            cost[k] = c->fwd + c->bwd + c->update + (exposed > 0 ? exposed : 0) + lambda * c->memory;
        }
        err = sc_spgraph_set_node(sg, v, nd->ncand, cost);
    }
    for (int e = 0; e < G->nedges && !err; e++)
        err = sc_spgraph_add_edge(sg, G->edge[e].u, G->edge[e].v, G->edge[e].cost);
    double best;
    if (!err)
        err = sc_sp_solve(sg, &best, choice);
    if (!err && !isfinite(best))
        err = sc_error(SC_ERR_ARG, "no assignment of grids fits the network's residual blocks");
    if (!err && chain_time) {
        int tmp[G->n];
        double ct;
        *chain_time = sc_chain_solve(sg, &ct, tmp) ? -1 : ct;
        if (*chain_time >= 0 && fabs(ct - best) > 1e-9 * (1 + fabs(best)))
            err = sc_error(SC_ERR_RUNTIME, "planner: chain shortest path %.9g differs from elimination %.9g", ct, best);
    }
    sc_spgraph_free(sg);
    return err;
}

static double memory_of(const struct graph *G, const int *choice)
{
    double mem = 0;
    for (int v = 0; v < G->n; v++)
        mem += G->node[v].cand[choice[v]].memory;
    return mem;
}

/* Where edge e's matrices hold the pair of candidates choice takes. */
static size_t edge_at(const struct graph *G, const struct edge *e, const int *choice)
{
    return (size_t)choice[e->u] * G->node[e->v].ncand + choice[e->v];
}

/* The redistribution into each node under choice, forward and back; how
 * many of them send messages. */
static int edges_of(const struct graph *G, const int *choice, double *efwd, double *ebwd)
{
    int rounds = 0;
    for (int v = 0; v < G->n; v++)
        efwd[v] = ebwd[v] = 0;
    for (int i = 0; i < G->nedges; i++) {
        const struct edge *e = &G->edge[i];
        size_t k = edge_at(G, e, choice);
        efwd[e->v] += e->fwd[k];
        ebwd[e->v] += e->bwd[k];
        rounds += e->rounds[k];
    }
    return rounds;
}

/* The predicted time of an assignment: its timeline under the best
 * policy (or o's), which goes to *pol (-1: o's is not modelled).  On a
 * tie the simpler policy wins: end before bucket:25 (the same while the
 * gradients fill one bucket) before layer. */
static double predict(const struct model *m, const struct graph *G, const int *choice, const struct sc_plan_opts *o,
                      int *pol)
{
    double efwd[G->n], ebwd[G->n], best = INFINITY;
    int rounds = edges_of(G, choice, efwd, ebwd);
    *pol = -1;
    for (int k = POL_END; k >= POL_LAYER; k--) {
        if (o->grad_comm && strcmp(o->grad_comm, policy_name[k]))
            continue;
        double t = timeline(m, G, choice, efwd, ebwd, rounds, k);
        if (*pol < 0 || t < best)
            best = t, *pol = k;
    }
    return best;
}

static int fill_plan(const struct model *m, const struct graph *G, const int *choice, const struct sc_plan_opts *o,
                     double chain_time, struct sc_plan *p)
{
    const struct sc_net *net = m->net;
    p->nlayers = net->nlayers;
    p->grid = calloc(net->nlayers, sizeof *p->grid);
    p->layer = calloc(net->nlayers, sizeof *p->layer);
    if (!p->grid || !p->layer)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    double efwd[G->n], ebwd[G->n];
    int rep[G->n];
    edges_of(G, choice, efwd, ebwd);
    p->fc_replicate = replicated(m, G, rep);
    for (int v = 0; v < G->n; v++) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        struct sc_plan_cost *pc = &p->layer[G->node[v].layer];
        sc_grid_format(&c->g, p->grid[G->node[v].layer], sizeof p->grid[0]);
        double bytes,
            ar = rep[v] && c->group > 1 ? gather_time(m, &net->layers[G->node[v].layer], c->group, &bytes) : c->ar_time;
        *pc = (struct sc_plan_cost){c->compute, c->halo, c->channels, efwd[v] + ebwd[v], ar, c->update, c->memory};
        p->total.compute += pc->compute;
        p->total.halo += pc->halo;
        p->total.channels += pc->channels;
        p->total.redistribute += pc->redistribute;
        p->total.allreduce += pc->allreduce;
        p->total.update += pc->update;
        p->total.memory += pc->memory;
    }
    int pol;
    p->time = predict(m, G, choice, o, &pol);
    if (pol < 0)
        return sc_error(SC_ERR_ARG, "the planner models --grad-comm layer, bucket:25 and end, not %s", o->grad_comm);
    snprintf(p->grad_comm, sizeof p->grad_comm, "%s", policy_name[pol]);
    p->chain_time = chain_time;
    return 0;
}

/* Whether every edge under choice can be costed (a [shortcut] reads its
 * inputs as they are: edge_cost's infinity). */
static int feasible(const struct graph *G, const int *choice)
{
    for (int i = 0; i < G->nedges; i++)
        if (!isfinite(G->edge[i].cost[edge_at(G, &G->edge[i], choice)]))
            return 0;
    return 1;
}

/* The cut points of the graph, into cut (G->n entries at most), and how
 * many: each b where every edge that crosses from the nodes before b to
 * the rest leaves node b - 1 (the ends of residual blocks; every node of
 * a chain), the last, G->n, included. */
static int cut_points(const struct graph *G, int *cut)
{
    int nb = 0;
    for (int b = 1; b <= G->n; b++) {
        int other = 0;
        for (int i = 0; i < G->nedges; i++)
            other += (G->edge[i].u < b) != (G->edge[i].v < b) && G->edge[i].u != b - 1;
        if (!other)
            cut[nb++] = b;
    }
    return nb;
}

/* The elimination is exact for the sum of each layer's and each edge's
 * cost, with each gradient collective hidden behind the backward compute
 * before it; the timeline (predict) also queues the collectives on one
 * channel, lets a wire's messages share it with them, and picks the
 * policy.  Where the two disagree, the sum can prefer many collectives
 * that each hide alone but not together (measured: resnet50 on 4 ranks at
 * 1 Gbit/s, the sum's choice 3.87 s an iteration, the timeline's 3.40).
 * So the solution is improved on the timeline itself by moves that set
 * one layer's candidate, and also every earlier layer's, or every later
 * one's up to a cut point of the graph (the end of a residual block, or
 * the last layer), to the same grid where they have it, until no move
 * gains: the first move that gains is taken (from the elimination's
 * choice), or with steepest, the one that gains most in each pass (from
 * a uniform plan, where the first small gain would close the way to a
 * larger one: resnet50 at batch 8192 on 1024 Lassen ranks, below).
 * Without the memory for its tables the start stands. */
static void refine(const struct model *m, const struct graph *G, const struct sc_plan_opts *o, const int *cut, int nb,
                   int *choice, int steepest)
{
    /* Every distinct grid among the candidates gets an id; at[w * ng + id]
     * is node w's candidate of that grid, or -1. */
    int nall = 0;
    for (int v = 0; v < G->n; v++)
        nall += G->node[v].ncand;
    int *id = malloc(sizeof(int) * nall), *at = NULL, ng = 0;
    const int **grid = malloc(sizeof(int *) * nall);
    for (int v = 0, i = 0; id && grid && v < G->n; v++)
        for (int k = 0; k < G->node[v].ncand; k++, i++) {
            const int *e = G->node[v].cand[k].g.extent;
            int g = 0;
            while (g < ng && memcmp(grid[g], e, sizeof G->node[v].cand[k].g.extent))
                g++;
            if (g == ng)
                grid[ng++] = e;
            id[i] = g;
        }
    if (id && grid && (at = malloc(sizeof(int) * (size_t)G->n * ng))) {
        for (size_t i = 0; i < (size_t)G->n * ng; i++)
            at[i] = -1;
        for (int v = 0, i = 0; v < G->n; v++)
            for (int k = 0; k < G->node[v].ncand; k++, i++)
                at[(size_t)v * ng + id[i]] = k;
    }
    int pol, trial[G->n];
    double best = predict(m, G, choice, o, &pol);
    int fits = !(o->mem_limit > 0) || memory_of(G, choice) <= o->mem_limit;
    int step[G->n];
    for (int pass = 0; at && pass < (steepest ? 64 : 8); pass++) {
        int gained = 0;
        double step_best = best;
        for (int v = 0, i = 0; v < G->n; i += G->node[v].ncand, v++)
            for (int k = 0; k < G->node[v].ncand; k++)
                for (int move = 0; move < 2 + nb; move++) {
                    /* v alone, v and every earlier layer, v and every
                     * later one up to a cut point (the last one: all) */
                    if (move >= 2 && cut[move - 2] <= v + 1)
                        continue;
                    int lo = move >= 2 ? v + 1 : 0, hi = move == 0 ? 0 : move == 1 ? v : cut[move - 2];
                    memcpy(trial, choice, sizeof trial);
                    trial[v] = k;
                    for (int w = lo; w < hi; w++)
                        if (at[(size_t)w * ng + id[i + k]] >= 0)
                            trial[w] = at[(size_t)w * ng + id[i + k]];
                    if (!memcmp(trial, choice, sizeof trial) || !feasible(G, trial) ||
                        (fits && o->mem_limit > 0 && memory_of(G, trial) > o->mem_limit))
                        continue;
                    double t = predict(m, G, trial, o, &pol);
                    if (t < (steepest ? step_best : best) * (1 - 1e-9)) {
                        if (steepest) {
                            step_best = t;
                            memcpy(step, trial, sizeof trial);
                        } else {
                            best = t;
                            memcpy(choice, trial, sizeof trial);
                        }
                        gained = 1;
                    }
                }
        if (!gained)
            break;
        if (steepest) {
            best = step_best;
            memcpy(choice, step, sizeof step);
        }
    }
    free(at);
    free(grid);
    free(id);
}

/* The best plan that gives every layer one grid (each layer that cannot
 * take it sample parallel) within the memory limit, into uni, and its
 * time; INFINITY where none fits. */
static double best_uniform(const struct model *m, const struct graph *G, const struct sc_plan_opts *o, int *uni)
{
    struct sc_grid grids[512], whole;
    int ng = all_grids(m->P, grids, 512), pol, alt[G->n];
    sc_grid_parse("", m->P, &whole);
    double best_uni = INFINITY;
    for (int k = 0; k < ng; k++) {
        int ok = 1;
        for (int v = 0; v < G->n && ok; v++) {
            const struct node *nd = &G->node[v];
            int pick = -1;
            for (int j = 0; j < nd->ncand && pick < 0; j++)
                if (!memcmp(nd->cand[j].g.extent, grids[k].extent, sizeof whole.extent))
                    pick = j;
            for (int j = 0; j < nd->ncand && pick < 0; j++)
                if (!memcmp(nd->cand[j].g.extent, whole.extent, sizeof whole.extent))
                    pick = j;
            ok = pick >= 0;
            alt[v] = pick;
        }
        if (!ok || (o->mem_limit > 0 && memory_of(G, alt) > o->mem_limit))
            continue;
        double t = predict(m, G, alt, o, &pol);
        if (t < best_uni) {
            best_uni = t;
            memcpy(uni, alt, sizeof alt);
        }
    }
    return best_uni;
}

/* The search's objective is additive (each allreduce less what it can
 * hide behind), the reported time a timeline (allreduces queued on one
 * channel, merged into buckets).  Where they disagree, the search's
 * choice could predict slower than a plain uniform grid.  So the best
 * uniform plan (uni, best_uni: best_uniform's) replaces the search's
 * choice unless that choice is faster by more than o->mix_margin. */
static void keep_best(const struct model *m, const struct graph *G, const struct sc_plan_opts *o, const int *uni,
                      double best_uni, int *choice)
{
    int pol;
    if (isfinite(best_uni) && best_uni <= predict(m, G, choice, o, &pol) * (1 + o->mix_margin))
        memcpy(choice, uni, sizeof(int) * G->n);
}

/* --fc-replicate as a search's option: n<P> everywhere with the first F
 * [connected] layers replicated, for each F, against the plan found;
 * taken (choice, m->replicate) if it beats it by more than the mix margin,
 * as a mix must beat the uniform plans (a change of the runtime's
 * schedule the measurements priced less surely than plain sample
 * parallelism).  Memory is not priced here: not under --mem-limit. */
static void try_replication(struct model *m, const struct graph *G, const struct sc_plan_opts *o, int *choice)
{
    int sample[G->n], nfc = 0, pol;
    for (int v = 0; v < G->n; v++) {
        const struct node *nd = &G->node[v];
        const struct sc_layer *l = &m->net->layers[nd->layer];
        sample[v] = -1;
        for (int k = 0; k < nd->ncand && sample[v] < 0; k++)
            if (ext(&nd->cand[k].g, SC_DIM_N) == m->P)
                sample[v] = k;
        if (sample[v] < 0)
            return;
        nfc += replicable(l);
    }
    if (!nfc || !feasible(G, sample))
        return;
    double best = predict(m, G, choice, o, &pol) * (1 - o->mix_margin);
    int keep = 0;
    for (int f = 1; f <= nfc; f++) {
        m->replicate = f;
        double t = predict(m, G, sample, o, &pol);
        if (pol >= 0 && t < best)
            best = t, keep = f;
    }
    m->replicate = keep;
    if (keep)
        memcpy(choice, sample, sizeof sample);
}

int sc_plan_make(const struct sc_net *net, const struct sc_calib *c, const struct sc_plan_opts *o, struct sc_plan **out)
{
    *out = NULL;
    if (o->ranks < 1 || o->ranks > MAXP)
        return sc_error(SC_ERR_ARG, "ranks %d: must be 1 to %d", o->ranks, MAXP);
    if (o->batch < 1)
        return sc_error(SC_ERR_ARG, "batch %d: must be at least 1", o->batch);
    char sample[16];
    struct sc_plan_opts with_sample;
    if (o->fc_replicate > 0 && o->ranks > 1) {
        /* The runtime replicates under sample parallelism only. */
        struct sc_grid g;
        snprintf(sample, sizeof sample, "n%d", o->ranks);
        if (o->grid && (strchr(o->grid, '=') || sc_grid_parse(o->grid, o->ranks, &g) || ext(&g, SC_DIM_N) != o->ranks))
            return sc_error(SC_ERR_ARG, "--fc-replicate works with sample parallelism only (%s), not %s", sample,
                            o->grid);
        with_sample = *o;
        with_sample.grid = sample;
        o = &with_sample;
    }
    if (o->ranks > 1 && c->p2p_alpha < 0)
        return sc_error(SC_ERR_PARSE, "the calibration has no communication times (it was made on one rank)");
    if (c->stream <= 0)
        return sc_error(SC_ERR_PARSE, "the calibration has no memory bandwidth (stream)");
    if (c->ranks_per_node < 0 ||
        (c->ranks_per_node > 0 && !(c->p2p_node_alpha >= 0 && c->p2p_node_beta >= 0 && isfinite(c->p2p_node_alpha) &&
                                    isfinite(c->p2p_node_beta))))
        return sc_error(SC_ERR_ARG,
                        "the calibration's within-node link (%d ranks per node, %g s, %g s/byte) is not valid",
                        c->ranks_per_node, c->p2p_node_alpha, c->p2p_node_beta);
    struct model m = {.net = net,
                      .c = c,
                      .P = o->ranks,
                      .B = o->batch,
                      .W = o->workers > 0 ? o->workers : c->workers,
                      .oversub = 1,
                      .replicate = o->ranks > 1 && o->fc_replicate > 0 ? o->fc_replicate : 0,
                      .rpn = c->ranks_per_node};
    if (m.W < 1)
        m.W = 1;
    if (c->cores > 0 && (double)m.P * m.W > c->cores)
        m.oversub = (double)m.P * m.W / c->cores, m.steal = 1;
    int every_core = c->cores > 0 && m.P * m.W >= c->cores; /* has a worker */
    /* A cost per byte within ten times memory's is copying (shared
     * memory); a larger one, a wire that waits. */
    m.copying = every_core && c->p2p_beta > 0 && c->p2p_beta < 30 / c->stream;
    m.busy = every_core && c->busy > 0 ? c->busy : 0;
    m.one_link = m.rpn == 0 && c->p2p_beta >= 30 / c->stream;
    struct graph G = {0};
    struct sc_plan *p = calloc(1, sizeof *p);
    int err = p ? build_nodes(&m, o, &G) : sc_error(SC_ERR_NOMEM, "out of memory");
    if (!err)
        err = build_edges(&m, &G);
    int *choice = err ? NULL : calloc(G.n, sizeof *choice);
    if (!err && !choice)
        err = sc_error(SC_ERR_NOMEM, "out of memory");
    double chain_time = -1;
    if (!err) {
        for (int v = 0; v < G.n; v++)
            p->candidates += G.node[v].ncand;
        /* Hiding behind backward depends on the choice: solve with the
         * first candidates' (sample parallelism's) backward, then again
         * with the solution's. */
        set_hide(&m, &G, choice);
        for (int it = 0; it < 2 && !err; it++) {
            err = solve(&G, 0, choice, &chain_time);
            set_hide(&m, &G, choice);
        }
    }
    if (!err && o->mem_limit > 0 && memory_of(&G, choice) > o->mem_limit) {
        /* Price memory until the plan fits: the least memory first. */
        int least[G.n];
        for (int v = 0; v < G.n; v++) {
            least[v] = 0;
            for (int k = 1; k < G.node[v].ncand; k++)
                if (G.node[v].cand[k].memory < G.node[v].cand[least[v]].memory)
                    least[v] = k;
        }
        double need = memory_of(&G, least);
        if (need > o->mem_limit)
            err = sc_error(SC_ERR_ARG, "no distribution fits --mem-limit %.0f bytes per rank: the least needs %.0f",
                           o->mem_limit, need);
        double lo = 0, hi = 1e-12;
        int fit[G.n];
        memcpy(fit, least, sizeof fit);
        while (!err && hi < 1e6) {
            if ((err = solve(&G, hi, choice, NULL)))
                break;
            if (memory_of(&G, choice) <= o->mem_limit)
                break;
            lo = hi, hi *= 4;
        }
        for (int it = 0; it < 30 && !err; it++) {
            double mid = 0.5 * (lo + hi);
            if ((err = solve(&G, mid, choice, NULL)))
                break;
            if (memory_of(&G, choice) <= o->mem_limit)
                hi = mid, memcpy(fit, choice, sizeof fit);
            else
                lo = mid;
        }
        if (!err && solve(&G, hi, choice, NULL) == 0 && memory_of(&G, choice) > o->mem_limit)
            memcpy(choice, fit, sizeof fit);
        chain_time = -1;
    }
    if (!err && !o->grid) {
        /* Two starts: the elimination's choice and the best uniform plan.
         * The refinement is a local search, and a plan it stops at can
         * need two moves at once to leave (resnet50 at batch 8192 on 1024
         * Lassen ranks: conv26 split by n512c2 keeps the buckets from
         * paying for the last stage's n256c2f2, which alone pays 9.5%). */
        int uni[G.n], from_uni[G.n], cut[G.n], pol, nb = cut_points(&G, cut);
        double best_uni = best_uniform(&m, &G, o, uni);
        refine(&m, &G, o, cut, nb, choice, 0);
        if (isfinite(best_uni)) {
            memcpy(from_uni, uni, sizeof uni);
            refine(&m, &G, o, cut, nb, from_uni, 1);
            if (predict(&m, &G, from_uni, o, &pol) < predict(&m, &G, choice, o, &pol))
                memcpy(choice, from_uni, sizeof from_uni);
        }
        keep_best(&m, &G, o, uni, best_uni, choice);
    }
    if (!err && !o->grid && o->fc_replicate < 0 && m.P > 1 && o->mem_limit <= 0)
        try_replication(&m, &G, o, choice);
    if (!err)
        err = fill_plan(&m, &G, choice, o, chain_time, p);
    free(choice);
    graph_free(&G);
    if (err) {
        sc_plan_free(p);
        return err;
    }
    *out = p;
    return 0;
}

void sc_plan_free(struct sc_plan *p)
{
    if (!p)
        return;
    free(p->grid);
    free(p->layer);
    free(p);
}

/* ---- what a calibration must hold ---- */

struct seen {
    int (*fn)(void *ctx, const struct sc_layer_work *w, const char *key);
    void *ctx;
    char (*keys)[SC_CALIB_KEY_LEN];
    int n, cap;
};

static int add_key(void *ctx, const struct sc_layer_work *w, enum role role, int interior)
{
    struct seen *s = ctx;
    char key[SC_CALIB_KEY_LEN];
    (void)role, (void)interior;
    sc_calib_kernel_key(w, key, sizeof key);
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->keys[i], key))
            return 0;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        void *nk = realloc(s->keys, cap * sizeof *s->keys);
        if (!nk)
            return sc_error(SC_ERR_NOMEM, "out of memory");
        s->keys = nk, s->cap = cap;
    }
    memcpy(s->keys[s->n++], key, SC_CALIB_KEY_LEN);
    return s->fn(s->ctx, w, key);
}

int sc_plan_kernels(const struct sc_net *net, const struct sc_plan_opts *o,
                    int (*fn)(void *ctx, const struct sc_layer_work *w, const char *key), void *ctx)
{
    struct sc_grid grids[512];
    int ng = all_grids(o->ranks, grids, 512), err = 0;
    int W = o->workers > 0 ? o->workers : 1;
    struct seen s = {fn, ctx, NULL, 0, 0};
    for (int li = 0; li < net->nlayers && !err; li++) {
        const struct sc_layer *l = &net->layers[li];
        if (l->alias || !l->ops->work)
            continue;
        for (int k = 0; k < ng && !err; k++) {
            if (!grid_valid(l, &grids[k], o->batch))
                continue;
            struct block b = block_of(o->batch, W, l, &grids[k]);
            struct works ws = {add_key, &s, {0, 0}, {0, 0}};
            err = layer_works(l, &grids[k], &b, &ws);
        }
    }
    free(s.keys);
    return err;
}

/* ---- output ---- */

void sc_plan_parallel_spec(const struct sc_net *net, const struct sc_plan *p, char *buf, size_t len)
{
    size_t k = 0;
    buf[0] = '\0';
    for (int l = 0; l < net->nlayers && k < len; l++)
        if (p->grid[l][0])
            k += snprintf(buf + k, len - k, "%s%s=%s", k ? "," : "", net->layers[l].name, p->grid[l]);
}

void sc_plan_print(FILE *fp, const struct sc_net *net, const struct sc_plan *p)
{
    fprintf(fp, "%-10s %-7s %9s %9s %9s %9s %9s %9s %10s\n", "layer", "grid", "compute", "halo", "channels", "redist",
            "allreduce", "update", "memory");
    for (int l = 0; l < net->nlayers; l++) {
        if (!p->grid[l][0])
            continue;
        const struct sc_plan_cost *c = &p->layer[l];
        fprintf(fp, "%-10s %-7s %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.2fMB\n", net->layers[l].name,
                p->grid[l], 1e3 * c->compute, 1e3 * c->halo, 1e3 * c->channels, 1e3 * c->redistribute,
                1e3 * c->allreduce, 1e3 * c->update, c->memory / 1e6);
    }
    const struct sc_plan_cost *t = &p->total;
    fprintf(fp, "%-10s %-7s %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.3fms %8.2fMB\n", "total", "", 1e3 * t->compute,
            1e3 * t->halo, 1e3 * t->channels, 1e3 * t->redistribute, 1e3 * t->allreduce, 1e3 * t->update,
            t->memory / 1e6);
    fprintf(fp, "gradient communication: --grad-comm %s (allreduce is before hiding behind backward)\n", p->grad_comm);
    if (p->fc_replicate)
        fprintf(fp,
                "--fc-replicate %d: those [connected] layers' allreduce column is their inputs' and errors' "
                "allgathers\n",
                p->fc_replicate);
    fprintf(fp, "predicted time per iteration: %.3f ms\n", 1e3 * p->time);
}

void sc_plan_print_json(FILE *fp, const struct sc_net *net, const struct sc_plan_opts *o, const struct sc_plan *p)
{
    char spec[4096];
    sc_plan_parallel_spec(net, p, spec, sizeof spec);
    fprintf(fp,
            "{\"ranks\": %d, \"batch\": %d, \"time\": %.9g, \"grad_comm\": \"%s\", \"fc_replicate\": %d, "
            "\"parallel\": \"%s\",\n",
            o->ranks, o->batch, p->time, p->grad_comm, p->fc_replicate, spec);
    const struct sc_plan_cost *t = &p->total;
    fprintf(fp,
            " \"total\": {\"compute\": %.9g, \"halo\": %.9g, \"channels\": %.9g, \"redistribute\": %.9g, "
            "\"allreduce\": %.9g, \"update\": %.9g, \"memory\": %.0f},\n",
            t->compute, t->halo, t->channels, t->redistribute, t->allreduce, t->update, t->memory);
    fprintf(fp, " \"candidates\": %ld, \"chain_time\": %.9g,\n \"layers\": [", p->candidates, p->chain_time);
    int first = 1;
    for (int l = 0; l < net->nlayers; l++) {
        if (!p->grid[l][0])
            continue;
        const struct sc_plan_cost *c = &p->layer[l];
        fprintf(fp,
                "%s\n  {\"name\": \"%s\", \"grid\": \"%s\", \"compute\": %.9g, \"halo\": %.9g, \"channels\": "
                "%.9g, \"redistribute\": %.9g, \"allreduce\": %.9g, \"update\": %.9g, \"memory\": %.0f}",
                first ? "" : ",", net->layers[l].name, p->grid[l], c->compute, c->halo, c->channels, c->redistribute,
                c->allreduce, c->update, c->memory);
        first = 0;
    }
    fprintf(fp, "\n ]}\n");
}
