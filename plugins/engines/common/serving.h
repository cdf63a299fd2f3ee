/*
 * The layout of the serving engines (vLLM and SGLang). Both build models
 * from the same parallel linear layers (QKVParallelLinear,
 * MergedColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding,
 * FusedMoE), so one description serves both; a ws_serving says where the
 * two differ (names, DP attention, expert placement) and which rank is
 * being described.
 */
#ifndef WEX_ENGINE_COMMON_SERVING_H
#define WEX_ENGINE_COMMON_SERVING_H

#include "model_view.h"

typedef struct ws_serving_flavor {
    const char *engine;           /* "vllm", "sglang" */
    const char *fused_qkv_a_name; /* MLA q_a + kv_a fused, replicated */
    int uneven_experts;           /* experts % ep may be nonzero */
    int64_t vocab_padding;        /* vocabulary padded to a multiple */
} ws_serving_flavor;

/* Sizes of one engine instance (one DP replica's TP x PP group). */
typedef struct ws_serving_sizes {
    int64_t tp;      /* dense layers: MLP, lm_head */
    int64_t attn_tp; /* attention; tp unless DP attention */
    int64_t moe_tp;  /* each expert's intermediate split */
    int64_t ep;      /* expert-parallel ranks */
    int64_t pp;
    int embed_replicated; /* the embedding is whole on every rank */
} ws_serving_sizes;

typedef struct ws_serving_rank {
    int64_t tp_rank, attn_rank, moe_tp_rank, ep_rank;
    int64_t layer_lo, layer_hi; /* this pipeline stage's layers */
    int first_stage, last_stage;
} ws_serving_rank;

/* Refuses what the engine itself would refuse for this model. */
wex_status ws_serving_check(ws_emit *e, const ws_model *m,
                            const ws_serving_flavor *f,
                            const ws_serving_sizes *s);
wex_status ws_serving_describe(ws_emit *e, const ws_model *m,
                               const ws_serving_flavor *f,
                               const ws_serving_sizes *s,
                               const ws_serving_rank *r);

/* Experts [first, first+count) held by expert-parallel rank ep_rank:
 * contiguous, the first (experts % ep) ranks holding one more. */
void ws_expert_range(int64_t experts, int64_t ep, int64_t ep_rank,
                     int64_t *first, int64_t *count);

#endif /* WEX_ENGINE_COMMON_SERVING_H */
