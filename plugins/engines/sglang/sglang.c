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
#include <wex/plugin.h>

#include "parallel_cfg.h"
#include "serving_plugin.h"

enum { P_EP = WS_P_DP + 1, P_ATTN_DP };

static const ws_serving_flavor flavor = {"sglang", "fused_qkv_a_proj_with_mqa",
                                         0, 64};

static wex_status sglang_sizes(wex_engine_ctx *ctx)
{
    const int64_t *p = ctx->p;

    if (p[WS_P_TP] % p[P_EP] != 0)
        return ws_refuse(ctx->host,
                         "parallel/ep: SGLang's ep must divide tp (each expert "
                         "group is tp / ep ranks); tp=%lld, ep=%lld",
                         (long long)p[WS_P_TP], (long long)p[P_EP]);
    if (p[WS_P_TP] % p[P_ATTN_DP] != 0)
        return ws_refuse(ctx->host,
                         "parallel/attn_dp: DP attention needs attn_dp to "
                         "divide tp; tp=%lld, attn_dp=%lld",
                         (long long)p[WS_P_TP], (long long)p[P_ATTN_DP]);
    ctx->sizes.tp = p[WS_P_TP];
    ctx->sizes.attn_tp = p[WS_P_TP] / p[P_ATTN_DP];
    ctx->sizes.ep = p[P_EP];
    ctx->sizes.moe_tp = p[WS_P_TP] / p[P_EP];
    ctx->sizes.pp = p[WS_P_PP];
    ctx->sizes.embed_replicated = p[P_ATTN_DP] > 1;
    return WEX_OK;
}

static void sglang_rank(const wex_engine_ctx *ctx, const int64_t *c,
                        ws_serving_rank *r, ws_emit *e)
{
    r->tp_rank = c[2];
    r->attn_rank = c[2] % ctx->sizes.attn_tp;
    r->moe_tp_rank = c[2] % ctx->sizes.moe_tp;
    r->ep_rank = c[2] / ctx->sizes.moe_tp;
    ws_coord(e, "attn_dp", c[2] / ctx->sizes.attn_tp);
    ws_coord(e, "attn_tp", r->attn_rank);
    ws_coord(e, "ep", r->ep_rank);
}

static const char *const keys[] = {"tp", "pp", "dp", "ep", "attn_dp", NULL};
static const char *const extra[] = {"pp_layers", NULL};
static const ws_serving_engine sglang = {&flavor, keys, extra, sglang_sizes,
                                         sglang_rank};

static wex_status sglang_ctx_create(wex_plugin_state *state,
                                    const wex_engine_args *args,
                                    wex_engine_ctx **ctx_p)
{
    return ws_serving_ctx_create(&sglang, state, args, ctx_p);
}

static const wex_engine_ops sglang_ops = {
    sizeof(wex_engine_ops), 0, 0, sglang_ctx_create, ws_serving_ctx_destroy,
    ws_serving_rank_count, ws_serving_describe_rank,
};

static const wex_plugin_desc sglang_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_ENGINE,
    WEX_PLUGIN_THREAD_PER_CTX, "sglang", "0.1.0", ws_plugin_init,
    ws_plugin_fini, &sglang_ops,
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
