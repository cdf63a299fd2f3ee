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
 *    attention TP only, and so is the embedding of most families
 *    (embed_follows_attention), while dense MLPs, shared experts and the
 *    lm_head stay on the full tp.
 *  - With tied embeddings and pp > 1 the last stage holds lm_head.weight
 *    (serving.h, tied_head_on_last_stage).
 * options/version picks the release whose facts apply: "0.5.23" (the
 * default), "0.5.9" or "0.5.2", each read from that release's wheel.
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
    .engine = "sglang",
    .fused_qkv_a_name = "fused_qkv_a_proj_with_mqa",
    .vocab_padding = 64,
    .nextn_renamed = 1,
};

/* options/version: the releases whose facts are modelled, newest (the
 * default) first. */
enum { V_0_5_23, V_0_5_9, V_0_5_2 };
static const char *const versions[] = {"0.5.23", "0.5.9", "0.5.2", NULL};

/* With tied embeddings SGLang's Qwen2 and Qwen3 (qwen2.py, qwen3.py)
 * build lm_head as a ParallelLMHead of its own when pp > 1, loaded from
 * model.embed_tokens.weight; the others (llama.py: lm_head =
 * model.embed_tokens, a PPMissingLayer on the last stage) cannot run
 * tied with pp > 1. */
static wex_status read_tied_head(const wex_engine_ctx *ctx, const char *arch,
                                 ws_serving_sizes *s)
{
    static const char *const own_head[] = {"Qwen2ForCausalLM",
                                           "Qwen3ForCausalLM", NULL};

    if (ctx->view.lm_head >= 0 || ctx->p[WS_P_PP] == 1)
        return WEX_OK;
    s->tied_head_on_last_stage = ws_arch_in(arch, own_head);
    if (s->tied_head_on_last_stage)
        return WEX_OK;
    return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                   "parallel/pp: SGLang's %s ties lm_head to "
                   "model.embed_tokens, which the last of %lld stages does "
                   "not hold (models/llama.py); expected pp = 1 for a model "
                   "with tie_word_embeddings",
                   arch ? arch : "model", (long long)ctx->p[WS_P_PP]);
}

/* Under DP attention the models built on Qwen2Model, Qwen2MoeModel and
 * DeepseekV2Model split their embedding over the attention TP group
 * (SGLang 0.5.9 and 0.5.23: use_attn_tp_group=is_dp_attention_enabled(),
 * or get_embedding_tp_kwargs() for DeepSeek), where SGLang 0.5.2 held it
 * whole (enable_tp=not is_dp_attention_enabled()); Llama and Mixtral
 * (llama.py, mixtral.py) split it over tp in all three. */
static int embed_follows_attention(const char *arch)
{
    static const char *const archs[] = {"Qwen2ForCausalLM",
                                        "Qwen3ForCausalLM",
                                        "Qwen2MoeForCausalLM",
                                        "Qwen3MoeForCausalLM",
                                        "DeepseekV2ForCausalLM",
                                        "DeepseekV3ForCausalLM",
                                        NULL};

    return ws_arch_in(arch, archs);
}

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
    const char *arch = e->host->model_architecture(e->model);
    int a2a = 0, fused, version = V_0_5_23;
    wex_status st;

    st = wp_option_enum(ctx->host, options, "/version", versions, &version);
    if (st == WEX_OK)
        st = wp_option_enum(ctx->host, options, "/moe_a2a_backend",
                            a2a_backends, &a2a);
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
    st = read_tied_head(ctx, arch, s);
    if (st != WEX_OK)
        return st;
    s->embed = WS_EMBED_TP;
    if (p[P_ATTN_DP] > 1 && embed_follows_attention(arch))
        s->embed = version == V_0_5_2 ? WS_EMBED_WHOLE : WS_EMBED_ATTN_TP;
    /* SGLang 0.5.23's VocabParallelEmbedding pads to 64 * ranks when the
     * 64-padded vocabulary does not divide them (0.5.9 and 0.5.2 only on
     * CPUs: layers/vocab_parallel_embedding.py). */
    s->vocab_pad_ranks = version == V_0_5_23;
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
