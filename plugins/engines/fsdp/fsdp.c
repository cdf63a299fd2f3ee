/*
 * The `fsdp` engine: how PyTorch FSDP2 (fully_shard) holds a model.
 *
 * Every parameter keeps its Hugging Face name and is sharded on dim 0
 * over the DP group on its own, as a DTensor with Shard(0) placement
 * (torch 2.13, torch/distributed/fsdp/_fully_shard/_fsdp_param.py,
 * FSDPParam._init_sharded_param): torch.chunk semantics, so with
 * chunk = ceil(rows / dp) rank r holds rows
 * [r * chunk, min(rows, (r + 1) * chunk)), and trailing ranks hold fewer
 * rows or none. FSDP2 allocates each shard padded to `chunk` rows (what
 * its all-gather moves), but the parameter, and so `to_local()`, is that
 * buffer narrowed to the rows held: a [held, ...] local tensor, [0, ...]
 * on a rank whose share is empty. Those are the local tensors here.
 * Buffers are not sharded: each rank holds them whole.
 *
 * Every tensor is held in options/dtype (bf16 unless "fp16" or "fp32"):
 * a trainer's weights, converted from the checkpoint's dtypes, fp8
 * weights as their values, and no block scales (holding.h). An fp8
 * checkpoint's scales would otherwise be sharded independently of their
 * weights, so this adapter emits its pieces itself instead of letting
 * shard_emit derive scales from weights.
 */
#include <stdlib.h>
#include <string.h>

#include <wex/plugin.h>

#include "holding.h"
#include "module_layout.h"
#include "parallel_cfg.h"
#include "plugin_state.h"

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    int64_t dp;
    uint32_t hold;          /* options/dtype: the float dtype held */
    ws_module_tensor *held; /* options/modules: what a module holds */
    size_t held_count;
};

static wex_status fsdp_ctx_create(wex_plugin_state *state,
                                  const wex_engine_args *args,
                                  wex_engine_ctx **ctx_p)
{
    static const char *const keys[] = {"dp", NULL};
    wex_engine_ctx *ctx;
    int64_t dp = 1;
    uint32_t modules = WS_MODULES_CHECKPOINT;
    wex_status st;

    st = ws_parallel_read(state->host, args->parallel, "fsdp", keys, NULL, &dp);
    if (st != WEX_OK)
        return st;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    ctx->model = args->model;
    ctx->dp = dp;
    st = ws_read_holding(state->host, args->options, 1, &ctx->hold);
    if (st == WEX_OK)
        st = ws_read_modules(state->host, args->options, &modules);
    if (st == WEX_OK)
        st = ws_module_tensors(state->host, args->model, modules, ctx->hold,
                               &ctx->held, &ctx->held_count);
    if (st != WEX_OK) {
        free(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static void fsdp_ctx_destroy(wex_engine_ctx *ctx)
{
    if (ctx != NULL)
        ws_module_tensors_free(ctx->held, ctx->held_count);
    free(ctx);
}

static wex_status fsdp_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = (uint64_t)ctx->dp;
    return WEX_OK;
}

/* A module buffer, not a parameter: FSDP2 shards parameters only, so
 * every rank keeps it whole. The one a checkpoint stores is DeepSeek-V3's
 * router bias (transformers' DeepseekV3TopkRouter registers it). */
static int is_buffer(const char *name)
{
    static const char suffix[] = ".e_score_correction_bias";
    size_t n = strlen(name), k = sizeof(suffix) - 1;

    return n > k && strcmp(name + n - k, suffix) == 0;
}

/* Rank `rank`'s shard of module tensor `t`: the rows of dim 0 it holds
 * (a stacked experts tensor: the experts). */
static wex_status shard(wex_engine_ctx *ctx, uint64_t rank,
                        const ws_module_tensor *t, wex_layout_builder *b)
{
    uint64_t rows = ws_module_rows(ctx->host, ctx->model, t), parts, chunk, lo;

    parts = is_buffer(t->name) ? 1 : (uint64_t)ctx->dp;
    chunk = rows / parts + (rows % parts != 0);
    lo = (parts > 1 ? rank : 0) * chunk;
    return ws_module_emit(ctx->host, ctx->model, b, t, ctx->hold, lo,
                          lo + chunk);
}

static wex_status fsdp_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                     wex_layout_builder *b)
{
    wex_status st = ctx->host->layout_set_coord(b, "dp", (int64_t)rank);

    for (size_t i = 0; st == WEX_OK && i < ctx->held_count; i++)
        st = shard(ctx, rank, &ctx->held[i], b);
    return st;
}

static const wex_engine_ops fsdp_ops = {
    .struct_size = sizeof(wex_engine_ops),
    .ctx_create = fsdp_ctx_create,
    .ctx_destroy = fsdp_ctx_destroy,
    .rank_count = fsdp_rank_count,
    .describe_rank = fsdp_describe_rank,
};

static const wex_plugin_desc fsdp_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_1,
    .kind = WEX_KIND_ENGINE,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "fsdp",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &fsdp_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_1, fsdp_desc)
