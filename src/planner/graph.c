/* The network as the planner's graph (see plan_private.h): a node per
 * layer that runs tasks, with its candidate grids and their costs, and an
 * edge per input, with the cost of redistributing it between every pair
 * of candidates. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "src/planner/plan_private.h"

/* The layer that holds source s's output: past [route] aliases, which run
 * no tasks. */
static int resolve(const struct sc_net *net, int s)
{
    while (s >= 0 && net->layers[s].alias)
        s = net->layers[s].src[0];
    return s;
}

void plan_graph_free(struct graph *G)
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

/* A node per layer that runs tasks, with its candidates: the grid its
 * cfg's parallel= or o->grid gives it, else every grid it can run under. */
static int build_nodes(struct model *m, const struct sc_plan_opts *o, struct graph *G)
{
    const struct sc_net *net = m->net;
    G->node = calloc(net->nlayers, sizeof *G->node);
    G->node_of = malloc(net->nlayers * sizeof *G->node_of);
    if (!G->node || !G->node_of)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    struct sc_grid grids[512];
    int ng = plan_all_grids(m->P, grids, 512), err;
    int list = o->grid && strchr(o->grid, '=');
    if (list && (err = sc_parallel_list_check(net, o->grid)))
        return err;
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
        /* A grid given for the layer (its cfg's parallel=, else
         * --parallel's), as the network's setup takes it. */
        if (l->parallel[0] || o->grid) {
            struct sc_grid g;
            if ((err = sc_rule_layer_grid(l, o->grid, m->P, &g)) || (err = sc_rule_grid_check(l, &g, m->B)) ||
                (m->replicate && (err = sc_rule_replicate_grid(&g))) || (err = plan_candidate(m, l, &g, &v->cand[0])))
                return err;
            v->ncand = 1;
            continue;
        }
        for (int k = 0; k < ng; k++)
            if (!sc_rule_grid_check(l, &grids[k], m->B)) {
                if ((err = plan_candidate(m, l, &grids[k], &v->cand[v->ncand])))
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
    struct sc_layout out = sc_rule_layout_out(lu, &a->g, m->B, 1), in = sc_rule_layout_in(lv, &b->g, m->B, 1);
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
     * waits for both (docs/planner-model.md, "What the rules rest on"). */
    struct exch f = plan_exchange(m, &out, &in, 1),
                k = plan_exchange(m, &in, &out, !(lv->mixes_channels && ext(&b->g, SC_DIM_F) > 1));
    int synced = lu->mixes_channels && ext(&a->g, SC_DIM_C) > 1;
    *fwd = f.seconds + (f.bytes > 0 && !synced ? plan_behind(m, b->task_f) : 0);
    *bwd = k.seconds + (k.bytes > 0 && !synced ? plan_behind(m, b->task_b) : 0);
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

int plan_graph_build(struct model *m, const struct sc_plan_opts *o, struct graph *G)
{
    G->K = m->K;
    int err = build_nodes(m, o, G);
    return err ? err : build_edges(m, G);
}
