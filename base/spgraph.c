/* Least-cost assignments of candidates to the nodes of a layer graph. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/spgraph.h"
#include "base/error.h"

struct sc_spedge {
    int u, v;
    double *cost; /* K_u x K_v, row major */
};

struct sc_spgraph {
    int n;
    int *k;         /* candidates per node, 0 while unset */
    double **node;  /* node[v][0 .. k[v]-1] */
    int *nedges_of; /* edges touching each node (set_node refuses a new k) */
    struct sc_spedge *edges;
    int nedges, cap;
};

static int nomem(const char *what)
{
    return sc_error(SC_ERR_NOMEM, "planner graph: out of memory (%s)", what);
}

int sc_spgraph_create(int n, struct sc_spgraph **out)
{
    *out = NULL;
    if (n < 1)
        return sc_error(SC_ERR_ARG, "planner graph: %d nodes (needs at least one)", n);
    struct sc_spgraph *g = calloc(1, sizeof(*g));
    if (!g)
        return nomem("graph");
    g->n = n;
    g->k = calloc(n, sizeof(*g->k));
    g->node = calloc(n, sizeof(*g->node));
    g->nedges_of = calloc(n, sizeof(*g->nedges_of));
    if (!g->k || !g->node || !g->nedges_of) {
        sc_spgraph_free(g);
        return nomem("nodes");
    }
    *out = g;
    return 0;
}

void sc_spgraph_free(struct sc_spgraph *g)
{
    if (!g)
        return;
    if (g->node)
        for (int v = 0; v < g->n; v++)
            free(g->node[v]);
    for (int e = 0; e < g->nedges; e++)
        free(g->edges[e].cost);
    free(g->node);
    free(g->k);
    free(g->nedges_of);
    free(g->edges);
    free(g);
}

static int check_costs(const double *cost, long count, const char *what, int u, int v)
{
    for (long i = 0; i < count; i++)
        if (isnan(cost[i]))
            return v < 0 ? sc_error(SC_ERR_ARG, "planner graph: %s %d has a NaN cost at %ld", what, u, i)
                         : sc_error(SC_ERR_ARG, "planner graph: %s %d -> %d has a NaN cost at %ld", what, u, v, i);
    return 0;
}

int sc_spgraph_set_node(struct sc_spgraph *g, int v, int k, const double *cost)
{
    if (v < 0 || v >= g->n)
        return sc_error(SC_ERR_ARG, "planner graph: node %d out of 0..%d", v, g->n - 1);
    if (k < 1 || !cost)
        return sc_error(SC_ERR_ARG, "planner graph: node %d needs at least one candidate and its costs", v);
    if (g->nedges_of[v] && k != g->k[v])
        return sc_error(SC_ERR_ARG, "planner graph: node %d has edges; its %d candidates cannot become %d", v, g->k[v],
                        k);
    int rc = check_costs(cost, k, "node", v, -1);
    if (rc)
        return rc;
    double *copy = malloc(k * sizeof(*copy));
    if (!copy)
        return nomem("node costs");
    memcpy(copy, cost, k * sizeof(*copy));
    free(g->node[v]);
    g->node[v] = copy;
    g->k[v] = k;
    return 0;
}

int sc_spgraph_add_edge(struct sc_spgraph *g, int u, int v, const double *cost)
{
    if (u < 0 || u >= g->n || v < 0 || v >= g->n || u == v)
        return sc_error(SC_ERR_ARG, "planner graph: edge %d -> %d (nodes 0..%d, no loops)", u, v, g->n - 1);
    if (!g->k[u] || !g->k[v])
        return sc_error(SC_ERR_ARG, "planner graph: edge %d -> %d before node %d is set", u, v, g->k[u] ? v : u);
    if (!cost)
        return sc_error(SC_ERR_ARG, "planner graph: edge %d -> %d without costs", u, v);
    long count = (long)g->k[u] * g->k[v];
    int rc = check_costs(cost, count, "edge", u, v);
    if (rc)
        return rc;
    if (g->nedges == g->cap) {
        int cap = g->cap ? 2 * g->cap : 8;
        struct sc_spedge *edges = realloc(g->edges, cap * sizeof(*edges));
        if (!edges)
            return nomem("edges");
        g->edges = edges;
        g->cap = cap;
    }
    double *copy = malloc(count * sizeof(*copy));
    if (!copy)
        return nomem("edge costs");
    memcpy(copy, cost, count * sizeof(*copy));
    g->edges[g->nedges++] = (struct sc_spedge){u, v, copy};
    g->nedges_of[u]++;
    g->nedges_of[v]++;
    return 0;
}

int sc_spgraph_cost(const struct sc_spgraph *g, const int *choice, double *cost)
{
    double sum = 0;
    for (int v = 0; v < g->n; v++) {
        if (choice[v] < 0 || choice[v] >= g->k[v])
            return sc_error(SC_ERR_ARG, "planner graph: node %d has no candidate %d (of %d)", v, choice[v], g->k[v]);
        sum += g->node[v][choice[v]];
    }
    for (int e = 0; e < g->nedges; e++) {
        const struct sc_spedge *ed = &g->edges[e];
        sum += ed->cost[choice[ed->u] * g->k[ed->v] + choice[ed->v]];
    }
    *cost = sum;
    return 0;
}

/* What every solver needs: every node set, acyclic (Kahn's order), one
 * source, one sink.  In a DAG with one source and one sink every node lies
 * on a path from the one to the other. */
static int check_graph(const struct sc_spgraph *g, int *source, int *sink)
{
    int n = g->n, rc = 0;
    for (int v = 0; v < n; v++)
        if (!g->k[v])
            return sc_error(SC_ERR_ARG, "planner graph: node %d is not set", v);
    int *indeg = calloc(n, sizeof(*indeg)), *outdeg = calloc(n, sizeof(*outdeg)), *queue = malloc(n * sizeof(*queue));
    if (!indeg || !outdeg || !queue) {
        rc = nomem("check");
        goto out;
    }
    for (int e = 0; e < g->nedges; e++) {
        indeg[g->edges[e].v]++;
        outdeg[g->edges[e].u]++;
    }
    int nsrc = 0, nsink = 0;
    for (int v = 0; v < n; v++) {
        if (!indeg[v] && nsrc++ == 0)
            *source = v;
        if (!outdeg[v] && nsink++ == 0)
            *sink = v;
    }
    if (nsrc != 1 || nsink != 1) {
        rc = sc_error(SC_ERR_ARG, "planner graph: %d sources and %d sinks (needs one of each)", nsrc, nsink);
        goto out;
    }
    /* Kahn: the nodes reached are those outside every cycle; O(n * edges),
     * which is nothing next to the solvers. */
    int head = 0, tail = 0;
    queue[tail++] = *source;
    while (head < tail) {
        int u = queue[head++];
        for (int e = 0; e < g->nedges; e++)
            if (g->edges[e].u == u && --indeg[g->edges[e].v] == 0)
                queue[tail++] = g->edges[e].v;
    }
    if (tail != n)
        rc = sc_error(SC_ERR_ARG, "planner graph: has a cycle (%d of %d nodes ordered)", tail, n);
out:
    free(indeg);
    free(outdeg);
    free(queue);
    return rc;
}

/* One source and one sink: the best pair of their candidates over the edge
 * matrix m between them (NULL: no edge, n == 1). */
static double best_pair(const struct sc_spgraph *g, int s, int t, const double *m, int *cs, int *ct)
{
    double best = INFINITY;
    *cs = *ct = 0;
    for (int a = 0; a < g->k[s]; a++)
        for (int c = 0; c < g->k[t]; c++) {
            double x = g->node[s][a] + g->node[t][c] + m[a * g->k[t] + c];
            if (x < best) {
                best = x;
                *cs = a;
                *ct = c;
            }
        }
    return best;
}

/* ------------------------------------------------------------ elimination */

struct work_edge {
    int u, v, alive;
    double *m; /* K_u x K_v */
};

/* A node elimination, to unwind: v's best candidate for each pair (a, c) of
 * its neighbours u and w is arg[a * K_w + c]. */
struct elim {
    int v, u, w;
    int *arg;
};

int sc_sp_solve(const struct sc_spgraph *g, double *cost, int *choice)
{
    int s, t, rc = check_graph(g, &s, &t);
    if (rc)
        return rc;
    int n = g->n;
    if (n == 1) {
        choice[0] = 0;
        for (int a = 1; a < g->k[0]; a++)
            if (g->node[0][a] < g->node[0][choice[0]])
                choice[0] = a;
        *cost = g->node[0][choice[0]];
        return 0;
    }
    /* Each node elimination adds one edge; there are at most n - 2. */
    int cap = g->nedges + n, nedges = 0, nelim = 0;
    struct work_edge *edges = calloc(cap, sizeof(*edges));
    struct elim *elims = calloc(n, sizeof(*elims));
    int *indeg = calloc(n, sizeof(*indeg)), *outdeg = calloc(n, sizeof(*outdeg)), *alive = malloc(n * sizeof(*alive));
    if (!edges || !elims || !indeg || !outdeg || !alive) {
        rc = nomem("elimination");
        goto out;
    }
    for (int v = 0; v < n; v++)
        alive[v] = 1;
    for (int e = 0; e < g->nedges; e++) {
        const struct sc_spedge *ed = &g->edges[e];
        size_t bytes = (size_t)g->k[ed->u] * g->k[ed->v] * sizeof(double);
        edges[e] = (struct work_edge){ed->u, ed->v, 1, malloc(bytes)};
        nedges++;
        if (!edges[e].m) {
            rc = nomem("elimination");
            goto out;
        }
        memcpy(edges[e].m, ed->cost, bytes);
        outdeg[ed->u]++;
        indeg[ed->v]++;
    }
    int nalive = n, nalive_edges = nedges;
    for (int changed = 1; changed;) {
        changed = 0;
        /* Edge elimination: parallel edges add up into the first. */
        for (int i = 0; i < nedges; i++) {
            if (!edges[i].alive)
                continue;
            for (int j = i + 1; j < nedges; j++) {
                if (!edges[j].alive || edges[j].u != edges[i].u || edges[j].v != edges[i].v)
                    continue;
                long count = (long)g->k[edges[i].u] * g->k[edges[i].v];
                for (long x = 0; x < count; x++)
                    edges[i].m[x] += edges[j].m[x];
                free(edges[j].m);
                edges[j].m = NULL;
                edges[j].alive = 0;
                outdeg[edges[i].u]--;
                indeg[edges[i].v]--;
                nalive_edges--;
                changed = 1;
            }
        }
        /* Node elimination: u -> v -> w becomes u -> w. */
        for (int v = 0; v < n; v++) {
            if (!alive[v] || v == s || v == t || indeg[v] != 1 || outdeg[v] != 1)
                continue;
            int in = -1, out = -1;
            for (int e = 0; e < nedges; e++) {
                if (!edges[e].alive)
                    continue;
                if (edges[e].v == v)
                    in = e;
                if (edges[e].u == v)
                    out = e;
            }
            int u = edges[in].u, w = edges[out].v, ku = g->k[u], kv = g->k[v], kw = g->k[w];
            double *m = malloc((size_t)ku * kw * sizeof(*m));
            int *arg = malloc((size_t)ku * kw * sizeof(*arg));
            if (!m || !arg) {
                free(m);
                free(arg);
                rc = nomem("elimination");
                goto out;
            }
            const double *e1 = edges[in].m, *e2 = edges[out].m, *nv = g->node[v];
            for (int a = 0; a < ku; a++)
                for (int c = 0; c < kw; c++) {
                    double best = INFINITY;
                    int bestb = 0;
                    for (int b = 0; b < kv; b++) {
                        double x = e1[a * kv + b] + nv[b] + e2[b * kw + c];
                        if (x < best) {
                            best = x;
                            bestb = b;
                        }
                    }
                    m[a * kw + c] = best;
                    arg[a * kw + c] = bestb;
                }
            free(edges[in].m);
            free(edges[out].m);
            edges[in].m = edges[out].m = NULL;
            edges[in].alive = edges[out].alive = 0;
            edges[nedges++] = (struct work_edge){u, w, 1, m};
            elims[nelim++] = (struct elim){v, u, w, arg};
            alive[v] = 0;
            nalive--;
            nalive_edges--;
            changed = 1;
        }
    }
    if (nalive != 2 || nalive_edges != 1) {
        int stuck = -1;
        for (int v = 0; v < n && stuck < 0; v++)
            if (alive[v] && v != s && v != t)
                stuck = v;
        rc = sc_error(SC_ERR_ARG,
                      "planner graph: not series-parallel: %d nodes and %d edges remain after elimination "
                      "(node %d has %d in-edges and %d out-edges)",
                      nalive, nalive_edges, stuck, stuck >= 0 ? indeg[stuck] : 0, stuck >= 0 ? outdeg[stuck] : 0);
        goto out;
    }
    for (int e = 0; e < nedges; e++)
        if (edges[e].alive)
            *cost = best_pair(g, s, t, edges[e].m, &choice[s], &choice[t]);
    /* Unwind: u and w outlived v, so their choices are known. */
    for (int i = nelim - 1; i >= 0; i--) {
        const struct elim *el = &elims[i];
        choice[el->v] = el->arg[choice[el->u] * g->k[el->w] + choice[el->w]];
    }
out:
    if (edges)
        for (int e = 0; e < nedges; e++)
            free(edges[e].m);
    if (elims)
        for (int i = 0; i < nelim; i++)
            free(elims[i].arg);
    free(edges);
    free(elims);
    free(indeg);
    free(outdeg);
    free(alive);
    return rc;
}

/* ------------------------------------------------------------------ chain */

int sc_chain_solve(const struct sc_spgraph *g, double *cost, int *choice)
{
    int s, t, rc = check_graph(g, &s, &t);
    if (rc)
        return rc;
    int n = g->n;
    int *next = malloc(n * sizeof(*next)), *order = malloc(n * sizeof(*order)), *back = NULL;
    double *dist = NULL, *prev = NULL, *edge = NULL;
    if (!next || !order) {
        rc = nomem("chain");
        goto out;
    }
    for (int v = 0; v < n; v++)
        next[v] = -1;
    int kmax = 1;
    for (int v = 0; v < n; v++)
        kmax = g->k[v] > kmax ? g->k[v] : kmax;
    for (int e = 0; e < g->nedges; e++) {
        int u = g->edges[e].u, v = g->edges[e].v;
        if (next[u] >= 0 && next[u] != v) {
            rc = sc_error(SC_ERR_ARG, "planner graph: not a chain: node %d has successors %d and %d", u, next[u], v);
            goto out;
        }
        next[u] = v;
    }
    /* With one source, one sink, acyclic and one successor each, the path
     * from the source visits every node. */
    order[0] = s;
    for (int i = 1; i < n; i++)
        order[i] = next[order[i - 1]];
    back = malloc((size_t)n * kmax * sizeof(*back));
    dist = malloc(kmax * sizeof(*dist));
    prev = malloc(kmax * sizeof(*prev));
    edge = malloc((size_t)kmax * kmax * sizeof(*edge));
    if (!back || !dist || !prev || !edge) {
        rc = nomem("chain");
        goto out;
    }
    /* dist[k]: the least cost of the prefix ending with the current node on
     * candidate k; back[i][k] the predecessor's candidate that reached it. */
    for (int k = 0; k < g->k[s]; k++)
        dist[k] = g->node[s][k];
    for (int i = 1; i < n; i++) {
        int u = order[i - 1], v = order[i], ku = g->k[u], kv = g->k[v];
        memset(edge, 0, (size_t)ku * kv * sizeof(*edge));
        for (int e = 0; e < g->nedges; e++)
            if (g->edges[e].u == u)
                for (int x = 0; x < ku * kv; x++)
                    edge[x] += g->edges[e].cost[x];
        memcpy(prev, dist, ku * sizeof(*prev));
        for (int b = 0; b < kv; b++) {
            double best = INFINITY;
            int besta = 0;
            for (int a = 0; a < ku; a++) {
                double x = prev[a] + edge[a * kv + b];
                if (x < best) {
                    best = x;
                    besta = a;
                }
            }
            dist[b] = best + g->node[v][b];
            back[(size_t)i * kmax + b] = besta;
        }
    }
    int c = 0;
    for (int k = 1; k < g->k[t]; k++)
        if (dist[k] < dist[c])
            c = k;
    *cost = dist[c];
    for (int i = n - 1; i >= 0; i--) {
        choice[order[i]] = c;
        if (i)
            c = back[(size_t)i * kmax + c];
    }
out:
    free(next);
    free(order);
    free(back);
    free(dist);
    free(prev);
    free(edge);
    return rc;
}

/* ------------------------------------------------------------ brute force */

int sc_sp_brute_force(const struct sc_spgraph *g, double *cost, int *choice)
{
    int s, t, rc = check_graph(g, &s, &t);
    if (rc)
        return rc;
    double total = 1;
    for (int v = 0; v < g->n; v++)
        total *= g->k[v];
    if (total > SC_SP_BRUTE_MAX)
        return sc_error(SC_ERR_ARG, "planner graph: %.3g assignments, more than brute force tries (%.3g)", total,
                        SC_SP_BRUTE_MAX);
    int *cur = calloc(g->n, sizeof(*cur));
    if (!cur)
        return nomem("brute force");
    double best = INFINITY;
    memset(choice, 0, g->n * sizeof(*choice));
    for (;;) {
        double x;
        sc_spgraph_cost(g, cur, &x);
        if (x < best) {
            best = x;
            memcpy(choice, cur, g->n * sizeof(*choice));
        }
        /* The next assignment, node 0 fastest. */
        int v = 0;
        while (v < g->n && ++cur[v] == g->k[v])
            cur[v++] = 0;
        if (v == g->n)
            break;
    }
    free(cur);
    *cost = best;
    return 0;
}
