/* Processor grids: spec parsing and its errors, rank <-> coordinates,
 * neighbours at the edges, segments, and load-balanced block ranges. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/grid.h"
#include "src/starconv.h"

#include "check.h"

static void good(const char *spec, int nranks, const char *canonical, int n, int c, int f, int h, int w)
{
    struct sc_grid g;
    char buf[64];
    int rc = sc_grid_parse(spec, nranks, &g);
    check(rc == 0, "'%s' on %d ranks: %s", spec ? spec : "(null)", nranks, rc ? sc_last_error() : "");
    if (rc)
        return;
    sc_grid_format(&g, buf, sizeof(buf));
    check(!strcmp(buf, canonical), "'%s' formats as '%s', want '%s'", spec ? spec : "(null)", buf, canonical);
    int want[SC_NDIMS] = {n, c, f, h, w};
    check(!memcmp(g.extent, want, sizeof(want)) && g.size == nranks, "'%s' extents", spec ? spec : "(null)");
}

static void bad(const char *spec, int nranks, const char *needle)
{
    struct sc_grid g;
    int rc = sc_grid_parse(spec, nranks, &g);
    check(rc == SC_ERR_ARG && strstr(sc_last_error(), needle), "'%s' on %d: rc %d, \"%s\" should have \"%s\"", spec,
          nranks, rc, sc_last_error(), needle);
}

int main(void)
{
    good(NULL, 4, "n4", 4, 1, 1, 1, 1);
    good("", 1, "n1", 1, 1, 1, 1, 1);
    good("n2h2", 4, "n2h2", 2, 1, 1, 2, 1);
    good("W2H2", 4, "h2w2", 1, 1, 1, 2, 2);
    good("h2", 2, "h2", 1, 1, 1, 2, 1);
    good("c2f3n1", 6, "c2f3", 1, 2, 3, 1, 1);
    good("n1", 1, "n1", 1, 1, 1, 1, 1);
    bad("h2w2", 2, "has 4 ranks but 2 were started");
    bad("n2x2", 4, "'x' is not a dimension");
    bad("h2h2", 4, "'h' appears twice");
    bad("h", 1, "'h' needs an extent");
    bad("h0", 1, "'h' needs an extent");
    bad("h-2", 2, "'h' needs an extent");
    bad("h+2", 2, "'h' needs an extent");
    bad("2h", 2, "'2' is not a dimension");
    bad("n99999999999", 2, "'n' needs an extent");

    /* rank <-> coordinates on n2 c1 f1 h3 w2: W fastest, N slowest */
    struct sc_grid g;
    sc_grid_parse("n2h3w2", 12, &g);
    for (int r = 0; r < g.size; r++) {
        int c[SC_NDIMS];
        sc_grid_coords(&g, r, c);
        check(sc_grid_rank(&g, c) == r, "rank %d round trip", r);
        check(c[SC_DIM_W] == r % 2 && c[SC_DIM_H] == r / 2 % 3 && c[SC_DIM_N] == r / 6, "rank %d coordinates", r);
    }
    int out[SC_NDIMS] = {0, 0, 0, 3, 0};
    check(sc_grid_rank(&g, out) == -1, "coordinates outside the grid give -1");
    /* rank 8 = n1 h1 w0 */
    check(sc_grid_neighbor(&g, 8, SC_DIM_W, +1) == 9, "w+1 of 8");
    check(sc_grid_neighbor(&g, 8, SC_DIM_W, -1) == -1, "w-1 of 8 is past the edge");
    check(sc_grid_neighbor(&g, 8, SC_DIM_H, -1) == 6, "h-1 of 8");
    check(sc_grid_neighbor(&g, 8, SC_DIM_H, +1) == 10, "h+1 of 8");
    check(sc_grid_neighbor(&g, 10, SC_DIM_H, +1) == -1, "h+1 of 10 is past the edge");
    check(sc_grid_neighbor(&g, 8, SC_DIM_N, -1) == 2, "n-1 of 8");

    int seg[12], n;
    n = sc_grid_segment(&g, 8, 1u << SC_DIM_N, seg);
    check(n == 2 && seg[0] == 2 && seg[1] == 8, "N segment of 8: %d ranks", n);
    n = sc_grid_segment(&g, 8, (1u << SC_DIM_H) | (1u << SC_DIM_W), seg);
    check(n == 6 && seg[0] == 6 && seg[5] == 11, "HW segment of 8: %d ranks", n);
    n = sc_grid_segment(&g, 5, 0, seg);
    check(n == 1 && seg[0] == 5, "empty mask: the rank alone");
    n = sc_grid_segment(&g, 5, ~0u, seg);
    check(n == 12, "all dimensions: every rank");

    /* block ranges cover [0, n) exactly once, sizes differ by at most 1 */
    for (int len = 0; len <= 37; len++)
        for (int parts = 1; parts <= 7; parts++) {
            int next = 0, lo = len, hi = 0, okay = 1;
            for (int i = 0; i < parts; i++) {
                int first, count;
                sc_block_range(len, parts, i, &first, &count);
                okay &= first == next;
                next = first + count;
                lo = count < lo ? count : lo;
                hi = count > hi ? count : hi;
            }
            check(okay && next == len && hi - lo <= 1, "block ranges of %d over %d", len, parts);
        }
    int first, count;
    sc_block_range(10, 4, 1, &first, &count);
    check(first == 3 && count == 3, "10 over 4, part 1: [%d, +%d)", first, count);
    sc_block_range(10, 4, 3, &first, &count);
    check(first == 8 && count == 2, "10 over 4, part 3: [%d, +%d)", first, count);

    printf("%s: %d passed, %d failed\n", failures ? "FAIL" : "PASS", passes, failures);
    return failures ? 1 : 0;
}
