/*
 * The layout of the serving engines (vLLM and SGLang). Both build models
 * from the same parallel linear layers (QKVParallelLinear,
 * MergedColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding,
 * FusedMoE), so one description serves both; a ws_serving says where the
 * two differ (names, DP attention, expert placement) and which rank is
 * being described.
 *
 * Names here start with ws_ ("wex shared", the engines' shared helpers):
 * they belong to plugins/engines/common, a static library private to the
 * in-tree engine adapters, and are no part of the SDK.
 */
#ifndef WEX_ENGINE_COMMON_SERVING_H
#define WEX_ENGINE_COMMON_SERVING_H

#include "expert_placement.h"
#include "model_view.h"

typedef struct ws_serving_flavor {
    const char *engine;           /* "vllm", "sglang" */
    const char *fused_qkv_a_name; /* MLA q_a + kv_a fused, replicated */
    int uneven_experts;           /* experts % ep may be nonzero */
    int64_t vocab_padding;        /* vocabulary padded to a multiple */
    /* The multi-token-prediction drafter's names. vLLM's DeepSeekMTP
     * keeps the checkpoint's model.layers.<n>. with the decoder under
     * mtp_block.; SGLang's NextN model renames the layer model. (enorm,
     * hnorm, eh_proj, shared_head.norm) and model.decoder., and shares
     * the target's embedding and head. */
    int nextn_renamed;
} ws_serving_flavor;

/* The input embedding: split over tp, over the attention TP group (DP
 * attention), or whole on every rank. */
enum { WS_EMBED_TP, WS_EMBED_ATTN_TP, WS_EMBED_WHOLE };

/* Sizes of one engine instance (one DP replica's TP x PP group). */
typedef struct ws_serving_sizes {
    int64_t tp;      /* dense layers: MLP, lm_head */
    int64_t attn_tp; /* attention; tp unless DP attention */
    int64_t moe_tp;  /* each expert's intermediate split */
    int64_t ep;      /* expert-parallel ranks */
    int64_t pp;
    const char *moe_tp_name; /* how refusals name moe_tp ("tp", "tp / ep") */
    int embed;               /* how the input embedding is split: WS_EMBED_* */
    /* With tied embeddings and pp > 1 the last stage holds the head as
     * lm_head.weight, a ParallelLMHead over tp loaded from the embedding
     * (SGLang's qwen2.py and qwen3.py build it unless
     * pp_group.world_size == 1), not a model.embed_tokens of its own
     * (vLLM's qwen2.py, llama.py, ... build embed_tokens on the last
     * stage too when tie_word_embeddings). */
    int tied_head_on_last_stage;
    /* The padded vocabulary that does not divide the ranks it is split
     * over is padded to vocab_padding * ranks instead (SGLang 0.5.23's
     * VocabParallelEmbedding; earlier releases refuse, on GPUs). */
    int vocab_pad_ranks;
    /* The MTP drafter holds a shared_head.head of its own (vLLM 0.13);
     * else it shares the target's lm_head (vLLM 0.34's
     * share_target_lm_head), laid out by the main model. */
    int drafter_head;
    int shared_whole; /* shared experts whole on every rank (no TP) */
    /* The shared expert is routed expert `experts` inside w13_weight /
     * w2_weight (SGLang's shared-experts fusion): no shared_experts.* */
    int fused_shared;
    /* embed_tokens, the final norm and lm_head on every pipeline stage,
     * not only the first / last (vLLM's qwen2_moe, qwen3_moe, mixtral) */
    int ends_every_stage;
    /* Lays out the MTP drafter (the model the engine loads from the
     * checkpoint's layers past num_hidden_layers) instead of the main
     * model, which holds none of them. */
    int drafter;
    /* Physical expert slots and the logical expert each holds
     * (options/redundant_experts, options/expert_placement). */
    ws_placement placement;
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

/* Whether architecture `arch` (may be NULL) is one of the NULL-
 * terminated `names`: the facts an engine keys by model class. */
int ws_arch_in(const char *arch, const char *const *names);

/* Experts [first, first+count) held by expert-parallel rank ep_rank:
 * contiguous, the first (experts % ep) ranks holding one more. */
void ws_expert_range(int64_t experts, int64_t ep, int64_t ep_rank,
                     int64_t *first, int64_t *count);

#endif /* WEX_ENGINE_COMMON_SERVING_H */
