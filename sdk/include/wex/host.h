/*
 * Services the host lends to plugins. A plugin never links against libwex:
 * everything it needs from the host comes through this table, handed to
 * the plugin's init and valid until its fini returns.
 *
 * The table only grows at its end. Every host has at least
 * WEX_HOST_SERVICES_SIZE_1_0 bytes of it; a plugin calls a service
 * appended after 1.0 only when
 * WEX_HAS_MEMBER(wex_host_services, member, host->struct_size).
 *
 * Structs a plugin passes in (wex_local_tensor_desc, wex_piece_desc,
 * wex_plan_op) carry the plugin's struct_size, at least the 1.0 size; the
 * host reads a member appended later only when that size covers it.
 * Structs the host fills (wex_tensor_info, wex_piece_view, a
 * wex_local_tensor_desc from layout_tensor) carry the caller's capacity
 * in struct_size, and the host writes no byte past it.
 *
 * Threading: log, log_enabled and set_error may be called from any thread,
 * including plugin-owned ones. The other services are called from the
 * thread that called into the plugin.
 */
#ifndef WEX_HOST_H
#define WEX_HOST_H

#include <wex/abi.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Log levels (smaller is more severe). */
#define WEX_LOG_ERROR 1u
#define WEX_LOG_WARN 2u
#define WEX_LOG_INFO 3u
#define WEX_LOG_DEBUG 4u
#define WEX_LOG_TRACE 5u

/* JSON value types reported by opt_type. */
#define WEX_JSON_MISSING 0u
#define WEX_JSON_NULL 1u
#define WEX_JSON_BOOL 2u
#define WEX_JSON_NUMBER 3u
#define WEX_JSON_STRING 4u
#define WEX_JSON_ARRAY 5u
#define WEX_JSON_OBJECT 6u

/* A read-only JSON document owned by the host: a plugin's validated
 * options, a parallel config, a model's config.json. Values are addressed
 * by JSON Pointer (RFC 6901): "" is the root, "/tp", "/layers/3". */
typedef struct wex_options wex_options;

/* A model catalog: the canonical tensors of one model, read through the
 * model_* services below (defined by the host, host/lib/model/catalog.h). */
typedef struct wex_model wex_model;

/* Receives one rank's local tensors and pieces from an engine (engine.h). */
typedef struct wex_layout_builder wex_layout_builder;
/* Every rank's layout on one side of a job, read-only (policy.h). */
typedef struct wex_layout wex_layout;
/* Receives a policy's copy operations (policy.h). */
typedef struct wex_plan_builder wex_plan_builder;

/* Which side of a job a rank belongs to. */
#define WEX_SIDE_SOURCE 0u
#define WEX_SIDE_DESTINATION 1u

/* One canonical tensor, as the checkpoint stores it. */
typedef struct wex_tensor_info {
    uint32_t struct_size; /* set by the caller: its capacity */
    uint32_t dtype;       /* WEX_DTYPE_* */
    uint32_t ndim;        /* 1..WEX_MAX_DIMS */
    uint32_t reserved0;
    const char *name;      /* "model.layers.0.self_attn.q_proj.weight" */
    const uint64_t *shape; /* ndim entries */
} wex_tensor_info;
#define WEX_TENSOR_INFO_SIZE_1_0 WEX_SIZE_THROUGH(wex_tensor_info, shape)

/* A buffer one engine rank holds: dense, row-major (C order). */
typedef struct wex_local_tensor_desc {
    uint32_t struct_size;
    uint32_t dtype;
    uint32_t ndim;
    uint32_t reserved0;
    const char *name;      /* the engine's own name */
    const uint64_t *shape; /* ndim entries */
} wex_local_tensor_desc;
#define WEX_LOCAL_TENSOR_DESC_SIZE_1_0                                         \
    WEX_SIZE_THROUGH(wex_local_tensor_desc, shape)

/* Piece transforms: how a local tensor holds the canonical tensor's
 * values (docs/design.md, "Transforms").
 *
 * NONE: as the checkpoint stores them, byte for byte, in its dtype (an
 * fp8 weight as e4m3, with its `_scale_inv` tensor held beside it).
 *
 * CONVERT (ABI 1.1): as values in the local tensor's float dtype (bf16,
 * f16, f32) where the checkpoint has another: a float tensor in another
 * precision, or an fp8 block-quantized weight as its dequantized values,
 * with no scale tensor. The host converts between the two forms when a
 * source and a destination hold a tensor differently: fp8 quantization
 * (rule fp8-block-128) on the sender, dequantization, rounding between
 * floats. An engine describing CONVERT pieces negotiates ABI 1.1. */
#define WEX_TRANSFORM_NONE 0u
#define WEX_TRANSFORM_CONVERT 1u

/* "The box offset/extent of canonical tensor `canonical` lives in the
 * local tensor starting at element coordinate `at`." The box has the
 * canonical tensor's rank n; the local tensor may have more dimensions
 * (stacked experts): the box's dimensions map onto the local tensor's
 * last n dimensions, and the leading local coordinates are fixed by `at`. */
typedef struct wex_piece_desc {
    uint32_t struct_size;
    uint32_t transform;     /* WEX_TRANSFORM_* */
    uint64_t canonical;     /* index of the canonical tensor in the model */
    const uint64_t *offset; /* canonical ndim entries */
    const uint64_t *extent; /* canonical ndim entries, each >= 1 */
    const uint64_t *at;     /* local ndim entries */
} wex_piece_desc;
#define WEX_PIECE_DESC_SIZE_1_0 WEX_SIZE_THROUGH(wex_piece_desc, at)

/* A piece as a policy sees it: which rank and local tensor hold which
 * canonical box, and where (see wex_piece_desc). The arrays stay valid
 * as long as the layout. */
typedef struct wex_piece_view {
    uint32_t struct_size; /* set by the caller: its capacity */
    uint32_t ndim;        /* the canonical tensor's rank */
    uint32_t local_ndim;  /* the local tensor's rank (>= ndim) */
    uint32_t reserved0;
    uint64_t rank;   /* rank on its side */
    uint64_t tensor; /* local tensor index within that rank */
    uint64_t canonical;
    const uint64_t *offset; /* ndim entries */
    const uint64_t *extent; /* ndim entries */
    const uint64_t *at;     /* local_ndim entries */
} wex_piece_view;
#define WEX_PIECE_VIEW_SIZE_1_0 WEX_SIZE_THROUGH(wex_piece_view, at)

/* One copy: the box `extent` (ndim entries) starting at src_offset in the
 * source rank's local tensor and at dst_offset in the destination rank's.
 * The box spans the trailing ndim dimensions of each local tensor; the
 * leading coordinates are fixed by the offsets. Offsets have one entry
 * per dimension of their local tensor. Both tensors have the same dtype. */
typedef struct wex_plan_op {
    uint32_t struct_size;
    uint32_t ndim;
    uint64_t src_rank;
    uint64_t src_tensor;
    uint64_t dst_rank;
    uint64_t dst_tensor;
    const uint64_t *src_offset;
    const uint64_t *dst_offset;
    const uint64_t *extent;
} wex_plan_op;
#define WEX_PLAN_OP_SIZE_1_0 WEX_SIZE_THROUGH(wex_plan_op, extent)

/* Element i of a host-owned wex_piece_view array. */
#define WEX_PIECE_VIEW_AT(base, i)                                             \
    ((const wex_piece_view *)(const void *)((const char *)(base) +             \
                                            (size_t)(i) *                      \
                                                (base)->struct_size))

typedef struct wex_host_services {
    uint32_t struct_size;
    uint32_t abi_version;
    wex_host_ctx *ctx; /* pass back as the first argument below */

    /* ---- logging and errors ---------------------------------------- */

    /* Plugins never print: every message goes through log. */
    void (*log)(wex_host_ctx *ctx, uint32_t level, const char *file,
                int32_t line, const char *fmt, ...) WEX_PRINTF(5, 6);
    /* Nonzero when `level` would be printed; skip formatting otherwise. */
    int32_t (*log_enabled)(wex_host_ctx *ctx, uint32_t level);
    /* Explain the failure about to be returned. One line, no newline. */
    void (*set_error)(wex_host_ctx *ctx, wex_status status, const char *fmt,
                      ...) WEX_PRINTF(3, 4);

    /* ---- read-only JSON documents ---------------------------------- */

    uint32_t (*opt_type)(const wex_options *doc, const char *pointer);
    /* WEX_ERR_INVALID when missing or of another type (a number that is
     * not an integer is another type for opt_get_i64). */
    wex_status (*opt_get_i64)(const wex_options *doc, const char *pointer,
                              int64_t *value_p);
    wex_status (*opt_get_f64)(const wex_options *doc, const char *pointer,
                              double *value_p);
    wex_status (*opt_get_bool)(const wex_options *doc, const char *pointer,
                               int32_t *value_p);
    /* The string stays valid as long as the document. */
    wex_status (*opt_get_str)(const wex_options *doc, const char *pointer,
                              const char **value_p);
    /* Elements of an array or members of an object. */
    wex_status (*opt_count)(const wex_options *doc, const char *pointer,
                            uint64_t *count_p);
    /* Name of the index-th member of an object (document order). */
    wex_status (*opt_key)(const wex_options *doc, const char *pointer,
                          uint64_t index, const char **key_p);

    /* ---- model catalog --------------------------------------------- */

    uint64_t (*model_tensor_count)(const wex_model *model);
    wex_status (*model_tensor)(const wex_model *model, uint64_t index,
                               wex_tensor_info *info);
    /* WEX_ERR_INVALID when the model has no tensor of that name. */
    wex_status (*model_find)(const wex_model *model, const char *name,
                             uint64_t *index_p);
    /* The model's config.json and its "architectures"[0]. */
    const wex_options *(*model_config)(const wex_model *model);
    const char *(*model_architecture)(const wex_model *model);

    /* ---- layout builder -------------------------------------------- */

    /* A named integer coordinate of the rank being described
     * ("tp", "pp", "ep", "dp", "replica", ...). */
    wex_status (*layout_set_coord)(wex_layout_builder *builder, const char *key,
                                   int64_t value);
    /* Adds a local tensor; *tensor_p is its index within the rank. */
    wex_status (*layout_add_tensor)(wex_layout_builder *builder,
                                    const wex_local_tensor_desc *desc,
                                    uint64_t *tensor_p);
    /* The host checks the piece lies inside both tensors and that the
     * dtypes agree (WEX_TRANSFORM_NONE), or that the conversion is one
     * the host performs (WEX_TRANSFORM_CONVERT). */
    wex_status (*layout_add_piece)(wex_layout_builder *builder, uint64_t tensor,
                                   const wex_piece_desc *piece);

    /* ---- layouts, read-only (policies) -------------------------------- */
    uint64_t (*layout_rank_count)(const wex_layout *side);
    /* The host (machine) a rank runs on; both sides share the numbering,
     * so equal ids mean an intra-host copy. */
    uint64_t (*layout_host)(const wex_layout *side, uint64_t rank);
    wex_status (*layout_tensor)(const wex_layout *side, uint64_t rank,
                                uint64_t tensor, wex_local_tensor_desc *desc);
    /* The pieces of one canonical tensor on this side, every rank's, in
     * (rank, local tensor, piece) order: an array the host owns, valid as
     * long as the layout. Its elements are base->struct_size bytes apart
     * (the host's size, never less than this header's); step through it
     * with WEX_PIECE_VIEW_AT. NULL with *count_p = 0 when none. */
    const wex_piece_view *(*layout_canonical_pieces)(const wex_layout *side,
                                                     uint64_t canonical,
                                                     uint64_t *count_p);
    /* The pieces one rank holds, in the order its engine described them. */
    uint64_t (*layout_rank_piece_count)(const wex_layout *side, uint64_t rank);
    wex_status (*layout_rank_piece)(const wex_layout *side, uint64_t rank,
                                    uint64_t index, wex_piece_view *view);

    /* ---- plan builder (policies) -------------------------------------- */
    /* The host checks the op against both layouts (inside both local
     * tensors, same dtype) and refuses it with a message otherwise. */
    wex_status (*plan_add_op)(wex_plan_builder *builder, const wex_plan_op *op);
} wex_host_services;
#define WEX_HOST_SERVICES_SIZE_1_0                                             \
    WEX_SIZE_THROUGH(wex_host_services, plan_add_op)

/* Logging helpers for plugins; `host` is the services pointer. */
#define WEX_LOG(host, level, ...)                                              \
    do {                                                                       \
        if ((host)->log_enabled((host)->ctx, (level)))                         \
            (host)->log((host)->ctx, (level), __FILE__, __LINE__,              \
                        __VA_ARGS__);                                          \
    } while (0)
#define WEX_WARN(host, ...) WEX_LOG(host, WEX_LOG_WARN, __VA_ARGS__)
#define WEX_INFO(host, ...) WEX_LOG(host, WEX_LOG_INFO, __VA_ARGS__)
#define WEX_DEBUG(host, ...) WEX_LOG(host, WEX_LOG_DEBUG, __VA_ARGS__)

#ifdef __cplusplus
}
#endif

#endif /* WEX_HOST_H */
