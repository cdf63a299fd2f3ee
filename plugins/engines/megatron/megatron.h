/*
 * The `megatron` engine: how Megatron-Core (with Transformer Engine
 * layers) holds a model. Shared between the plugin entry points
 * (megatron_plugin.c), the parallel-config checks (megatron_config.c) and
 * the layout itself (megatron_layout.c).
 */
#ifndef WEX_ENGINE_MEGATRON_H
#define WEX_ENGINE_MEGATRON_H

#include <wex/plugin.h>

#include "model_view.h"

/* Indices into wex_engine_ctx.p, in ws_parallel_read's key order. */
enum { MG_TP, MG_PP, MG_EP, MG_ETP, MG_DP, MG_COUNT };

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    ws_model view;
    int64_t p[MG_COUNT];
    int64_t vocab_multiple; /* make_vocab_size_divisible_by */
    int grouped_gemm;       /* moe_grouped_gemm */
    int64_t mtp_layers;     /* mtp_num_layers: MTP layers built */
    const char *mtp_inner;  /* mtp_layer_name: the MTP layer's inner layer */
    uint32_t hold;          /* options/dtype: the float dtype held */
    int64_t *stage_first;   /* pp + 1 entries: first layer of each stage */
};

/* One rank's coordinates, in Megatron's process-group terms. */
typedef struct mg_rank {
    int64_t tp, pp, dp; /* the dense grid: tp fastest, then dp, then pp */
    int64_t ep, etp;    /* the expert grid: etp fastest, then ep, then edp */
    int64_t layer_lo, layer_hi; /* this stage's global layer numbers */
    int first_stage, last_stage;
} mg_rank;

/* Reads the options and the parallel config; refuses what Megatron
 * would refuse for this model. */
wex_status mg_configure(wex_engine_ctx *ctx, const wex_engine_args *args);

/* Emits rank r's local tensors and pieces. */
wex_status mg_describe(ws_emit *e, const wex_engine_ctx *ctx, const mg_rank *r);

/* Rows per vocab-parallel shard: the vocabulary padded to a multiple of
 * make_vocab_size_divisible_by x tp, divided by tp. */
uint64_t mg_vocab_shard_rows(const wex_engine_ctx *ctx, uint64_t vocab);

#endif /* WEX_ENGINE_MEGATRON_H */
