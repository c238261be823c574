/* The planner's candidates and their costs (see plan_private.h): the
 * grids of P ranks, which a layer can run under, and the model of one
 * layer under one grid (its kernels, halo, channel collectives, gradient
 * allreduce, update and memory); and the kernels a calibration must hold. */
#include <stdlib.h>
#include <string.h>

#include "src/planner/plan_private.h"

/* ---- candidates: grids whose extents multiply to P ---- */

/* Every grid of P ranks, in a fixed order (n first, so that ties go to
 * sample parallelism). */
int plan_all_grids(int P, struct sc_grid *out, int cap)
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

/* ---- the model of one layer under one grid ---- */

/* The rank's block of layer l under g: samples per tile, channels and
 * rows x columns (those of a middle rank: the most halo). */
struct block {
    int nr, nt, tiles, cin, cout;
    struct sc_box ib, ob;
};
static struct block block_of(int B, int W, const struct sc_layer *l, const struct sc_grid *g)
{
    struct block b;
    struct sc_layout in = sc_rule_layout_in(l, g, B, 1), out = sc_rule_layout_out(l, g, B, 1);
    int gc = ext(g, SC_DIM_C), gf = ext(g, SC_DIM_F), reps[MAXREPS];
    b.nr = B / ext(g, SC_DIM_N);
    b.tiles = b.nr < W ? b.nr : W;
    b.nt = (b.nr + b.tiles - 1) / b.tiles;
    b.cin = l->in.c / sc_layout_channel_parts(&in);
    b.cout = l->mixes_channels ? l->out.c / gf : l->out.c / (gc * gf);
    int r = reps[plan_representatives(g, 0, reps) > 1 ? 1 : 0];
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
    rl[0] = plan_overlap(need.r0, need.r1 - need.r0, need.r0, own.r0 - need.r0);
    rl[1] = plan_overlap(need.r0, need.r1 - need.r0, own.r0, own.r1 - own.r0);
    rl[2] = plan_overlap(need.r0, need.r1 - need.r0, own.r1, need.r1 - own.r1);
    cl[0] = plan_overlap(need.c0, need.c1 - need.c0, need.c0, own.c0 - need.c0);
    cl[1] = plan_overlap(need.c0, need.c1 - need.c0, own.c0, own.c1 - own.c0);
    cl[2] = plan_overlap(need.c0, need.c1 - need.c0, own.c1, need.c1 - own.c1);
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
            if (plan_same_node(m, r, q))
                in_msgs += msg, in_bytes += per_cell * area;
            else
                out_msgs += msg, out_bytes += per_cell * area;
        }
    return plan_p2p_levels(m, in_msgs, in_bytes, out_msgs, out_bytes);
}

/* The rows (per sample and channel) of the pieces a halo of own needs
 * around it: the pack task copies each piece row by row (kernels/
 * region.c), so a piece a column or two wide costs a copy per row
 * (the calibration's rowcopy), not its bytes: a column split's halos
 * cost more than a row split's of the same bytes (docs/planner-model.md, "What the rules rest on"). */
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
    struct sc_layout in = sc_rule_layout_in(l, g, m->B, 1), out = sc_rule_layout_out(l, g, m->B, 1);
    int reps[MAXREPS], nrep = plan_representatives(g, m->rpn, reps);
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
        double cx = m->rpn > 0 ? halo_levels(m, g, r, need, ib, 4.0 * b->nr * b->cin) : plan_p2p(m, nx, bx);
        double cdy = m->rpn > 0 ? halo_levels(m, g, r, need_dy, ob, 4.0 * b->nr * b->cout) : plan_p2p(m, ndy, bdy);
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
     * the wait beyond the interior shows (docs/planner-model.md, "What the rules rest on"). */
    double wf = plan_behind(m, fwd / b->tiles) - fwd_in, wb = plan_behind(m, bwd / b->tiles) - bwd_in;
    if (*hf > 0 && wf > 0)
        *hf += wf;
    if (*hb > 0 && wb > 0)
        *hb += wb;
}

/* Layer l's cost under g, into c (SC_ERR_PARSE: a time the calibration
 * lacks). */
int plan_candidate(struct model *m, const struct sc_layer *l, const struct sc_grid *g, struct cand *c)
{
    memset(c, 0, sizeof *c);
    c->g = *g;
    struct block b = block_of(m->B, m->W, l, g);
    double kf = 0, kb = 0, kf_in = 0, kb_in = 0, one_bwd = 1, filter = 0;
    int err, tasks = 0;
    if ((err = kernel_times(m, l, g, &b, &kf, &kb, &kf_in, &kb_in, &one_bwd, &filter, &tasks)))
        return err;
    c->filter = filter * m->oversub;
    /* The input block each rank loads (src/net/input.c): a task of its
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
     * (behind; docs/planner-model.md, "What the rules rest on"). */
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
        double stats = plan_p2p(m, hw - 1, 8.0 * (double)l->group_sum_len * (hw - 1)) + 2 * m->c->task;
        hf += stats;
        hb += stats;
    }
    c->halo = hf + hb;
    int gc = ext(g, SC_DIM_C);
    double cf = 0, cb = 0;
    if (l->mixes_channels && gc > 1) {
        /* Partial sums over C, reduce-scattered into the output; dy
         * gathered back (src/net/setup.c, plan_exchanges). */
        struct sc_layout out = sc_rule_layout_out(l, g, m->B, 1), part = out;
        part.cdims = SC_CDIMS_F;
        cf = plan_exchange(m, &part, &out, 0).seconds + plan_behind(m, c->task_f);
        cb = plan_exchange(m, &out, &part, 1).seconds + plan_behind(m, c->task_b);
        c->rounds += 2;
    }
    c->channels = cf + cb;
    c->fwd = kf + load * m->oversub + hf + cf;
    c->bwd = kb + hb + cb;
    c->msgs_b = hb + cb;
    double np = share_params(l, g);
    c->group = sc_rule_grad_group(g);
    c->ar_bytes = 4 * np;
    if (np > 0 && c->group > 1) {
        c->ar_time = plan_grad_allreduce(m, c->group, c->ar_bytes);
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
    int ng = plan_all_grids(o->ranks, grids, 512), err = 0;
    int W = o->workers > 0 ? o->workers : 1;
    struct seen s = {fn, ctx, NULL, 0, 0};
    for (int li = 0; li < net->nlayers && !err; li++) {
        const struct sc_layer *l = &net->layers[li];
        if (l->alias || !l->ops->work)
            continue;
        for (int k = 0; k < ng && !err; k++) {
            if (sc_rule_grid_check(l, &grids[k], o->batch))
                continue;
            struct block b = block_of(o->batch, W, l, &grids[k]);
            struct works ws = {add_key, &s, {0, 0}, {0, 0}};
            err = layer_works(l, &grids[k], &b, &ws);
        }
    }
    free(s.keys);
    return err;
}
