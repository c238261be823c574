/* Rows [r0, r1) x columns [c0, c1) of an image, in the image's
 * coordinates: the block of a tensor that a tile holds, or a region a
 * kernel works on. */
#ifndef SC_BOX_H
#define SC_BOX_H

struct sc_box {
    int r0, r1, c0, c1;
};

static inline int sc_box_empty(struct sc_box b)
{
    return b.r1 <= b.r0 || b.c1 <= b.c0;
}
static inline struct sc_box sc_box_intersect(struct sc_box a, struct sc_box b)
{
    struct sc_box r = {a.r0 > b.r0 ? a.r0 : b.r0, a.r1 < b.r1 ? a.r1 : b.r1, a.c0 > b.c0 ? a.c0 : b.c0,
                       a.c1 < b.c1 ? a.c1 : b.c1};
    return r;
}
static inline int sc_box_contains(struct sc_box outer, struct sc_box inner)
{
    return sc_box_empty(inner) ||
           (inner.r0 >= outer.r0 && inner.r1 <= outer.r1 && inner.c0 >= outer.c0 && inner.c1 <= outer.c1);
}
static inline long sc_box_area(struct sc_box b)
{
    return sc_box_empty(b) ? 0 : (long)(b.r1 - b.r0) * (b.c1 - b.c0);
}

/* A block of one sample's tensor: rows x columns (box) of channels
 * [ch0, ch1). */
struct sc_block {
    struct sc_box box;
    int ch0, ch1;
};

static inline int sc_block_empty(struct sc_block b)
{
    return sc_box_empty(b.box) || b.ch1 <= b.ch0;
}
static inline struct sc_block sc_block_intersect(struct sc_block a, struct sc_block b)
{
    struct sc_block r = {sc_box_intersect(a.box, b.box), a.ch0 > b.ch0 ? a.ch0 : b.ch0, a.ch1 < b.ch1 ? a.ch1 : b.ch1};
    return r;
}

#endif
