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
#include <stdlib.h>

#include <wex/plugin.h>

#include "parallel_cfg.h"
#include "serving.h"

enum { P_TP, P_PP, P_DP, P_EP, P_COUNT };

struct wex_plugin_state {
    const wex_host_services *host;
};

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    ws_model view;
    ws_serving_sizes sizes;
    int64_t p[P_COUNT];
    int64_t *stage_first; /* pp + 1 entries: first layer of each stage */
};

static const ws_serving_flavor flavor = {"vllm", "fused_qkv_a_proj", 1, 64};

static wex_status vllm_init(const wex_host_services *host,
                            wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    *state_p = state;
    return WEX_OK;
}

static void vllm_fini(wex_plugin_state *state)
{
    free(state);
}

static void vllm_ctx_destroy(wex_engine_ctx *ctx)
{
    if (ctx == NULL)
        return;
    free(ctx->stage_first);
    free(ctx);
}

static wex_status configure(wex_engine_ctx *ctx, const wex_options *parallel)
{
    static const char *const keys[] = {"tp", "pp", "dp", "ep", NULL};
    static const char *const extra[] = {"pp_layers", NULL};
    const wex_host_services *h = ctx->host;
    ws_emit e;
    wex_status st;

    st = ws_parallel_read(h, parallel, "vllm", keys, extra, ctx->p);
    if (st != WEX_OK)
        return st;
    if (ctx->p[P_EP] != 1 && ctx->p[P_EP] != ctx->p[P_TP] &&
        ctx->p[P_EP] != ctx->p[P_TP] * ctx->p[P_DP])
        return ws_refuse(h,
                         "parallel/ep: vLLM's expert parallelism spans a "
                         "server's TP group or the whole TP x DP group; "
                         "expected 1, tp = %lld or tp * dp = %lld, got %lld",
                         (long long)ctx->p[P_TP],
                         (long long)(ctx->p[P_TP] * ctx->p[P_DP]),
                         (long long)ctx->p[P_EP]);
    ws_emit_init(&e, h, ctx->model, NULL);
    if (ws_model_read(&e, &ctx->view) != WEX_OK)
        return e.status;
    ctx->sizes.tp = ctx->sizes.attn_tp = ctx->p[P_TP];
    ctx->sizes.ep = ctx->p[P_EP];
    ctx->sizes.moe_tp = ctx->p[P_EP] > 1 ? 1 : ctx->p[P_TP];
    ctx->sizes.pp = ctx->p[P_PP];
    if (ws_serving_check(&e, &ctx->view, &flavor, &ctx->sizes) != WEX_OK)
        return e.status;
    return ws_stage_table(h, parallel, "vllm", ctx->view.layers,
                          ctx->p[P_PP], 0, &ctx->stage_first);
}

static wex_status vllm_ctx_create(wex_plugin_state *state,
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
        vllm_ctx_destroy(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static wex_status vllm_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = (uint64_t)(ctx->p[P_DP] * ctx->p[P_PP] * ctx->p[P_TP]);
    return WEX_OK;
}

static wex_status vllm_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                     wex_layout_builder *b)
{
    const int64_t sizes[3] = {ctx->p[P_DP], ctx->p[P_PP], ctx->p[P_TP]};
    int64_t c[3]; /* dp, pp, tp */
    ws_serving_rank r = {0};
    ws_emit e;

    ws_unrank(rank, sizes, 3, c);
    r.tp_rank = r.attn_rank = c[2];
    if (ctx->sizes.ep > 1) {
        r.ep_rank = ctx->sizes.ep == ctx->p[P_TP]
                        ? c[2]
                        : c[0] * ctx->p[P_TP] + c[2];
        r.moe_tp_rank = 0;
    } else {
        r.moe_tp_rank = c[2];
    }
    r.layer_lo = ctx->stage_first[c[1]];
    r.layer_hi = ctx->stage_first[c[1] + 1];
    r.first_stage = c[1] == 0;
    r.last_stage = c[1] == ctx->p[P_PP] - 1;
    ws_emit_init(&e, ctx->host, ctx->model, b);
    ws_coord(&e, "dp", c[0]);
    ws_coord(&e, "pp", c[1]);
    ws_coord(&e, "tp", c[2]);
    ws_coord(&e, "ep", r.ep_rank);
    ws_serving_describe(&e, &ctx->view, &flavor, &ctx->sizes, &r);
    ws_emit_fini(&e);
    return e.status;
}

static const wex_engine_ops vllm_ops = {
    sizeof(wex_engine_ops), 0, 0, vllm_ctx_create, vllm_ctx_destroy,
    vllm_rank_count, vllm_describe_rank,
};

static const wex_plugin_desc vllm_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_ENGINE,
    WEX_PLUGIN_THREAD_PER_CTX, "vllm", "0.1.0", vllm_init, vllm_fini,
    &vllm_ops,
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
