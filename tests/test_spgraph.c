/* The planner's search core: node and edge elimination against brute force
 * on random series-parallel graphs, the chain shortest path against both,
 * hand-computed cases, and the graphs each solver must refuse. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/rng.h"
#include "base/spgraph.h"

#include "check.h"

#define MAXN 64
#define MAXE 256

static uint64_t rng_state;

static uint64_t draw(void)
{
    return sc_splitmix64(rng_state++);
}

static int draw_int(int n)
{
    return (int)(draw() % (uint64_t)n);
}

/* A cost: small integers (many ties) or reals; now and then a forbidden
 * candidate (infinite) when forbid is set. */
static double draw_cost(int ints, int forbid)
{
    if (forbid && draw_int(12) == 0)
        return INFINITY;
    return ints ? (double)draw_int(4) : (double)(draw() >> 11) * 0x1p-53 * 10.0;
}

/* A graph's shape before it is built: nodes, their candidates, edges. */
struct shape {
    int n, ne;
    int k[MAXN];
    int eu[MAXE], ev[MAXE];
};

static void add(struct shape *sh, int u, int v)
{
    sh->eu[sh->ne] = u;
    sh->ev[sh->ne] = v;
    sh->ne++;
}

/* Something series-parallel between s and t: one edge, a series
 * composition through a new node, or two parallel compositions. */
static void compose(struct shape *sh, int s, int t, int depth, int maxn)
{
    int r = depth > 6 || sh->ne > MAXE / 4 ? 0 : draw_int(5);
    if (r >= 3 && sh->n < maxn) {
        int m = sh->n++;
        compose(sh, s, m, depth + 1, maxn);
        compose(sh, m, t, depth + 1, maxn);
    } else if (r == 2 || r == 1) {
        compose(sh, s, t, depth + 1, maxn);
        compose(sh, s, t, depth + 1, maxn);
    } else {
        add(sh, s, t);
    }
}

/* A random series-parallel shape: source 0, sink 1, at most maxn nodes. */
static void random_sp(struct shape *sh, int maxn)
{
    memset(sh, 0, sizeof(*sh));
    sh->n = 2;
    compose(sh, 0, 1, 0, maxn);
}

/* A chain through the nodes in a random order, with now and then a second
 * (parallel) edge between neighbours. */
static void random_chain(struct shape *sh, int n)
{
    int perm[MAXN];
    memset(sh, 0, sizeof(*sh));
    sh->n = n;
    for (int i = 0; i < n; i++)
        perm[i] = i;
    for (int i = n - 1; i > 0; i--) {
        int j = draw_int(i + 1), x = perm[i];
        perm[i] = perm[j];
        perm[j] = x;
    }
    for (int i = 0; i + 1 < n; i++) {
        add(sh, perm[i], perm[i + 1]);
        if (draw_int(6) == 0)
            add(sh, perm[i], perm[i + 1]);
    }
}

/* Build sh with random candidates (1..kmax) and costs. */
static struct sc_spgraph *build(struct shape *sh, int kmax, int ints, int forbid)
{
    struct sc_spgraph *g;
    if (sc_spgraph_create(sh->n, &g))
        return NULL;
    double cost[16 * 16];
    for (int v = 0; v < sh->n; v++) {
        sh->k[v] = 1 + draw_int(kmax);
        for (int i = 0; i < sh->k[v]; i++)
            cost[i] = draw_cost(ints, forbid);
        if (sc_spgraph_set_node(g, v, sh->k[v], cost))
            goto fail;
    }
    for (int e = 0; e < sh->ne; e++) {
        for (int i = 0; i < sh->k[sh->eu[e]] * sh->k[sh->ev[e]]; i++)
            cost[i] = draw_cost(ints, 0);
        if (sc_spgraph_add_edge(g, sh->eu[e], sh->ev[e], cost))
            goto fail;
    }
    return g;
fail:
    sc_spgraph_free(g);
    return NULL;
}

static int same(double a, double b)
{
    return a == b || fabs(a - b) <= 1e-9 * fmax(1.0, fmax(fabs(a), fabs(b)));
}

/* The solver's assignment costs what it says. */
static int consistent(const struct sc_spgraph *g, const int *choice, double cost)
{
    double again;
    return sc_spgraph_cost(g, choice, &again) == 0 && same(again, cost);
}

static void random_sp_graphs(int count)
{
    int ok_solve = 1, ok_same = 1, ok_choice = 1, maxn_seen = 0, parallel = 0, series = 0;
    for (int i = 0; i < count; i++) {
        rng_state = 1000003ULL * (uint64_t)(i + 1);
        struct shape sh;
        random_sp(&sh, 10);
        struct sc_spgraph *g = build(&sh, 4, i % 2, i % 3 == 0);
        if (!g) {
            check(0, "sp graph %d builds: %s", i, sc_last_error());
            return;
        }
        maxn_seen = sh.n > maxn_seen ? sh.n : maxn_seen;
        series += sh.n > 2;
        parallel += sh.ne > sh.n - 1;
        double c1, c2;
        int ch1[MAXN], ch2[MAXN];
        int rc1 = sc_sp_solve(g, &c1, ch1), rc2 = sc_sp_brute_force(g, &c2, ch2);
        if (rc1 || rc2) {
            if (ok_solve)
                check(0, "sp graph %d (%d nodes, %d edges) solves: %d %d %s", i, sh.n, sh.ne, rc1, rc2,
                      sc_last_error());
            ok_solve = 0;
        } else {
            if (!same(c1, c2) && ok_same)
                check(0, "sp graph %d: elimination %.17g, brute force %.17g", i, c1, c2);
            ok_same &= same(c1, c2);
            if (!(consistent(g, ch1, c1) && consistent(g, ch2, c2)) && ok_choice)
                check(0, "sp graph %d: the assignments cost what the solvers say", i);
            ok_choice &= consistent(g, ch1, c1) && consistent(g, ch2, c2);
        }
        sc_spgraph_free(g);
    }
    check(ok_solve, "%d random series-parallel graphs (up to %d nodes; %d with series, %d with parallel edges) solve",
          count, maxn_seen, series, parallel);
    check(ok_same, "elimination cost == brute-force cost on all of them");
    check(ok_choice, "each returned assignment recomputes to the returned cost");
}

static void random_chains(int count)
{
    int ok = 1;
    for (int i = 0; i < count && ok; i++) {
        rng_state = 7777777ULL * (uint64_t)(i + 1);
        struct shape sh;
        random_chain(&sh, 1 + draw_int(9));
        struct sc_spgraph *g = build(&sh, 4, i % 2, i % 4 == 0);
        if (!g) {
            check(0, "chain %d builds: %s", i, sc_last_error());
            return;
        }
        double c1, c2, c3;
        int ch1[MAXN], ch2[MAXN], ch3[MAXN];
        int rc = sc_chain_solve(g, &c1, ch1) | sc_sp_brute_force(g, &c2, ch2) | sc_sp_solve(g, &c3, ch3);
        ok = !rc && same(c1, c2) && same(c3, c2) && consistent(g, ch1, c1) && consistent(g, ch3, c3);
        if (!ok)
            check(0, "chain %d (%d nodes): rc %d, chain %.17g, brute force %.17g, elimination %.17g %s", i, sh.n, rc,
                  c1, c2, c3, rc ? sc_last_error() : "");
        sc_spgraph_free(g);
    }
    check(ok, "%d random chains: shortest path == brute force == elimination", count);
}

/* Graphs too big for brute force: the solvers agree with each other and
 * beat random assignments. */
static void big_graphs(void)
{
    struct shape sh;
    rng_state = 42;
    random_chain(&sh, MAXN);
    struct sc_spgraph *g = build(&sh, 4, 0, 0);
    double c1, c2, c3;
    int ch1[MAXN], ch2[MAXN];
    int rc1 = sc_chain_solve(g, &c1, ch1), rc2 = sc_sp_solve(g, &c2, ch2), rc3 = sc_sp_brute_force(g, &c3, ch1);
    check(!rc1 && !rc2 && same(c1, c2) && consistent(g, ch2, c2), "chain of %d: shortest path %.6g == elimination %.6g",
          MAXN, c1, c2);
    check(rc3 == SC_ERR_ARG && strstr(sc_last_error(), "brute force"), "brute force refuses it: %s", sc_last_error());
    sc_spgraph_free(g);

    /* A residual network: a chain of blocks, each a diamond (the body,
     * two layers, beside the shortcut). */
    memset(&sh, 0, sizeof(sh));
    sh.n = 1;
    for (int b = 0; b < 20; b++) {
        int in = sh.n - 1, l1 = sh.n, l2 = sh.n + 1, out = sh.n + 2;
        sh.n += 3;
        add(&sh, in, l1);
        add(&sh, l1, l2);
        add(&sh, l2, out);
        add(&sh, in, out);
    }
    g = build(&sh, 4, 0, 0);
    int rc = sc_sp_solve(g, &c1, ch1), beaten = 0;
    check(!rc && consistent(g, ch1, c1), "residual network of %d nodes solves: %.6g %s", sh.n, c1,
          rc ? sc_last_error() : "");
    for (int i = 0; i < 2000; i++) {
        for (int v = 0; v < sh.n; v++)
            ch2[v] = draw_int(sh.k[v]);
        sc_spgraph_cost(g, ch2, &c2);
        beaten += c2 < c1 - 1e-9;
    }
    check(beaten == 0, "no random assignment of 2000 beats it");
    sc_spgraph_free(g);
}

static void hand_computed(void)
{
    /* 0 -> 1 -> 2.  Node 0 alone would take 0 (1 < 3), but every
     * redistribution out of 0 on 0 costs; (1, 1, 1) costs 3 + 1 + 1 + 0 + 0
     * = 5, the next best (0, 0, 0) 1 + 2 + 4 + 0 + 0 = 7. */
    const double n0[] = {1, 3}, n1[] = {2, 1}, n2[] = {4, 1};
    const double e01[] = {0, 5, 1, 0}, e12[] = {0, 4, 2, 0}, e02[] = {0, 0, 9, 9};
    struct sc_spgraph *g;
    sc_spgraph_create(3, &g);
    sc_spgraph_set_node(g, 0, 2, n0);
    sc_spgraph_set_node(g, 1, 2, n1);
    sc_spgraph_set_node(g, 2, 2, n2);
    sc_spgraph_add_edge(g, 0, 1, e01);
    sc_spgraph_add_edge(g, 1, 2, e12);
    double c;
    int ch[3];
    int rc = sc_sp_solve(g, &c, ch);
    check(!rc && c == 5 && ch[0] == 1 && ch[1] == 1 && ch[2] == 1,
          "chain by elimination: %g (%d, %d, %d), want 5 (1, 1, 1)", c, ch[0], ch[1], ch[2]);
    rc = sc_chain_solve(g, &c, ch);
    check(!rc && c == 5 && ch[0] == 1 && ch[1] == 1 && ch[2] == 1, "chain by shortest path: %g (%d, %d, %d)", c, ch[0],
          ch[1], ch[2]);
    /* A shortcut 0 -> 2 that costs 9 when 0 is on 1: now (0, 0, 0) at 7
     * wins over (1, 1, 1) at 14 and (0, 0, 1), (0, 1, 1) at 8. */
    sc_spgraph_add_edge(g, 0, 2, e02);
    rc = sc_sp_solve(g, &c, ch);
    check(!rc && c == 7 && ch[0] == 0 && ch[1] == 0 && ch[2] == 0,
          "triangle by elimination: %g (%d, %d, %d), want 7 (0, 0, 0)", c, ch[0], ch[1], ch[2]);
    rc = sc_chain_solve(g, &c, ch);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "not a chain"), "the triangle is not a chain: %s",
          sc_last_error());
    sc_spgraph_free(g);

    /* One node: its cheapest candidate. */
    const double one[] = {3, 2, 5};
    sc_spgraph_create(1, &g);
    sc_spgraph_set_node(g, 0, 3, one);
    rc = sc_sp_solve(g, &c, ch) | sc_chain_solve(g, &c, ch);
    check(!rc && c == 2 && ch[0] == 1, "one node: %g (%d)", c, ch[0]);
    sc_spgraph_free(g);
}

static void refused(void)
{
    const double k2[] = {1, 2}, m22[] = {0, 1, 1, 0};
    double c = -1;
    int ch[5];
    struct sc_spgraph *g;

    /* The Wheatstone bridge s -> a, s -> b, a -> b, a -> t, b -> t. */
    sc_spgraph_create(4, &g);
    for (int v = 0; v < 4; v++)
        sc_spgraph_set_node(g, v, 2, k2);
    const int eu[] = {0, 0, 1, 1, 2}, ev[] = {1, 2, 2, 3, 3};
    for (int e = 0; e < 5; e++)
        sc_spgraph_add_edge(g, eu[e], ev[e], m22);
    int rc = sc_sp_solve(g, &c, ch);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "not series-parallel"), "Wheatstone bridge refused: %d %s", rc,
          sc_last_error());
    rc = sc_chain_solve(g, &c, ch);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "not a chain"), "nor a chain: %s", sc_last_error());
    rc = sc_sp_brute_force(g, &c, ch);
    check(!rc && c == 4, "brute force still solves it: %g", c);
    sc_spgraph_free(g);

    /* Two sources, a cycle, an unset node. */
    sc_spgraph_create(3, &g);
    for (int v = 0; v < 3; v++)
        sc_spgraph_set_node(g, v, 2, k2);
    sc_spgraph_add_edge(g, 0, 2, m22);
    sc_spgraph_add_edge(g, 1, 2, m22);
    rc = sc_sp_solve(g, &c, ch);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "2 sources"), "two sources refused: %s", sc_last_error());
    sc_spgraph_free(g);

    sc_spgraph_create(4, &g);
    for (int v = 0; v < 4; v++)
        sc_spgraph_set_node(g, v, 2, k2);
    sc_spgraph_add_edge(g, 0, 1, m22);
    sc_spgraph_add_edge(g, 1, 2, m22);
    sc_spgraph_add_edge(g, 2, 1, m22);
    sc_spgraph_add_edge(g, 2, 3, m22);
    rc = sc_sp_solve(g, &c, ch);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "cycle"), "a cycle refused: %s", sc_last_error());
    rc = sc_sp_brute_force(g, &c, ch);
    check(rc == SC_ERR_ARG, "by brute force too: %s", sc_last_error());
    sc_spgraph_free(g);

    sc_spgraph_create(2, &g);
    sc_spgraph_set_node(g, 0, 2, k2);
    rc = sc_spgraph_add_edge(g, 0, 1, m22);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "before node 1 is set"), "edge to an unset node: %s",
          sc_last_error());
    rc = sc_sp_solve(g, &c, ch);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "node 1 is not set"), "unset node refused: %s", sc_last_error());
    sc_spgraph_set_node(g, 1, 2, k2);
    sc_spgraph_add_edge(g, 0, 1, m22);
    rc = sc_spgraph_set_node(g, 1, 1, k2);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "cannot become 1"), "candidates fixed once edges exist: %s",
          sc_last_error());
    const double bad[] = {1, NAN};
    rc = sc_spgraph_set_node(g, 1, 2, bad);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "NaN"), "NaN cost refused: %s", sc_last_error());
    rc = sc_spgraph_add_edge(g, 1, 1, m22);
    check(rc == SC_ERR_ARG, "self-loop refused: %s", sc_last_error());
    int wrong[] = {0, 2};
    rc = sc_spgraph_cost(g, wrong, &c);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), "no candidate 2"), "out-of-range assignment: %s",
          sc_last_error());
    sc_spgraph_free(g);

    struct sc_spgraph *none = (struct sc_spgraph *)1;
    rc = sc_spgraph_create(0, &none);
    check(rc == SC_ERR_ARG && none == NULL, "no graph of 0 nodes: %s", sc_last_error());
    sc_spgraph_free(NULL);
}

int main(void)
{
    hand_computed();
    refused();
    random_sp_graphs(500);
    random_chains(500);
    big_graphs();
    printf("%s: %d passed, %d failed\n", failures ? "FAIL" : "PASS", passes, failures);
    return failures ? 1 : 0;
}
