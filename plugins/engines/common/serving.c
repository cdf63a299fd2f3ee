#include "serving.h"

#include <stdio.h>
#include <string.h>

#define LAYER "%s"

int ws_arch_in(const char *arch, const char *const *names)
{
    for (size_t i = 0; arch != NULL && names[i] != NULL; i++)
        if (strcmp(arch, names[i]) == 0)
            return 1;
    return 0;
}

void ws_expert_range(int64_t experts, int64_t ep, int64_t ep_rank,
                     int64_t *first, int64_t *count)
{
    int64_t base = experts / ep, extra = experts % ep;

    *count = base + (ep_rank < extra);
    *first = ep_rank * base + (ep_rank < extra ? ep_rank : extra);
}

/* The vocabulary as padded by a VocabParallelEmbedding split `ranks`
 * ways. */
static uint64_t padded_vocab(const ws_serving_flavor *f,
                             const ws_serving_sizes *s, uint64_t vocab,
                             int64_t ranks)
{
    uint64_t pad = (uint64_t)f->vocab_padding;
    uint64_t padded = (vocab + pad - 1) / pad * pad;

    if (s->vocab_pad_ranks && ranks > 1 && padded % (uint64_t)ranks != 0) {
        pad *= (uint64_t)ranks;
        padded = (vocab + pad - 1) / pad * pad;
    }
    return padded;
}

/* Ranks the input embedding is split over, and this rank's part. */
static int64_t embed_ranks(const ws_serving_sizes *s)
{
    return s->embed == WS_EMBED_WHOLE     ? 1
           : s->embed == WS_EMBED_ATTN_TP ? s->attn_tp
                                          : s->tp;
}

/* ---- checks ---------------------------------------------------------- */

/* The parallel key a size is named by: the last word of an expression
 * ("tp * dp" is refused as parallel/dp, "tp / ep" as parallel/ep). */
static const char *key_of(const char *size_name)
{
    const char *space = strrchr(size_name, ' ');

    return space ? space + 1 : size_name;
}

/* An fp8 weight split `parts` ways along `dim` must split on block
 * boundaries, or the engine cannot shard its scales. */
static wex_status block_split(ws_emit *e, const ws_serving_flavor *f,
                              int64_t canonical, uint32_t dim, int64_t parts,
                              const char *size_name)
{
    ws_canon c = ws_canon_of(e, canonical);
    uint64_t share, block;

    if (canonical < 0 || parts <= 1 || e->block[0] == 0 || c.ndim != 2 ||
        ws_find(e, "%s_scale_inv", c.name) < 0)
        return e->status;
    share = c.shape[dim] / (uint64_t)parts;
    block = e->block[dim];
    if (share % block == 0)
        return e->status;
    return ws_fail(e, WEX_ERR_INVALID,
                   "parallel/%s: %s splits %s %s %lld ways into %llu, not a "
                   "multiple of the fp8 quantization block (%llu); %s refuses "
                   "this",
                   key_of(size_name), size_name, c.name,
                   dim == 0 ? "rows" : "columns", (long long)parts,
                   (unsigned long long)share, (unsigned long long)block,
                   f->engine);
}

static wex_status divides(ws_emit *e, const ws_serving_flavor *f, int64_t total,
                          const char *what, int64_t parts,
                          const char *size_name)
{
    if (parts > 0 && total % parts == 0)
        return e->status;
    return ws_fail(e, WEX_ERR_INVALID,
                   "parallel/%s: %s (%lld) must be divisible by %s (%lld) "
                   "for %s",
                   key_of(size_name), what, (long long)total, size_name,
                   (long long)parts, f->engine);
}

static wex_status check_attention(ws_emit *e, const ws_model *m,
                                  const ws_serving_flavor *f, int64_t tp,
                                  const char *tp_name)
{
    divides(e, f, m->heads, "num_attention_heads", tp, tp_name);
    if (m->mla || e->status != WEX_OK)
        return e->status;
    if (tp >= m->kv_heads && tp % m->kv_heads != 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "parallel/%s: %s (%lld) must be a multiple of "
                       "num_key_value_heads (%lld) to replicate KV heads in %s",
                       tp_name, tp_name, (long long)tp, (long long)m->kv_heads,
                       f->engine);
    if (tp < m->kv_heads)
        divides(e, f, m->kv_heads, "num_key_value_heads", tp, tp_name);
    return e->status;
}

/* TP parts of a layer's shared experts: none when fused into the routed
 * experts; one (whole) where the engine disables their TP, which it does
 * for DeepSeek's shared_experts only (vLLM's sequence-parallel MoE,
 * SGLang's all-to-all backends); tp otherwise. */
static int64_t shared_parts(const ws_serving_sizes *s, const ws_layer *l)
{
    if (l->sh[0] < 0 || s->fused_shared)
        return 0;
    if (s->shared_whole && strcmp(l->sh_name, "shared_experts") == 0)
        return 1;
    return s->tp;
}

static wex_status check_layer(ws_emit *e, const ws_model *m,
                              const ws_serving_flavor *f,
                              const ws_serving_sizes *s, int64_t layer,
                              const char *tp_name, const char *attn_name)
{
    ws_layer l;
    int64_t sh_parts;

    ws_layer_probe(e, m, layer, &l);
    sh_parts = shared_parts(s, &l);
    if (l.gate >= 0)
        divides(e, f, (int64_t)ws_dim(e, l.gate, 0), "intermediate_size", s->tp,
                tp_name);
    if (l.sh[0] >= 0 && sh_parts > 1)
        divides(e, f, (int64_t)ws_dim(e, l.sh[0], 0),
                "the shared experts' intermediate size", sh_parts, tp_name);
    if (l.moe)
        divides(e, f, (int64_t)ws_dim(e, ws_expert(e, m, layer, 0, WS_GATE), 0),
                "moe_intermediate_size", s->moe_tp, s->moe_tp_name);
    block_split(e, f, l.q_b, 0, s->attn_tp, attn_name);
    block_split(e, f, l.kv_b, 0, s->attn_tp, attn_name);
    block_split(e, f, l.q, 0, s->attn_tp, attn_name);
    block_split(e, f, l.o, 1, s->attn_tp, attn_name);
    block_split(e, f, l.gate, 0, s->tp, tp_name);
    block_split(e, f, l.down, 1, s->tp, tp_name);
    block_split(e, f, l.sh[0], 0, sh_parts, tp_name);
    block_split(e, f, l.sh[2], 1, sh_parts, tp_name);
    if (l.moe)
        block_split(e, f, ws_expert(e, m, layer, 0, WS_GATE), 0, s->moe_tp,
                    s->moe_tp_name);
    return e->status;
}

wex_status ws_serving_check(ws_emit *e, const ws_model *m,
                            const ws_serving_flavor *f,
                            const ws_serving_sizes *s)
{
    const char *attn_name = s->attn_tp == s->tp ? "tp" : "attn_dp";
    int64_t embed = embed_ranks(s);
    int head = m->lm_head >= 0 || (s->tied_head_on_last_stage && s->pp > 1);

    check_attention(e, m, f, s->attn_tp, attn_name);
    divides(e, f, (int64_t)padded_vocab(f, s, (uint64_t)m->vocab, embed),
            "the padded vocabulary", embed,
            s->embed == WS_EMBED_ATTN_TP ? "tp / attn_dp" : "tp");
    if (head)
        divides(e, f, (int64_t)padded_vocab(f, s, (uint64_t)m->vocab, s->tp),
                "the padded vocabulary", s->tp, "tp");
    if (s->ep > 1 && m->experts == 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "parallel/ep: %lld expert-parallel ranks, but the model "
                       "has no experts",
                       (long long)s->ep);
    if (s->ep > m->experts && m->experts > 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "parallel/ep: %lld expert-parallel ranks for %lld "
                       "experts; %s needs at least one expert per rank",
                       (long long)s->ep, (long long)m->experts, f->engine);
    /* (with redundant experts the physical slots must divide evenly:
     * expert_placement.c) */
    if (m->experts > 0 && !f->uneven_experts && s->placement.redundant == 0)
        divides(e, f, m->experts, "the number of routed experts", s->ep, "ep");
    if (s->drafter && m->mtp_layers == 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/model: \"mtp-drafter\" lays out the "
                       "multi-token-prediction drafter, but the model has no "
                       "MTP layers (num_nextn_predict_layers); expected "
                       "\"main\"");
    if (s->drafter && f->nextn_renamed && m->mtp_layers > 1)
        return ws_fail(
            e, WEX_ERR_INVALID,
            "options/model: %s's NextN drafter is one MTP layer; the "
            "model has %lld (num_nextn_predict_layers), which %s "
            "refuses",
            f->engine, (long long)m->mtp_layers, f->engine);
    /* The main model holds none of the MTP layers: vLLM and SGLang load
     * them into a separate drafter model, and only when asked to. */
    for (int64_t layer = s->drafter ? m->layers : 0;
         layer < m->layers + (s->drafter ? m->mtp_layers : 0) &&
         e->status == WEX_OK;
         layer++)
        check_layer(e, m, f, s, layer, "tp", attn_name);
    return e->status;
}

/* ---- layout ---------------------------------------------------------- */

static void vocab_shard(ws_emit *e, const ws_serving_flavor *f,
                        const ws_serving_sizes *s, int64_t canonical,
                        int64_t parts, int64_t part, const char *name)
{
    ws_canon c = ws_canon_of(e, canonical);
    uint64_t vocab = c.shape[0];
    uint64_t per = padded_vocab(f, s, vocab, parts) / (uint64_t)parts;
    uint64_t lo = (uint64_t)part * per, hi = lo + per;
    uint64_t shape[2] = {per, c.shape[1]};

    if (hi > vocab)
        hi = vocab;
    /* Rows past the vocabulary are padding: held, never written. */
    ws_begin(e, c.dtype, 2, shape, "%s", name);
    if (hi > lo)
        ws_rows(e, canonical, lo, hi - lo, WS_NONE, 0);
    ws_end(e);
}

/* q heads of rank t, then its K and V heads; with more ranks than KV
 * heads each KV head is replicated over tp / kv_heads ranks. */
static void qkv(ws_emit *e, const ws_model *m, int64_t tp, int64_t t, int64_t q,
                int64_t k, int64_t v, const char *pre, const char *param)
{
    uint64_t d = (uint64_t)m->head_dim, hidden = ws_dim(e, q, 1);
    uint64_t q_rows = (uint64_t)(m->heads / tp) * d;
    uint64_t kv_heads = tp <= m->kv_heads ? (uint64_t)(m->kv_heads / tp) : 1;
    uint64_t kv_first = tp <= m->kv_heads ? (uint64_t)t * kv_heads
                                          : (uint64_t)(t / (tp / m->kv_heads));
    uint64_t kv_rows = kv_heads * d;
    uint64_t shape[2] = {q_rows + 2 * kv_rows, hidden};

    ws_begin(e, 0, hidden ? 2 : 1, shape, LAYER "self_attn.qkv_proj.%s", pre,
             param);
    ws_rows(e, q, (uint64_t)t * q_rows, q_rows, WS_NONE, 0);
    ws_rows(e, k, kv_first * d, kv_rows, WS_NONE, q_rows);
    ws_rows(e, v, kv_first * d, kv_rows, WS_NONE, q_rows + kv_rows);
    ws_end(e);
}

static void mla(ws_emit *e, const ws_model *m, const ws_serving_flavor *f,
                const ws_serving_sizes *s, const ws_serving_rank *r,
                const ws_layer *l, const char *pre)
{
    (void)m;
    if (l->q_a >= 0) {
        uint64_t qa = ws_dim(e, l->q_a, 0), kva = ws_dim(e, l->kv_a, 0);
        uint64_t shape[2] = {qa + kva, ws_dim(e, l->q_a, 1)};

        ws_begin(e, 0, 2, shape, LAYER "self_attn.%s.weight", pre,
                 f->fused_qkv_a_name);
        ws_rows(e, l->q_a, 0, qa, WS_NONE, 0);
        ws_rows(e, l->kv_a, 0, kva, WS_NONE, qa);
        ws_end(e);
        ws_whole_if(e, l->q_a_norm, pre, "self_attn.q_a_layernorm.weight");
        ws_row_part(e, l->q_b, s->attn_tp, r->attn_rank, pre,
                    "self_attn.q_b_proj.weight");
    } else {
        ws_row_part(e, l->q, s->attn_tp, r->attn_rank, pre,
                    "self_attn.q_proj.weight");
        ws_whole_if(e, l->kv_a, pre, "self_attn.kv_a_proj_with_mqa.weight");
    }
    ws_whole_if(e, l->kv_a_norm, pre, "self_attn.kv_a_layernorm.weight");
    ws_row_part(e, l->kv_b, s->attn_tp, r->attn_rank, pre,
                "self_attn.kv_b_proj.weight");
}

static void attention(ws_emit *e, const ws_model *m, const ws_serving_flavor *f,
                      const ws_serving_sizes *s, const ws_serving_rank *r,
                      const ws_layer *l, const char *pre)
{
    if (m->mla) {
        mla(e, m, f, s, r, l, pre);
    } else {
        qkv(e, m, s->attn_tp, r->attn_rank, l->q, l->k, l->v, pre, "weight");
        if (l->q_bias >= 0)
            qkv(e, m, s->attn_tp, r->attn_rank, l->q_bias, l->k_bias, l->v_bias,
                pre, "bias");
        ws_whole_if(e, l->q_norm, pre, "self_attn.q_norm.weight");
        ws_whole_if(e, l->k_norm, pre, "self_attn.k_norm.weight");
    }
    ws_col_part(e, l->o, s->attn_tp, r->attn_rank, pre,
                "self_attn.o_proj.weight");
    /* Row-parallel biases are added once, after the reduction: whole. */
    ws_whole_if(e, l->o_bias, pre, "self_attn.o_proj.bias");
}

/* gate rows of rank t, then up rows of rank t. */
static void gate_up(ws_emit *e, int64_t gate, int64_t up, int64_t tp, int64_t t,
                    const char *pre, const char *module)
{
    uint64_t n = ws_share(e, gate, 0, tp);
    uint64_t shape[2] = {2 * n, ws_dim(e, gate, 1)};

    ws_begin(e, 0, 2, shape, LAYER "%s.gate_up_proj.weight", pre, module);
    ws_rows(e, gate, (uint64_t)t * n, n, WS_NONE, 0);
    ws_rows(e, up, (uint64_t)t * n, n, WS_NONE, n);
    ws_end(e);
}

/* Routed expert `j`'s weight `which`; slot `experts` is the shared
 * expert when fused (SGLang loads mlp.shared_experts.* as
 * mlp.experts.<n_routed_experts>). */
static int64_t expert_weight(const ws_emit *e, const ws_model *m,
                             const ws_layer *l, int64_t j, int which)
{
    return j == m->experts ? l->sh[which] : ws_expert(e, m, l->index, j, which);
}

/* The logical expert physical slot `slot` holds; the fused shared
 * expert's slot (past the routed ones) is its own. */
static int64_t logical(const ws_model *m, const ws_serving_sizes *s,
                       const ws_layer *l, int64_t slot)
{
    if (slot >= s->placement.physical)
        return slot;
    return ws_placement_logical(&s->placement, m, l->index, slot);
}

static void experts(ws_emit *e, const ws_model *m, const ws_serving_sizes *s,
                    const ws_serving_rank *r, const ws_layer *l,
                    const char *pre)
{
    int64_t first, count, slots = s->placement.physical;
    int64_t gate0 = ws_expert(e, m, l->index, 0, WS_GATE);
    uint64_t n = ws_share(e, gate0, 0, s->moe_tp), hidden = ws_dim(e, gate0, 1);
    uint64_t lo = (uint64_t)r->moe_tp_rank * n;

    if (s->fused_shared && l->sh[0] >= 0)
        slots++;
    ws_expert_range(slots, s->ep, r->ep_rank, &first, &count);
    if (count == 0)
        return;
    {
        uint64_t shape[3] = {(uint64_t)count, 2 * n, hidden};
        ws_begin(e, 0, 3, shape, LAYER "%s.experts.w13_weight", pre, m->moe);
        for (int64_t j = 0; j < count; j++) {
            int64_t x = logical(m, s, l, first + j);
            ws_rows(e, expert_weight(e, m, l, x, WS_GATE), lo, n, (uint64_t)j,
                    0);
            ws_rows(e, expert_weight(e, m, l, x, WS_UP), lo, n, (uint64_t)j, n);
        }
        ws_end(e);
    }
    {
        uint64_t shape[3] = {(uint64_t)count, hidden, n};
        ws_begin(e, 0, 3, shape, LAYER "%s.experts.w2_weight", pre, m->moe);
        for (int64_t j = 0; j < count; j++)
            ws_cols(
                e, expert_weight(e, m, l, logical(m, s, l, first + j), WS_DOWN),
                lo, n, (uint64_t)j, 0);
        ws_end(e);
    }
}

static void mlp(ws_emit *e, const ws_model *m, const ws_serving_sizes *s,
                const ws_serving_rank *r, const ws_layer *l, const char *pre)
{
    char rest[WS_NAME_MAX];
    int64_t parts = shared_parts(s, l);
    int64_t part = parts > 1 ? r->tp_rank : 0;

    if (!l->moe) {
        gate_up(e, l->gate, l->up, s->tp, r->tp_rank, pre, "mlp");
        ws_col_part(e, l->down, s->tp, r->tp_rank, pre, "mlp.down_proj.weight");
        return;
    }
    snprintf(rest, sizeof(rest), "%s.gate.weight", m->moe);
    ws_whole_if(e, l->router, pre, rest);
    snprintf(rest, sizeof(rest), "%s.gate.e_score_correction_bias", m->moe);
    ws_whole_if(e, l->router_bias, pre, rest);
    experts(e, m, s, r, l, pre);
    if (parts > 0) {
        snprintf(rest, sizeof(rest), "mlp.%s", l->sh_name);
        gate_up(e, l->sh[WS_GATE], l->sh[WS_UP], parts, part, pre, rest);
        snprintf(rest, sizeof(rest), "mlp.%s.down_proj.weight", l->sh_name);
        ws_col_part(e, l->sh[WS_DOWN], parts, part, pre, rest);
    }
    ws_whole_if(e, l->sh_router, pre, "mlp.shared_expert_gate.weight");
}

static void decoder_layer(ws_emit *e, const ws_model *m,
                          const ws_serving_flavor *f, const ws_serving_sizes *s,
                          const ws_serving_rank *r, int64_t layer,
                          const char *pre)
{
    ws_layer l;

    ws_layer_probe(e, m, layer, &l);
    ws_whole_if(e, l.in_norm, pre, "input_layernorm.weight");
    attention(e, m, f, s, r, &l, pre);
    ws_whole_if(e, l.post_norm, pre, "post_attention_layernorm.weight");
    mlp(e, m, s, r, &l, pre);
}

/* Multi-token-prediction layer `layer` (DeepSeek-V3's layer 61) as the
 * engine's drafter model holds it; the main model holds none of it.
 *  - vLLM (model_executor/models/deepseek_mtp.py, DeepSeekMTP.load_weights
 *    and _rewrite_spec_layer_name): model.layers.<n>.{enorm, hnorm,
 *    eh_proj, shared_head.norm, shared_head.head} and the decoder under
 *    model.layers.<n>.mtp_block.; the layer's embed_tokens becomes the
 *    drafter's model.embed_tokens, which v1/spec_decode/eagle.py
 *    (load_model) replaces by the target's when pp = 1. vLLM 0.34
 *    (v1/worker/gpu/spec_decode/eagle/utils.py, load_eagle_model and
 *    share_target_lm_head) also replaces every shared_head.head by the
 *    target's lm_head, DeepSeekMTP declaring no has_own_lm_head: the
 *    drafter then holds no head of its own (sizes.drafter_head).
 *  - SGLang (models/deepseek_nextn.py, DeepseekV3ForCausalLMNextN, and
 *    the is_nextn branch of DeepSeek's load_weights): model.{enorm, hnorm,
 *    eh_proj, shared_head.norm} and model.decoder.; embed_tokens and
 *    shared_head.head are skipped, the target's shared by
 *    set_embed_and_head.
 * eh_proj is a plain nn.Linear in both: whole on every rank. */
static void mtp_layer(ws_emit *e, const ws_model *m, const ws_serving_flavor *f,
                      const ws_serving_sizes *s, const ws_serving_rank *r,
                      int64_t layer)
{
    static const char *const whole[] = {"enorm.weight", "hnorm.weight",
                                        "eh_proj.weight",
                                        "shared_head.norm.weight"};
    char pre[64], name[WS_NAME_MAX];
    int64_t t;

    if (f->nextn_renamed)
        snprintf(pre, sizeof(pre), "model.");
    else
        snprintf(pre, sizeof(pre), "model.layers.%lld.", (long long)layer);
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
        ws_whole_if(
            e, ws_find(e, "model.layers.%lld.%s", (long long)layer, whole[i]),
            pre, whole[i]);
    t = ws_find(e, "model.layers.%lld.shared_head.head.weight",
                (long long)layer);
    if (s->drafter_head && t >= 0) {
        snprintf(name, sizeof(name), "%sshared_head.head.weight", pre);
        vocab_shard(e, f, s, t, s->tp, r->tp_rank, name);
    }
    if (f->nextn_renamed)
        snprintf(pre, sizeof(pre), "model.decoder.");
    else
        snprintf(pre, sizeof(pre), "model.layers.%lld.mtp_block.",
                 (long long)layer);
    decoder_layer(e, m, f, s, r, layer, pre);
}

wex_status ws_serving_describe(ws_emit *e, const ws_model *m,
                               const ws_serving_flavor *f,
                               const ws_serving_sizes *s,
                               const ws_serving_rank *r)
{
    int64_t embed_parts = embed_ranks(s);
    int64_t embed_part = s->embed == WS_EMBED_WHOLE     ? 0
                         : s->embed == WS_EMBED_ATTN_TP ? r->attn_rank
                                                        : r->tp_rank;
    int first = r->first_stage || s->ends_every_stage;
    int last = r->last_stage || s->ends_every_stage;
    char pre[WS_NAME_MAX];

    if (s->drafter) {
        for (int64_t i = 0; i < m->mtp_layers && e->status == WEX_OK; i++)
            mtp_layer(e, m, f, s, r, m->layers + i);
        return e->status;
    }
    if (first)
        vocab_shard(e, f, s, m->embed, embed_parts, embed_part,
                    "model.embed_tokens.weight");
    /* The last stage of a tied model computes logits from its own copy
     * of the embedding. */
    else if (m->lm_head < 0 && last && s->tied_head_on_last_stage)
        vocab_shard(e, f, s, m->embed, s->tp, r->tp_rank, "lm_head.weight");
    else if (m->lm_head < 0 && last)
        vocab_shard(e, f, s, m->embed, embed_parts, embed_part,
                    "model.embed_tokens.weight");
    for (int64_t layer = r->layer_lo; layer < r->layer_hi; layer++) {
        snprintf(pre, sizeof(pre), "model.layers.%lld.", (long long)layer);
        decoder_layer(e, m, f, s, r, layer, pre);
        if (e->status != WEX_OK)
            return e->status;
    }
    if (last) {
        ws_whole(e, m->final_norm, "model.norm.weight");
        if (m->lm_head >= 0)
            vocab_shard(e, f, s, m->lm_head, s->tp, r->tp_rank,
                        "lm_head.weight");
    }
    return e->status;
}
