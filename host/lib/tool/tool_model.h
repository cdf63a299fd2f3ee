/*
 * Models and layouts as libwex computes them (tool.h): a model's catalog
 * of canonical tensors from its config.json, an engine plugin driven as
 * a job drives it, and the rank layouts it describes, each piece checked
 * by the host as it arrives.
 */
#ifndef WEX_TOOL_MODEL_H
#define WEX_TOOL_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <wex/host.h>

#include "tool_plugins.h"

typedef struct wex__engine wex_tool_engine;
/* One rank's layout: its coordinates, local tensors and pieces. */
typedef struct wex__rank_layout wex_tool_layout;

typedef struct wex_tool_model_info {
    const char *architecture; /* config.json's architectures[0] */
    uint64_t count;           /* canonical tensors */
    uint64_t total_bytes;     /* the checkpoint's metadata.total_size */
    uint64_t total_elements;  /* parameters, quantization scales included */
} wex_tool_model_info;

/* A tensor: a canonical one of a model, or a local one of a layout. */
typedef struct wex_tool_tensor {
    const char *name;
    uint32_t dtype; /* WEX_DTYPE_* */
    uint32_t ndim;
    uint64_t shape[WEX_MAX_DIMS];
    uint64_t bytes;
    uint64_t elements; /* the product of the shape */
} wex_tool_tensor;

/* "This box of canonical tensor `canonical` lives in local tensor
 * `tensor` at `at`" (wex_piece_desc of <wex/host.h>, as the host keeps
 * it). */
typedef struct wex_tool_piece {
    uint64_t canonical; /* index into the model */
    uint64_t tensor;    /* index into the rank's local tensors */
    uint32_t transform; /* WEX_TRANSFORM_* */
    uint32_t ndim;      /* the canonical tensor's */
    uint64_t offset[WEX_MAX_DIMS];
    uint64_t extent[WEX_MAX_DIMS];
    uint64_t at[WEX_MAX_DIMS]; /* the local tensor's ndim entries */
} wex_tool_piece;

typedef struct wex_tool_layout_info {
    size_t coord_count, tensor_count, piece_count;
    uint64_t bytes; /* of its local tensors */
} wex_tool_layout_info;

/* ---- models ---------------------------------------------------------- */

/* The catalog of the model `config_path` (a config.json) describes;
 * errors name the file and the field. */
wex_status wex_tool_model_load(const char *config_path, wex_model **model_p);
void wex_tool_model_free(wex_model *model); /* NULL is a no-op */
void wex_tool_model_get_info(const wex_model *model, wex_tool_model_info *info);
/* Canonical tensor `index` (< count), in canonical order. */
void wex_tool_model_tensor(const wex_model *model, uint64_t index,
                           wex_tool_tensor *tensor);

/* ---- engines --------------------------------------------------------- */

/* Opens engine plugin `name` of `registry` for `model` under `parallel`
 * and `options` (JSON objects, either NULL), which must outlive it. */
wex_status wex_tool_engine_open(wex_tool_registry *registry, const char *name,
                                const wex_model *model, const cJSON *parallel,
                                const cJSON *options,
                                wex_tool_engine **engine_p);
void wex_tool_engine_close(wex_tool_engine *engine); /* NULL: no-op */
uint64_t wex_tool_engine_ranks(const wex_tool_engine *engine);
/* Describes `rank` into a layout of the caller's (free it with
 * wex_tool_layout_free); *layout_p is NULL on failure. */
wex_status wex_tool_engine_describe(wex_tool_engine *engine, uint64_t rank,
                                    wex_tool_layout **layout_p);
/* Ranks first..last as the document of schemas/layout.schema.json (what
 * wex_layout_json returns); NULL with the thread's error set. */
cJSON *wex_tool_layout_document(wex_tool_engine *engine, uint64_t first,
                                uint64_t last);

/* ---- layouts ---------------------------------------------------------- */

void wex_tool_layout_get_info(const wex_tool_layout *layout,
                              wex_tool_layout_info *info);
/* Coordinate `index` (< coord_count): its key ("tp") and value. */
void wex_tool_layout_coord(const wex_tool_layout *layout, size_t index,
                           const char **key_p, int64_t *value_p);
/* Local tensor `index` (< tensor_count). */
void wex_tool_layout_tensor(const wex_tool_layout *layout, size_t index,
                            wex_tool_tensor *tensor);
/* Piece `index` (< piece_count). */
void wex_tool_layout_piece(const wex_tool_layout *layout, size_t index,
                           wex_tool_piece *piece);
/* Frees a layout wex_tool_engine_describe made (not one a planner
 * lends); NULL is a no-op. */
void wex_tool_layout_free(wex_tool_layout *layout);

#endif /* WEX_TOOL_MODEL_H */
