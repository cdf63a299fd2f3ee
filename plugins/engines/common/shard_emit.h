/*
 * Building one rank's layout from canonical names.
 *
 * Engine adapters think in "local tensor X holds rows a..b of canonical
 * tensor Y at row r". This helper turns that into layout_* calls and does
 * the parts every adapter would otherwise repeat:
 *  - errors are sticky: after the first failure every call is a no-op and
 *    ws_end()/ws_status() return it, so adapter code reads straight through;
 *  - a trainer's floats (ws_hold): every local tensor in one float dtype,
 *    converted from the checkpoint's where that differs, no block scales;
 *  - fp8 block scales follow their weights: when a local tensor is built
 *    from fp8 canonical tensors that have `<name>_scale_inv` siblings, the
 *    local `<name>_scale_inv` tensor and its pieces are derived from the
 *    weight's pieces, block for block, and a split that cuts a
 *    quantization block is refused.
 *
 * Names here start with ws_ ("wex shared", the engines' shared helpers):
 * they belong to plugins/engines/common, a static library private to the
 * in-tree engine adapters, and are no part of the SDK.
 */
#ifndef WEX_ENGINE_COMMON_SHARD_EMIT_H
#define WEX_ENGINE_COMMON_SHARD_EMIT_H

#include <stdarg.h>
#include <stddef.h>

#include <wex/plugin.h>

#define WS_NAME_MAX 256
#define WS_NONE UINT64_MAX /* "no leading (expert) index" */

typedef struct ws_piece {
    int64_t canonical;
    uint32_t ndim; /* canonical rank */
    uint64_t offset[WEX_MAX_DIMS];
    uint64_t extent[WEX_MAX_DIMS];
    uint64_t at[WEX_MAX_DIMS]; /* local rank entries */
} ws_piece;

typedef struct ws_emit {
    const wex_host_services *host;
    const wex_model *model;
    wex_layout_builder *builder;
    uint64_t block[2]; /* fp8 weight block (rows, cols); 0 when unquantized */
    uint32_t hold;     /* float dtype held (holding.h), 0: the checkpoint's */
    wex_status status;
    /* the local tensor being assembled */
    char name[WS_NAME_MAX];
    uint32_t dtype;
    uint32_t ndim;
    uint32_t scales_dropped; /* block scales left out: floats hold none */
    uint64_t shape[WEX_MAX_DIMS];
    ws_piece *pieces;
    size_t count, cap;
    /* The describing context's, NULL outside describe_rank: each fp8
     * weight's block-scale tensor (-1 none), kept across ranks. */
    int64_t *scale_memo;
} ws_emit;

/* Canonical tensor facts, by index. */
typedef struct ws_canon {
    uint32_t dtype;
    uint32_t ndim;
    const uint64_t *shape;
    const char *name;
} ws_canon;

void ws_emit_init(ws_emit *e, const wex_host_services *host,
                  const wex_model *model, wex_layout_builder *builder);
void ws_emit_fini(ws_emit *e);
wex_status ws_status(const ws_emit *e);
/* Holds every tensor as values of float dtype `hold` (0: as the
 * checkpoint): local tensors take that dtype, pieces of another dtype
 * carry WEX_TRANSFORM_CONVERT, and fp8 block scales are neither derived
 * nor held. Call right after ws_emit_init. */
void ws_hold(ws_emit *e, uint32_t hold);

/* Records a failure (first one wins) and returns it. */
wex_status ws_fail(ws_emit *e, wex_status status, const char *fmt, ...)
    WEX_PRINTF(3, 4);

/* Index of the canonical tensor so named, -1 when the model has none. */
int64_t ws_find(const ws_emit *e, const char *fmt, ...) WEX_PRINTF(2, 3);
/* A slot of a table kept across ranks that no lookup has filled yet. */
#define WS_NOT_LOOKED_UP (-2)
/* ws_find, kept in *kept: looked up only while *kept is WS_NOT_LOOKED_UP
 * (kept NULL: always). */
int64_t ws_find_kept(const ws_emit *e, int64_t *kept, const char *fmt, ...)
    WEX_PRINTF(3, 4);
ws_canon ws_canon_of(const ws_emit *e, int64_t canonical);
/* Size of dimension `dim` of a canonical tensor (0 when absent). */
uint64_t ws_dim(const ws_emit *e, int64_t canonical, uint32_t dim);

wex_status ws_coord(ws_emit *e, const char *key, int64_t value);

/* Starts a local tensor. dtype 0 takes the first piece's dtype. */
void ws_begin(ws_emit *e, uint32_t dtype, uint32_t ndim, const uint64_t *shape,
              const char *fmt, ...) WEX_PRINTF(5, 6);
void ws_piece_add(ws_emit *e, int64_t canonical, const uint64_t *offset,
                  const uint64_t *extent, const uint64_t *at);
/* Rows [row, row+rows) of a canonical tensor (every other dimension
 * whole) at local row at_row, under leading index `lead` (WS_NONE when
 * the local tensor has the canonical rank). */
void ws_rows(ws_emit *e, int64_t canonical, uint64_t row, uint64_t rows,
             uint64_t lead, uint64_t at_row);
/* Columns [col, col+cols) of a 2-D canonical tensor at local column
 * at_col (all rows, starting at local row 0). */
void ws_cols(ws_emit *e, int64_t canonical, uint64_t col, uint64_t cols,
             uint64_t lead, uint64_t at_col);
/* Emits the local tensor (and its fp8 scale tensor); returns the status. */
wex_status ws_end(ws_emit *e);

/* One-call forms: a whole canonical tensor under a local name; a row
 * shard; a column shard. */
wex_status ws_whole(ws_emit *e, int64_t canonical, const char *fmt, ...)
    WEX_PRINTF(3, 4);
wex_status ws_row_shard(ws_emit *e, int64_t canonical, uint64_t row,
                        uint64_t rows, const char *fmt, ...) WEX_PRINTF(5, 6);
wex_status ws_col_shard(ws_emit *e, int64_t canonical, uint64_t col,
                        uint64_t cols, const char *fmt, ...) WEX_PRINTF(5, 6);

/* Layer-relative forms, each a no-op for an absent (-1) tensor: local
 * name = pre + rest; part `part` of `parts` equal row (column-parallel
 * linear) or column (row-parallel linear) shares. */
uint64_t ws_share(const ws_emit *e, int64_t canonical, uint32_t dim,
                  int64_t parts);
void ws_whole_if(ws_emit *e, int64_t canonical, const char *pre,
                 const char *rest);
void ws_row_part(ws_emit *e, int64_t canonical, int64_t parts, int64_t part,
                 const char *pre, const char *rest);
void ws_col_part(ws_emit *e, int64_t canonical, int64_t parts, int64_t part,
                 const char *pre, const char *rest);

#endif /* WEX_ENGINE_COMMON_SHARD_EMIT_H */
