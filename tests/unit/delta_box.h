/* What the tests of the device's delta programs (test_delta_chunks,
 * test_delta_scan) share: a box in a tensor, its walk, and its stream
 * moved between the tensor and a contiguous buffer. */
#ifndef WEX_TEST_DELTA_BOX_H
#define WEX_TEST_DELTA_BOX_H

#include <stdint.h>
#include <string.h>

#include "box_runs.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A box in a tensor, and the walk of its runs. */
typedef struct box {
    uint32_t ndim;
    uint64_t shape[3], offset[3], extent[3];
} box;

static void walk_of(const box *b, unsigned elem, wex__box_runs *w)
{
    wex__box_side side = {b->ndim, b->shape, b->offset};
    wex__box_runs_init(w, b->ndim, b->extent, elem, &side, &side);
}

static uint64_t elements(const box *b)
{
    uint64_t n = 1;

    for (uint32_t d = 0; d < b->ndim; d++)
        n *= b->extent[d];
    return n;
}

static uint64_t tensor_bytes(const box *b, unsigned elem)
{
    uint64_t n = elem;

    for (uint32_t d = 0; d < b->ndim; d++)
        n *= b->shape[d];
    return n;
}

/* The box's stream between a tensor and a contiguous buffer: into the
 * tensor (the CPU's apply) or out of it. */
static void move_stream(const box *b, unsigned elem, uint8_t *stream,
                        uint8_t *tensor, int into_tensor)
{
    wex__box_runs w;
    uint64_t a, d, at = 0;

    walk_of(b, elem, &w);
    while (wex__box_runs_next(&w, &a, &d)) {
        if (into_tensor)
            memcpy(tensor + d, stream + at, w.run_bytes);
        else
            memcpy(stream + at, tensor + d, w.run_bytes);
        at += w.run_bytes;
    }
}

#endif /* WEX_TEST_DELTA_BOX_H */
