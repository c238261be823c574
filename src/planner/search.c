/* The planner's search (see plan_private.h): the elimination over the
 * graph (base/spgraph.h) with each collective hidden behind the backward
 * pass before it, the memory price that brings a plan within a limit, the
 * local search on the timeline from two starts, and --fc-replicate's
 * alternative. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/spgraph.h"
#include "src/planner/plan_private.h"

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

static int solve(const struct graph *G, double lambda, int *choice, double *chain_time)
{
    struct sc_spgraph *sg;
    int err = sc_spgraph_create(G->n, &sg);
    if (err)
        return err;
    for (int v = 0; v < G->n && !err; v++) {
        const struct node *nd = &G->node[v];
        double cost[nd->ncand];
        for (int k = 0; k < nd->ncand; k++) {
            const struct cand *c = &nd->cand[k];
            double exposed = c->ar_time - nd->hide;
            cost[k] = (G->K > 1 ? G->K : 1) * (c->fwd + c->bwd) + c->update + (exposed > 0 ? exposed : 0) +
                      lambda * c->memory;
        }
        err = sc_spgraph_set_node(sg, v, nd->ncand, cost);
    }
    for (int e = 0; e < G->nedges && !err; e++) { /* redistributions: every micro-batch's */
        const struct edge *ed = &G->edge[e];
        size_t n = (size_t)G->node[ed->u].ncand * G->node[ed->v].ncand;
        double *scaled = G->K > 1 ? malloc(n * sizeof *scaled) : NULL;
        if (G->K > 1 && !scaled)
            err = sc_error(SC_ERR_NOMEM, "out of memory");
        for (size_t i = 0; scaled && i < n; i++)
            scaled[i] = G->K * ed->cost[i];
        if (!err)
            err = sc_spgraph_add_edge(sg, ed->u, ed->v, scaled ? scaled : ed->cost);
        free(scaled);
    }
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

/* Whether every edge under choice can be costed (a [shortcut] reads its
 * inputs as they are: edge_cost's infinity). */
static int feasible(const struct graph *G, const int *choice)
{
    for (int i = 0; i < G->nedges; i++)
        if (!isfinite(G->edge[i].cost[plan_edge_at(G, &G->edge[i], choice)]))
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
 * that each hide alone but not together (docs/planner-model.md, "What the rules rest on").
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
    double best = plan_predict(m, G, choice, &pol);
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
                    double t = plan_predict(m, G, trial, &pol);
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
    int ng = plan_all_grids(m->P, grids, 512), pol, alt[G->n];
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
        double t = plan_predict(m, G, alt, &pol);
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
    if (isfinite(best_uni) && best_uni <= plan_predict(m, G, choice, &pol) * (1 + o->mix_margin))
        memcpy(choice, uni, sizeof(int) * G->n);
}

/* --fc-replicate as a search's option: n<P> everywhere with the first F
 * [connected] layers replicated, for each F, against the plan found;
 * taken (choice, m->replicate) if it beats it by more than the mix margin,
 * as a mix must beat the uniform plans (a change of the runtime's
 * schedule the measurements priced less surely than plain sample
 * parallelism).  Memory is not priced here: not under --mem-limit. */
void plan_try_replication(struct model *m, const struct graph *G, const struct sc_plan_opts *o, int *choice)
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
        nfc += sc_rule_replicable(l);
    }
    if (!nfc || !feasible(G, sample))
        return;
    double best = plan_predict(m, G, choice, &pol) * (1 - o->mix_margin);
    int keep = 0;
    for (int f = 1; f <= nfc; f++) {
        m->replicate = f;
        double t = plan_predict(m, G, sample, &pol);
        if (pol >= 0 && t < best)
            best = t, keep = f;
    }
    m->replicate = keep;
    if (keep)
        memcpy(choice, sample, sizeof sample);
}

/* The elimination's choice.  Hiding behind backward depends on the choice:
 * solve with the first candidates' (sample parallelism's) backward, then
 * again with the solution's.  chain_time: solve's cross-check. */
int plan_solve(const struct model *m, struct graph *G, int *choice, double *chain_time)
{
    int err = 0;
    set_hide(m, G, choice);
    for (int it = 0; it < 2 && !err; it++) {
        err = solve(G, 0, choice, chain_time);
        set_hide(m, G, choice);
    }
    return err;
}

/* A choice over mem_limit bytes per rank (if > 0) brought within it:
 * memory is priced, by bisection, until the elimination's choice fits,
 * starting from the least memory each layer can take (SC_ERR_ARG when
 * even that does not fit).  *chain_time, the cross-check of the unpriced
 * solve, is then -1. */
int plan_fit_memory(const struct graph *G, double mem_limit, int *choice, double *chain_time)
{
    if (!(mem_limit > 0) || memory_of(G, choice) <= mem_limit)
        return 0;
    *chain_time = -1;
    int least[G->n], err = 0;
    for (int v = 0; v < G->n; v++) {
        least[v] = 0;
        for (int k = 1; k < G->node[v].ncand; k++)
            if (G->node[v].cand[k].memory < G->node[v].cand[least[v]].memory)
                least[v] = k;
    }
    double need = memory_of(G, least);
    if (need > mem_limit)
        err = sc_error(SC_ERR_ARG, "no distribution fits --mem-limit %.0f bytes per rank: the least needs %.0f",
                       mem_limit, need);
    double lo = 0, hi = 1e-12;
    int fit[G->n];
    memcpy(fit, least, sizeof fit);
    while (!err && hi < 1e6) {
        if ((err = solve(G, hi, choice, NULL)))
            break;
        if (memory_of(G, choice) <= mem_limit)
            break;
        lo = hi, hi *= 4;
    }
    for (int it = 0; it < 30 && !err; it++) {
        double mid = 0.5 * (lo + hi);
        if ((err = solve(G, mid, choice, NULL)))
            break;
        if (memory_of(G, choice) <= mem_limit)
            hi = mid, memcpy(fit, choice, sizeof fit);
        else
            lo = mid;
    }
    if (!err && solve(G, hi, choice, NULL) == 0 && memory_of(G, choice) > mem_limit)
        memcpy(choice, fit, sizeof fit);
    return err;
}

/* The elimination's choice improved on the timeline, from two starts: the
 * choice and the best uniform plan.  The refinement is a local search, and
 * a plan it stops at can need two moves at once to leave (docs/planner-model.md, "What the rules rest on").
 * Then a mix must beat the uniform plans by the margin (keep_best). */
void plan_improve(const struct model *m, const struct graph *G, const struct sc_plan_opts *o, int *choice)
{
    int uni[G->n], from_uni[G->n], cut[G->n], pol, nb = cut_points(G, cut);
    double best_uni = best_uniform(m, G, o, uni);
    refine(m, G, o, cut, nb, choice, 0);
    if (isfinite(best_uni)) {
        memcpy(from_uni, uni, sizeof uni);
        refine(m, G, o, cut, nb, from_uni, 1);
        if (plan_predict(m, G, from_uni, &pol) < plan_predict(m, G, choice, &pol))
            memcpy(choice, from_uni, sizeof from_uni);
    }
    keep_best(m, G, o, uni, best_uni, choice);
}
