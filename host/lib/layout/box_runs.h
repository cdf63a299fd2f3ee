/*
 * A box inside two dense row-major tensors, walked as contiguous byte
 * runs: the unit every copy, digest and check of an operation uses. Both
 * sides see the box's elements in the same (row-major box) order, so a
 * digest over the runs of one side matches the other's.
 */
#ifndef WEX_HOST_BOX_RUNS_H
#define WEX_HOST_BOX_RUNS_H

#include <stdint.h>

#include <wex/abi.h>

typedef struct wex__box_side {
    uint32_t ndim;
    const uint64_t *shape;  /* the tensor's */
    const uint64_t *offset; /* the box's first element, ndim entries */
} wex__box_side;

typedef struct wex__box_runs {
    uint32_t box_ndim; /* trailing dims the box spans */
    uint64_t extent[WEX_MAX_DIMS];
    uint64_t elem;      /* bytes per element */
    uint64_t run_bytes; /* bytes per contiguous run */
    uint32_t outer;     /* box dims walked run by run */
    uint64_t a_stride[WEX_MAX_DIMS], b_stride[WEX_MAX_DIMS]; /* bytes */
    uint64_t a_base, b_base; /* byte offsets of the first element */
    uint64_t idx[WEX_MAX_DIMS];
    uint64_t remaining; /* runs left */
} wex__box_runs;

/* Prepares the walk of box `extent` (box_ndim entries) placed in tensor a
 * at a->offset and in tensor b at b->offset. */
void wex__box_runs_init(wex__box_runs *w, uint32_t box_ndim,
                        const uint64_t *extent, uint64_t elem_bytes,
                        const wex__box_side *a, const wex__box_side *b);
/* Next run: byte offsets in a and b, and its length (run_bytes).
 * Returns 0 when the box is done. */
int wex__box_runs_next(wex__box_runs *w, uint64_t *a_off, uint64_t *b_off);

/* The same walk over one tensor only. */
void wex__box_runs_init1(wex__box_runs *w, uint32_t box_ndim,
                         const uint64_t *extent, uint64_t elem_bytes,
                         const wex__box_side *a);

#endif /* WEX_HOST_BOX_RUNS_H */
