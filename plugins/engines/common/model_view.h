/*
 * A transformer seen through its canonical tensors: the sizes engines
 * shard by (heads, KV heads, experts, MLA ranks) read from config.json,
 * and, per layer, which canonical tensors exist. Presence is looked up by
 * name, so one walk serves Llama, Qwen2/3 (biases, q/k norms), Mixtral,
 * Qwen3-MoE and DeepSeek-V3/Kimi-K2 (MLA, dense first layers, shared
 * experts, fp8 scales) alike.
 *
 * Names here start with ws_ ("wex shared", the engines' shared helpers):
 * they belong to plugins/engines/common, a static library private to the
 * in-tree engine adapters, and are no part of the SDK.
 */
#ifndef WEX_ENGINE_COMMON_MODEL_VIEW_H
#define WEX_ENGINE_COMMON_MODEL_VIEW_H

#include "shard_emit.h"

typedef struct ws_model {
    int64_t layers;     /* decoder layers (num_hidden_layers) */
    int64_t mtp_layers; /* multi-token-prediction layers after them */
    int64_t hidden;
    int64_t vocab;          /* rows of embed_tokens */
    int64_t heads;          /* query heads */
    int64_t kv_heads;       /* KV heads (GQA); heads for MHA */
    int64_t head_dim;       /* q/k/v rows per head (non-MLA) */
    int64_t experts;        /* routed experts; 0 for a dense model */
    int64_t shared_experts; /* config.json n_shared_experts; 0 when absent */
    int mla;                /* DeepSeek multi-head latent attention */
    int64_t q_lora_rank;    /* 0: no q compression (q_proj) */
    int64_t kv_lora_rank, qk_nope_dim, qk_rope_dim, v_head_dim;
    const char *moe;         /* "mlp" or "block_sparse_moe" (Mixtral) */
    const char *expert_w[3]; /* gate, up, down: gate_proj.. or w1, w3, w2 */
    int64_t embed, lm_head, final_norm; /* lm_head -1 when tied */
    /* Lookups kept across the ranks one context describes: every rank
     * holding a layer looked up its tensors by name again, and names cost
     * a format and a hash probe each (most of describing a large MoE).
     * Per layer (layers + mtp_layers) its probe (index -1 until probed),
     * per (layer, expert, weight) its index, per canonical tensor its
     * block scales (ws_emit.scale_memo); WS_NOT_LOOKED_UP until looked
     * up. Freed by ws_model_fini. */
    struct ws_layer *layer_memo;
    int64_t *expert_memo;
    int64_t *scale_memo;
} ws_model;

enum { WS_GATE = 0, WS_UP = 1, WS_DOWN = 2 };

struct ws_layer {
    int64_t index; /* the layer number */
    int64_t in_norm, post_norm;
    /* standard attention (q also serves MLA without q_lora) */
    int64_t q, k, v, o, q_bias, k_bias, v_bias, o_bias, q_norm, k_norm;
    /* MLA */
    int64_t q_a, q_a_norm, q_b, kv_a, kv_a_norm, kv_b;
    /* dense MLP */
    int64_t gate, up, down;
    /* MoE */
    int moe;
    int64_t router, router_bias;
    int64_t sh[3];       /* shared experts: gate, up, down */
    int64_t sh_router;   /* shared_expert_gate (Qwen2-MoE) */
    const char *sh_name; /* "shared_experts" or "shared_expert" */
};
typedef struct ws_layer ws_layer;

/* Reads the geometry; a missing config field is an error naming it. */
wex_status ws_model_read(ws_emit *e, ws_model *m);
/* Frees what ws_model_read kept. */
void ws_model_fini(ws_model *m);
void ws_layer_probe(const ws_emit *e, const ws_model *m, int64_t layer,
                    ws_layer *l);
/* Canonical index of routed expert `expert`'s WS_GATE/UP/DOWN weight. */
int64_t ws_expert(const ws_emit *e, const ws_model *m, int64_t layer,
                  int64_t expert, int which);

#endif /* WEX_ENGINE_COMMON_MODEL_VIEW_H */
