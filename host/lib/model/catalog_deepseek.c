/*
 * DeepseekV3ForCausalLM: DeepSeek-V3/R1 and Kimi-K2. Multi-head latent
 * attention (MLA), a mixture of routed experts plus shared experts, an
 * optional multi-token-prediction (MTP) module, and checkpoints stored in
 * block-scaled fp8.
 *
 * Per decoder layer L, with prefix "model.layers.L.", in HF module
 * registration order (H hidden, n heads, d = qk_nope + qk_rope):
 *
 *   self_attn.q_proj                 [n*d, H]            (q_lora_rank null)
 *   self_attn.q_a_proj [+bias]       [q_lora_rank, H]    (otherwise)
 *   self_attn.q_a_layernorm.weight   [q_lora_rank]
 *   self_attn.q_b_proj               [n*d, q_lora_rank]
 *   self_attn.kv_a_proj_with_mqa [+bias] [kv_lora_rank + qk_rope, H]
 *   self_attn.kv_a_layernorm.weight  [kv_lora_rank]
 *   self_attn.kv_b_proj              [n*(qk_nope + v_head_dim), kv_lora_rank]
 *   self_attn.o_proj [+bias]         [H, n*v_head_dim]
 *   dense layer: mlp.{gate,up,down}_proj            (intermediate_size)
 *   MoE layer:   mlp.experts.e.{gate,up,down}_proj  (moe_intermediate_size)
 *                mlp.gate.weight [E, H]             (model dtype)
 *                mlp.gate.e_score_correction_bias [E]  (F32; noaux_tc only)
 *                mlp.shared_experts.{gate,up,down}_proj
 *                               (moe_intermediate_size * n_shared_experts)
 *   input_layernorm.weight, post_attention_layernorm.weight
 *
 * A layer is MoE iff n_routed_experts > 0, L >= first_k_dense_replace and
 * L % moe_layer_freq == 0 (DeepseekV3DecoderLayer); MTP layers follow the
 * same rule, which makes them MoE for every released model.
 *
 * fp8 (quantization_config.quant_method "fp8"): every projection above
 * (attention, dense MLP, experts, shared experts) is F8_E4M3 and is
 * followed by "<stem>.weight_scale_inv", F32, [ceil(rows/block[0]),
 * ceil(cols/block[1])]. The router, norms, biases, embeddings, lm_head and
 * the MTP eh_proj/shared_head stay in the model dtype.
 *
 * MTP: num_nextn_predict_layers = N adds layers L = num_hidden_layers ..
 * num_hidden_layers + N - 1 after lm_head, each in the order
 *   embed_tokens.weight [V, H], enorm.weight [H], hnorm.weight [H],
 *   eh_proj.weight [H, 2H], <the decoder layer above>,
 *   shared_head.norm.weight [H], shared_head.head.weight [V, H]
 * (data-flow order; HF transformers does not model MTP and skips these).
 */
#include "catalog.h"
#include "error.h"

#include <inttypes.h>
#include <string.h>

typedef struct deepseek_cfg {
    uint32_t dtype;
    uint64_t vocab;
    uint64_t hidden;
    uint64_t layers;
    uint64_t heads;
    uint64_t intermediate;
    uint64_t moe_intermediate;
    uint64_t experts;        /* routed; 0 = every layer dense */
    uint64_t shared_experts; /* 0 = none */
    uint64_t q_lora_rank;    /* 0 = plain q_proj */
    uint64_t kv_lora_rank;
    uint64_t qk_nope;
    uint64_t qk_rope;
    uint64_t v_head_dim;
    uint64_t first_dense;
    uint64_t moe_freq;
    uint64_t mtp_layers;
    int attention_bias;
    int score_bias; /* topk_method "noaux_tc" */
    int tied;
    int fp8;
    uint64_t block[2]; /* weight_block_size: rows, cols */
} deepseek_cfg;

static wex_status read_dims(const wex__cfg *cfg, deepseek_cfg *m)
{
    wex_status st;

    if ((st = wex__cfg_dtype(cfg, &m->dtype)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/vocab_size", 1, &m->vocab)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/hidden_size", 1, &m->hidden)) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/num_hidden_layers", 1, &m->layers)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/num_attention_heads", 1, &m->heads)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/intermediate_size", 1, &m->intermediate)) !=
            WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/q_lora_rank", 1, 0, &m->q_lora_rank)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/kv_lora_rank", 1, &m->kv_lora_rank)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/qk_nope_head_dim", 1, &m->qk_nope)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/qk_rope_head_dim", 1, &m->qk_rope)) !=
            WEX_OK ||
        (st = wex__cfg_uint(cfg, "/v_head_dim", 1, &m->v_head_dim)) != WEX_OK ||
        (st = wex__cfg_bool_or(cfg, "/attention_bias", 0,
                               &m->attention_bias)) != WEX_OK ||
        (st = wex__cfg_bool_or(cfg, "/tie_word_embeddings", 0, &m->tied)) !=
            WEX_OK)
        return st;
    return WEX_OK;
}

static wex_status read_moe(const wex__cfg *cfg, deepseek_cfg *m)
{
    const char *topk_method;
    wex_status st;

    if ((st = wex__cfg_uint_or(cfg, "/n_routed_experts", 0, 0, &m->experts)) !=
            WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/n_shared_experts", 0, 0,
                               &m->shared_experts)) != WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/first_k_dense_replace", 0, 0,
                               &m->first_dense)) != WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/moe_layer_freq", 1, 1, &m->moe_freq)) !=
            WEX_OK ||
        (st = wex__cfg_uint_or(cfg, "/num_nextn_predict_layers", 0, 0,
                               &m->mtp_layers)) != WEX_OK ||
        (st = wex__cfg_string_or(cfg, "/topk_method", "noaux_tc",
                                 &topk_method)) != WEX_OK)
        return st;
    /* The router's correction bias exists only for aux-loss-free
     * ("noaux_tc") routing, as in the reference modeling_deepseek.py. */
    m->score_bias = strcmp(topk_method, "noaux_tc") == 0;
    /* Shared experts live only in MoE layers, which need routed ones. */
    if (m->experts > 0)
        return wex__cfg_uint(cfg, "/moe_intermediate_size", 1,
                             &m->moe_intermediate);
    return WEX_OK;
}

/* Reads weight_block_size, [128, 128] when absent (as HF's
 * FineGrainedFP8Config). */
static wex_status read_block(const wex__cfg *cfg, deepseek_cfg *m)
{
    const char *pointer = "/quantization_config/weight_block_size";
    const cJSON *block = wex__cfg_get(cfg, pointer);
    wex_status st;

    m->block[0] = 128;
    m->block[1] = 128;
    if (block == NULL || cJSON_IsNull(block))
        return WEX_OK;
    if (!cJSON_IsArray(block) || cJSON_GetArraySize(block) != 2)
        return wex__cfg_expected(cfg, pointer,
                                 "an array of two positive integers", block);
    if ((st = wex__cfg_uint(cfg, "/quantization_config/weight_block_size/0", 1,
                            &m->block[0])) != WEX_OK ||
        (st = wex__cfg_uint(cfg, "/quantization_config/weight_block_size/1", 1,
                            &m->block[1])) != WEX_OK)
        return st;
    return WEX_OK;
}

/* Only the layout the released checkpoints use is accepted: anything else
 * (static activation scales, other formats, skipped modules) changes the
 * tensor set in ways this catalog does not model. */
static wex_status read_quantization(const wex__cfg *cfg, deepseek_cfg *m)
{
    const cJSON *quant, *skip;
    const char *method, *fmt, *activation;
    wex_status st;

    quant = wex__cfg_get(cfg, "/quantization_config");
    if (quant == NULL || cJSON_IsNull(quant))
        return WEX_OK;
    if (!cJSON_IsObject(quant))
        return wex__cfg_expected(cfg, "/quantization_config", "an object",
                                 quant);
    if ((st = wex__cfg_string_or(cfg, "/quantization_config/quant_method", NULL,
                                 &method)) != WEX_OK ||
        (st = wex__cfg_string_or(cfg, "/quantization_config/fmt", "e4m3",
                                 &fmt)) != WEX_OK ||
        (st = wex__cfg_string_or(cfg, "/quantization_config/activation_scheme",
                                 "dynamic", &activation)) != WEX_OK)
        return st;
    if (method == NULL)
        return wex__cfg_expected(cfg, "/quantization_config/quant_method",
                                 "a string", NULL);
    if (strcmp(method, "fp8") != 0)
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "%s: /quantization_config/quant_method: \"%.40s\" "
                          "is not supported (supported: \"fp8\")",
                          cfg->source, method);
    if (strcmp(fmt, "e4m3") != 0)
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "%s: /quantization_config/fmt: \"%.40s\" is not "
                          "supported (supported: \"e4m3\")",
                          cfg->source, fmt);
    if (strcmp(activation, "dynamic") != 0)
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "%s: /quantization_config/activation_scheme: "
                          "\"%.40s\" is not supported (supported: "
                          "\"dynamic\")",
                          cfg->source, activation);
    skip = wex__cfg_get(cfg, "/quantization_config/modules_to_not_convert");
    if (skip != NULL && !cJSON_IsNull(skip) &&
        !(cJSON_IsArray(skip) && cJSON_GetArraySize(skip) == 0))
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "%s: /quantization_config/modules_to_not_convert: "
                          "checkpoints with unquantized modules are not "
                          "supported",
                          cfg->source);
    m->fp8 = 1;
    return read_block(cfg, m);
}

static uint64_t ceil_div(uint64_t a, uint64_t b)
{
    return a / b + (a % b != 0);
}

/* A projection of a decoder layer: fp8 plus its scale when quantized. */
static void linear(wex__catalog *cat, const deepseek_cfg *m, const char *stem,
                   uint64_t rows, uint64_t cols, int bias)
{
    if (m->fp8) {
        wex__catalog_mat(cat, stem, ".weight", WEX_DTYPE_F8_E4M3, rows, cols);
        wex__catalog_mat(cat, stem, ".weight_scale_inv", WEX_DTYPE_F32,
                         ceil_div(rows, m->block[0]),
                         ceil_div(cols, m->block[1]));
    } else {
        wex__catalog_mat(cat, stem, ".weight", m->dtype, rows, cols);
    }
    if (bias)
        wex__catalog_vec(cat, stem, ".bias", m->dtype, rows);
}

static void add_attention(wex__catalog *cat, const deepseek_cfg *m)
{
    uint64_t n = m->heads, h = m->hidden;
    uint64_t q = n * (m->qk_nope + m->qk_rope);
    int bias = m->attention_bias;

    if (m->q_lora_rank == 0) {
        linear(cat, m, "self_attn.q_proj", q, h, 0);
    } else {
        linear(cat, m, "self_attn.q_a_proj", m->q_lora_rank, h, bias);
        wex__catalog_vec(cat, "self_attn.q_a_layernorm.weight", NULL, m->dtype,
                         m->q_lora_rank);
        linear(cat, m, "self_attn.q_b_proj", q, m->q_lora_rank, 0);
    }
    linear(cat, m, "self_attn.kv_a_proj_with_mqa", m->kv_lora_rank + m->qk_rope,
           h, bias);
    wex__catalog_vec(cat, "self_attn.kv_a_layernorm.weight", NULL, m->dtype,
                     m->kv_lora_rank);
    linear(cat, m, "self_attn.kv_b_proj", n * (m->qk_nope + m->v_head_dim),
           m->kv_lora_rank, 0);
    linear(cat, m, "self_attn.o_proj", h, n * m->v_head_dim, bias);
}

static void add_glu(wex__catalog *cat, const deepseek_cfg *m, const char *gate,
                    const char *up, const char *down, uint64_t inter)
{
    linear(cat, m, gate, inter, m->hidden, 0);
    linear(cat, m, up, inter, m->hidden, 0);
    linear(cat, m, down, m->hidden, inter, 0);
}

static void add_moe(wex__catalog *cat, const deepseek_cfg *m, uint64_t layer)
{
    uint64_t e;

    for (e = 0; e < m->experts && wex__catalog_ok(cat); e++) {
        wex__catalog_prefix(
            cat, "model.layers.%" PRIu64 ".mlp.experts.%" PRIu64 ".", layer, e);
        add_glu(cat, m, "gate_proj", "up_proj", "down_proj",
                m->moe_intermediate);
    }
    wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".mlp.", layer);
    wex__catalog_mat(cat, "gate.weight", NULL, m->dtype, m->experts, m->hidden);
    if (m->score_bias)
        wex__catalog_vec(cat, "gate.e_score_correction_bias", NULL,
                         WEX_DTYPE_F32, m->experts);
    if (m->shared_experts > 0)
        add_glu(cat, m, "shared_experts.gate_proj", "shared_experts.up_proj",
                "shared_experts.down_proj",
                m->moe_intermediate * m->shared_experts);
}

static int is_moe(const deepseek_cfg *m, uint64_t layer)
{
    return m->experts > 0 && layer >= m->first_dense &&
           layer % m->moe_freq == 0;
}

/* One decoder layer; leaves the prefix at "model.layers.L.". */
static void add_layer(wex__catalog *cat, const deepseek_cfg *m, uint64_t layer)
{
    wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", layer);
    add_attention(cat, m);
    if (is_moe(m, layer))
        add_moe(cat, m, layer);
    else
        add_glu(cat, m, "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj",
                m->intermediate);
    wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", layer);
    wex__catalog_vec(cat, "input_layernorm.weight", NULL, m->dtype, m->hidden);
    wex__catalog_vec(cat, "post_attention_layernorm.weight", NULL, m->dtype,
                     m->hidden);
}

static void add_mtp_layer(wex__catalog *cat, const deepseek_cfg *m,
                          uint64_t layer)
{
    uint64_t h = m->hidden;

    wex__catalog_prefix(cat, "model.layers.%" PRIu64 ".", layer);
    wex__catalog_mat(cat, "embed_tokens.weight", NULL, m->dtype, m->vocab, h);
    wex__catalog_vec(cat, "enorm.weight", NULL, m->dtype, h);
    wex__catalog_vec(cat, "hnorm.weight", NULL, m->dtype, h);
    /* Released checkpoints keep eh_proj unquantized. */
    wex__catalog_mat(cat, "eh_proj.weight", NULL, m->dtype, h, 2 * h);
    add_layer(cat, m, layer);
    wex__catalog_vec(cat, "shared_head.norm.weight", NULL, m->dtype, h);
    wex__catalog_mat(cat, "shared_head.head.weight", NULL, m->dtype, m->vocab,
                     h);
}

wex_status wex__family_deepseek_v3(wex__catalog *cat, const wex__cfg *cfg)
{
    deepseek_cfg m;
    uint64_t i;
    wex_status st;

    memset(&m, 0, sizeof(m));
    if ((st = read_dims(cfg, &m)) != WEX_OK ||
        (st = read_moe(cfg, &m)) != WEX_OK ||
        (st = read_quantization(cfg, &m)) != WEX_OK)
        return st;

    wex__catalog_prefix(cat, "model.");
    wex__catalog_mat(cat, "embed_tokens.weight", NULL, m.dtype, m.vocab,
                     m.hidden);
    for (i = 0; i < m.layers && wex__catalog_ok(cat); i++)
        add_layer(cat, &m, i);
    wex__catalog_prefix(cat, "model.");
    wex__catalog_vec(cat, "norm.weight", NULL, m.dtype, m.hidden);
    if (!m.tied) {
        wex__catalog_prefix(cat, "lm_head.");
        wex__catalog_mat(cat, "weight", NULL, m.dtype, m.vocab, m.hidden);
    }
    for (i = 0; i < m.mtp_layers && wex__catalog_ok(cat); i++)
        add_mtp_layer(cat, &m, m.layers + i);
    return wex__catalog_status(cat);
}
