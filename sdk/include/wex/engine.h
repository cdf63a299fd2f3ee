/*
 * Engine adapters: describe how one engine (a trainer or an inference
 * server) lays a model out over its ranks.
 *
 * An adapter is a pure function of (model catalog, parallel config,
 * options): the host may describe any rank in any process, in any order,
 * and must always get the same answer. That is what lets every rank of
 * a job compute both sides' layouts without a gather.
 */
#ifndef WEX_ENGINE_H
#define WEX_ENGINE_H

#include <wex/host.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wex_engine_ctx wex_engine_ctx; /* plugin, per job side */

typedef struct wex_engine_args {
    uint32_t struct_size;
    uint32_t reserved0;
    const wex_model *model;      /* canonical tensors and config.json */
    const wex_options *parallel; /* {"tp":4,"pp":2,"ep":1,"dp":1,...} */
    const wex_options *options;  /* validated against the manifest schema */
} wex_engine_args;
#define WEX_ENGINE_ARGS_SIZE_1_0 WEX_SIZE_THROUGH(wex_engine_args, options)

typedef struct wex_engine_ops {
    uint32_t struct_size;
    uint32_t reserved0;
    uint64_t caps; /* reserved, zero */

    /* Checks the parallel config against the model the way the engine
     * itself would (TP divides heads, PP <= layers, ...); a refusal names
     * the constraint through host->set_error and returns
     * WEX_ERR_INVALID. `args` is borrowed; the handles inside it stay
     * valid until ctx_destroy. */
    wex_status (*ctx_create)(wex_plugin_state *state,
                             const wex_engine_args *args,
                             wex_engine_ctx **ctx_p);
    void (*ctx_destroy)(wex_engine_ctx *ctx);

    /* Ranks of this side: every replica, every parallel coordinate. */
    wex_status (*rank_count)(wex_engine_ctx *ctx, uint64_t *count_p);

    /* Reports rank `rank`'s coordinates, local tensors and pieces through
     * the host's layout_* services. */
    wex_status (*describe_rank)(wex_engine_ctx *ctx, uint64_t rank,
                                wex_layout_builder *builder);
} wex_engine_ops;
#define WEX_ENGINE_OPS_SIZE_1_0 WEX_SIZE_THROUGH(wex_engine_ops, describe_rank)

#ifdef __cplusplus
}
#endif

#endif /* WEX_ENGINE_H */
