/*
 * The `vllm` engine: how vLLM holds a model.
 *
 * Ranks are numbered as vLLM's global ranks: dp outermost, then pp, then
 * tp. With ep == 1 every expert is split over TP like a dense MLP; with
 * expert parallelism enabled vLLM spreads whole experts, contiguously
 * (the first experts % ep ranks taking one more), over either the TP x DP
 * group of one engine with internal DP (ep == tp * dp) or, for separate
 * servers behind a router, each server's TP group (ep == tp).
 */
#include <wex/plugin.h>

#include "parallel_cfg.h"
#include "serving_plugin.h"

enum { P_EP = WS_P_DP + 1 };

static const ws_serving_flavor flavor = {"vllm", "fused_qkv_a_proj", 1, 64};

static wex_status vllm_sizes(wex_engine_ctx *ctx)
{
    const int64_t *p = ctx->p;

    if (p[P_EP] != 1 && p[P_EP] != p[WS_P_TP] &&
        p[P_EP] != p[WS_P_TP] * p[WS_P_DP])
        return ws_refuse(ctx->host,
                         "parallel/ep: vLLM's expert parallelism spans a "
                         "server's TP group or the whole TP x DP group; "
                         "expected 1, tp = %lld or tp * dp = %lld, got %lld",
                         (long long)p[WS_P_TP],
                         (long long)(p[WS_P_TP] * p[WS_P_DP]),
                         (long long)p[P_EP]);
    ctx->sizes.tp = ctx->sizes.attn_tp = p[WS_P_TP];
    ctx->sizes.ep = p[P_EP];
    ctx->sizes.moe_tp = p[P_EP] > 1 ? 1 : p[WS_P_TP];
    ctx->sizes.pp = p[WS_P_PP];
    return WEX_OK;
}

static void vllm_rank(const wex_engine_ctx *ctx, const int64_t *c,
                      ws_serving_rank *r, ws_emit *e)
{
    int64_t tp = ctx->p[WS_P_TP];

    r->tp_rank = r->attn_rank = c[2];
    if (ctx->sizes.ep > 1)
        r->ep_rank = ctx->sizes.ep == tp ? c[2] : c[0] * tp + c[2];
    else
        r->moe_tp_rank = c[2];
    ws_coord(e, "ep", r->ep_rank);
}

static const char *const keys[] = {"tp", "pp", "dp", "ep", NULL};
static const char *const extra[] = {"pp_layers", NULL};
static const ws_serving_engine vllm = {&flavor, keys, extra, vllm_sizes,
                                       vllm_rank};

static wex_status vllm_ctx_create(wex_plugin_state *state,
                                  const wex_engine_args *args,
                                  wex_engine_ctx **ctx_p)
{
    return ws_serving_ctx_create(&vllm, state, args, ctx_p);
}

static const wex_engine_ops vllm_ops = {
    sizeof(wex_engine_ops), 0, 0, vllm_ctx_create, ws_serving_ctx_destroy,
    ws_serving_rank_count, ws_serving_describe_rank,
};

static const wex_plugin_desc vllm_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_ENGINE,
    WEX_PLUGIN_THREAD_PER_CTX, "vllm", "0.1.0", ws_plugin_init,
    ws_plugin_fini, &vllm_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out)
{
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
    out->abi_version = WEX_ABI_1_0;
    out->desc = &vllm_desc;
    return WEX_OK;
}
