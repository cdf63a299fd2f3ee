#include "model_view.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int64_t cfg_int(const ws_emit *e, const char *pointer, int64_t fallback)
{
    const wex_options *cfg = e->host->model_config(e->model);
    int64_t v = fallback;

    if (e->host->opt_type(cfg, pointer) == WEX_JSON_NUMBER)
        e->host->opt_get_i64(cfg, pointer, &v);
    return v;
}

static wex_status need(ws_emit *e, const char *field, int64_t value)
{
    if (value > 0)
        return WEX_OK;
    return ws_fail(e, WEX_ERR_INVALID,
                   "config.json: %s: expected a positive integer "
                   "(architecture %s)",
                   field, e->host->model_architecture(e->model));
}

static void read_mla(ws_emit *e, ws_model *m)
{
    m->mla = 1;
    m->q_lora_rank = cfg_int(e, "/q_lora_rank", 0);
    m->kv_lora_rank = cfg_int(e, "/kv_lora_rank", -1);
    m->qk_nope_dim = cfg_int(e, "/qk_nope_head_dim", -1);
    m->qk_rope_dim = cfg_int(e, "/qk_rope_head_dim", -1);
    m->v_head_dim = cfg_int(e, "/v_head_dim", -1);
    if (need(e, "kv_lora_rank", m->kv_lora_rank) == WEX_OK &&
        need(e, "qk_nope_head_dim", m->qk_nope_dim) == WEX_OK &&
        need(e, "qk_rope_head_dim", m->qk_rope_dim) == WEX_OK)
        need(e, "v_head_dim", m->v_head_dim);
}

static void read_experts(ws_emit *e, ws_model *m)
{
    static const char *const keys[] = {"/n_routed_experts", "/num_experts",
                                       "/num_local_experts"};

    m->moe = "mlp";
    m->expert_w[WS_GATE] = "gate_proj";
    m->expert_w[WS_UP] = "up_proj";
    m->expert_w[WS_DOWN] = "down_proj";
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]) && !m->experts; i++)
        m->experts = cfg_int(e, keys[i], 0);
    m->shared_experts = cfg_int(e, "/n_shared_experts", 0);
    for (int64_t l = 0; l < m->layers && m->experts > 0; l++) {
        if (ws_find(e, "model.layers.%lld.block_sparse_moe.experts.0.w1.weight",
                    (long long)l) >= 0) {
            m->moe = "block_sparse_moe";
            m->expert_w[WS_GATE] = "w1";
            m->expert_w[WS_UP] = "w3";
            m->expert_w[WS_DOWN] = "w2";
            break;
        }
        if (ws_find(e, "model.layers.%lld.mlp.experts.0.gate_proj.weight",
                    (long long)l) >= 0)
            break;
    }
}

/* The tables of lookups kept across ranks (ws_model). */
static wex_status memo_alloc(ws_emit *e, ws_model *m)
{
    uint64_t layers = (uint64_t)(m->layers + m->mtp_layers);
    uint64_t experts = layers * (uint64_t)m->experts * 3;
    uint64_t count = e->host->model_tensor_count(e->model);

    m->layer_memo = malloc((layers ? layers : 1) * sizeof(*m->layer_memo));
    m->expert_memo = malloc((experts ? experts : 1) * sizeof(int64_t));
    m->scale_memo = malloc((count ? count : 1) * sizeof(int64_t));
    if (m->layer_memo == NULL || m->expert_memo == NULL ||
        m->scale_memo == NULL)
        return ws_fail(e, WEX_ERR_NOMEM, "out of memory");
    for (uint64_t i = 0; i < layers; i++)
        m->layer_memo[i].index = -1;
    for (uint64_t i = 0; i < experts; i++)
        m->expert_memo[i] = WS_NOT_LOOKED_UP;
    for (uint64_t i = 0; i < count; i++)
        m->scale_memo[i] = WS_NOT_LOOKED_UP;
    return WEX_OK;
}

wex_status ws_model_read(ws_emit *e, ws_model *m)
{
    memset(m, 0, sizeof(*m));
    m->layers = cfg_int(e, "/num_hidden_layers", -1);
    m->heads = cfg_int(e, "/num_attention_heads", -1);
    m->kv_heads = cfg_int(e, "/num_key_value_heads", m->heads);
    m->embed = ws_find(e, "model.embed_tokens.weight");
    m->lm_head = ws_find(e, "lm_head.weight");
    m->final_norm = ws_find(e, "model.norm.weight");
    if (need(e, "num_hidden_layers", m->layers) != WEX_OK ||
        need(e, "num_attention_heads", m->heads) != WEX_OK ||
        need(e, "num_key_value_heads", m->kv_heads) != WEX_OK)
        return e->status;
    if (m->embed < 0 || m->final_norm < 0)
        return ws_fail(
            e, WEX_ERR_INVALID,
            "model: no model.embed_tokens.weight or model.norm.weight "
            "in the catalog; not a decoder-only transformer");
    m->vocab = (int64_t)ws_dim(e, m->embed, 0);
    m->hidden = (int64_t)ws_dim(e, m->embed, 1);
    m->head_dim = cfg_int(e, "/head_dim", m->hidden / m->heads);
    if (ws_find(e, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight") >= 0)
        read_mla(e, m);
    read_experts(e, m);
    while (ws_find(e, "model.layers.%lld.eh_proj.weight",
                   (long long)(m->layers + m->mtp_layers)) >= 0)
        m->mtp_layers++;
    if (e->status == WEX_OK)
        memo_alloc(e, m);
    return e->status; /* on failure the caller's ws_model_fini frees */
}

void ws_model_fini(ws_model *m)
{
    free(m->layer_memo);
    free(m->expert_memo);
    free(m->scale_memo);
    m->layer_memo = NULL;
    m->expert_memo = NULL;
    m->scale_memo = NULL;
}

static int64_t find_layer(const ws_emit *e, int64_t layer, const char *rest)
{
    return ws_find(e, "model.layers.%lld.%s", (long long)layer, rest);
}

static void probe_moe(const ws_emit *e, const ws_model *m, int64_t layer,
                      ws_layer *l)
{
    static const char *const shared[] = {"shared_experts", "shared_expert"};
    static const char *const proj[] = {"gate_proj", "up_proj", "down_proj"};
    char rest[WS_NAME_MAX];

    l->moe = m->experts > 0 && ws_expert(e, m, layer, 0, WS_GATE) >= 0;
    l->sh[0] = l->sh[1] = l->sh[2] = l->sh_router = -1;
    l->router = l->router_bias = -1;
    if (!l->moe)
        return;
    snprintf(rest, sizeof(rest), "%s.gate.weight", m->moe);
    l->router = find_layer(e, layer, rest);
    snprintf(rest, sizeof(rest), "%s.gate.e_score_correction_bias", m->moe);
    l->router_bias = find_layer(e, layer, rest);
    for (size_t s = 0; s < 2; s++) {
        for (int w = 0; w < 3; w++) {
            snprintf(rest, sizeof(rest), "mlp.%s.%s.weight", shared[s],
                     proj[w]);
            l->sh[w] = find_layer(e, layer, rest);
        }
        if (l->sh[0] >= 0) {
            l->sh_name = shared[s];
            break;
        }
    }
    l->sh_router = find_layer(e, layer, "mlp.shared_expert_gate.weight");
}

static void layer_probe(const ws_emit *e, const ws_model *m, int64_t layer,
                        ws_layer *l)
{
    memset(l, 0, sizeof(*l));
    l->index = layer;
    l->in_norm = find_layer(e, layer, "input_layernorm.weight");
    l->post_norm = find_layer(e, layer, "post_attention_layernorm.weight");
    l->q = find_layer(e, layer, "self_attn.q_proj.weight");
    l->k = find_layer(e, layer, "self_attn.k_proj.weight");
    l->v = find_layer(e, layer, "self_attn.v_proj.weight");
    l->o = find_layer(e, layer, "self_attn.o_proj.weight");
    l->q_bias = find_layer(e, layer, "self_attn.q_proj.bias");
    l->k_bias = find_layer(e, layer, "self_attn.k_proj.bias");
    l->v_bias = find_layer(e, layer, "self_attn.v_proj.bias");
    l->o_bias = find_layer(e, layer, "self_attn.o_proj.bias");
    l->q_norm = find_layer(e, layer, "self_attn.q_norm.weight");
    l->k_norm = find_layer(e, layer, "self_attn.k_norm.weight");
    l->q_a = find_layer(e, layer, "self_attn.q_a_proj.weight");
    l->q_a_norm = find_layer(e, layer, "self_attn.q_a_layernorm.weight");
    l->q_b = find_layer(e, layer, "self_attn.q_b_proj.weight");
    l->kv_a = find_layer(e, layer, "self_attn.kv_a_proj_with_mqa.weight");
    l->kv_a_norm = find_layer(e, layer, "self_attn.kv_a_layernorm.weight");
    l->kv_b = find_layer(e, layer, "self_attn.kv_b_proj.weight");
    l->gate = find_layer(e, layer, "mlp.gate_proj.weight");
    l->up = find_layer(e, layer, "mlp.up_proj.weight");
    l->down = find_layer(e, layer, "mlp.down_proj.weight");
    probe_moe(e, m, layer, l);
}

void ws_layer_probe(const ws_emit *e, const ws_model *m, int64_t layer,
                    ws_layer *l)
{
    ws_layer *kept = layer >= 0 && layer < m->layers + m->mtp_layers
                         ? &m->layer_memo[layer]
                         : NULL;

    if (kept != NULL && kept->index == layer) {
        *l = *kept;
        return;
    }
    layer_probe(e, m, layer, l);
    if (kept != NULL)
        *kept = *l;
}

int64_t ws_expert(const ws_emit *e, const ws_model *m, int64_t layer,
                  int64_t expert, int which)
{
    int64_t *kept = NULL;

    if (layer >= 0 && layer < m->layers + m->mtp_layers && expert >= 0 &&
        expert < m->experts && which >= 0 && which < 3)
        kept = &m->expert_memo[(layer * m->experts + expert) * 3 + which];
    return ws_find_kept(e, kept, "model.layers.%lld.%s.experts.%lld.%s.weight",
                        (long long)layer, m->moe, (long long)expert,
                        m->expert_w[which]);
}
