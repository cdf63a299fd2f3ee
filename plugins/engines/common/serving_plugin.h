/*
 * The plugin side shared by the serving engines (vLLM, SGLang): one
 * context type and the engine ops around ws_serving_describe. Each
 * engine supplies its parallel keys, how they become sizes, and how a
 * rank's (dp, pp, tp) coordinates become a ws_serving_rank; its own file
 * keeps only that, its descriptor and its entry point.
 *
 * Names here start with ws_ ("wex shared", the engines' shared helpers):
 * they belong to plugins/engines/common, a static library private to the
 * in-tree engine adapters, and are no part of the SDK.
 */
#ifndef WEX_ENGINE_COMMON_SERVING_PLUGIN_H
#define WEX_ENGINE_COMMON_SERVING_PLUGIN_H

#include "plugin_state.h"
#include "serving.h"

/* Index of each size in wex_engine_ctx.p: every serving engine has tp,
 * pp and dp first; the rest are the engine's own. */
enum { WS_P_TP, WS_P_PP, WS_P_DP, WS_P_MAX = 8 };

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    const struct ws_serving_engine *engine;
    ws_model view;
    ws_serving_sizes sizes;
    int64_t p[WS_P_MAX];  /* in the order of engine->keys */
    int64_t *stage_first; /* pp + 1 entries: first layer of each stage */
    uint32_t hold;        /* options/dtype (holding.h) */
};

typedef struct ws_serving_engine {
    const ws_serving_flavor *flavor;
    const char *const *keys;  /* "tp", "pp", "dp", then the engine's own */
    const char *const *extra; /* other allowed keys (pp_layers) */
    /* Checks the sizes and the engine's own options against each other
     * and the model (ctx->view, read through e), and fills ctx->sizes. */
    wex_status (*sizes)(wex_engine_ctx *ctx, const wex_options *options,
                        ws_emit *e);
    /* Fills r's TP/EP coordinates for (dp, pp, tp) = c and reports the
     * rank's coordinates through ws_coord. */
    void (*rank)(const wex_engine_ctx *ctx, const int64_t *c,
                 ws_serving_rank *r, ws_emit *e);
} ws_serving_engine;

wex_status ws_serving_ctx_create(const ws_serving_engine *engine,
                                 wex_plugin_state *state,
                                 const wex_engine_args *args,
                                 wex_engine_ctx **ctx_p);
void ws_serving_ctx_destroy(wex_engine_ctx *ctx);
/* Ranks: dp outermost, then pp, then tp. */
wex_status ws_serving_rank_count(wex_engine_ctx *ctx, uint64_t *count_p);
wex_status ws_serving_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                    wex_layout_builder *builder);

#endif /* WEX_ENGINE_COMMON_SERVING_PLUGIN_H */
