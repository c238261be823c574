/* The choice of a rank's cores among the ranks of a node
 * (sc_cpubind_choose): kept where the launcher's bindings are disjoint and
 * cover the node, split among the ranks otherwise. */
#include <stdio.h>

#include "src/runtime/cpubind.h"

#include "check.h"

static const char *how_name(enum sc_cpubind_how h)
{
    switch (h) {
    case SC_CPUBIND_KEPT:
        return "kept";
    case SC_CPUBIND_ALONE:
        return "alone";
    case SC_CPUBIND_OVERLAP:
        return "overlap";
    case SC_CPUBIND_UNUSED:
        return "unused";
    case SC_CPUBIND_SHARED:
        return "shared";
    }
    return "?";
}

/* Every rank of the node in turn: how, and the first core and count of
 * each (want_first[r] < 0: kept, no range to check). */
static void expect(const char *what, int ncores, int nranks, const char *const *bound, enum sc_cpubind_how want,
                   const int *want_first, const int *want_count)
{
    for (int me = 0; me < nranks; me++) {
        int first = -1, count = -1;
        enum sc_cpubind_how how = sc_cpubind_choose(ncores, bound, nranks, me, &first, &count);
        int ok = how == want && (want_first[me] < 0 || (first == want_first[me] && count == want_count[me]));
        check(ok, "%s, rank %d: %s cores %d+%d, want %s %d+%d", what, me, how_name(how), first, count, how_name(want),
              want_first[me], want_count[me]);
    }
}

int main(void)
{
    /* mpirun -np 1 on 2 cores binds the rank to core 0: it gets both. */
    expect("alone, bound to one core of 2", 2, 1, (const char *[]){"0"}, SC_CPUBIND_ALONE, (int[]){0}, (int[]){2});
    expect("alone, unbound", 16, 1, (const char *[]){"0-15"}, SC_CPUBIND_ALONE, (int[]){0}, (int[]){16});
    /* mpirun -np 2 (--bind-to core): one core each, as given. */
    expect("2 ranks on cores 0 and 1", 2, 2, (const char *[]){"0", "1"}, SC_CPUBIND_KEPT, (int[]){-1, -1},
           (int[]){0, 0});
    expect("2 ranks bound to halves of 8", 8, 2, (const char *[]){"4-7", "0-3"}, SC_CPUBIND_KEPT, (int[]){-1, -1},
           (int[]){0, 0});
    /* --bind-to none on 2 ranks: both unbound, so they overlap. */
    expect("2 ranks unbound on 2 cores", 2, 2, (const char *[]){"0-1", "0-1"}, SC_CPUBIND_OVERLAP, (int[]){0, 1},
           (int[]){1, 1});
    expect("3 ranks, two on one core", 6, 3, (const char *[]){"0", "0", "2-5"}, SC_CPUBIND_OVERLAP, (int[]){0, 2, 4},
           (int[]){2, 2, 2});
    expect("a rank with no cores", 4, 2, (const char *[]){"", "0-1"}, SC_CPUBIND_OVERLAP, (int[]){0, 2}, (int[]){2, 2});
    /* Disjoint but too small: 2 ranks on one core each of 4. */
    expect("2 ranks on 2 of 4 cores", 4, 2, (const char *[]){"0", "1"}, SC_CPUBIND_UNUSED, (int[]){0, 2},
           (int[]){2, 2});
    expect("3 ranks on 7 cores, uneven", 7, 3, (const char *[]){"0", "1", "2"}, SC_CPUBIND_UNUSED, (int[]){0, 3, 5},
           (int[]){3, 2, 2});
    /* Oversubscribed: -np 4 on 2 cores (mpirun binds to the package). */
    expect("4 ranks on 2 cores", 2, 4, (const char *[]){"0-1", "0-1", "0-1", "0-1"}, SC_CPUBIND_SHARED,
           (int[]){0, 0, 0, 0}, (int[]){2, 2, 2, 2});
    /* A list hwloc cannot read counts as unbound. */
    expect("garbage binding", 2, 2, (const char *[]){"x", "1"}, SC_CPUBIND_OVERLAP, (int[]){0, 1}, (int[]){1, 1});
    /* Cores beyond the node's are ignored. */
    expect("binding past the node", 2, 2, (const char *[]){"0,5", "1"}, SC_CPUBIND_KEPT, (int[]){-1, -1},
           (int[]){0, 0});
    printf("%d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
