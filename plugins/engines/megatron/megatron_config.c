/*
 * Megatron's options and parallel config, and the checks Megatron itself
 * makes (megatron/core/parallel_state.py, transformer_config.py): every
 * split must divide, the expert grid must tile each pipeline stage, and
 * fp8 block scales must not be cut.
 */
#include <stdlib.h>

#include "megatron.h"
#include "holding.h"
#include "parallel_cfg.h"
#include "plugin_fail.h"
#include "plugin_options.h"

#define VOCAB_MULTIPLE_MAX 2147483647 /* keeps padded sizes far from overflow */
#define RANKS_MAX (INT64_C(1) << 40)

/* Megatron-Core's defaults (megatron/core/transformer/transformer_config.py):
 * moe_grouped_gemm False (SequentialMLP). Its mtp_num_layers is None (no
 * MTP) unless set; absent here, it is the checkpoint's MTP layer count,
 * what a trainer of such a model sets. */
static wex_status read_options(wex_engine_ctx *ctx, const wex_options *opts)
{
    static const char *const inners[] = {"mtp_model_layer", "transformer_layer",
                                         NULL};
    const wex_host_services *h = ctx->host;
    int64_t multiple = 128, mtp = -1;
    int32_t grouped = 0;
    int inner = 0;
    wex_status st;

    /* The host applies the schema's defaults; absent still means them. */
    if ((st = wp_option_i64(h, opts, "/make_vocab_size_divisible_by", 1,
                            VOCAB_MULTIPLE_MAX, &multiple)) != WEX_OK ||
        (st = wp_option_bool(h, opts, "/moe_grouped_gemm", &grouped)) !=
            WEX_OK ||
        (st = wp_option_i64(h, opts, "/mtp_num_layers", 0, INT64_MAX, &mtp)) !=
            WEX_OK ||
        (st = wp_option_enum(h, opts, "/mtp_layer_name", inners, &inner)) !=
            WEX_OK)
        return st;
    ctx->vocab_multiple = multiple;
    ctx->grouped_gemm = grouped != 0;
    ctx->mtp_layers = mtp;
    /* A literal: the option's string lives only as long as its document. */
    ctx->mtp_inner = inners[inner];
    return ws_read_holding(h, opts, 1, &ctx->hold);
}

/* Megatron builds options/mtp_num_layers MTP layers (by default the
 * checkpoint's count); the checkpoint can only supply as many as it has. */
static wex_status check_mtp(ws_emit *e, wex_engine_ctx *ctx)
{
    if (e->status != WEX_OK)
        return e->status;
    if (ctx->mtp_layers < 0)
        ctx->mtp_layers = ctx->view.mtp_layers;
    if (ctx->mtp_layers > ctx->view.mtp_layers)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/mtp_num_layers: %lld, more than the model's "
                       "num_nextn_predict_layers (%lld)",
                       (long long)ctx->mtp_layers,
                       (long long)ctx->view.mtp_layers);
    return e->status;
}

static wex_status divides(ws_emit *e, int64_t total, const char *what,
                          int64_t parts, const char *key)
{
    if (e->status != WEX_OK || (parts > 0 && total % parts == 0))
        return e->status;
    return ws_fail(e, WEX_ERR_INVALID,
                   "parallel/%s: %s (%lld) must be divisible by %s (%lld) for "
                   "megatron",
                   key, what, (long long)total, key, (long long)parts);
}

/* An fp8 weight split `parts` ways along `dim` must split on quantization
 * block boundaries, or its block scales cannot be split with it. */
static wex_status block_split(ws_emit *e, int64_t canonical, uint32_t dim,
                              int64_t parts, const char *key)
{
    ws_canon c = ws_canon_of(e, canonical);
    uint64_t share;

    if (e->status != WEX_OK || canonical < 0 || parts <= 1 ||
        e->block[0] == 0 || c.ndim != 2 ||
        ws_find(e, "%s_scale_inv", c.name) < 0)
        return e->status;
    share = c.shape[dim] / (uint64_t)parts;
    if (share % e->block[dim] == 0)
        return e->status;
    return ws_fail(e, WEX_ERR_INVALID,
                   "parallel/%s: %s = %lld splits %s %s into %llu, not a "
                   "multiple of the fp8 quantization block (%llu); megatron "
                   "refuses this",
                   key, key, (long long)parts, c.name,
                   dim == 0 ? "rows" : "columns", (unsigned long long)share,
                   (unsigned long long)e->block[dim]);
}

/* linear_qkv interleaves q, k and v per query group, head by head: an
 * fp8 checkpoint whose heads do not fill whole blocks cannot keep its
 * block scales through that, whatever the parallel config. */
static wex_status check_qkv_blocks(ws_emit *e, const ws_model *m,
                                   const ws_layer *l)
{
    ws_canon q = ws_canon_of(e, l->q);

    if (e->status != WEX_OK || m->mla || l->q < 0 || e->block[0] == 0 ||
        ws_find(e, "%s_scale_inv", q.name) < 0 ||
        (uint64_t)m->head_dim % e->block[0] == 0)
        return e->status;
    return ws_fail(e, WEX_ERR_INVALID,
                   "model: head_dim (%lld) is not a multiple of the fp8 "
                   "quantization block (%llu); megatron's linear_qkv, "
                   "interleaved per query group, would cut its blocks",
                   (long long)m->head_dim, (unsigned long long)e->block[0]);
}

/* linear_qkv is cut per query group from q/k/v rows laid out head by
 * head; a catalog whose shapes say otherwise cannot be interleaved. */
static wex_status check_qkv_shape(ws_emit *e, const ws_model *m,
                                  const ws_layer *l)
{
    uint64_t d = (uint64_t)m->head_dim;

    if (e->status != WEX_OK || m->mla || l->q < 0)
        return e->status;
    if (m->heads % m->kv_heads != 0 || l->k < 0 || l->v < 0 ||
        ws_dim(e, l->q, 0) != (uint64_t)m->heads * d ||
        ws_dim(e, l->k, 0) != (uint64_t)m->kv_heads * d ||
        ws_dim(e, l->v, 0) != (uint64_t)m->kv_heads * d ||
        (l->q_bias >= 0 && (l->k_bias < 0 || l->v_bias < 0)))
        return ws_fail(e, WEX_ERR_INVALID,
                       "model: layer %lld: q/k/v projections do not match "
                       "%lld query heads in %lld groups of head_dim %lld; "
                       "megatron cannot build linear_qkv",
                       (long long)l->index, (long long)m->heads,
                       (long long)m->kv_heads, (long long)m->head_dim);
    return e->status;
}

static wex_status check_layer(ws_emit *e, const wex_engine_ctx *ctx,
                              int64_t layer)
{
    const ws_model *m = &ctx->view;
    int64_t tp = ctx->p[MG_TP], etp = ctx->p[MG_ETP];
    int64_t eh, expert_gate;
    ws_layer l;

    ws_layer_probe(e, m, layer, &l);
    expert_gate = l.moe ? ws_expert(e, m, layer, 0, WS_GATE) : -1;
    if (l.gate >= 0)
        divides(e, (int64_t)ws_dim(e, l.gate, 0), "intermediate_size", tp,
                "tp");
    if (l.sh[WS_GATE] >= 0)
        divides(e, (int64_t)ws_dim(e, l.sh[WS_GATE], 0),
                "the shared experts' intermediate size", tp, "tp");
    if (expert_gate >= 0)
        divides(e, (int64_t)ws_dim(e, expert_gate, 0), "moe_intermediate_size",
                etp, "etp");
    eh = ws_find(e, "model.layers.%lld.eh_proj.weight", (long long)layer);
    if (eh >= 0)
        divides(e, (int64_t)ws_dim(e, eh, 0), "eh_proj's rows (hidden_size)",
                tp, "tp");
    check_qkv_shape(e, m, &l);
    check_qkv_blocks(e, m, &l);
    block_split(e, l.q, 0, tp, "tp");
    block_split(e, l.q_b, 0, tp, "tp");
    block_split(e, l.kv_b, 0, tp, "tp");
    block_split(e, l.o, 1, tp, "tp");
    block_split(e, l.gate, 0, tp, "tp");
    block_split(e, l.down, 1, tp, "tp");
    block_split(e, l.sh[WS_GATE], 0, tp, "tp");
    block_split(e, l.sh[WS_DOWN], 1, tp, "tp");
    block_split(e, expert_gate, 0, etp, "etp");
    if (l.moe)
        block_split(e, ws_expert(e, m, layer, 0, WS_DOWN), 1, etp, "etp");
    return e->status;
}

/* Megatron regroups each stage's tp x dp ranks as etp x ep x edp for the
 * MoE layers (it builds that grid for dense models too). */
static int expert_grid_tiles(const int64_t *p)
{
    int64_t stage = p[MG_TP] * p[MG_DP];

    return p[MG_ETP] <= stage && p[MG_EP] <= stage / p[MG_ETP] &&
           stage % (p[MG_ETP] * p[MG_EP]) == 0;
}

static wex_status check_model(ws_emit *e, const wex_engine_ctx *ctx)
{
    const ws_model *m = &ctx->view;
    const int64_t *p = ctx->p;

    divides(e, m->heads, "num_attention_heads", p[MG_TP], "tp");
    if (!m->mla)
        divides(e, m->kv_heads, "num_key_value_heads", p[MG_TP], "tp");
    if (e->status == WEX_OK && p[MG_EP] > 1 && m->experts == 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "parallel/ep: %lld expert-parallel ranks, but the model "
                       "has no experts",
                       (long long)p[MG_EP]);
    if (e->status == WEX_OK && !expert_grid_tiles(p))
        return ws_fail(e, WEX_ERR_INVALID,
                       "parallel/ep: megatron's expert grid (etp x ep x edp) "
                       "must tile the tp x dp ranks of a pipeline stage; "
                       "tp * dp (%lld) is not divisible by etp * ep "
                       "(%lld * %lld)",
                       (long long)(p[MG_TP] * p[MG_DP]), (long long)p[MG_ETP],
                       (long long)p[MG_EP]);
    if (m->experts > 0)
        divides(e, m->experts, "the number of routed experts", p[MG_EP], "ep");
    for (int64_t l = 0; l < m->layers + ctx->mtp_layers && e->status == WEX_OK;
         l++)
        check_layer(e, ctx, l);
    return e->status;
}

static wex_status read_parallel(wex_engine_ctx *ctx,
                                const wex_options *parallel)
{
    static const char *const keys[] = {"tp", "pp", "ep", "etp", "dp", NULL};
    static const char *const extra[] = {"pp_layers", "first_stage_layers",
                                        "last_stage_layers", NULL};
    const wex_host_services *h = ctx->host;
    int64_t *p = ctx->p;
    wex_status st;

    st = ws_parallel_read(h, parallel, "megatron", keys, extra, p);
    if (st != WEX_OK)
        return st;
    /* expert_tensor_parallel_size defaults to tensor_model_parallel_size. */
    if (h->opt_type(parallel, "/etp") == WEX_JSON_MISSING)
        p[MG_ETP] = p[MG_TP];
    if (p[MG_TP] > RANKS_MAX / p[MG_PP] ||
        p[MG_DP] > RANKS_MAX / (p[MG_TP] * p[MG_PP]))
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "parallel/dp: tp x pp x dp is over %lld ranks",
                       (long long)RANKS_MAX);
    return WEX_OK;
}

static wex_status split_stages(wex_engine_ctx *ctx, const wex_options *parallel)
{
    int64_t pp = ctx->p[MG_PP];
    int64_t *counts = calloc((size_t)pp, sizeof(*counts));
    wex_status st;

    ctx->stage_first = calloc((size_t)pp + 1, sizeof(*ctx->stage_first));
    if (counts == NULL || ctx->stage_first == NULL) {
        free(counts);
        return WEX_ERR_NOMEM;
    }
    /* Megatron splits decoder layers evenly unless told the stage sizes;
     * MTP layers always go with the last stage. */
    st = ws_pp_split(ctx->host, parallel, "megatron", ctx->view.layers, pp, 1,
                     counts);
    for (int64_t s = 0; st == WEX_OK && s < pp; s++) {
        /* As pp_layers and pp <= layers already demand: no empty stage. */
        if (counts[s] < 1)
            st = WP_FAIL(ctx->host, WEX_ERR_INVALID,
                         "parallel/%s: pipeline stage %lld would hold no "
                         "layers; megatron needs at least one per stage",
                         s == 0        ? "first_stage_layers"
                         : s == pp - 1 ? "last_stage_layers"
                                       : "pp",
                         (long long)s);
        ctx->stage_first[s + 1] = ctx->stage_first[s] + counts[s];
    }
    free(counts);
    return st;
}

wex_status mg_configure(wex_engine_ctx *ctx, const wex_engine_args *args)
{
    wex_status st;
    ws_emit e;

    st = read_options(ctx, args->options);
    if (st == WEX_OK)
        st = read_parallel(ctx, args->parallel);
    if (st != WEX_OK)
        return st;
    ws_emit_init(&e, ctx->host, ctx->model, NULL);
    ws_hold(&e, ctx->hold);
    if (ws_model_read(&e, &ctx->view) == WEX_OK && check_mtp(&e, ctx) == WEX_OK)
        check_model(&e, ctx);
    ws_emit_fini(&e);
    if (e.status != WEX_OK)
        return e.status;
    return split_stages(ctx, args->parallel);
}

uint64_t mg_vocab_shard_rows(const wex_engine_ctx *ctx, uint64_t vocab)
{
    uint64_t multiple = (uint64_t)(ctx->vocab_multiple * ctx->p[MG_TP]);

    return (vocab + multiple - 1) / multiple * multiple /
           (uint64_t)ctx->p[MG_TP];
}
