/*
 * fp8 weights the host quantizes on the way (docs/design.md,
 * "Transforms"): when the sources hold a block-quantized weight as
 * float values (a bf16 trainer) and a destination holds it as e4m3 with
 * its scales (an FP8 engine), no policy plans that tensor. The host
 * hides those destination pieces, and their scales, from the policy and
 * routes them itself, in cells that keep 128 x 128 blocks together where
 * the sources allow:
 *  - a destination piece is cut where source pieces begin and end; each
 *    cell comes from one live source that holds it (one on the
 *    destination's host first, then a hash of the cell, so replicas share
 *    the work);
 *  - each cell is one QUANTIZE operation (floats read, e4m3 sent);
 *  - each block's scale_inv is sent by the source of the cell that holds
 *    the block's first element (a SCALE operation per cell);
 *  - a block split between cells of different sources ("straddling") is
 *    quantized by each with the amax of the whole block, which those
 *    sources agree on through the rendezvous before they quantize
 *    (job/transforms.c).
 */
#ifndef WEX_HOST_QUANTIZE_PLAN_H
#define WEX_HOST_QUANTIZE_PLAN_H

#include "planner.h"

/* Decides which fp8 weights the host quantizes (p->quantized) and hides
 * their destination pieces from the policy. Refuses, in one line naming
 * the tensor, a source side that holds a weight both ways and an fp8
 * checkpoint whose blocks are not 128 x 128 where a conversion is
 * needed. */
wex_status wex__quantize_classify(wex__planner *p);

/* Appends the QUANTIZE and SCALE operations `rank` of `side` takes part
 * in, the live sources being those not in `dead`. */
wex_status wex__quantize_plan_rank(const wex__planner *p, uint32_t side,
                                   uint64_t rank, const uint64_t *dead,
                                   uint64_t dead_count, wex_plan_builder *b);

/* One cell of a destination piece the host quantizes. */
typedef struct wex__qcell {
    uint64_t lo[2], hi[2]; /* canonical rows and columns */
    uint64_t src_rank;
    const wex__piece *src_piece;
} wex__qcell;

/* The cells of the fp8 pieces one source rank quantizes into, kept from
 * its plan share (plan_share.h), cut with every source live. */
typedef struct wex__kept_group {
    uint64_t dst_rank, piece;
    size_t first, count; /* in cells */
} wex__kept_group;

typedef struct wex__kept_cells {
    wex__kept_group *groups; /* ascending (dst_rank, piece) */
    size_t group_count;
    wex__qcell *cells; /* src_piece NULL */
} wex__kept_cells;

void wex__kept_cells_free(wex__kept_cells *kept);

/* Every cell of piece `piece` of destination rank `dst_rank` and the
 * source each comes from, in the order its operations are planned.
 * *cells_p is malloc'd. */
wex_status wex__quantize_cells(const wex__planner *p, uint64_t dst_rank,
                               uint64_t piece, const uint64_t *dead,
                               uint64_t dead_count, wex__qcell **cells_p,
                               size_t *count_p);

#endif /* WEX_HOST_QUANTIZE_PLAN_H */
