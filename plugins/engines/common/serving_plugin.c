#include "serving_plugin.h"

#include <stdlib.h>

#include "holding.h"
#include "parallel_cfg.h"
#include "plugin_fail.h"
#include "plugin_options.h"

void ws_serving_ctx_destroy(wex_engine_ctx *ctx)
{
    if (ctx == NULL)
        return;
    free(ctx->stage_first);
    ws_placement_fini(&ctx->sizes.placement);
    ws_model_fini(&ctx->view);
    free(ctx);
}

/* options/model: the main model, or the multi-token-prediction drafter
 * the engine builds beside it for speculative decoding. */
static wex_status read_model(wex_engine_ctx *ctx, const wex_options *options)
{
    static const char *const models[] = {"main", "mtp-drafter", NULL};
    const char *name = ctx->engine->flavor->engine;
    int which = 0;
    wex_status st;

    st = wp_option_enum(ctx->host, options, "/model", models, &which);
    if (st != WEX_OK)
        return st;
    ctx->sizes.drafter = which == 1;
    if (ctx->sizes.drafter && ctx->p[WS_P_PP] > 1)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/pp: the MTP drafter (options/model "
                       "\"mtp-drafter\") is modelled for pp = 1 only, where "
                       "%s shares the target's embedding with it; got pp = "
                       "%lld",
                       name, (long long)ctx->p[WS_P_PP]);
    return WEX_OK;
}

static wex_status configure(wex_engine_ctx *ctx, const wex_options *parallel,
                            const wex_options *options)
{
    const ws_serving_engine *en = ctx->engine;
    const char *name = en->flavor->engine;
    const wex_host_services *h = ctx->host;
    ws_emit e;
    wex_status st;

    st = ws_read_holding(h, options, 0, &ctx->hold);
    if (st == WEX_OK)
        st = ws_parallel_read(h, parallel, name, en->keys, en->extra, ctx->p);
    if (st == WEX_OK)
        st = read_model(ctx, options);
    if (st != WEX_OK)
        return st;
    ws_emit_init(&e, h, ctx->model, NULL);
    ws_hold(&e, ctx->hold);
    if (ws_model_read(&e, &ctx->view) != WEX_OK)
        return e.status;
    st = en->sizes(ctx, options, &e);
    if (st != WEX_OK)
        return st;
    if (ws_placement_read(&e, options, &ctx->view, ctx->sizes.ep, name,
                          &ctx->sizes.placement) != WEX_OK)
        return e.status;
    if (ws_serving_check(&e, &ctx->view, en->flavor, &ctx->sizes) != WEX_OK)
        return e.status;
    return ws_stage_table(h, parallel, name, ctx->view.layers, ctx->p[WS_P_PP],
                          0, &ctx->stage_first);
}

wex_status ws_serving_ctx_create(const ws_serving_engine *engine,
                                 wex_plugin_state *state,
                                 const wex_engine_args *args,
                                 wex_engine_ctx **ctx_p)
{
    wex_engine_ctx *ctx = calloc(1, sizeof(*ctx));
    wex_status st;

    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    ctx->model = args->model;
    ctx->engine = engine;
    st = configure(ctx, args->parallel, args->options);
    if (st != WEX_OK) {
        ws_serving_ctx_destroy(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

wex_status ws_serving_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = (uint64_t)(ctx->p[WS_P_DP] * ctx->p[WS_P_PP] * ctx->p[WS_P_TP]);
    return WEX_OK;
}

wex_status ws_serving_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                    wex_layout_builder *b)
{
    const int64_t sizes[3] = {ctx->p[WS_P_DP], ctx->p[WS_P_PP],
                              ctx->p[WS_P_TP]};
    int64_t c[3]; /* dp, pp, tp */
    ws_serving_rank r = {0};
    ws_emit e;

    ws_unrank(rank, sizes, 3, c);
    r.layer_lo = ctx->stage_first[c[1]];
    r.layer_hi = ctx->stage_first[c[1] + 1];
    r.first_stage = c[1] == 0;
    r.last_stage = c[1] == ctx->p[WS_P_PP] - 1;
    ws_emit_init(&e, ctx->host, ctx->model, b);
    ws_hold(&e, ctx->hold);
    e.scale_memo = ctx->view.scale_memo;
    ws_coord(&e, "dp", c[0]);
    ws_coord(&e, "pp", c[1]);
    ws_coord(&e, "tp", c[2]);
    ctx->engine->rank(ctx, c, &r, &e);
    ws_serving_describe(&e, &ctx->view, ctx->engine->flavor, &ctx->sizes, &r);
    ws_emit_fini(&e);
    return e.status;
}
