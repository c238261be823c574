/* Processor grids and block distributions. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grid.h"
#include "base/error.h"

static const char dim_letter[SC_NDIMS] = {'n', 'c', 'f', 'h', 'w'};

static int letter_dim(char c)
{
    for (int d = 0; d < SC_NDIMS; d++)
        if (tolower((unsigned char)c) == dim_letter[d])
            return d;
    return -1;
}

int sc_grid_parse(const char *spec, int nranks, struct sc_grid *g)
{
    if (nranks < 1)
        return sc_error(SC_ERR_ARG, "a grid needs at least one rank (got %d)", nranks);
    for (int d = 0; d < SC_NDIMS; d++)
        g->extent[d] = 1;
    if (!spec || !*spec) {
        g->extent[SC_DIM_N] = nranks;
        g->size = nranks;
        return 0;
    }
    int seen = 0;
    long size = 1;
    for (const char *p = spec; *p;) {
        int d = letter_dim(*p);
        if (d < 0)
            return sc_error(SC_ERR_ARG, "grid '%s': '%c' is not a dimension (n, c, f, h, w)", spec, *p);
        if (seen & (1 << d))
            return sc_error(SC_ERR_ARG, "grid '%s': '%c' appears twice", spec, dim_letter[d]);
        seen |= 1 << d;
        char *end;
        long e = strtol(p + 1, &end, 10);
        if (end == p + 1 || !isdigit((unsigned char)p[1]) || e < 1 || e > 1 << 20)
            return sc_error(SC_ERR_ARG, "grid '%s': '%c' needs an extent >= 1 (e.g. %c2)", spec, dim_letter[d],
                            dim_letter[d]);
        g->extent[d] = (int)e;
        size *= e;
        if (size > 1 << 24)
            return sc_error(SC_ERR_ARG, "grid '%s' is too large", spec);
        p = end;
    }
    if (size != nranks)
        return sc_error(SC_ERR_ARG, "grid '%s' has %ld ranks but %d were started", spec, size, nranks);
    g->size = (int)size;
    return 0;
}

void sc_grid_format(const struct sc_grid *g, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (int d = 0; d < SC_NDIMS && used < len; d++)
        if (g->extent[d] > 1)
            used += (size_t)snprintf(buf + used, len - used, "%c%d", dim_letter[d], g->extent[d]);
    if (!buf[0])
        snprintf(buf, len, "n1");
}

/* Dimensions from slowest to fastest are N, C, F, H, W: the enum order. */
void sc_grid_coords(const struct sc_grid *g, int rank, int coords[SC_NDIMS])
{
    for (int d = SC_NDIMS - 1; d >= 0; d--) {
        coords[d] = rank % g->extent[d];
        rank /= g->extent[d];
    }
}

int sc_grid_rank(const struct sc_grid *g, const int coords[SC_NDIMS])
{
    int rank = 0;
    for (int d = 0; d < SC_NDIMS; d++) {
        if (coords[d] < 0 || coords[d] >= g->extent[d])
            return -1;
        rank = rank * g->extent[d] + coords[d];
    }
    return rank;
}

int sc_grid_neighbor(const struct sc_grid *g, int rank, enum sc_dim dim, int step)
{
    int c[SC_NDIMS];
    sc_grid_coords(g, rank, c);
    c[dim] += step;
    return sc_grid_rank(g, c);
}

int sc_grid_segment(const struct sc_grid *g, int rank, unsigned dims, int *ranks)
{
    int me[SC_NDIMS], c[SC_NDIMS], n = 0;
    sc_grid_coords(g, rank, me);
    for (int r = 0; r < g->size; r++) {
        sc_grid_coords(g, r, c);
        int same = 1;
        for (int d = 0; d < SC_NDIMS && same; d++)
            same = (dims & (1u << d)) || c[d] == me[d];
        if (same)
            ranks[n++] = r;
    }
    return n;
}

void sc_block_range(int n, int parts, int i, int *first, int *count)
{
    int base = n / parts, extra = n % parts;
    *count = base + (i < extra);
    *first = i * base + (i < extra ? i : extra);
}
