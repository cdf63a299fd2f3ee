/*
 * The `vllm` engine: how vLLM holds a model.
 *
 * Ranks are numbered as vLLM's global ranks: dp outermost, then pp, then
 * tp. How the dp ranks relate is options/data_parallel:
 *  - "replicas" (the default): dp separate servers behind a router, each
 *    a TP x PP group holding the whole model;
 *  - "internal": one server with --data-parallel-size dp (data-parallel
 *    attention). vLLM's FusedMoEParallelConfig.make
 *    (model_executor/layers/fused_moe/config.py) flattens tp across dp for
 *    the experts: without expert parallelism each expert's intermediate
 *    dimension is split over all tp * dp ranks (moe rank = dp_rank * tp +
 *    tp_rank); with it, whole experts are spread over those ranks.
 * With ep == 1 every expert is split over TP like a dense MLP; with
 * expert parallelism vLLM spreads whole experts contiguously (the first
 * experts % ep ranks taking one more) over each server's TP group
 * (ep == tp, replicas) or the TP x DP group (ep == tp * dp, internal DP:
 * what ep == tp * dp > tp means when options/data_parallel is absent).
 *
 * Under internal DP with expert parallelism and tp > 1 vLLM runs the MoE
 * sequence parallel for most all2all backends
 * (ParallelConfig.use_sequence_parallel_moe, config/parallel.py), and
 * DeepseekV2MoE (models/deepseek_v2.py) then builds its shared experts
 * with disable_tp: whole on every rank.
 *
 * options/version picks the release whose facts apply: "0.34" (the
 * default; vLLM 0.34.0) or "0.13" (vLLM 0.13.0). They differ in the
 * all-to-all backends and which run sequence parallel (config/
 * parallel.py), and in the DeepSeek MTP drafter's head (serving.c,
 * mtp_layer).
 *
 * Qwen2-MoE, Qwen3-MoE and Mixtral build embed_tokens, the final norm and
 * lm_head unconditionally (models/qwen2_moe.py, qwen3_moe.py, mixtral.py:
 * no PPMissingLayer), so every pipeline stage holds them; the other
 * architectures hold them on the first / last stage only.
 */
#include <wex/plugin.h>

#include "parallel_cfg.h"
#include "plugin_fail.h"
#include "plugin_options.h"
#include "plugin_state.h"
#include "serving_plugin.h"

enum { P_EP = WS_P_DP + 1 };
enum { DP_REPLICAS, DP_INTERNAL };

static const ws_serving_flavor flavor = {
    .engine = "vllm",
    .fused_qkv_a_name = "fused_qkv_a_proj",
    .uneven_experts = 1,
    .vocab_padding = 64,
};

/* options/version: the releases whose facts are modelled, newest (the
 * default) first. */
enum { V_0_34, V_0_13 };
static const char *const versions[] = {"0.34", "0.13", NULL};

/* --all2all-backend values over every modelled release, the default
 * first (All2AllBackend, config/parallel.py). */
static const char *const backends[] = {"allgather_reducescatter",
                                       "naive",
                                       "deepep_high_throughput",
                                       "deepep_low_latency",
                                       "pplx",
                                       "flashinfer_all2allv",
                                       "mori",
                                       "deepep_v2",
                                       "mori_high_throughput",
                                       "mori_low_latency",
                                       "moonep",
                                       "nixl_ep",
                                       "flashinfer_nvlink_two_sided",
                                       "flashinfer_nvlink_one_sided",
                                       "passthrough",
                                       NULL};

/* Per release and backend (in the order above): -1 when the release has
 * no such backend, else whether ParallelConfig.use_sequence_parallel_moe
 * names it. vLLM 0.13.0 knows the first six and runs the first four
 * sequence parallel. vLLM 0.34.0 knows them all; its __post_init__
 * replaces the removed "pplx" and "naive" by allgather_reducescatter
 * (sequence parallel), and moonep, flashinfer_all2allv and
 * flashinfer_nvlink_two_sided are the ones it does not name. */
static const int sequence_parallel[][15] = {
    [V_0_34] = {1, 1, 1, 1, 1, 0, 1, 1, 1, 1, 0, 1, 0, 1, 1},
    [V_0_13] = {1, 1, 1, 1, 0, 0, -1, -1, -1, -1, -1, -1, -1, -1, -1},
};

/* Architectures whose embed_tokens, norm and lm_head vLLM builds on
 * every pipeline stage. */
static int ends_every_stage(const char *arch)
{
    static const char *const archs[] = {"Qwen2MoeForCausalLM",
                                        "Qwen3MoeForCausalLM",
                                        "MixtralForCausalLM", NULL};

    return ws_arch_in(arch, archs);
}

static wex_status read_data_parallel(wex_engine_ctx *ctx,
                                     const wex_options *options, int *mode_p)
{
    static const char *const modes[] = {"replicas", "internal", NULL};
    const int64_t *p = ctx->p;
    int64_t tp = p[WS_P_TP], dp = p[WS_P_DP], ep = p[P_EP];
    int wide = dp > 1 && ep > tp && ep == tp * dp;
    wex_status st;

    *mode_p = wide ? DP_INTERNAL : DP_REPLICAS;
    st = wp_option_enum(ctx->host, options, "/data_parallel", modes, mode_p);
    if (st != WEX_OK)
        return st;
    if (*mode_p == DP_REPLICAS && wide)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/ep: %lld = tp * dp spans the dp ranks, which "
                       "only one server with internal data parallelism does; "
                       "expected ep = 1 or tp = %lld with options/"
                       "data_parallel \"replicas\"",
                       (long long)ep, (long long)tp);
    if (*mode_p == DP_INTERNAL && ep != 1 && ep != tp * dp)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/ep: with options/data_parallel \"internal\" "
                       "vLLM's expert parallelism spans all tp * dp ranks; "
                       "expected 1 or %lld, got %lld",
                       (long long)(tp * dp), (long long)ep);
    if (*mode_p == DP_REPLICAS && ep != 1 && ep != tp)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "parallel/ep: vLLM's expert parallelism spans a "
                       "server's TP group or the whole TP x DP group; "
                       "expected 1, tp = %lld or tp * dp = %lld, got %lld",
                       (long long)tp, (long long)(tp * dp), (long long)ep);
    return WEX_OK;
}

static wex_status vllm_sizes(wex_engine_ctx *ctx, const wex_options *options,
                             ws_emit *e)
{
    const int64_t *p = ctx->p;
    ws_serving_sizes *s = &ctx->sizes;
    int mode, version = V_0_34, backend = 0;
    int64_t moe_ranks;
    wex_status st;

    st = read_data_parallel(ctx, options, &mode);
    if (st == WEX_OK)
        st = wp_option_enum(ctx->host, options, "/version", versions, &version);
    if (st == WEX_OK)
        st = wp_option_enum(ctx->host, options, "/all2all_backend", backends,
                            &backend);
    if (st != WEX_OK)
        return st;
    if (sequence_parallel[version][backend] < 0)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "options/all2all_backend: vLLM %s has no \"%s\" "
                       "backend; expected one it has, or options/version "
                       "\"%s\"",
                       versions[version], backends[backend], versions[V_0_34]);
    /* Ranks the experts are spread or split over. */
    moe_ranks = p[WS_P_TP] * (mode == DP_INTERNAL ? p[WS_P_DP] : 1);
    s->tp = s->attn_tp = p[WS_P_TP];
    s->ep = p[P_EP];
    s->moe_tp = p[P_EP] > 1 ? 1 : moe_ranks;
    s->moe_tp_name = s->moe_tp > s->tp ? "tp * dp" : "tp";
    s->pp = p[WS_P_PP];
    s->shared_whole = mode == DP_INTERNAL && p[P_EP] > 1 && p[WS_P_TP] > 1 &&
                      p[WS_P_DP] > 1 && sequence_parallel[version][backend];
    s->drafter_head = version == V_0_13;
    s->ends_every_stage =
        ends_every_stage(e->host->model_architecture(e->model));
    return WEX_OK;
}

static void vllm_rank(const wex_engine_ctx *ctx, const int64_t *c,
                      ws_serving_rank *r, ws_emit *e)
{
    const ws_serving_sizes *s = &ctx->sizes;
    int64_t tp = ctx->p[WS_P_TP];
    /* The rank inside the group the experts are spread or split over:
     * the whole TP x DP group under internal DP (dp > 1), else the
     * server's TP group. */
    int64_t moe_rank = s->ep > tp || s->moe_tp > tp ? c[0] * tp + c[2] : c[2];

    r->tp_rank = r->attn_rank = c[2];
    if (ctx->sizes.ep > 1)
        r->ep_rank = moe_rank;
    else
        r->moe_tp_rank = moe_rank;
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
    .struct_size = sizeof(wex_engine_ops),
    .ctx_create = vllm_ctx_create,
    .ctx_destroy = ws_serving_ctx_destroy,
    .rank_count = ws_serving_rank_count,
    .describe_rank = ws_serving_describe_rank,
};

static const wex_plugin_desc vllm_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_1,
    .kind = WEX_KIND_ENGINE,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "vllm",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &vllm_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_1, vllm_desc)
