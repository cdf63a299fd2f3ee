/*
 * The `fsdp` engine: how PyTorch FSDP2 (fully_shard) holds a model.
 *
 * Every parameter keeps its Hugging Face name and is sharded on dim 0
 * over the DP group on its own, as a DTensor with Shard(0) placement:
 * torch.chunk semantics, so with chunk = ceil(rows / dp) rank r holds
 * rows [r * chunk, min(rows, (r + 1) * chunk)), and trailing ranks hold
 * fewer rows or none. FSDP2 allocates every local shard padded to
 * `chunk` rows (that is what its all-gather moves), so every rank has a
 * [chunk, ...] local tensor for every parameter; the padding rows, and
 * the whole tensor on a rank whose share is empty, are not covered.
 *
 * fp8 block scales (`*_scale_inv`) are parameters like any other and are
 * sharded independently of their weights, so this adapter emits its
 * pieces itself instead of letting shard_emit derive scales from weights.
 */
#include <stdlib.h>

#include <wex/plugin.h>

#include "parallel_cfg.h"
#include "plugin_state.h"

struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
    int64_t dp;
};

static wex_status fsdp_ctx_create(wex_plugin_state *state,
                                  const wex_engine_args *args,
                                  wex_engine_ctx **ctx_p)
{
    static const char *const keys[] = {"dp", NULL};
    wex_engine_ctx *ctx;
    int64_t dp = 1;
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
    *ctx_p = ctx;
    return WEX_OK;
}

static void fsdp_ctx_destroy(wex_engine_ctx *ctx)
{
    free(ctx);
}

static wex_status fsdp_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = (uint64_t)ctx->dp;
    return WEX_OK;
}

/* Rank `rank`'s padded shard of canonical tensor `index`. */
static wex_status shard(wex_engine_ctx *ctx, uint64_t rank, uint64_t index,
                        wex_layout_builder *b)
{
    static const uint64_t zeros[WEX_MAX_DIMS];
    const wex_host_services *host = ctx->host;
    wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
    wex_local_tensor_desc local = {sizeof(local), 0, 0, 0, NULL, NULL};
    uint64_t shape[WEX_MAX_DIMS], offset[WEX_MAX_DIMS] = {0};
    uint64_t extent[WEX_MAX_DIMS], rows, chunk, lo, hi, tensor;
    wex_piece_desc piece = {sizeof(piece), WEX_TRANSFORM_NONE, index, offset,
                            extent, zeros};
    wex_status st;

    st = host->model_tensor(ctx->model, index, &info);
    if (st != WEX_OK)
        return st;
    rows = info.shape[0];
    chunk = rows / (uint64_t)ctx->dp + (rows % (uint64_t)ctx->dp != 0);
    lo = rank * chunk;
    hi = lo + chunk < rows ? lo + chunk : rows;
    for (uint32_t d = 0; d < info.ndim; d++)
        shape[d] = extent[d] = info.shape[d];
    shape[0] = chunk;
    local.dtype = info.dtype;
    local.ndim = info.ndim;
    local.name = info.name;
    local.shape = shape;
    st = host->layout_add_tensor(b, &local, &tensor);
    if (st != WEX_OK || hi <= lo)
        return st;
    offset[0] = lo;
    extent[0] = hi - lo;
    return host->layout_add_piece(b, tensor, &piece);
}

static wex_status fsdp_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                     wex_layout_builder *b)
{
    uint64_t count = ctx->host->model_tensor_count(ctx->model);
    wex_status st = ctx->host->layout_set_coord(b, "dp", (int64_t)rank);

    for (uint64_t i = 0; st == WEX_OK && i < count; i++)
        st = shard(ctx, rank, i, b);
    return st;
}

static const wex_engine_ops fsdp_ops = {
    sizeof(wex_engine_ops), 0, 0, fsdp_ctx_create, fsdp_ctx_destroy,
    fsdp_rank_count, fsdp_describe_rank,
};

static const wex_plugin_desc fsdp_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_ENGINE,
    WEX_PLUGIN_THREAD_PER_CTX, "fsdp", "0.1.0", ws_plugin_init,
    ws_plugin_fini, &fsdp_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out)
{
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
    out->abi_version = WEX_ABI_1_0;
    out->desc = &fsdp_desc;
    return WEX_OK;
}
