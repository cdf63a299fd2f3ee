/*
 * Llama-style decoders: LlamaForCausalLM, Qwen2ForCausalLM,
 * Qwen3ForCausalLM, Qwen3MoeForCausalLM, MixtralForCausalLM.
 *
 * They share one skeleton and differ only in attention biases, the Qwen3
 * per-head q/k norms and the MLP block. Per layer L, with prefix
 * "model.layers.L.", the order (HF module registration order) is:
 *
 *   self_attn.q_proj.weight [.bias]   [heads*head_dim, hidden]
 *   self_attn.k_proj.weight [.bias]   [kv_heads*head_dim, hidden]
 *   self_attn.v_proj.weight [.bias]   [kv_heads*head_dim, hidden]
 *   self_attn.o_proj.weight [.bias]   [hidden, heads*head_dim]
 *   self_attn.q_norm.weight           [head_dim]          (Qwen3, Qwen3-MoE)
 *   self_attn.k_norm.weight           [head_dim]          (Qwen3, Qwen3-MoE)
 *   MLP block (below)
 *   input_layernorm.weight            [hidden]
 *   post_attention_layernorm.weight   [hidden]
 *
 * MLP blocks:
 *   dense:     mlp.{gate,up,down}_proj.weight [.bias]
 *   Qwen3-MoE: mlp.gate.weight [experts, hidden], then for each expert e
 *              mlp.experts.e.{gate,up,down}_proj.weight
 *   Mixtral:   block_sparse_moe.gate.weight [experts, hidden], then for
 *              each expert e block_sparse_moe.experts.e.{w1,w2,w3}.weight
 *              (w1 gate [I,H], w2 down [H,I], w3 up [I,H])
 *
 * Biases (a bias follows its weight):
 *   Llama:       q/k/v/o when attention_bias; gate/up/down when mlp_bias
 *   Qwen2:       q/k/v always, o never (Qwen2Attention hard-codes it)
 *   Qwen3(-MoE): q/k/v/o when attention_bias
 *   Mixtral:     none
 */
#include "catalog.h"
#include "error.h"

#include <inttypes.h>
#include <stdlib.h>

typedef struct llama_cfg {
    uint32_t dtype;
    uint64_t vocab;
    uint64_t hidden;
    uint64_t layers;
    uint64_t heads;
    uint64_t kv_heads;
    uint64_t head_dim;
    uint64_t intermediate;
    int qkv_bias;
    int o_bias;
    int mlp_bias;
    int qk_norm;
    int tied;
} llama_cfg;

/* The fields every family here shares. */
static wex_status read_common(const wex__cfg *cfg, llama_cfg *m)
{
    const cJSON *quant;
    wex_status st;

    if ((st = wex__cfg_dtype(cfg, &m->dtype)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/vocab_size", 1, &m->vocab)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/hidden_size", 1, &m->hidden)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/num_hidden_layers", 1, &m->layers)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/num_attention_heads", 1, &m->heads)) !=
            WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/num_key_value_heads", 1, m->heads,
                               &m->kv_heads)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/intermediate_size", 1, &m->intermediate)) !=
            WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/head_dim", 1, 0, &m->head_dim)) !=
            WEX_OK ||
        (st = wex__cfg_bool_or(cfg, "/tie_word_embeddings", 0, &m->tied)) !=
            WEX_OK)
        return st;
    quant = wex__cfg_get(cfg, "/quantization_config");
    if (quant != NULL && !cJSON_IsNull(quant))
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "%s: /quantization_config: quantized checkpoints "
                          "of this architecture are not supported",
                          cfg->source);
    /* HF: head_dim = getattr(config, "head_dim", hidden // heads); a
     * remainder would make the projections ragged. */
    if (m->head_dim == 0) {
        if (m->hidden % m->heads != 0)
            return wex__error(WEX_ERR_INVALID,
                              "%s: /hidden_size (%" PRIu64
                              ") is not divisible by /num_attention_heads "
                              "(%" PRIu64 ") and /head_dim is absent",
                              cfg->source, m->hidden, m->heads);
        m->head_dim = m->hidden / m->heads;
    }
    return WEX_OK;
}

/* A projection [rows, cols] and, when `bias`, its bias [rows]. */
static void linear(wex__catalog *cat, const llama_cfg *m, const char *stem,
                   uint64_t rows, uint64_t cols, int bias)
{
    wex__catalog_mat(cat, stem, ".weight", m->dtype, rows, cols);
    if (bias)
        wex__catalog_vec(cat, stem, ".bias", m->dtype, rows);
}

static void add_attention(wex__catalog *cat, const llama_cfg *m)
{
    uint64_t q = m->heads * m->head_dim;
    uint64_t kv = m->kv_heads * m->head_dim;

    linear(cat, m, "self_attn.q_proj", q, m->hidden, m->qkv_bias);
    linear(cat, m, "self_attn.k_proj", kv, m->hidden, m->qkv_bias);
    linear(cat, m, "self_attn.v_proj", kv, m->hidden, m->qkv_bias);
    linear(cat, m, "self_attn.o_proj", m->hidden, q, m->o_bias);
    if (m->qk_norm) {
        wex__catalog_vec(cat, "self_attn.q_norm.weight", NULL, m->dtype,
                         m->head_dim);
        wex__catalog_vec(cat, "self_attn.k_norm.weight", NULL, m->dtype,
                         m->head_dim);
    }
}

/* A gated MLP's three projections under the current prefix. */
static void add_glu(wex__catalog *cat, const llama_cfg *m, const char *gate,
                    const char *up, const char *down, uint64_t inter)
{
    linear(cat, m, gate, inter, m->hidden, m->mlp_bias);
    linear(cat, m, up, inter, m->hidden, m->mlp_bias);
    linear(cat, m, down, m->hidden, inter, m->mlp_bias);
}

static void add_dense_mlp(wex__catalog *cat, const llama_cfg *m)
{
    add_glu(cat, m, "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
            m->intermediate);
}

static void add_norms(wex__catalog *cat, const llama_cfg *m, uint64_t layer)
{
    /* Expert blocks move the prefix; restore the layer's. */
    wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", layer);
    wex__catalog_vec(cat, "input_layernorm.weight", NULL, m->dtype, m->hidden);
    wex__catalog_vec(cat, "post_attention_layernorm.weight", NULL, m->dtype,
                     m->hidden);
}

static void add_embedding(wex__catalog *cat, const llama_cfg *m)
{
    wex__catalog_prefix(cat, "model.");
    wex__catalog_mat(cat, "embed_tokens.weight", NULL, m->dtype, m->vocab,
                     m->hidden);
}

static void add_head(wex__catalog *cat, const llama_cfg *m)
{
    wex__catalog_prefix(cat, "model.");
    wex__catalog_vec(cat, "norm.weight", NULL, m->dtype, m->hidden);
    if (!m->tied) {
        wex__catalog_prefix(cat, "lm_head.");
        wex__catalog_mat(cat, "weight", NULL, m->dtype, m->vocab, m->hidden);
    }
}

/* Every layer dense: Llama, Qwen2, Qwen3. */
static wex_status add_dense_model(wex__catalog *cat, const llama_cfg *m)
{
    uint64_t i;

    add_embedding(cat, m);
    for (i = 0; i < m->layers && wex__catalog_ok(cat); i++) {
        wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", i);
        add_attention(cat, m);
        add_dense_mlp(cat, m);
        add_norms(cat, m, i);
    }
    add_head(cat, m);
    return wex__catalog_status(cat);
}

wex_status wex__family_llama(wex__catalog *cat, const wex__cfg *cfg)
{
    llama_cfg m = {0};
    int attention_bias;
    wex_status st;

    if ((st = read_common(cfg, &m)) != WEX_OK ||
        (st = wex__cfg_bool_or(cfg, "/attention_bias", 0, &attention_bias)) !=
            WEX_OK ||
        (st = wex__cfg_bool_or(cfg, "/mlp_bias", 0, &m.mlp_bias)) != WEX_OK)
        return st;
    m.qkv_bias = attention_bias;
    m.o_bias = attention_bias;
    return add_dense_model(cat, &m);
}

wex_status wex__family_qwen2(wex__catalog *cat, const wex__cfg *cfg)
{
    llama_cfg m = {0};
    wex_status st;

    if ((st = read_common(cfg, &m)) != WEX_OK)
        return st;
    m.qkv_bias = 1;
    return add_dense_model(cat, &m);
}

/* Qwen3 attention: attention_bias on all four projections, q/k norms. */
static wex_status read_qwen3(const wex__cfg *cfg, llama_cfg *m)
{
    int attention_bias;
    wex_status st;

    if ((st = read_common(cfg, m)) != WEX_OK ||
        (st = wex__cfg_bool_or(cfg, "/attention_bias", 0, &attention_bias)) !=
            WEX_OK)
        return st;
    m->qkv_bias = attention_bias;
    m->o_bias = attention_bias;
    m->qk_norm = 1;
    return WEX_OK;
}

wex_status wex__family_qwen3(wex__catalog *cat, const wex__cfg *cfg)
{
    llama_cfg m = {0};
    wex_status st;

    if ((st = read_qwen3(cfg, &m)) != WEX_OK)
        return st;
    return add_dense_model(cat, &m);
}

static void add_qwen3_moe(wex__catalog *cat, const llama_cfg *m, uint64_t layer,
                          uint64_t experts, uint64_t inter)
{
    uint64_t e;

    wex__catalog_mat(cat, "mlp.gate.weight", NULL, m->dtype, experts,
                     m->hidden);
    for (e = 0; e < experts && wex__catalog_ok(cat); e++) {
        wex__catalog_prefix(
            cat, "model.layers.%" PRIu64 ".mlp.experts.%" PRIu64 ".", layer, e);
        add_glu(cat, m, "gate_proj", "up_proj", "down_proj", inter);
    }
}

/* A layer is sparse iff it is not in mlp_only_layers, there are experts,
 * and (i + 1) % decoder_sparse_step == 0 (Qwen3MoeDecoderLayer). */
wex_status wex__family_qwen3_moe(wex__catalog *cat, const wex__cfg *cfg)
{
    llama_cfg m = {0};
    uint64_t experts, inter, step, i;
    uint8_t *dense = NULL;
    wex_status st;

    /* transformers 5 writes Qwen3MoeConfig.num_experts as
     * num_local_experts (its attribute_map) */
    const char *count = wex__cfg_get(cfg, "/num_experts") == NULL &&
                                wex__cfg_get(cfg, "/num_local_experts") != NULL
                            ? "/num_local_experts"
                            : "/num_experts";

    if ((st = read_qwen3(cfg, &m)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, count, 0, &experts)) != WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/decoder_sparse_step", 1, 1, &step)) !=
            WEX_OK)
        goto out;
    if (experts > 0 && (st = wex__cfg_uint(cfg, "/moe_intermediate_size", 1,
                                           &inter)) != WEX_OK)
        goto out;
    /* Every layer adds tensors: a layer count past the catalog's limit is
     * refused before anything is allocated for it. */
    if (m.layers > WEX__CATALOG_MAX_TENSORS) {
        st = wex__error(WEX_ERR_INVALID,
                        "%s: /num_hidden_layers: %" PRIu64 " layers is more "
                        "than a catalog of at most %" PRIu64 " tensors holds",
                        cfg->source, m.layers,
                        (uint64_t)WEX__CATALOG_MAX_TENSORS);
        goto out;
    }
    dense = calloc(m.layers, 1);
    if (dense == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "%s: out of memory", cfg->source);
        goto out;
    }
    st = wex__cfg_uint_set(cfg, "/mlp_only_layers", m.layers, dense);
    if (st != WEX_OK)
        goto out;

    add_embedding(cat, &m);
    for (i = 0; i < m.layers && wex__catalog_ok(cat); i++) {
        wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", i);
        add_attention(cat, &m);
        if (!dense[i] && experts > 0 && (i + 1) % step == 0)
            add_qwen3_moe(cat, &m, i, experts, inter);
        else
            add_dense_mlp(cat, &m);
        add_norms(cat, &m, i);
    }
    add_head(cat, &m);
    st = wex__catalog_status(cat);
out:
    free(dense);
    return st;
}

static void add_mixtral_moe(wex__catalog *cat, const llama_cfg *m,
                            uint64_t layer, uint64_t experts)
{
    uint64_t e;

    wex__catalog_mat(cat, "block_sparse_moe.gate.weight", NULL, m->dtype,
                     experts, m->hidden);
    for (e = 0; e < experts && wex__catalog_ok(cat); e++) {
        wex__catalog_prefix(cat,
                            "model.layers.%" PRIu64
                            ".block_sparse_moe.experts.%" PRIu64 ".",
                            layer, e);
        /* Registration order of MixtralBlockSparseTop2MLP: w1, w2, w3. */
        linear(cat, m, "w1", m->intermediate, m->hidden, 0);
        linear(cat, m, "w2", m->hidden, m->intermediate, 0);
        linear(cat, m, "w3", m->intermediate, m->hidden, 0);
    }
}

wex_status wex__family_mixtral(wex__catalog *cat, const wex__cfg *cfg)
{
    llama_cfg m = {0};
    uint64_t experts, i;
    wex_status st;

    if ((st = read_common(cfg, &m)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/num_local_experts", 1, &experts)) != WEX_OK)
        return st;
    add_embedding(cat, &m);
    for (i = 0; i < m.layers && wex__catalog_ok(cat); i++) {
        wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", i);
        add_attention(cat, &m);
        add_mixtral_moe(cat, &m, i, experts);
        add_norms(cat, &m, i);
    }
    add_head(cat, &m);
    return wex__catalog_status(cat);
}
