/*
 * The balanced policy, shared between its files.
 *
 * Every destination piece is cut along the boundaries of the source
 * pieces that overlap it; each cell then has a set of holders. Cell k of
 * a canonical tensor, needed by n destination pieces and held by h
 * sources, goes to holder (ordinal + offset) mod h, where ordinal is the
 * destination piece's position among the n and offset a hash of the cell:
 * a pure function of the two layouts, so every rank derives the same
 * answer for its own operations without the global plan. When n < h a
 * large cell is split into h / n parts from different holders.
 *
 * Names here start with pb_ ("policy balanced"): they are private to the
 * files of this folder, which build one plugin.
 */
#ifndef WEX_POLICY_BALANCED_H
#define WEX_POLICY_BALANCED_H

#include <wex/plugin.h>

typedef struct pb_op {
    uint64_t key[4]; /* order: canonical, destination piece, cell, part */
    uint64_t src_rank, src_tensor, dst_rank, dst_tensor;
    uint32_t ndim, src_nd, dst_nd, reserved0;
    uint64_t src_off[WEX_MAX_DIMS];
    uint64_t dst_off[WEX_MAX_DIMS];
    uint64_t ext[WEX_MAX_DIMS]; /* ndim entries: the trailing dims */
} pb_op;

typedef struct pb_ops {
    pb_op *v;
    size_t count, cap;
} pb_ops;

typedef struct pb_config {
    int prefer_local;
    int coalesce;
    uint64_t split_min_bytes;
} pb_config;

/* One canonical tensor's pieces as the assignment scans them: boxes
 * packed [lo0, hi0, lo1, hi1, ...] per piece (ndim dims, the destination
 * pieces' rank), and the host of each source piece's rank. */
typedef struct pb_packed {
    uint64_t *sbox, *dbox, *src_host;
    uint32_t ndim;
    int ready;
} pb_packed;

/* Packed pieces per canonical tensor, for the layouts of one job. */
typedef struct pb_cache {
    const wex_layout *src, *dst;
    pb_packed *v;
    uint64_t len;
} pb_cache;

/* What one planning call needs. */
typedef struct pb_job {
    const wex_host_services *host;
    const wex_plan_request *req;
    pb_config cfg;
    uint32_t side; /* of the rank planned for */
    uint64_t rank;
    pb_ops *out;
    /* one canonical tensor's pieces on each side (host-owned arrays) */
    const wex_piece_view *src, *dst;
    pb_cache *cache;
    /* the same pieces packed (the cache's arrays) */
    const uint64_t *src_host; /* host of each source piece's rank */
    uint32_t ndim;
    const uint64_t *sbox, *dbox;
    /* scratch, reused across pieces */
    uint64_t *cand;
    uint64_t cand_cap;
    uint64_t *cuts;
    uint64_t cut_cap;
    /* Source ranks that must send nothing, ascending (the request's). */
    const uint64_t *dead;
    uint64_t dead_count;
} pb_job;

#define PB_SRC(job, i) WEX_PIECE_VIEW_AT((job)->src, i)
#define PB_DST(job, i) WEX_PIECE_VIEW_AT((job)->dst, i)
#define PB_SBOX(job, i) ((job)->sbox + 2 * (size_t)(job)->ndim * (i))
#define PB_DBOX(job, i) ((job)->dbox + 2 * (size_t)(job)->ndim * (i))

/* Packs the boxes of `count` host views into *box (grown as needed). */
wex_status pb_pack_boxes(const wex_piece_view *views, uint64_t count,
                         uint32_t ndim, uint64_t **box, uint64_t *cap);

/* The packed pieces of canonical tensor c, built on first use. */
wex_status pb_cache_get(pb_cache *cache, const wex_host_services *h,
                        const wex_plan_request *req, uint64_t c,
                        const pb_packed **packed_p);
void pb_cache_fini(pb_cache *cache);

/* Plans destination piece `j` of canonical tensor `c` (src/dst arrays
 * already loaded for c), adding the operations that involve the rank. */
wex_status pb_assign_piece(pb_job *job, uint64_t c, uint64_t nsrc,
                           uint64_t ndst, uint64_t j);

/* Merges adjacent operations between the same two tensors, then sorts
 * by key: the order both ends of each pair execute them in. */
wex_status pb_coalesce(pb_ops *ops, int merge);

wex_status pb_push(pb_ops *ops, const pb_op *op);

#endif /* WEX_POLICY_BALANCED_H */
