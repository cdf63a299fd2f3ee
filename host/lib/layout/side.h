/*
 * One side of a job (the source or the destination): its engine, every
 * rank's layout, which host each rank runs on, and an index from each
 * canonical tensor to the pieces that hold it. This is the `wex_layout`
 * policies read through the layout_* services.
 */
#ifndef WEX_HOST_SIDE_H
#define WEX_HOST_SIDE_H

#include "engine.h"

/* The size guard (docs/limits.md): the most ranks, and pieces over all
 * ranks, one side may have, checked before laying every rank out. */
#define WEX__SIDE_RANKS_MAX 32768u
#define WEX__SIDE_PIECES_MAX (1u << 28)

typedef struct wex__piece_ref {
    uint32_t rank;
    uint32_t piece; /* index into that rank's pieces */
} wex__piece_ref;

struct wex_layout {
    const char *what; /* "source", "destination" */
    wex__engine *engine;
    const wex_model *model;
    uint64_t ranks;
    wex__rank_layout *layouts; /* one per rank */
    uint64_t *hosts;           /* host id per rank */
    uint64_t *canon_start;     /* model->count + 1 offsets into canon_refs */
    wex__piece_ref *canon_refs;
    /* canon_refs as policies see them, contiguous: policies walk one
     * canonical tensor's pieces for every piece they plan. */
    wex_piece_view *canon_views;
    uint64_t canon_cap; /* entries canon_refs and canon_views have room for */
    /* What a policy sees (services_plan.c): every piece, unless the host
     * hid some it plans itself (wex__side_hide); then, per rank, the
     * indices of the pieces left, and the canonical index over them. */
    uint32_t **visible; /* NULL while nothing is hidden */
    uint32_t *visible_count;
    uint64_t *policy_canon_start;
    wex_piece_view *policy_canon_views;
};
typedef struct wex_layout wex__side;

/* Opens the engine and describes every rank. */
wex_status wex__side_open(wex__side *side, const char *what,
                          wex__registry *registry, const char *engine,
                          const wex_model *model, const cJSON *parallel,
                          const cJSON *options);
void wex__side_close(wex__side *side);

/* Describes ranks [first, first + count) again with `engine` (the side's
 * engine opened with other options: an expert placement) and takes
 * their new pieces; their local tensors must be the same (their memory
 * and names stay where they were handed out). Then indexes every piece
 * again; what a policy was shown is dropped (hide again). All or
 * nothing: on failure the side is as it was. */
wex_status wex__side_replace_pieces(wex__side *s, wex__engine *engine,
                                    uint64_t first, uint64_t count);

/* Total bytes of the pieces of one rank. */
uint64_t wex__side_piece_bytes(const wex__side *side, uint64_t rank);

/* Hides from the policy the pieces for which hidden(side, rank, piece,
 * arg) is nonzero. */
wex_status wex__side_hide(wex__side *side,
                          int (*hidden)(const wex__side *side, uint64_t rank,
                                        size_t piece, void *arg),
                          void *arg);
/* Fills a policy's view of piece `piece` of rank `rank`. */
void wex__side_view(const wex__side *side, uint64_t rank, uint64_t piece,
                    wex_piece_view *view);

#endif /* WEX_HOST_SIDE_H */
