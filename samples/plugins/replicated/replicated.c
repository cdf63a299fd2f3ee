/*
 * Sample engine adapter, built out of tree against the wex SDK alone.
 *
 * Every rank holds every canonical tensor whole (pure data parallelism):
 * the parallel config's "dp" is the number of ranks, each local tensor is
 * the canonical tensor itself, named name_prefix + canonical name.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/plugin.h>

/* The per-load state, init and fini: what every plugin writes, here by
 * hand since an out-of-tree plugin has the SDK alone. The in-tree plugins
 * share these lines (and failing with a message, and reading options)
 * from a static library private to them, plugins/common, which is not
 * installed; a third party with several plugins would do the same. */
struct wex_plugin_state {
    const wex_host_services *host;
};

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    uint64_t ranks;
    const char *prefix;
};

static wex_status replicated_init(const wex_host_services *host,
                                  wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    *state_p = state;
    return WEX_OK;
}

static void replicated_fini(wex_plugin_state *state)
{
    free(state);
}

static wex_status replicated_ctx_create(wex_plugin_state *state,
                                        const wex_engine_args *args,
                                        wex_engine_ctx **ctx_p)
{
    const wex_host_services *host = state->host;
    wex_engine_ctx *ctx;
    int64_t dp = 1;

    if (host->opt_type(args->parallel, "/dp") != WEX_JSON_MISSING &&
        host->opt_get_i64(args->parallel, "/dp", &dp) != WEX_OK) {
        host->set_error(host->ctx, WEX_ERR_INVALID,
                        "parallel/dp: expected a positive integer");
        return WEX_ERR_INVALID;
    }
    if (dp < 1) {
        host->set_error(host->ctx, WEX_ERR_INVALID,
                        "parallel/dp: expected >= 1, got %lld", (long long)dp);
        return WEX_ERR_INVALID;
    }
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = host;
    ctx->model = args->model;
    ctx->ranks = (uint64_t)dp;
    if (host->opt_get_str(args->options, "/name_prefix", &ctx->prefix) !=
        WEX_OK)
        ctx->prefix = "";
    *ctx_p = ctx;
    return WEX_OK;
}

static void replicated_ctx_destroy(wex_engine_ctx *ctx)
{
    free(ctx);
}

static wex_status replicated_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = ctx->ranks;
    return WEX_OK;
}

/* One local tensor and one whole-tensor piece per canonical tensor. */
static wex_status add_whole(wex_engine_ctx *ctx, wex_layout_builder *b,
                            uint64_t index)
{
    const wex_host_services *host = ctx->host;
    static const uint64_t zeros[WEX_MAX_DIMS];
    wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
    wex_local_tensor_desc local = {sizeof(local), 0, 0, 0, NULL, NULL};
    wex_piece_desc piece = {sizeof(piece), WEX_TRANSFORM_NONE, 0, NULL, NULL,
                            NULL};
    char name[512];
    uint64_t tensor;
    wex_status status;

    status = host->model_tensor(ctx->model, index, &info);
    if (status != WEX_OK)
        return status;
    snprintf(name, sizeof(name), "%s%s", ctx->prefix, info.name);
    local.dtype = info.dtype;
    local.ndim = info.ndim;
    local.name = name;
    local.shape = info.shape;
    status = host->layout_add_tensor(b, &local, &tensor);
    if (status != WEX_OK)
        return status;
    piece.canonical = index;
    piece.offset = zeros;
    piece.extent = info.shape;
    piece.at = zeros;
    return host->layout_add_piece(b, tensor, &piece);
}

static wex_status replicated_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                           wex_layout_builder *b)
{
    const wex_host_services *host = ctx->host;
    uint64_t count = host->model_tensor_count(ctx->model);
    wex_status status;

    if (rank >= ctx->ranks) {
        host->set_error(
            host->ctx, WEX_ERR_INVALID, "rank %llu is outside 0..%llu",
            (unsigned long long)rank, (unsigned long long)(ctx->ranks - 1));
        return WEX_ERR_INVALID;
    }
    status = host->layout_set_coord(b, "dp", (int64_t)rank);
    for (uint64_t i = 0; status == WEX_OK && i < count; i++)
        status = add_whole(ctx, b, i);
    return status;
}

static const wex_engine_ops replicated_ops = {
    .struct_size = sizeof(wex_engine_ops),
    .ctx_create = replicated_ctx_create,
    .ctx_destroy = replicated_ctx_destroy,
    .rank_count = replicated_rank_count,
    .describe_rank = replicated_describe_rank,
};

static const wex_plugin_desc replicated_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_0,
    .kind = WEX_KIND_ENGINE,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "replicated",
    .version = "1.0.0",
    .init = replicated_init,
    .fini = replicated_fini,
    .ops = &replicated_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_0, replicated_desc)
