/* sc_spgraph: the search core of a per-layer parallelization planner.  A
 * directed acyclic graph of layers with one source and one sink; layer v
 * has K_v candidate configurations, each with a cost (its compute time
 * under that configuration), and an edge (u, v) has a K_u x K_v matrix (the
 * cost of redistributing u's output into what v wants).  An assignment
 * picks one candidate per layer; its cost is the sum of the picked node
 * costs and edge entries.  The solvers find an assignment of least cost:
 *  - sc_sp_solve, exact on series-parallel graphs (chains with residual
 *    diamonds, nested), by DeePa's node and edge elimination (Jia et al.);
 *  - sc_chain_solve, Dryden et al.'s shortest path over a chain;
 *  - sc_sp_brute_force, every assignment, the reference of the tests.
 * Pure arithmetic: no MPI, no StarPU. */
#ifndef SC_BASE_SPGRAPH_H
#define SC_BASE_SPGRAPH_H

/* sc_sp_brute_force refuses graphs with more assignments than this. */
#define SC_SP_BRUTE_MAX 10000000.0

struct sc_spgraph;

/* A graph of n >= 1 nodes 0 .. n-1, none set yet, no edges.  The graph
 * copies everything it is given; sc_spgraph_free(NULL) does nothing. */
int sc_spgraph_create(int n, struct sc_spgraph **out);
void sc_spgraph_free(struct sc_spgraph *g);

/* Node v's k >= 1 candidates and their costs cost[0 .. k-1] (no NaN; an
 * infinite cost forbids a candidate).  Set a node before its edges; once it
 * has edges its number of candidates cannot change. */
int sc_spgraph_set_node(struct sc_spgraph *g, int v, int k, const double *cost);
/* An edge u -> v (u != v, both set) with the K_u x K_v matrix cost, row
 * major: cost[a * K_v + b] is the cost when u takes a and v takes b.
 * Parallel edges are allowed; their costs add. */
int sc_spgraph_add_edge(struct sc_spgraph *g, int u, int v, const double *cost);

/* The cost of the assignment choice[0 .. n-1] (SC_ERR_ARG if a choice is
 * out of range): what the solvers minimize. */
int sc_spgraph_cost(const struct sc_spgraph *g, const int *choice, double *cost);

/* Each solver checks the graph (every node set; acyclic with one source and
 * one sink), then writes the least cost to *cost and an assignment reaching
 * it to choice[0 .. n-1].  Ties go to the lower candidate.  SC_ERR_ARG,
 * with a message saying why, when the graph is not of the solver's kind:
 * sc_sp_solve refuses a graph the eliminations do not reduce to one edge
 * (not series-parallel, e.g. a Wheatstone bridge) rather than guess;
 * sc_chain_solve one where a node has two successors; sc_sp_brute_force one
 * with more than SC_SP_BRUTE_MAX assignments. */
int sc_sp_solve(const struct sc_spgraph *g, double *cost, int *choice);
int sc_chain_solve(const struct sc_spgraph *g, double *cost, int *choice);
int sc_sp_brute_force(const struct sc_spgraph *g, double *cost, int *choice);

#endif
