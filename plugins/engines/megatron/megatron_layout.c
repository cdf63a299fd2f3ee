/*
 * One Megatron rank's tensors, named as Megatron-Core's state dict names
 * them with Transformer Engine layers (layer norms fused into the linear
 * that follows them: linear_qkv.layer_norm_weight,
 * linear_fc1.layer_norm_weight). Layer numbers are stage-local:
 * decoder.layers.0 is the first layer of every pipeline stage.
 */
#include <stdarg.h>
#include <stdio.h>

#include "megatron.h"

/* A local name: `pre` (the layer's prefix) followed by a formatted rest. */
typedef struct mg_name {
    char s[WS_NAME_MAX];
} mg_name;

static WEX_PRINTF(2, 3) mg_name named(const char *pre, const char *fmt, ...)
{
    mg_name n;
    va_list ap;
    int len = snprintf(n.s, sizeof(n.s), "%s", pre);

    va_start(ap, fmt);
    if (len >= 0 && (size_t)len < sizeof(n.s))
        vsnprintf(n.s + len, sizeof(n.s) - (size_t)len, fmt, ap);
    va_end(ap);
    return n;
}

/* VocabParallelEmbedding and the output layer: the vocabulary padded to
 * make_vocab_size_divisible_by x tp, rank t holding padded rows
 * [t * Vp/tp, (t+1) * Vp/tp). Rows past the vocabulary are padding:
 * held, never written. */
static void vocab_parallel(ws_emit *e, const wex_engine_ctx *ctx,
                           const mg_rank *r, int64_t canonical, const char *pre,
                           const char *rest)
{
    ws_canon c = ws_canon_of(e, canonical);
    uint64_t per, lo, hi, shape[2];

    if (canonical < 0 || c.ndim != 2)
        return;
    per = mg_vocab_shard_rows(ctx, c.shape[0]);
    lo = (uint64_t)r->tp * per;
    hi = lo + per < c.shape[0] ? lo + per : c.shape[0];
    shape[0] = per;
    shape[1] = c.shape[1];
    ws_begin(e, c.dtype, 2, shape, "%s%s", pre, rest);
    if (hi > lo)
        ws_rows(e, canonical, lo, hi - lo, WS_NONE, 0);
    ws_end(e);
}

/* linear_qkv: per query group g of this rank, its heads/kv_heads query
 * heads, then key head g, then value head g (weight rows, or bias
 * entries). */
static void linear_qkv(ws_emit *e, const ws_model *m, int64_t tp, int64_t t,
                       int64_t q, int64_t k, int64_t v, const char *pre,
                       const char *param)
{
    ws_canon qc = ws_canon_of(e, q);
    uint64_t d = (uint64_t)m->head_dim;
    uint64_t groups = (uint64_t)(m->kv_heads / tp);
    uint64_t q_rows = (uint64_t)(m->heads / m->kv_heads) * d;
    uint64_t stride = q_rows + 2 * d;
    uint64_t shape[2] = {groups * stride, qc.ndim > 1 ? qc.shape[1] : 0};

    if (q < 0)
        return;
    ws_begin(e, 0, qc.ndim, shape, "%sself_attention.linear_qkv.%s", pre,
             param);
    for (uint64_t g = 0; g < groups; g++) {
        uint64_t group = (uint64_t)t * groups + g, at = g * stride;
        ws_rows(e, q, group * q_rows, q_rows, WS_NONE, at);
        ws_rows(e, k, group * d, d, WS_NONE, at + q_rows);
        ws_rows(e, v, group * d, d, WS_NONE, at + q_rows + d);
    }
    ws_end(e);
}

/* Multi-head latent attention (DeepSeek-V3, Kimi-K2): the down
 * projections whole, the up projections split by heads. */
static void mla(ws_emit *e, int64_t tp, int64_t t, const ws_layer *l,
                const char *pre)
{
    ws_whole_if(e, l->in_norm, pre, "input_layernorm.weight");
    if (l->q_a >= 0) {
        ws_whole_if(e, l->q_a, pre, "self_attention.linear_q_down_proj.weight");
        ws_whole_if(e, l->q_a_norm, pre,
                    "self_attention.linear_q_up_proj.layer_norm_weight");
        ws_row_part(e, l->q_b, tp, t, pre,
                    "self_attention.linear_q_up_proj.weight");
    } else {
        ws_row_part(e, l->q, tp, t, pre, "self_attention.linear_q_proj.weight");
    }
    ws_whole_if(e, l->kv_a, pre, "self_attention.linear_kv_down_proj.weight");
    ws_whole_if(e, l->kv_a_norm, pre,
                "self_attention.linear_kv_up_proj.layer_norm_weight");
    ws_row_part(e, l->kv_b, tp, t, pre,
                "self_attention.linear_kv_up_proj.weight");
}

static void attention(ws_emit *e, const ws_model *m, const mg_rank *r,
                      int64_t tp, const ws_layer *l, const char *pre)
{
    if (m->mla) {
        mla(e, tp, r->tp, l, pre);
    } else {
        ws_whole_if(e, l->in_norm, pre,
                    "self_attention.linear_qkv.layer_norm_weight");
        linear_qkv(e, m, tp, r->tp, l->q, l->k, l->v, pre, "weight");
        if (l->q_bias >= 0)
            linear_qkv(e, m, tp, r->tp, l->q_bias, l->k_bias, l->v_bias, pre,
                       "bias");
        ws_whole_if(e, l->q_norm, pre, "self_attention.q_layernorm.weight");
        ws_whole_if(e, l->k_norm, pre, "self_attention.k_layernorm.weight");
    }
    ws_col_part(e, l->o, tp, r->tp, pre, "self_attention.linear_proj.weight");
    /* A row-parallel bias is added once, after the reduction: whole. */
    ws_whole_if(e, l->o_bias, pre, "self_attention.linear_proj.bias");
}

/* linear_fc1 (gated): this part's gate rows, then its up rows. */
static void fc1(ws_emit *e, int64_t gate, int64_t up, int64_t parts,
                int64_t part, const mg_name *name)
{
    uint64_t n = ws_share(e, gate, 0, parts), lo = (uint64_t)part * n;
    uint64_t shape[2] = {2 * n, ws_dim(e, gate, 1)};

    ws_begin(e, 0, 2, shape, "%s", name->s);
    ws_rows(e, gate, lo, n, WS_NONE, 0);
    ws_rows(e, up, lo, n, WS_NONE, n);
    ws_end(e);
}

static void fc2(ws_emit *e, int64_t down, int64_t parts, int64_t part,
                const mg_name *name)
{
    uint64_t n = ws_share(e, down, 1, parts);

    ws_col_shard(e, down, (uint64_t)part * n, n, "%s", name->s);
}

/* Routed experts: ep rank r holds experts [r*E/ep, (r+1)*E/ep), each
 * split etp ways. TEGroupedMLP numbers its weights linear_fc1.weight<j>;
 * SequentialMLP keeps one module per local expert. */
static void experts(ws_emit *e, const wex_engine_ctx *ctx, const mg_rank *r,
                    const ws_layer *l, const char *pre)
{
    const ws_model *m = &ctx->view;
    int64_t per = m->experts / ctx->p[MG_EP], first = r->ep * per;
    int64_t etp = ctx->p[MG_ETP];

    for (int64_t j = 0; j < per && e->status == WEX_OK; j++) {
        int64_t x = first + j;
        mg_name n =
            ctx->grouped_gemm
                ? named(pre, "mlp.experts.linear_fc1.weight%lld", (long long)j)
                : named(pre,
                        "mlp.experts.local_experts.%lld."
                        "linear_fc1.weight",
                        (long long)j);
        fc1(e, ws_expert(e, m, l->index, x, WS_GATE),
            ws_expert(e, m, l->index, x, WS_UP), etp, r->etp, &n);
        if (ctx->grouped_gemm)
            continue;
        n = named(pre, "mlp.experts.local_experts.%lld.linear_fc2.weight",
                  (long long)j);
        fc2(e, ws_expert(e, m, l->index, x, WS_DOWN), etp, r->etp, &n);
    }
    for (int64_t j = 0; ctx->grouped_gemm && j < per && e->status == WEX_OK;
         j++) {
        mg_name n =
            named(pre, "mlp.experts.linear_fc2.weight%lld", (long long)j);
        fc2(e, ws_expert(e, m, l->index, first + j, WS_DOWN), etp, r->etp, &n);
    }
}

static void mlp(ws_emit *e, const wex_engine_ctx *ctx, const mg_rank *r,
                const ws_layer *l, const char *pre)
{
    int64_t tp = ctx->p[MG_TP];
    mg_name n;

    if (!l->moe) {
        ws_whole_if(e, l->post_norm, pre, "mlp.linear_fc1.layer_norm_weight");
        if (l->gate < 0)
            return;
        n = named(pre, "mlp.linear_fc1.weight");
        fc1(e, l->gate, l->up, tp, r->tp, &n);
        n = named(pre, "mlp.linear_fc2.weight");
        fc2(e, l->down, tp, r->tp, &n);
        return;
    }
    ws_whole_if(e, l->post_norm, pre, "pre_mlp_layernorm.weight");
    ws_whole_if(e, l->router, pre, "mlp.router.weight");
    {
        /* megatron-core 0.16.1, transformer/moe/router.py: TopKRouter
         * registers expert_bias as a float32 buffer and keeps it float32
         * around forward and state-dict load and save, whatever the
         * model's dtype (a trainer's hold is never the checkpoint's) */
        uint32_t held = e->hold;
        ws_hold(e, WEX_DTYPE_F32);
        ws_whole_if(e, l->router_bias, pre, "mlp.router.expert_bias");
        ws_hold(e, held);
    }
    experts(e, ctx, r, l, pre);
    if (l->sh[WS_GATE] >= 0) {
        /* Shared experts are a dense MLP: split by tp, not etp. */
        n = named(pre, "mlp.shared_experts.linear_fc1.weight");
        fc1(e, l->sh[WS_GATE], l->sh[WS_UP], tp, r->tp, &n);
        n = named(pre, "mlp.shared_experts.linear_fc2.weight");
        fc2(e, l->sh[WS_DOWN], tp, r->tp, &n);
    }
    ws_whole_if(e, l->sh_router, pre, "mlp.shared_experts.gate_weight");
}

static void decoder_layer(ws_emit *e, const wex_engine_ctx *ctx,
                          const mg_rank *r, int64_t layer, const char *pre)
{
    ws_layer l;

    ws_layer_probe(e, &ctx->view, layer, &l);
    attention(e, &ctx->view, r, ctx->p[MG_TP], &l, pre);
    mlp(e, ctx, r, &l, pre);
}

/* Multi-token prediction layer i (the checkpoint's layer layers + i),
 * held by the last stage as mtp.layers.<i>, as Megatron-Core's
 * MultiTokenPredictionLayer (megatron/core/transformer/
 * multi_token_prediction.py) builds it: enorm and hnorm, eh_proj (a
 * column-parallel linear [hidden, 2 * hidden]: rows over tp), the inner
 * transformer layer (options/mtp_layer_name: mtp_model_layer, or
 * transformer_layer before 2026-02) and final_layernorm (the checkpoint's
 * shared_head.norm). MTP shares the main model's embedding and output
 * layer: the checkpoint's own copies in this layer (embed_tokens,
 * shared_head.head) are held by no Megatron rank. */
static void mtp_layer(ws_emit *e, const wex_engine_ctx *ctx, const mg_rank *r,
                      int64_t i)
{
    int64_t layer = ctx->view.layers + i;
    mg_name pre = named("", "mtp.layers.%lld.", (long long)i);
    mg_name block = named(pre.s, "%s.", ctx->mtp_inner);

#define MTP(rest) ws_find(e, "model.layers.%lld." rest, (long long)layer)
    ws_whole_if(e, MTP("enorm.weight"), pre.s, "enorm.weight");
    ws_whole_if(e, MTP("hnorm.weight"), pre.s, "hnorm.weight");
    ws_row_part(e, MTP("eh_proj.weight"), ctx->p[MG_TP], r->tp, pre.s,
                "eh_proj.weight");
    decoder_layer(e, ctx, r, layer, block.s);
    ws_whole_if(e, MTP("shared_head.norm.weight"), pre.s,
                "final_layernorm.weight");
#undef MTP
}

wex_status mg_describe(ws_emit *e, const wex_engine_ctx *ctx, const mg_rank *r)
{
    const ws_model *m = &ctx->view;

    /* gpt_model.py builds the embedding on the first stage and, for the
     * MTP layers' inputs, on the stage holding them (the last). */
    if (r->first_stage || (r->last_stage && ctx->mtp_layers > 0))
        vocab_parallel(e, ctx, r, m->embed, "",
                       "embedding.word_embeddings.weight");
    for (int64_t layer = r->layer_lo; layer < r->layer_hi; layer++) {
        mg_name pre =
            named("", "decoder.layers.%lld.", (long long)(layer - r->layer_lo));
        decoder_layer(e, ctx, r, layer, pre.s);
        if (e->status != WEX_OK)
            return e->status;
    }
    if (!r->last_stage)
        return e->status;
    ws_whole(e, m->final_norm, "decoder.final_layernorm.weight");
    /* Tied embeddings: with one stage the output layer is the embedding
     * itself; with more, the last stage keeps its own copy of it. */
    if (m->lm_head >= 0)
        vocab_parallel(e, ctx, r, m->lm_head, "", "output_layer.weight");
    else if (!r->first_stage)
        vocab_parallel(e, ctx, r, m->embed, "", "output_layer.weight");
    for (int64_t i = 0; i < ctx->mtp_layers && e->status == WEX_OK; i++)
        mtp_layer(e, ctx, r, i);
    return e->status;
}
