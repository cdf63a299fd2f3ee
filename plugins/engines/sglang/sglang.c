/*
 * The `sglang` engine: how SGLang holds a model.
 *
 * One SGLang server is a TP x PP group; `dp` counts whole servers behind
 * a router (replicas). Inside a server:
 *  - ep divides tp: experts are spread over ep groups of tp / ep ranks,
 *    and each expert's intermediate dimension is split over its group
 *    (moe_tp = tp / ep, ep_rank = tp_rank / moe_tp);
 *  - DP attention (attn_dp > 1) splits the TP group into attn_dp attention
 *    replicas of tp / attn_dp ranks: attention weights are split over the
 *    attention TP only, the embedding is whole on every rank, while dense
 *    MLPs, shared experts and the lm_head stay on the full tp.
 * Ranks are numbered dp outermost, then pp, then tp.
 */
#include <stdlib.h>

#include <wex/plugin.h>

#include "parallel_cfg.h"
#include "serving.h"

enum { P_TP, P_PP, P_DP, P_EP, P_ATTN_DP, P_COUNT };

struct wex_plugin_state {
    const wex_host_services *host;
};

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    ws_model view;
    ws_serving_sizes sizes;
    int64_t p[P_COUNT];
    int64_t *stage_first; /* pp + 1 entries */
};

static const ws_serving_flavor flavor = {"sglang", "fused_qkv_a_proj_with_mqa",
                                         0, 64};

static wex_status sglang_init(const wex_host_services *host,
                              wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    *state_p = state;
    return WEX_OK;
}

static void sglang_fini(wex_plugin_state *state)
{
    free(state);
}

static void sglang_ctx_destroy(wex_engine_ctx *ctx)
{
    if (ctx == NULL)
        return;
    free(ctx->stage_first);
    free(ctx);
}

static wex_status check_sizes(const wex_host_services *h, const int64_t *p)
{
    if (p[P_TP] % p[P_EP] != 0)
        return ws_refuse(h,
                         "parallel/ep: SGLang's ep must divide tp (each expert "
                         "group is tp / ep ranks); tp=%lld, ep=%lld",
                         (long long)p[P_TP], (long long)p[P_EP]);
    if (p[P_TP] % p[P_ATTN_DP] != 0)
        return ws_refuse(h,
                         "parallel/attn_dp: DP attention needs attn_dp to "
                         "divide tp; tp=%lld, attn_dp=%lld",
                         (long long)p[P_TP], (long long)p[P_ATTN_DP]);
    return WEX_OK;
}

static wex_status configure(wex_engine_ctx *ctx, const wex_options *parallel)
{
    static const char *const keys[] = {"tp", "pp", "dp", "ep", "attn_dp", NULL};
    static const char *const extra[] = {"pp_layers", NULL};
    const wex_host_services *h = ctx->host;
    ws_emit e;
    wex_status st;

    st = ws_parallel_read(h, parallel, "sglang", keys, extra, ctx->p);
    if (st == WEX_OK)
        st = check_sizes(h, ctx->p);
    if (st != WEX_OK)
        return st;
    ws_emit_init(&e, h, ctx->model, NULL);
    if (ws_model_read(&e, &ctx->view) != WEX_OK)
        return e.status;
    ctx->sizes.tp = ctx->p[P_TP];
    ctx->sizes.attn_tp = ctx->p[P_TP] / ctx->p[P_ATTN_DP];
    ctx->sizes.ep = ctx->p[P_EP];
    ctx->sizes.moe_tp = ctx->p[P_TP] / ctx->p[P_EP];
    ctx->sizes.pp = ctx->p[P_PP];
    ctx->sizes.embed_replicated = ctx->p[P_ATTN_DP] > 1;
    if (ws_serving_check(&e, &ctx->view, &flavor, &ctx->sizes) != WEX_OK)
        return e.status;
    return ws_stage_table(h, parallel, "sglang", ctx->view.layers,
                          ctx->p[P_PP], 0, &ctx->stage_first);
}

static wex_status sglang_ctx_create(wex_plugin_state *state,
                                    const wex_engine_args *args,
                                    wex_engine_ctx **ctx_p)
{
    wex_engine_ctx *ctx = calloc(1, sizeof(*ctx));
    wex_status st;

    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    ctx->model = args->model;
    st = configure(ctx, args->parallel);
    if (st != WEX_OK) {
        sglang_ctx_destroy(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static wex_status sglang_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = (uint64_t)(ctx->p[P_DP] * ctx->p[P_PP] * ctx->p[P_TP]);
    return WEX_OK;
}

static wex_status sglang_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                       wex_layout_builder *b)
{
    const int64_t sizes[3] = {ctx->p[P_DP], ctx->p[P_PP], ctx->p[P_TP]};
    int64_t c[3]; /* dp, pp, tp */
    ws_serving_rank r = {0};
    ws_emit e;

    ws_unrank(rank, sizes, 3, c);
    r.tp_rank = c[2];
    r.attn_rank = c[2] % ctx->sizes.attn_tp;
    r.moe_tp_rank = c[2] % ctx->sizes.moe_tp;
    r.ep_rank = c[2] / ctx->sizes.moe_tp;
    r.layer_lo = ctx->stage_first[c[1]];
    r.layer_hi = ctx->stage_first[c[1] + 1];
    r.first_stage = c[1] == 0;
    r.last_stage = c[1] == ctx->p[P_PP] - 1;
    ws_emit_init(&e, ctx->host, ctx->model, b);
    ws_coord(&e, "dp", c[0]);
    ws_coord(&e, "pp", c[1]);
    ws_coord(&e, "tp", c[2]);
    ws_coord(&e, "attn_dp", c[2] / ctx->sizes.attn_tp);
    ws_coord(&e, "attn_tp", r.attn_rank);
    ws_coord(&e, "ep", r.ep_rank);
    ws_serving_describe(&e, &ctx->view, &flavor, &ctx->sizes, &r);
    ws_emit_fini(&e);
    return e.status;
}

static const wex_engine_ops sglang_ops = {
    sizeof(wex_engine_ops), 0, 0, sglang_ctx_create, sglang_ctx_destroy,
    sglang_rank_count, sglang_describe_rank,
};

static const wex_plugin_desc sglang_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_ENGINE,
    WEX_PLUGIN_THREAD_PER_CTX, "sglang", "0.1.0", sglang_init, sglang_fini,
    &sglang_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out)
{
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
    out->abi_version = WEX_ABI_1_0;
    out->desc = &sglang_desc;
    return WEX_OK;
}
