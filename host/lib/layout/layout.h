/*
 * Layouts: what one engine rank holds. An engine adapter fills a
 * wex__rank_layout through the layout_* services; the host checks every
 * piece as it arrives, so a buggy adapter fails at describe time with
 * the tensor and piece named, never later as corrupted weights.
 */
#ifndef WEX_HOST_LAYOUT_H
#define WEX_HOST_LAYOUT_H

#include <wex/host.h>

#include "box_runs.h"
#include "catalog.h"

typedef struct wex__piece {
    uint64_t canonical; /* index into the model */
    uint64_t tensor;    /* index of the local tensor within the rank */
    uint32_t transform;
    uint32_t ndim; /* the canonical tensor's rank */
    uint64_t offset[WEX_MAX_DIMS];
    uint64_t extent[WEX_MAX_DIMS];
    uint64_t at[WEX_MAX_DIMS]; /* local tensor's rank entries */
} wex__piece;

typedef struct wex__local_tensor {
    char *name;
    uint32_t dtype;
    uint32_t ndim;
    uint64_t shape[WEX_MAX_DIMS];
    uint64_t bytes;
} wex__local_tensor;

typedef struct wex__coord {
    char *key;
    int64_t value;
} wex__coord;

typedef struct wex__rank_layout {
    uint64_t rank;
    wex__coord *coords;
    size_t coord_count;
    wex__local_tensor *tensors;
    size_t tensor_count, tensor_cap;
    wex__piece *pieces;
    size_t piece_count, piece_cap;
    uint64_t bytes; /* sum of local tensor bytes */
} wex__rank_layout;

struct wex_layout_builder {
    const wex_model *model;
    wex__rank_layout *out;
};

/* The `_scale_inv` tensor of an fp8 block-quantized weight (e4m3, 2
 * dims, with a float32 sibling named so), or -1 when it is none. */
int64_t wex__scale_of(const wex_model *model, uint64_t canonical);
/* The fp8 weight whose block scales canonical tensor `canonical` is, or
 * -1. */
int64_t wex__weight_of_scale(const wex_model *model, uint64_t canonical);
/* A local tensor of `local_dtype` may hold canonical tensor `canonical`
 * as values (WEX_TRANSFORM_CONVERT): a float dtype other than the
 * checkpoint's, which is a float or a block-quantized fp8 weight. */
int wex__convertible(const wex_model *model, uint64_t canonical,
                     uint32_t local_dtype);

/* Walks piece `p` of `layout` as the runs contiguous in both its local
 * tensor (the walk's a side) and its canonical tensor in `model` (the b
 * side), in units of the local tensor's element size. */
void wex__piece_runs_init(wex__box_runs *w, const wex__rank_layout *layout,
                          const wex_model *model, const wex__piece *p);

void wex__rank_layout_init(wex__rank_layout *layout, uint64_t rank);
void wex__rank_layout_fini(wex__rank_layout *layout);

/* The services behind layout_set_coord, layout_add_tensor and
 * layout_add_piece. */
wex_status wex__layout_set_coord(wex_layout_builder *b, const char *key,
                                 int64_t value);
wex_status wex__layout_add_tensor(wex_layout_builder *b,
                                  const wex_local_tensor_desc *desc,
                                  uint64_t *tensor_p);
wex_status wex__layout_add_piece(wex_layout_builder *b, uint64_t tensor,
                                 const wex_piece_desc *piece);

#endif /* WEX_HOST_LAYOUT_H */
