/*
 * The `hf` engine: the checkpoint layout itself. One rank holds every
 * canonical tensor whole, under its checkpoint name, in checkpoint order.
 * Useful as either side of a job (loading a checkpoint, dumping one) and
 * as the reference the other adapters are compared against. With
 * options/modules "transformers-4" or "transformers-5" it holds what a
 * transformers model's modules hold instead (module_layout.h).
 */
#include <stdlib.h>

#include <wex/plugin.h>

#include "holding.h"
#include "module_layout.h"
#include "plugin_fail.h"
#include "plugin_state.h"

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    uint64_t replicas;      /* parallel.dp */
    uint32_t hold;          /* options/dtype: 0 the checkpoint's, or bf16 */
    ws_module_tensor *held; /* options/modules: what a rank holds */
    size_t held_count;
};

/* hf has no sharding: any tp, pp, ep... other than 1 is a mistake to
 * report. dp is the one key it takes: that many replicas, each holding the
 * whole checkpoint (plain data-parallel trainers). */
static wex_status read_parallel(const wex_host_services *host,
                                const wex_options *parallel,
                                uint64_t *replicas_p)
{
    static const char *const keys[] = {"/tp", "/pp", "/ep", "/etp", "/attn_dp"};
    int64_t dp = 1;

    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        int64_t v = 1;
        if (host->opt_type(parallel, keys[i]) == WEX_JSON_MISSING)
            continue;
        if (host->opt_get_i64(parallel, keys[i], &v) != WEX_OK || v != 1)
            return WP_FAIL(host, WEX_ERR_INVALID,
                           "parallel%s: the hf layout is one unsharded "
                           "rank per replica; expected 1",
                           keys[i]);
    }
    if (host->opt_type(parallel, "/dp") != WEX_JSON_MISSING &&
        (host->opt_get_i64(parallel, "/dp", &dp) != WEX_OK || dp < 1 ||
         dp > 65536))
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/dp: expected an integer from 1 to 65536 "
                       "(replicas of the whole checkpoint)");
    *replicas_p = (uint64_t)dp;
    return WEX_OK;
}

static wex_status hf_ctx_create(wex_plugin_state *state,
                                const wex_engine_args *args,
                                wex_engine_ctx **ctx_p)
{
    wex_engine_ctx *ctx;
    uint64_t replicas = 1;
    uint32_t hold = 0;
    wex_status status = read_parallel(state->host, args->parallel, &replicas);

    uint32_t modules = WS_MODULES_CHECKPOINT;

    if (status == WEX_OK)
        status = ws_read_holding(state->host, args->options, 0, &hold);
    if (status == WEX_OK)
        status = ws_read_modules(state->host, args->options, &modules);
    if (status != WEX_OK)
        return status;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    ctx->model = args->model;
    ctx->replicas = replicas;
    ctx->hold = hold;
    status = ws_module_tensors(state->host, args->model, modules, hold,
                               &ctx->held, &ctx->held_count);
    if (status != WEX_OK) {
        free(ctx);
        return status;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static void hf_ctx_destroy(wex_engine_ctx *ctx)
{
    if (ctx != NULL)
        ws_module_tensors_free(ctx->held, ctx->held_count);
    free(ctx);
}

static wex_status hf_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = ctx->replicas;
    return WEX_OK;
}

static wex_status hf_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                   wex_layout_builder *b)
{
    const wex_host_services *host = ctx->host;
    wex_status status = WEX_OK;

    /* the host checked rank against rank_count */
    if (ctx->replicas > 1)
        status = host->layout_set_coord(b, "dp", (int64_t)rank);
    for (size_t i = 0; status == WEX_OK && i < ctx->held_count; i++)
        status = ws_module_emit(host, ctx->model, b, &ctx->held[i], ctx->hold,
                                0, UINT64_MAX);
    return status;
}

static const wex_engine_ops hf_ops = {
    .struct_size = sizeof(wex_engine_ops),
    .ctx_create = hf_ctx_create,
    .ctx_destroy = hf_ctx_destroy,
    .rank_count = hf_rank_count,
    .describe_rank = hf_describe_rank,
};

static const wex_plugin_desc hf_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_1,
    .kind = WEX_KIND_ENGINE,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "hf",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &hf_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_1, hf_desc)
