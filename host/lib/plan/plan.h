/*
 * Plans: the copy operations a policy emits, checked as they arrive, and
 * what they add up to (bytes per rank and link, the predicted step time,
 * the redundancy).
 */
#ifndef WEX_HOST_PLAN_H
#define WEX_HOST_PLAN_H

#include <stdio.h>

#include "side.h"
#include "topology.h"

/* What an operation does to the bytes on their way (docs/design.md,
 * "Transforms"). The host derives it from the two tensors' dtypes and
 * pieces; a policy never says. */
#define WEX__OP_COPY 0u       /* the same dtype: bytes as they are */
#define WEX__OP_CONVERT 1u    /* float to float, each value rounded */
#define WEX__OP_DEQUANTIZE 2u /* e4m3 + the source's block scales to float */
#define WEX__OP_QUANTIZE 3u   /* float to e4m3 by its blocks' amax */
#define WEX__OP_SCALE 4u      /* the scale_inv of each block QUANTIZE wrote */

typedef struct wex__op {
    uint64_t src_rank, src_tensor, dst_rank, dst_tensor;
    uint32_t ndim, src_ndim, dst_ndim;
    uint32_t dtype_size;     /* the destination's: what crosses the wire */
    uint32_t src_dtype_size; /* what the source reads (0 for SCALE) */
    uint32_t transform;      /* WEX__OP_* */
    uint64_t src_off[WEX_MAX_DIMS];
    uint64_t dst_off[WEX_MAX_DIMS];
    uint64_t extent[WEX_MAX_DIMS]; /* ndim entries: the trailing dims */
    uint64_t bytes;                /* written at the destination */
    uint64_t src_bytes;            /* read at the source */
    /* DEQUANTIZE, QUANTIZE, SCALE: the fp8 weight, and the canonical
     * (row, col) of the box's first element (for SCALE: its first
     * block's, in blocks). */
    uint64_t canonical;
    uint64_t canon_off[2];
    /* QUANTIZE, SCALE: the destination piece of the weight (index in the
     * destination rank's pieces) whose cells the operation is one of. */
    uint64_t dst_piece;
    /* DEQUANTIZE: the source rank's local tensor of the weight's block
     * scales, the block (row, col) of its piece's first entry, and where
     * that entry is in the tensor (src_ndim entries). */
    uint64_t scale_tensor;
    uint64_t scale_block[2];
    uint64_t scale_at[WEX_MAX_DIMS];
} wex__op;

struct wex_plan_builder {
    const wex__side *src, *dst;
    wex__op *ops;
    size_t count, cap;
};

void wex__plan_builder_init(wex_plan_builder *b, const wex__side *src,
                            const wex__side *dst);
void wex__plan_builder_fini(wex_plan_builder *b);
/* The plan_add_op service. */
wex_status wex__plan_add_op(wex_plan_builder *b, const wex_plan_op *op);

typedef struct wex__plan_stats {
    uint64_t operations;
    uint64_t bytes;               /* moved */
    uint64_t source_bytes;        /* read at the sources to make them */
    uint64_t quantized_bytes;     /* of those, read to quantize to fp8: a cell
                               * a source sends to several replicas once */
    uint64_t quantize_work_bytes; /* each cell once, whichever source */
    uint64_t bytes_needed;        /* destination piece bytes */
    uint64_t redundant_bytes;     /* written twice into one destination */
    uint64_t intra_host_bytes;
    /* per rank, per link: [0] NIC, [1] intra-host */
    uint64_t (*send)[2]; /* source ranks */
    uint64_t (*recv)[2]; /* destination ranks */
    uint64_t *quant;     /* per source rank: floats read to quantize */
    uint64_t src_ranks, dst_ranks;
    struct wex__cell_set *cells_made, *cells_needed; /* quantize_once.h */
} wex__plan_stats;

wex_status wex__plan_stats_init(wex__plan_stats *s, const wex__side *src,
                                const wex__side *dst);
void wex__plan_stats_fini(wex__plan_stats *s);
/* Adds one destination rank's operations (all of them, in one call).
 * WEX_ERR_NOMEM when the cells quantized cannot be counted. */
wex_status wex__plan_stats_add(wex__plan_stats *s, const wex__side *src,
                               const wex__side *dst, const wex__op *ops,
                               size_t count);
/* A rank's time on its links: the slower of its NIC and intra-host
 * bytes over their bandwidths. */
double wex__plan_link_seconds(const uint64_t link[2], const wex__topology *t);
/* Source `rank`'s time: its links, after the floats it quantizes. */
double wex__plan_source_seconds(const wex__plan_stats *s, uint64_t rank,
                                const wex__topology *t);
/* Busiest rank's bytes on either link over that link's bandwidth. */
double wex__plan_predicted_seconds(const wex__plan_stats *s,
                                   const wex__topology *t);
uint64_t wex__plan_max_send(const wex__plan_stats *s);
uint64_t wex__plan_max_recv(const wex__plan_stats *s);

/* "copy", "convert", "dequantize", "quantize", "scale". */
const char *wex__op_transform_name(uint32_t transform);
/* One JSON line per operation (the --ops format). */
void wex__plan_write_ops(FILE *out, const wex__op *ops, size_t count);

/* The step time no plan can beat on this topology (lower_bound.c). */
wex_status wex__plan_lower_bound(const wex__side *src, const wex__side *dst,
                                 const wex__topology *t, double *seconds_p);

#endif /* WEX_HOST_PLAN_H */
