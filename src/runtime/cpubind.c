/* Where a rank's CPU workers run (see cpubind.h). */
#include "src/runtime/cpubind.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <hwloc.h>

#include "base/grid.h"
#include "base/error.h"

/* ---- the choice ---- */

enum sc_cpubind_how sc_cpubind_choose(int ncores, const char *const *bound, int nranks, int me, int *first, int *count)
{
    *first = 0;
    *count = ncores;
    if (nranks > ncores)
        return SC_CPUBIND_SHARED;
    if (nranks == 1)
        return SC_CPUBIND_ALONE;
    hwloc_bitmap_t all = hwloc_bitmap_alloc(), seen = hwloc_bitmap_alloc(), one = hwloc_bitmap_alloc();
    enum sc_cpubind_how how = SC_CPUBIND_KEPT;
    hwloc_bitmap_set_range(all, 0, ncores - 1);
    for (int r = 0; r < nranks && how == SC_CPUBIND_KEPT; r++) {
        if (hwloc_bitmap_list_sscanf(one, bound[r]) < 0)
            hwloc_bitmap_zero(one);
        hwloc_bitmap_and(one, one, all);
        /* Unbound (nothing, or every core) overlaps whatever the others have. */
        if (hwloc_bitmap_iszero(one) || hwloc_bitmap_isequal(one, all) || hwloc_bitmap_intersects(one, seen))
            how = SC_CPUBIND_OVERLAP;
        hwloc_bitmap_or(seen, seen, one);
    }
    if (how == SC_CPUBIND_KEPT && !hwloc_bitmap_isequal(seen, all))
        how = SC_CPUBIND_UNUSED;
    hwloc_bitmap_free(all);
    hwloc_bitmap_free(seen);
    hwloc_bitmap_free(one);
    if (how != SC_CPUBIND_KEPT) {
        /* Contiguous blocks in hwloc's logical order keep a rank's cores
         * within one package and NUMA node where the counts allow. */
        sc_block_range(ncores, nranks, me, first, count);
    }
    return how;
}

/* ---- the rank's placement ---- */

struct sc_cpubind {
    hwloc_topology_t topo;
    enum sc_cpubind_how how;
    int nranks;           /* ranks on the node */
    hwloc_bitmap_t cores; /* the rank's cores (core logical indexes) */
    hwloc_bitmap_t pus;   /* their processing units (hwloc cpuset) */
    char *set_text, *launcher_text;
    int launcher_unbound; /* the launcher's binding covers every core */
    int nworkers;
    hwloc_bitmap_t *worker_pus; /* per worker; NULL: workers not bound */
    char line[512];
    char where[320]; /* "core 0, as bound by the launcher" */
};

/* SC_CPU_BIND: 0 auto, 1 launcher, 2 none; -1 (sc_error set) for anything else. */
static int bind_mode(void)
{
    const char *env = getenv("SC_CPU_BIND");
    if (!env || !*env || !strcmp(env, "auto"))
        return 0;
    if (!strcmp(env, "launcher"))
        return 1;
    if (!strcmp(env, "none"))
        return 2;
    sc_error(SC_ERR_ARG, "SC_CPU_BIND=%s: want auto, launcher or none", env);
    return -1;
}

/* The cores (logical indexes) that a cpuset touches. */
static void cores_of(hwloc_topology_t topo, hwloc_const_cpuset_t pus, hwloc_bitmap_t cores)
{
    hwloc_bitmap_zero(cores);
    int n = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    for (int i = 0; i < n; i++) {
        hwloc_obj_t c = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
        if (hwloc_bitmap_intersects(c->cpuset, pus))
            hwloc_bitmap_set(cores, (unsigned)i);
    }
}

/* The processing units of a set of cores, within what the process may use. */
static void pus_of(hwloc_topology_t topo, hwloc_const_bitmap_t cores, hwloc_bitmap_t pus)
{
    hwloc_bitmap_zero(pus);
    int i;
    hwloc_bitmap_foreach_begin(i, cores)
    {
        hwloc_obj_t c = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)i);
        if (c)
            hwloc_bitmap_or(pus, pus, c->cpuset);
    }
    hwloc_bitmap_foreach_end();
    hwloc_bitmap_and(pus, pus, hwloc_topology_get_allowed_cpuset(topo));
}

/* The same for one core. */
static void pus_of_core(hwloc_topology_t topo, int core, hwloc_bitmap_t pus)
{
    hwloc_obj_t c = hwloc_get_obj_by_type(topo, HWLOC_OBJ_CORE, (unsigned)core);
    hwloc_bitmap_zero(pus);
    if (c)
        hwloc_bitmap_and(pus, c->cpuset, hwloc_topology_get_allowed_cpuset(topo));
}

/* Every rank's core list, gathered over the node. */
static int gather_lists(MPI_Comm node, int nranks, const char *mine, char ***out, char **buf)
{
    int len = (int)strlen(mine) + 1, *lens = calloc((size_t)nranks, sizeof(int)),
        *displs = calloc((size_t)nranks, sizeof(int));
    *out = calloc((size_t)nranks, sizeof(char *));
    *buf = NULL;
    int err = !lens || !displs || !*out;
    MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_INT, MPI_MAX, node);
    if (!err) {
        MPI_Allgather(&len, 1, MPI_INT, lens, 1, MPI_INT, node);
        long total = 0;
        for (int r = 0; r < nranks; r++) {
            displs[r] = (int)total;
            total += lens[r];
        }
        err = !(*buf = malloc((size_t)total));
        MPI_Allreduce(MPI_IN_PLACE, &err, 1, MPI_INT, MPI_MAX, node);
        if (!err) {
            MPI_Allgatherv(mine, len, MPI_CHAR, *buf, lens, displs, MPI_CHAR, node);
            for (int r = 0; r < nranks; r++)
                (*out)[r] = *buf + displs[r];
        }
    }
    free(lens);
    free(displs);
    if (err) {
        free(*out);
        free(*buf);
        *out = NULL;
        *buf = NULL;
        return sc_error(SC_ERR_NOMEM, "out of memory");
    }
    return 0;
}

void sc_cpubind_free(struct sc_cpubind *b)
{
    if (!b)
        return;
    if (b->worker_pus)
        for (int w = 0; w < b->nworkers; w++)
            hwloc_bitmap_free(b->worker_pus[w]);
    free(b->worker_pus);
    hwloc_bitmap_free(b->cores);
    hwloc_bitmap_free(b->pus);
    free(b->set_text);
    free(b->launcher_text);
    if (b->topo)
        hwloc_topology_destroy(b->topo);
    free(b);
}

int sc_cpubind_setup(MPI_Comm node, struct sc_cpubind **out)
{
    *out = NULL;
    /* Every rank of the node takes part in the gather below, or none does. */
    int mode = bind_mode(), lo = mode, hi = mode;
    MPI_Allreduce(MPI_IN_PLACE, &lo, 1, MPI_INT, MPI_MIN, node);
    MPI_Allreduce(MPI_IN_PLACE, &hi, 1, MPI_INT, MPI_MAX, node);
    if (mode < 0)
        return SC_ERR_ARG;
    if (lo != hi)
        return sc_error(SC_ERR_ARG, "SC_CPU_BIND differs among the ranks of a node");
    if (mode == 2)
        return 0;

    struct sc_cpubind *b = calloc(1, sizeof(*b));
    if (!b)
        return sc_error(SC_ERR_NOMEM, "out of memory");
    int err = 0;
    hwloc_bitmap_t launcher = hwloc_bitmap_alloc();
    b->cores = hwloc_bitmap_alloc();
    b->pus = hwloc_bitmap_alloc();
    if (hwloc_topology_init(&b->topo)) {
        b->topo = NULL;
        err = sc_error(SC_ERR_RUNTIME, "hwloc cannot read this machine's topology");
    } else if (hwloc_topology_load(b->topo))
        err = sc_error(SC_ERR_RUNTIME, "hwloc cannot read this machine's topology");
    int ncores = !err ? hwloc_get_nbobjs_by_type(b->topo, HWLOC_OBJ_CORE) : 0;
    if (!err && ncores < 1)
        err = sc_error(SC_ERR_RUNTIME, "hwloc finds no core on this machine");
    if (!err && hwloc_get_cpubind(b->topo, launcher, HWLOC_CPUBIND_PROCESS))
        hwloc_bitmap_copy(launcher, hwloc_topology_get_allowed_cpuset(b->topo)); /* unknown: unbound */
    hwloc_bitmap_t launcher_cores = hwloc_bitmap_alloc();
    if (!err) {
        cores_of(b->topo, launcher, launcher_cores);
        b->launcher_unbound = hwloc_bitmap_weight(launcher_cores) == ncores;
    }
    hwloc_bitmap_list_asprintf(&b->launcher_text, launcher_cores);
    int any_err = err;
    MPI_Allreduce(MPI_IN_PLACE, &any_err, 1, MPI_INT, MPI_MIN, node);
    if (any_err && !err)
        err = sc_error(any_err, "another rank of this node could not read the topology (hwloc)");
    MPI_Comm_size(node, &b->nranks);
    int me;
    MPI_Comm_rank(node, &me);
    char **lists = NULL, *buf = NULL;
    if (!err)
        err = gather_lists(node, b->nranks, b->launcher_text ? b->launcher_text : "", &lists, &buf);
    if (!err) {
        int first, count;
        if (mode == 1) {
            b->how = SC_CPUBIND_KEPT;
            hwloc_bitmap_copy(b->cores, launcher_cores);
        } else {
            b->how = sc_cpubind_choose(ncores, (const char *const *)lists, b->nranks, me, &first, &count);
            if (b->how == SC_CPUBIND_KEPT)
                hwloc_bitmap_copy(b->cores, launcher_cores);
            else
                hwloc_bitmap_set_range(b->cores, (unsigned)first, first + count - 1);
        }
        pus_of(b->topo, b->cores, b->pus);
        if (hwloc_bitmap_iszero(b->pus)) { /* cores the process may not use: keep what it had */
            hwloc_bitmap_copy(b->pus, launcher);
            cores_of(b->topo, launcher, b->cores);
        }
        hwloc_bitmap_list_asprintf(&b->set_text, b->cores);
        /* The whole process, threads started later included (StarPU-MPI's
         * progress thread, the CUDA drivers): a failure leaves the
         * launcher's binding, which is no reason to stop. */
        if (!hwloc_bitmap_isequal(b->pus, launcher) && hwloc_set_cpubind(b->topo, b->pus, HWLOC_CPUBIND_PROCESS))
            SC_LOG(1, "warning: cannot bind this rank to cores %s; its workers run where the launcher put them",
                   b->set_text ? b->set_text : "?");
    }
    free(lists);
    free(buf);
    hwloc_bitmap_free(launcher);
    hwloc_bitmap_free(launcher_cores);
    if (!err && (!b->set_text || !b->launcher_text))
        err = sc_error(SC_ERR_NOMEM, "out of memory");
    if (err) {
        sc_cpubind_free(b);
        return err;
    }
    *out = b;
    return 0;
}

int sc_cpubind_cores(const struct sc_cpubind *b)
{
    int n = hwloc_bitmap_weight(b->cores);
    if (b->how == SC_CPUBIND_SHARED) /* the node's ranks share its cores */
        n /= b->nranks;
    return n < 1 ? 1 : n;
}

/* "core 3" or "cores 0-3" */
static void cores_phrase(char *buf, size_t size, const char *list)
{
    (void)!snprintf(buf, size, "core%s %s", strpbrk(list, "-,") ? "s" : "", list);
}

const char *sc_cpubind_where(const struct sc_cpubind *b)
{
    return b->where;
}

static const char *how_text(const struct sc_cpubind *b)
{
    switch (b->how) {
    case SC_CPUBIND_KEPT:
        return "";
    case SC_CPUBIND_ALONE:
        return "; alone on its node: all of its cores";
    case SC_CPUBIND_OVERLAP:
        return "; the node's ranks were bound to overlapping cores: the cores split among them";
    case SC_CPUBIND_UNUSED:
        return "; the node's ranks left cores unused: the cores split among them";
    case SC_CPUBIND_SHARED:
        return "; more ranks than cores on the node: workers not bound";
    }
    return "";
}

int sc_cpubind_place(struct sc_cpubind *b, int nworkers)
{
    int ncores = hwloc_bitmap_weight(b->cores);
    if (b->how != SC_CPUBIND_SHARED && ncores > 0) {
        if (!(b->worker_pus = calloc((size_t)nworkers, sizeof(hwloc_bitmap_t))))
            return sc_error(SC_ERR_NOMEM, "out of memory");
        b->nworkers = nworkers;
        int core = hwloc_bitmap_first(b->cores);
        for (int w = 0; w < nworkers; w++) {
            if (!(b->worker_pus[w] = hwloc_bitmap_alloc()))
                return sc_error(SC_ERR_NOMEM, "out of memory");
            pus_of_core(b->topo, core, b->worker_pus[w]);
            core = hwloc_bitmap_next(b->cores, core);
            if (core < 0)
                core = hwloc_bitmap_first(b->cores);
        }
    }
    /* Long core lists are cut short: these are messages. */
    char set[128], launcher[160];
    cores_phrase(set, sizeof set, b->set_text);
    int unbound = b->launcher_unbound;
    if (unbound)
        snprintf(launcher, sizeof launcher, "not bound by the launcher");
    else {
        char cores[128];
        cores_phrase(cores, sizeof cores, b->launcher_text);
        (void)!snprintf(launcher, sizeof launcher, "bound by the launcher to %s", cores);
    }
    if (!strcmp(b->set_text, b->launcher_text))
        (void)!snprintf(b->where, sizeof b->where, "%s, %s", set,
                        unbound ? "as the launcher left it" : "as bound by the launcher");
    else
        (void)!snprintf(b->where, sizeof b->where, "%s; %s", set, launcher);
    (void)!snprintf(b->line, sizeof b->line, "%d CPU worker%s on %s (%s%s)", nworkers, nworkers == 1 ? "" : "s", set,
                    launcher, how_text(b));
    return 0;
}

int sc_cpubind_launcher_limits(const struct sc_cpubind *b)
{
    return b->how == SC_CPUBIND_KEPT;
}

const char *sc_cpubind_describe(const struct sc_cpubind *b)
{
    return b->line;
}

void sc_cpubind_worker(const struct sc_cpubind *b, int w)
{
    if (!b || !b->worker_pus || w < 0 || w >= b->nworkers)
        return;
    /* A failure (a cgroup that forbids it) leaves the thread on the rank's set. */
    hwloc_set_cpubind(b->topo, b->worker_pus[w], HWLOC_CPUBIND_THREAD);
}
