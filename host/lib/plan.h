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

typedef struct wex__op {
    uint64_t src_rank, src_tensor, dst_rank, dst_tensor;
    uint32_t ndim, src_ndim, dst_ndim, dtype_size;
    uint64_t src_off[WEX_MAX_DIMS];
    uint64_t dst_off[WEX_MAX_DIMS];
    uint64_t extent[WEX_MAX_DIMS]; /* ndim entries: the trailing dims */
    uint64_t bytes;
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
    uint64_t bytes;           /* moved */
    uint64_t bytes_needed;    /* destination piece bytes */
    uint64_t redundant_bytes; /* written twice into one destination */
    uint64_t intra_host_bytes;
    /* per rank, per link: [0] NIC, [1] intra-host */
    uint64_t (*send)[2]; /* source ranks */
    uint64_t (*recv)[2]; /* destination ranks */
    uint64_t src_ranks, dst_ranks;
} wex__plan_stats;

wex_status wex__plan_stats_init(wex__plan_stats *s, const wex__side *src,
                                const wex__side *dst);
void wex__plan_stats_fini(wex__plan_stats *s);
/* Adds one destination rank's operations (all of them, in one call). */
void wex__plan_stats_add(wex__plan_stats *s, const wex__side *src,
                         const wex__side *dst, const wex__op *ops,
                         size_t count);
/* Busiest rank's bytes on either link over that link's bandwidth. */
double wex__plan_predicted_seconds(const wex__plan_stats *s,
                                   const wex__topology *t);
uint64_t wex__plan_max_send(const wex__plan_stats *s);
uint64_t wex__plan_max_recv(const wex__plan_stats *s);

/* One JSON line per operation (the --ops format). */
void wex__plan_write_ops(FILE *out, const wex__op *ops, size_t count);

/* The step time no plan can beat on this topology (lower_bound.c). */
wex_status wex__plan_lower_bound(const wex__side *src, const wex__side *dst,
                                 const wex__topology *t, double *seconds_p);

#endif /* WEX_HOST_PLAN_H */
