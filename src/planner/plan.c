/* The planner's entry (plan.h): sc_plan_make checks the options and the
 * calibration, sets up the model, and runs the phases of plan_private.h
 * in turn: the graph, the elimination, the memory price, the local search,
 * replication, the plan. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/ring_segment.h"
#include "src/planner/plan_private.h"

#define MAXP 1024

/* o->grad_comm as --grad-comm parses it (src/net/net.h) into the policy
 * priced (-1: NULL, the best of layer, bucket:25 and end) and the MB of
 * bucket:MB; SC_ERR_ARG for one the model does not price (chunks:K). */
static int parse_policy(const struct sc_plan_opts *o, int *policy, double *bucket_mb)
{
    struct sc_comm_opts co;
    sc_comm_opts_default(&co);
    *policy = -1;
    *bucket_mb = co.bucket_mb;
    if (!o->grad_comm)
        return 0;
    int err = sc_comm_opts_parse_grad(o->grad_comm, &co);
    if (err)
        return err;
    if (co.grad_comm == SC_GRAD_CHUNKS)
        return sc_error(SC_ERR_ARG, "the planner models --grad-comm layer, bucket:MB and end, not %s", o->grad_comm);
    *policy = co.grad_comm == SC_GRAD_LAYER ? POL_LAYER : co.grad_comm == SC_GRAD_BUCKET ? POL_BUCKET : POL_END;
    *bucket_mb = co.bucket_mb;
    return 0;
}

/* The ring's segments under o, in bytes: --comm-segment's, or auto's
 * rule applied to the link the calibration measured, through the
 * bandwidth the runtime's link probe would see on it (one probe message
 * at the calibration's alpha + beta b; none on one rank). */
static double segment_bytes(const struct sc_plan_opts *o, const struct sc_calib *c)
{
    if (o->segment_kb > 0)
        return 1024.0 * o->segment_kb;
    double probe = (double)SC_LINK_PROBE_BYTES, t = c->p2p_alpha + c->p2p_beta * probe;
    double bw = o->ranks > 1 && c->p2p_alpha >= 0 && c->p2p_beta >= 0 && t > 0 ? probe / t : 0;
    return 1024.0 * sc_ring_segment_kb_for(bw);
}

/* o, checked against the ranks, batch and calibration c, into *opts;
 * under --fc-replicate F > 0 without a grid, sample parallelism (in
 * sample, of size len), which the runtime replicates under only
 * (sc_rule_replicate_grid: a grid given is checked layer by layer). */
static int check_options(const struct sc_plan_opts *o, const struct sc_calib *c, struct sc_plan_opts *opts,
                         char *sample, size_t len)
{
    if (o->ranks < 1 || o->ranks > MAXP)
        return sc_error(SC_ERR_ARG, "ranks %d: must be 1 to %d", o->ranks, MAXP);
    if (o->batch < 1)
        return sc_error(SC_ERR_ARG, "batch %d: must be at least 1", o->batch);
    if (o->segment_kb < 0)
        return sc_error(SC_ERR_ARG, "segment %d KiB: must be positive (0: auto)", o->segment_kb);
    if (o->accumulate < 0 || o->accumulate > SC_ACCUMULATE_MAX)
        return sc_error(SC_ERR_ARG, "--accumulate %d: not an integer in [1, %d]", o->accumulate, SC_ACCUMULATE_MAX);
    int policy, err;
    double mb;
    if ((err = parse_policy(o, &policy, &mb)))
        return err;
    *opts = *o;
    if (o->fc_replicate > 0 && o->ranks > 1 && !o->grid) {
        snprintf(sample, len, "n%d", o->ranks);
        opts->grid = sample;
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
    return 0;
}

/* The model of net on o->ranks ranks under calibration c: workers, how
 * they share the cores, and what kind of link the messages take. */
static struct model make_model(const struct sc_net *net, const struct sc_calib *c, const struct sc_plan_opts *o)
{
    struct model m = {.net = net,
                      .c = c,
                      .P = o->ranks,
                      .B = o->batch,
                      .W = o->workers > 0 ? o->workers : c->workers,
                      .oversub = 1,
                      .replicate = o->ranks > 1 && o->fc_replicate > 0 ? o->fc_replicate : 0,
                      .rpn = c->ranks_per_node,
                      .segment_bytes = segment_bytes(o, c),
                      .K = o->accumulate > 1 ? o->accumulate : 1,
                      .grad_bf16 = o->grad_bf16};
    parse_policy(o, &m.policy, &m.bucket_mb); /* checked by check_options */
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
    return m;
}

/* The plan of choice: each layer's grid and costs, the totals, the
 * predicted time and its policy. */
static int fill_plan(const struct model *m, const struct graph *G, const int *choice, double chain_time,
                     struct sc_plan *p)
{
    const struct sc_net *net = m->net;
    p->nlayers = net->nlayers;
    p->grid = calloc(net->nlayers, sizeof *p->grid);
    p->layer = calloc(net->nlayers, sizeof *p->layer);
    if (!p->grid || !p->layer)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    for (int v = 0; v < G->n; v++)
        p->candidates += G->node[v].ncand;
    double efwd[G->n], ebwd[G->n];
    int rep[G->n];
    plan_edges_of(G, choice, efwd, ebwd);
    p->fc_replicate = plan_replicated(m, G, rep);
    for (int v = 0; v < G->n; v++) {
        const struct cand *c = &G->node[v].cand[choice[v]];
        struct sc_plan_cost *pc = &p->layer[G->node[v].layer];
        sc_grid_format(&c->g, p->grid[G->node[v].layer], sizeof p->grid[0]);
        double bytes, ar = rep[v] && c->group > 1
                               ? plan_gather_time(m, &net->layers[G->node[v].layer], c->group, &bytes)
                               : c->ar_time;
        /* per iteration: the micro-batches' compute and messages K times,
         * the reduction and the update once (a replicated layer's
         * allgathers, of every micro-batch's inputs and errors, K times) */
        double K = m->K;
        *pc = (struct sc_plan_cost){
            K * c->compute, K * c->halo, K * c->channels, K * (efwd[v] + ebwd[v]), rep[v] && c->group > 1 ? K * ar : ar,
            c->update,      c->memory};
        p->total.compute += pc->compute;
        p->total.halo += pc->halo;
        p->total.channels += pc->channels;
        p->total.redistribute += pc->redistribute;
        p->total.allreduce += pc->allreduce;
        p->total.update += pc->update;
        p->total.memory += pc->memory;
    }
    int pol;
    p->time = plan_predict(m, G, choice, &pol);
    plan_policy_name(m, pol, p->grad_comm, sizeof p->grad_comm);
    p->grad_bf16 = m->grad_bf16;
    p->chain_time = chain_time;
    return 0;
}

int sc_plan_make(const struct sc_net *net, const struct sc_calib *c, const struct sc_plan_opts *o, struct sc_plan **out)
{
    *out = NULL;
    struct sc_plan_opts opts;
    char sample[16];
    int err = check_options(o, c, &opts, sample, sizeof sample);
    if (err)
        return err;
    struct model m = make_model(net, c, &opts);
    struct graph G = {0};
    struct sc_plan *p = calloc(1, sizeof *p);
    int *choice = NULL;
    double chain_time = -1;
    err = p ? plan_graph_build(&m, &opts, &G) : sc_error(SC_ERR_NOMEM, "out of memory");
    if (!err && !(choice = calloc(G.n, sizeof *choice)))
        err = sc_error(SC_ERR_NOMEM, "out of memory");
    if (!err)
        err = plan_solve(&m, &G, choice, &chain_time);
    if (!err)
        err = plan_fit_memory(&G, opts.mem_limit, choice, &chain_time);
    if (!err && !opts.grid)
        plan_improve(&m, &G, &opts, choice);
    if (!err && !opts.grid && opts.fc_replicate < 0 && m.P > 1 && opts.mem_limit <= 0)
        plan_try_replication(&m, &G, &opts, choice);
    if (!err)
        err = fill_plan(&m, &G, choice, chain_time, p);
    free(choice);
    plan_graph_free(&G);
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
