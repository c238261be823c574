/* The planner's model of messages between ranks (see plan_private.h):
 * point-to-point times on one or two levels, the ranks that stand for a
 * grid, a tensor's redistribution between two layouts, and the wait of a
 * message behind busy workers. */
#include <string.h>

#include "base/ring_segment.h"
#include "src/planner/plan_private.h"

double plan_grad_allreduce(const struct model *m, int group, double bytes)
{
    if (!m->grad_bf16 || bytes <= (double)SC_RING_DIRECT_KB_DEFAULT * 1024)
        return sc_calib_allreduce(m->c, group, bytes);
    /* The ring's two phases move as many bytes each (the calibration
     * times both in fp32): the reduce-scatter's at 2 bytes an element, the
     * allgather's at 4. */
    double rs = sc_calib_allreduce(m->c, group, bytes / 2), ag = sc_calib_allreduce(m->c, group, bytes);
    return rs < 0 || ag < 0 ? -1 : 0.5 * (rs + ag);
}

double plan_p2p(const struct model *m, int msgs, double bytes)
{
    return msgs * m->c->p2p_alpha + bytes * m->c->p2p_beta;
}

/* Two levels: what a rank receives from ranks of its node (in_msgs
 * messages, in_bytes) over the within-node link, and from the others
 * over the between-node link.  The two are separate links (NVLink or
 * shared memory, and the network adapter), which carry their messages at
 * the same time: the exchange waits for the slower of them, not for
 * their sum. */
double plan_p2p_levels(const struct model *m, int in_msgs, double in_bytes, int out_msgs, double out_bytes)
{
    double ti = in_msgs ? in_msgs * m->c->p2p_node_alpha + in_bytes * m->c->p2p_node_beta : 0;
    double to = out_msgs ? out_msgs * m->c->p2p_alpha + out_bytes * m->c->p2p_beta : 0;
    return ti > to ? ti : to;
}

int plan_same_node(const struct model *m, int r, int q)
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
int plan_representatives(const struct sc_grid *g, int rpn, int out[MAXREPS])
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

int plan_overlap(int a0, int an, int b0, int bn)
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
        int o = plan_overlap(f, c, w0, wn);
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
struct exch plan_exchange(const struct model *m, const struct sc_layout *src, const struct sc_layout *dst, int copy)
{
    struct exch e = {0, 0};
    if (sc_layout_equal(src, dst))
        return e;
    unsigned rep = copy ? sc_layout_replicated(src) : 0;
    const struct sc_grid *g = &src->grid;
    int gc = ext(g, SC_DIM_C), gf = ext(g, SC_DIM_F);
    int reps[MAXREPS], nrep = plan_representatives(&dst->grid, m->rpn, reps);
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
                int o = plan_overlap(h0, hn, c0, cn);
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
            comm = plan_p2p_levels(m, in_msgs, in_bytes, msgs - in_msgs, bytes - in_bytes);
        } else {
            comm = plan_p2p(m, msgs, bytes);
        }
        double t = comm + (msgs + 1) * m->c->task + (bytes + assembled) / m->c->stream;
        if (t > e.seconds)
            e.seconds = t;
        if (bytes > e.bytes)
            e.bytes = bytes;
    }
    return e;
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
double plan_behind(const struct model *m, double task)
{
    return m->busy > 0 ? (task / m->oversub < m->busy ? task / m->oversub : m->busy) : 0;
}
