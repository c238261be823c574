/* The planner's timeline of one iteration under a gradient-communication
 * policy (see plan_private.h): the compute chain, the collectives on the
 * wire and what they delay, and the predicted time of an assignment under
 * the best policy. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "src/planner/plan_private.h"

/* ---- the iteration's timeline under a gradient-communication policy ---- */

void plan_policy_name(const struct model *m, int pol, char *buf, size_t len)
{
    if (pol == POL_BUCKET)
        snprintf(buf, len, "bucket:%g", m->bucket_mb);
    else
        snprintf(buf, len, "%s", pol == POL_LAYER ? "layer" : "end");
}

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
 *   (behind): with ranks sharing cores, per-layer collectives cost about
 *   one such task each beyond their calibrated time, on a core each they
 *   did not (docs/planner-model.md, "What the rules rest on");
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
        *t += a + (m->steal ? plan_behind(m, task) : 0);
        *chan = *t;
    } else if (m->steal) {
        double cpu = 4.0 * (group - 1) * m->c->task + bytes * 3 / m->c->stream;
        *t += (cpu < a ? cpu : a) * m->oversub;
    }
}

/* The wire shared by flows (collectives, a layer's messages) that arrive
 * at arr[i] (in any order) and need work[i] seconds of it alone: it
 * serves every flow in flight at once, each at 1/n of its speed
 * (processor sharing, not first come first served, since the ring's
 * window lets a later collective pass; docs/planner-model.md, "What the rules rest on").  Sets done[i]. */
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

/* The layers --fc-replicate replicates, as the network's setup picks them
 * (sc_rule_replicated: the first m->replicate replicable ones).  Sets
 * rep[v] for each node; returns how many. */
int plan_replicated(const struct model *m, const struct graph *G, int *rep)
{
    int by_layer[m->net->nlayers];
    int n = sc_rule_replicated(m->net, m->replicate, m->P, by_layer);
    for (int v = 0; v < G->n; v++)
        rep[v] = by_layer[G->node[v].layer];
    return n;
}

/* A replicated layer's collectives over group ranks instead of its
 * gradient's allreduce: the allgathers of the whole batch's inputs and
 * errors (*bytes in all).  An allgather moves what the second half of a
 * ring allreduce of the same bytes moves: half the calibrated
 * allreduce, each. */
double plan_gather_time(const struct model *m, const struct sc_layer *l, int group, double *bytes)
{
    double x = 4.0 * m->B * l->in.c * l->in.h * l->in.w, dy = 4.0 * m->B * l->out.c * l->out.h * l->out.w;
    *bytes = x + dy;
    return 0.5 * (sc_calib_allreduce(m->c, group, x) + sc_calib_allreduce(m->c, group, dy));
}

/* The network's buckets under pol (bucket, end) for choice, as the setup
 * cuts them (sc_rule_buckets): closes[v] is 1 where node v's gradient is
 * the last of its bucket in backward order. */
static void network_buckets(const struct model *m, const struct graph *G, const int *choice, const int *rep,
                            enum policy pol, int *closes)
{
    struct sc_comm_opts cut = {.grad_comm = pol == POL_BUCKET ? SC_GRAD_BUCKET : SC_GRAD_END,
                               .bucket_mb = m->bucket_mb};
    int walk[G->n], bucket_of[G->n], n = 0;
    const struct sc_grid *grid[G->n];
    double bytes[G->n];
    for (int v = G->n - 1; v >= 0; v--) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        closes[v] = 0;
        if (c->ar_bytes > 0 && !rep[v]) {
            grid[n] = &c->g;
            bytes[n] = c->ar_bytes;
            walk[n++] = v;
        }
    }
    sc_rule_buckets(&cut, n, grid, bytes, bucket_of);
    for (int i = 0; i < n; i++)
        closes[walk[i]] = i == n - 1 || bucket_of[i + 1] != bucket_of[i];
}

/* Forward, then backward layer by layer from the last (rounds: the
 * redistributions between layers that send messages); each layer's
 * gradient allreduce queues on one channel from the moment its gradient
 * is ready (layer), fills the network's buckets in backward order
 * (bucket: of m->bucket_mb MiB, cut as sc_rule_bucket_closed cuts them),
 * or waits for the whole backward pass (end); the update follows each.
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
    /* --accumulate K: the K - 1 micro-batches before the last, each the
     * chain with no reduction (a replicated layer's allgathers and whole
     * gradient in each, exposed), before the last one's timeline below */
    double early = 0;
    int rep_early[G->n];
    plan_replicated(m, G, rep_early);
    for (int v = 0; v < G->n && m->K > 1; v++) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        double bytes;
        early += c->fwd + efwd[v] + c->bwd + ebwd[v];
        if (rep_early[v] && c->ar_bytes > 0 && c->group > 1)
            early +=
                plan_gather_time(m, &m->net->layers[G->node[v].layer], c->group, &bytes) + (c->group - 1) * c->filter;
    }
    early *= m->K - 1;
    rounds *= m->K;
    /* The flows on the wire (2 per node at most, and the last bucket),
     * and which flow carries each node's gradient (-1: none). */
    double arr[2 * G->n + 1], work[2 * G->n + 1], done[2 * G->n + 1];
    int flow_of[G->n], bucket[G->n], nflows = 0, nbucket = 0;
    double chan = 0, upd = 0, pending = 0;
    int group = 0, rep[G->n], closes[G->n];
    plan_replicated(m, G, rep);
    network_buckets(m, G, choice, rep, pol, closes);
#define FLOW(at, w) (arr[nflows] = (at), work[nflows] = (w), nflows++)
/* The collective of the bucket's pending bytes over group, issued now:
 * one flow on the wire for every layer in the bucket. */
#define ISSUE_BUCKET(during, task)                                                                                     \
    do {                                                                                                               \
        double a_ = plan_grad_allreduce(m, group, pending);                                                            \
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
         * both end later by the shorter of the two (docs/planner-model.md, "What the rules rest on"). */
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
        if (rep[v]) {
            /* Both allgathers priced where the errors' starts: the inputs'
             * one, issued in forward, has only the layers after it to hide
             * behind, few after a network's [connected] layers.  Then
             * every rank computes the other ranks' shares of the weight
             * gradient too, beside the next iteration's forward like the
             * update. */
            if (c->group <= 1)
                continue;
            double bytes, a = plan_gather_time(m, &m->net->layers[G->node[v].layer], c->group, &bytes);
            flow_of[v] = FLOW(t, a);
            collective(m, &t, &chan, c->group, bytes, a, v > 0, c->task_b);
            wire += a;
            upd += (c->group - 1) * c->filter;
            continue;
        }
        if (pol == POL_LAYER) {
            if (c->group <= 1)
                continue;
            flow_of[v] = FLOW(t, c->ar_time);
            collective(m, &t, &chan, c->group, c->ar_bytes, c->ar_time, v > 0, c->task_b);
            wire += c->ar_time;
            continue;
        }
        /* bucket, end: the network's buckets, one collective each over
         * more than one rank (its layers sum over the same ranks), which
         * the runtime starts as soon as its last layer's gradients are
         * ready (src/net/step.c): where the ranks change, during
         * backward under end too. */
        group = c->group;
        if (group > 1) {
            pending += c->ar_bytes;
            bucket[nbucket++] = v;
            if (closes[v])
                ISSUE_BUCKET(v > 0, c->task_b);
        }
    }
#undef FLOW
#undef ISSUE_BUCKET
    share_wire(nflows, arr, work, done);
    double first = t; /* the next iteration's first forward task starts */
    for (int v = 0; v < G->n; v++)
        if (flow_of[v] >= 0 && done[flow_of[v]] - fstart[v] > first)
            first = done[flow_of[v]] - fstart[v];
    double time = early + first + upd;
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
     * each (m->segment_bytes, as the runtime sizes them; the ring keeps at
     * most 2 per step in flight, tasks/tasks.h), at the wire's time per byte (p2p_beta / P:
     * the calibration's p2p has every rank sending at once).  A round
     * finds the wire busy with probability wire / T and then waits half of
     * that queue on average, so the chain of compute and messages takes
     * chain + rounds x wait / 2 x wire / T = T; solved,
     * T = (chain + sqrt(chain^2 + 2 rounds wait wire)) / 2 (docs/
     * planner-model.md, "What the rules rest on", has what it was fitted
     * to). */
    if (m->one_link && pol != POL_END && wire > 0 && rounds > 0) {
        double wait = (m->P - 1) * m->segment_bytes * m->c->p2p_beta / m->P, c = early + chain + upd;
        double steady = 0.5 * (c + sqrt(c * c + 2 * rounds * wait * wire));
        if (steady > time)
            time = steady;
    }
    return time;
}

/* Where edge e's matrices hold the pair of candidates choice takes. */
size_t plan_edge_at(const struct graph *G, const struct edge *e, const int *choice)
{
    return (size_t)choice[e->u] * G->node[e->v].ncand + choice[e->v];
}

/* The redistribution into each node under choice, forward and back; how
 * many of them send messages. */
int plan_edges_of(const struct graph *G, const int *choice, double *efwd, double *ebwd)
{
    int rounds = 0;
    for (int v = 0; v < G->n; v++)
        efwd[v] = ebwd[v] = 0;
    for (int i = 0; i < G->nedges; i++) {
        const struct edge *e = &G->edge[i];
        size_t k = plan_edge_at(G, e, choice);
        efwd[e->v] += e->fwd[k];
        ebwd[e->v] += e->bwd[k];
        rounds += e->rounds[k];
    }
    return rounds;
}

/* The predicted time of an assignment: its timeline under the best
 * policy (or m->policy), which goes to *pol.  On a tie the simpler policy
 * wins: end before bucket (the same while the gradients fill one bucket)
 * before layer. */
double plan_predict(const struct model *m, const struct graph *G, const int *choice, int *pol)
{
    double efwd[G->n], ebwd[G->n], best = INFINITY;
    int rounds = plan_edges_of(G, choice, efwd, ebwd);
    *pol = -1;
    for (int k = POL_END; k >= POL_LAYER; k--) {
        if (m->policy >= 0 && k != m->policy)
            continue;
        double t = timeline(m, G, choice, efwd, ebwd, rounds, k);
        if (*pol < 0 || t < best)
            best = t, *pol = k;
    }
    return best;
}
