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
 *
 * DeepSeek-V3's shared expert (models/deepseek_v2.py):
 *  - fused into the routed experts (options/shared_experts_fusion):
 *    w13_weight / w2_weight hold n_routed_experts + 1 experts, the last
 *    being mlp.shared_experts (the weight loader renames it
 *    mlp.experts.<n_routed_experts>), and no shared_experts.* exist.
 *    determine_num_fused_shared_experts turns this on for architecture
 *    DeepseekV3ForCausalLM (DeepseekV3ForCausalLMNextN for the drafter)
 *    with 256 routed experts and n_shared_experts = 1, unless
 *    --disable-shared-experts-fusion, expert parallelism (ep > 1, on
 *    NVIDIA GPUs), a DeepEP-class or flashinfer all-to-all backend, two-
 *    or single-batch overlap, the flashinfer_trtllm MoE runner, W4AFP8 or
 *    a GPU below capability 8.0 turns it off;
 *  - whole on every rank (DeepseekV2MoE builds it with tp_size = 1) under
 *    an all-to-all MoE backend (options/moe_a2a_backend), every one of
 *    which also sets ep to tp (_A2A_EP_SPANNING_BACKENDS, server args).
 */
#include <wex/plugin.h>

#include <string.h>

#include "parallel_cfg.h"
#include "plugin_fail.h"
#include "plugin_options.h"
#include "plugin_state.h"
#include "serving_plugin.h"

enum { P_EP = WS_P_DP + 1, P_ATTN_DP };
enum { FUSION_AUTO, FUSION_ON, FUSION_OFF };

static const ws_serving_flavor flavor = {
    "sglang", "fused_qkv_a_proj_with_mqa", 0, 64, 1, 0};

/* --moe-a2a-backend values modelled, "none" first. */
static const char *const a2a_backends[] = {
    "none",          "deepep",     "mooncake", "nixl", "mori",
    "ascend_fuseep", "flashinfer", "megamoe",  NULL};

static wex_status check_sizes(const wex_engine_ctx *ctx, int a2a)
{
    const int64_t *p = ctx->p;

    if (p[WS_P_TP] % p[P_EP] != 0)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/ep: SGLang's ep must divide tp (each expert "
                       "group is tp / ep ranks); tp=%lld, ep=%lld",
                       (long long)p[WS_P_TP], (long long)p[P_EP]);
    if (p[WS_P_TP] % p[P_ATTN_DP] != 0)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/attn_dp: DP attention needs attn_dp to "
                       "divide tp; tp=%lld, attn_dp=%lld",
                       (long long)p[WS_P_TP], (long long)p[P_ATTN_DP]);
    if (a2a != 0 && p[P_EP] != p[WS_P_TP])
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/ep: options/moe_a2a_backend \"%s\" makes "
                       "SGLang set ep to tp; expected ep = %lld, got %lld",
                       a2a_backends[a2a], (long long)p[WS_P_TP],
                       (long long)p[P_EP]);
    return WEX_OK;
}

/* Some layer has shared experts under mlp.<name>. */
static int has_shared(const ws_emit *e, const ws_model *m, const char *name)
{
    for (int64_t l = 0; l < m->layers; l++)
        if (ws_find(e, "model.layers.%lld.mlp.%s.gate_proj.weight",
                    (long long)l, name) >= 0)
            return 1;
    return 0;
}

/* SGLang's determine_num_fused_shared_experts, as far as the config and
 * the parallel sizes decide it. */
static int fusion_auto(const wex_engine_ctx *ctx, const char *arch, int a2a)
{
    return arch != NULL && strcmp(arch, "DeepseekV3ForCausalLM") == 0 &&
           ctx->view.experts == 256 && ctx->view.shared_experts == 1 &&
           ctx->p[P_EP] == 1 && a2a == 0;
}

static wex_status read_fusion(const wex_engine_ctx *ctx,
                              const wex_options *options, ws_emit *e, int a2a,
                              int *fused_p)
{
    static const char *const modes[] = {"auto", "on", "off", NULL};
    const char *arch = e->host->model_architecture(e->model);
    int mode = FUSION_AUTO;
    wex_status st;

    st = wp_option_enum(ctx->host, options, "/shared_experts_fusion", modes,
                        &mode);
    if (st != WEX_OK)
        return st;
    *fused_p = mode == FUSION_ON ||
               (mode == FUSION_AUTO && fusion_auto(ctx, arch, a2a));
    if (mode != FUSION_ON)
        return WEX_OK;
    if (ctx->view.shared_experts != 1 ||
        !has_shared(e, &ctx->view, "shared_experts"))
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "options/shared_experts_fusion: \"on\" fuses one "
                       "DeepSeek shared expert (mlp.shared_experts, "
                       "n_shared_experts = 1) into the routed experts; this "
                       "model has none; expected \"auto\" or \"off\"");
    if (ctx->p[P_EP] > 1 || a2a != 0)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "options/shared_experts_fusion: \"on\" with ep > 1 or "
                       "an all-to-all backend (per-rank shared-expert slots) "
                       "is not modelled; expected ep = 1, "
                       "options/moe_a2a_backend \"none\", or \"off\"");
    return WEX_OK;
}

static wex_status sglang_sizes(wex_engine_ctx *ctx, const wex_options *options,
                               ws_emit *e)
{
    const int64_t *p = ctx->p;
    ws_serving_sizes *s = &ctx->sizes;
    int a2a = 0, fused;
    wex_status st;

    st = wp_option_enum(ctx->host, options, "/moe_a2a_backend", a2a_backends,
                        &a2a);
    if (st == WEX_OK)
        st = check_sizes(ctx, a2a);
    if (st == WEX_OK)
        st = read_fusion(ctx, options, e, a2a, &fused);
    if (st != WEX_OK)
        return st;
    if (a2a != 0 && has_shared(e, &ctx->view, "shared_expert"))
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "options/moe_a2a_backend: \"%s\" with Qwen2-MoE's "
                       "mlp.shared_expert is not modelled (only DeepSeek's "
                       "shared_experts); expected \"none\"",
                       a2a_backends[a2a]);
    s->tp = p[WS_P_TP];
    s->attn_tp = p[WS_P_TP] / p[P_ATTN_DP];
    s->ep = p[P_EP];
    s->moe_tp = p[WS_P_TP] / p[P_EP];
    s->moe_tp_name = s->moe_tp == s->tp ? "tp" : "tp / ep";
    s->pp = p[WS_P_PP];
    s->embed_replicated = p[P_ATTN_DP] > 1;
    s->shared_whole = a2a != 0;
    s->fused_shared = fused;
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
    .struct_size = sizeof(wex_engine_ops),
    .ctx_create = sglang_ctx_create,
    .ctx_destroy = ws_serving_ctx_destroy,
    .rank_count = ws_serving_rank_count,
    .describe_rank = ws_serving_describe_rank,
};

static const wex_plugin_desc sglang_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_1,
    .kind = WEX_KIND_ENGINE,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "sglang",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &sglang_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_1, sglang_desc)
