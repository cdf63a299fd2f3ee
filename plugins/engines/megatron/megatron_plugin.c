/*
 * The `megatron` engine: how a Megatron-Core training job holds a model.
 *
 * Ranks follow Megatron's default order (tp-cp-ep-dp-pp, with cp = 1):
 * tp varies fastest, then dp, then pp, so
 *     rank = (pp_rank * dp + dp_rank) * tp + tp_rank.
 * Within a pipeline stage the tp x dp ranks are regrouped for the MoE
 * layers into Megatron's expert grid (etp-ep-edp, etp fastest): for the
 * stage-local index i = dp_rank * tp + tp_rank,
 *     etp_rank = i % etp, ep_rank = (i / etp) % ep.
 */
#include <stdlib.h>

#include "megatron.h"
#include "parallel_cfg.h"
#include "plugin_state.h"

static void mg_ctx_destroy(wex_engine_ctx *ctx)
{
    if (ctx == NULL)
        return;
    free(ctx->stage_first);
    ws_model_fini(&ctx->view);
    free(ctx);
}

static wex_status mg_ctx_create(wex_plugin_state *state,
                                const wex_engine_args *args,
                                wex_engine_ctx **ctx_p)
{
    wex_engine_ctx *ctx = calloc(1, sizeof(*ctx));
    wex_status st;

    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    ctx->model = args->model;
    st = mg_configure(ctx, args);
    if (st != WEX_OK) {
        mg_ctx_destroy(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static wex_status mg_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    *count_p = (uint64_t)(ctx->p[MG_PP] * ctx->p[MG_DP] * ctx->p[MG_TP]);
    return WEX_OK;
}

static void unrank(const wex_engine_ctx *ctx, uint64_t rank, mg_rank *r)
{
    const int64_t sizes[3] = {ctx->p[MG_PP], ctx->p[MG_DP], ctx->p[MG_TP]};
    int64_t c[3], i;

    ws_unrank(rank, sizes, 3, c);
    r->pp = c[0];
    r->dp = c[1];
    r->tp = c[2];
    i = r->dp * ctx->p[MG_TP] + r->tp;
    r->etp = i % ctx->p[MG_ETP];
    r->ep = (i / ctx->p[MG_ETP]) % ctx->p[MG_EP];
    r->layer_lo = ctx->stage_first[r->pp];
    r->layer_hi = ctx->stage_first[r->pp + 1];
    r->first_stage = r->pp == 0;
    r->last_stage = r->pp == ctx->p[MG_PP] - 1;
}

static wex_status mg_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                   wex_layout_builder *b)
{
    mg_rank r;
    ws_emit e;

    unrank(ctx, rank, &r);
    ws_emit_init(&e, ctx->host, ctx->model, b);
    ws_hold(&e, ctx->hold);
    e.scale_memo = ctx->view.scale_memo;
    ws_coord(&e, "tp", r.tp);
    ws_coord(&e, "pp", r.pp);
    ws_coord(&e, "dp", r.dp);
    ws_coord(&e, "ep", r.ep);
    ws_coord(&e, "etp", r.etp);
    mg_describe(&e, ctx, &r);
    ws_emit_fini(&e);
    return e.status;
}

static const wex_engine_ops mg_ops = {
    .struct_size = sizeof(wex_engine_ops),
    .ctx_create = mg_ctx_create,
    .ctx_destroy = mg_ctx_destroy,
    .rank_count = mg_rank_count,
    .describe_rank = mg_describe_rank,
};

static const wex_plugin_desc mg_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_1,
    .kind = WEX_KIND_ENGINE,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "megatron",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &mg_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_1, mg_desc)
