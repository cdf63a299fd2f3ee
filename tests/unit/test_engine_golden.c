/*
 * Golden facts of the engine adapters: where real engines put specific
 * bytes (rows of q, k and v inside vLLM's qkv_proj, Megatron's per-group
 * interleave, padded vocabularies, stacked experts, DP attention, fp8
 * scales), and the refusals engines give for configs they reject.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine_fixture.h"

#define ASSERT_BOX(p, o0, e0, a0)                                              \
    do {                                                                       \
        ck_assert_uint_eq((p)->offset[0], (o0));                               \
        ck_assert_uint_eq((p)->extent[0], (e0));                               \
        ck_assert_uint_eq((p)->at[0], (a0));                                   \
    } while (0)

#define QKV "model.layers.0.self_attn.qkv_proj.weight"

START_TEST(vllm_qkv_rows_on_a_tp_rank)
{
    described d;

    /* Qwen3-8B: 32 query heads, 8 KV heads of 128; TP 4, rank 1. */
    describe(&d, "Qwen3-8B", "vllm", "{\"tp\":4}", NULL, 1);
    ck_assert_uint_eq(tensor(&d, QKV, NULL)->shape[0], 1024 + 256 + 256);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.q_proj.weight", 0),
               1024, 1024, 0);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.k_proj.weight", 0), 256,
               256, 1024);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.v_proj.weight", 0), 256,
               256, 1280);
    release(&d);
}
END_TEST

START_TEST(vllm_replicates_kv_heads_past_their_count)
{
    described d;

    /* TP 16 over 8 KV heads: ranks 2 and 3 share KV head 1. */
    describe(&d, "Qwen3-8B", "vllm", "{\"tp\":16}", NULL, 3);
    ck_assert_uint_eq(tensor(&d, QKV, NULL)->shape[0], 256 + 128 + 128);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.q_proj.weight", 0), 768,
               256, 0);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.k_proj.weight", 0), 128,
               128, 256);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.v_proj.weight", 0), 128,
               128, 384);
    release(&d);
}
END_TEST

START_TEST(vllm_stacks_experts_split_over_tp)
{
    described d;
    const char *w13 = "model.layers.0.mlp.experts.w13_weight";
    const wex__piece *p;

    /* Qwen3-30B-A3B: 128 experts of intermediate 768; TP 2, rank 1. */
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2}", NULL, 1);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->ndim, 3);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[0], 128);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[1], 768);
    p = piece(&d, w13, "model.layers.0.mlp.experts.5.up_proj.weight", 0);
    ck_assert_uint_eq(p->offset[0], 384);
    ck_assert_uint_eq(p->extent[0], 384);
    ck_assert_uint_eq(p->at[0], 5);
    ck_assert_uint_eq(p->at[1], 384);
    release(&d);
}
END_TEST

START_TEST(vllm_expert_parallel_over_tp_times_dp)
{
    described d;
    const char *w2 = "model.layers.0.mlp.experts.w2_weight";

    /* ep = tp * dp = 4: rank 3 (dp 1, tp 1) holds experts 96..127 whole. */
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2,\"ep\":4}", NULL,
             3);
    ck_assert_uint_eq(tensor(&d, w2, NULL)->shape[0], 32);
    ck_assert_uint_eq(tensor(&d, w2, NULL)->shape[2], 768);
    ck_assert_uint_eq(
        piece(&d, w2, "model.layers.0.mlp.experts.96.down_proj.weight", 0)
            ->at[0],
        0);
    ck_assert_uint_eq(
        piece(&d, w2, "model.layers.0.mlp.experts.127.down_proj.weight", 0)
            ->at[0],
        31);
    release(&d);
}
END_TEST

START_TEST(mla_fused_a_projection_names_and_scales)
{
    described d;
    const char *v = "model.layers.0.self_attn.fused_qkv_a_proj.weight";
    const char *s = "model.layers.0.self_attn.fused_qkv_a_proj_with_mqa.weight";
    const wex__piece *p;

    /* DeepSeek-V3 fp8: q_a (1536 rows) then kv_a (576), replicated; the
     * scales follow block for block: 12 + 5 = 17 rows of 128. */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8}", NULL, 5);
    ck_assert_uint_eq(tensor(&d, v, NULL)->shape[0], 2112);
    ck_assert_uint_eq(
        tensor(&d, "model.layers.0.self_attn.fused_qkv_a_proj.weight_scale_inv",
               NULL)
            ->shape[0],
        17);
    p = piece(&d, "model.layers.0.self_attn.fused_qkv_a_proj.weight_scale_inv",
              "model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv",
              0);
    ASSERT_BOX(p, 0, 5, 12);
    release(&d);
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8}", NULL, 5);
    ck_assert(has_tensor(&d, s));
    ck_assert(!has_tensor(&d, v));
    release(&d);
}
END_TEST

START_TEST(megatron_interleaves_qkv_per_query_group)
{
    described d;
    const char *qkv = "decoder.layers.0.self_attention.linear_qkv.weight";

    /* Qwen3-8B, TP 2, rank 1: query groups 4..7, each 4 q heads, k, v. */
    describe(&d, "Qwen3-8B", "megatron", "{\"tp\":2}", NULL, 1);
    ck_assert_uint_eq(tensor(&d, qkv, NULL)->shape[0], 4 * (4 + 2) * 128);
    ASSERT_BOX(piece(&d, qkv, "model.layers.0.self_attn.q_proj.weight", 0),
               2048, 512, 0);
    ASSERT_BOX(piece(&d, qkv, "model.layers.0.self_attn.k_proj.weight", 0), 512,
               128, 512);
    ASSERT_BOX(piece(&d, qkv, "model.layers.0.self_attn.v_proj.weight", 0), 512,
               128, 640);
    ASSERT_BOX(piece(&d, qkv, "model.layers.0.self_attn.q_proj.weight", 1),
               2560, 512, 768);
    release(&d);
}
END_TEST

START_TEST(megatron_pads_the_vocabulary_per_tp)
{
    described d;
    const char *emb = "embedding.word_embeddings.weight";

    /* 151936 rows padded to a multiple of 128 * 2: 152064; rank 1 holds
     * rows 76032.. of which only 75904 are real. */
    describe(&d, "Qwen3-8B", "megatron", "{\"tp\":2}", NULL, 1);
    ck_assert_uint_eq(tensor(&d, emb, NULL)->shape[0], 76032);
    ASSERT_BOX(piece(&d, emb, "model.embed_tokens.weight", 0), 76032, 75904, 0);
    release(&d);
}
END_TEST

START_TEST(megatron_tied_output_layer_on_the_last_stage)
{
    described d;

    /* Qwen3-0.6B ties its embeddings: with pp 2 the last stage keeps its
     * own copy as output_layer; stage-local layer numbers restart at 0. */
    describe(&d, "Qwen3-0.6B", "megatron", "{\"pp\":2}", NULL, 1);
    ASSERT_BOX(piece(&d, "output_layer.weight", "model.embed_tokens.weight", 0),
               0, 151936, 0);
    ck_assert(!has_tensor(&d, "embedding.word_embeddings.weight"));
    ck_assert_ptr_nonnull(
        piece(&d, "decoder.layers.0.self_attention.linear_qkv.weight",
              "model.layers.14.self_attn.q_proj.weight", 0));
    release(&d);
}
END_TEST

START_TEST(sglang_dp_attention)
{
    described d;

    /* tp 4 with attn_dp 2: attention is split over 2 ranks (rank 3 is
     * attention rank 1), the embedding is whole (SGLang 0.5.2; later
     * releases split it: test_engine_versions), lm_head split over 4. */
    describe(&d, "Qwen3-30B-A3B", "sglang", "{\"tp\":4,\"attn_dp\":2}",
             "{\"version\":\"0.5.2\"}", 3);
    ASSERT_BOX(piece(&d, QKV, "model.layers.0.self_attn.q_proj.weight", 0),
               2048, 2048, 0);
    ASSERT_BOX(
        piece(&d, "model.embed_tokens.weight", "model.embed_tokens.weight", 0),
        0, 151936, 0);
    ASSERT_BOX(piece(&d, "lm_head.weight", "lm_head.weight", 0), 3 * 37984,
               37984, 0);
    release(&d);
}
END_TEST

START_TEST(fsdp_chunks_like_torch_chunk)
{
    described d;

    /* 151936 rows over 3: chunks of 50646; the last holds 50644, and
     * its local tensor (FSDP2's to_local()) is those rows, unpadded. */
    describe(&d, "Qwen3-0.6B", "fsdp", "{\"dp\":3}", NULL, 2);
    ck_assert_uint_eq(tensor(&d, "model.embed_tokens.weight", NULL)->shape[0],
                      50644);
    ASSERT_BOX(
        piece(&d, "model.embed_tokens.weight", "model.embed_tokens.weight", 0),
        101292, 50644, 0);
    release(&d);
}
END_TEST

START_TEST(kimi_k2_megatron_256_ranks)
{
    described d;

    describe(&d, "Kimi-K2-Instruct", "megatron",
             "{\"tp\":8,\"pp\":8,\"ep\":32,\"etp\":1,\"dp\":4,"
             "\"first_stage_layers\":6,\"last_stage_layers\":7}",
             NULL, 255);
    ck_assert_uint_eq(d.engine->ranks, 256);
    ck_assert(has_tensor(&d, "output_layer.weight"));
    ck_assert(has_tensor(&d, "decoder.final_layernorm.weight"));
    release(&d);
}
END_TEST

START_TEST(engines_refuse_what_they_would_reject)
{
    refused(
        "Qwen2.5-7B-Instruct", "vllm", "{\"tp\":8}", NULL,
        "parallel/tp: num_attention_heads (28) must be divisible by tp (8)");
    refused("DeepSeek-V3", "vllm", "{\"tp\":32}", NULL,
            "fp8 quantization block");
    refused("Qwen3-8B", "vllm", "{\"ep\":2}", NULL, "parallel/ep");
    refused("Qwen3-30B-A3B", "sglang", "{\"tp\":4,\"ep\":3}", NULL,
            "ep must divide tp");
    refused("Kimi-K2-Instruct", "megatron", "{\"pp\":4}", NULL,
            "does not divide");
    refused("Qwen3-8B", "megatron", "{\"tp\":16}", NULL, "parallel/tp");
    refused("Qwen3-8B", "fsdp", "{\"tp\":2}", NULL, "parallel/tp");
    refused("Llama-3.2-1B", "vllm", "{\"pp\":17}", NULL, "parallel/pp");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_golden");
    TCase *tc = tcase_create("golden");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, vllm_qkv_rows_on_a_tp_rank);
    tcase_add_test(tc, vllm_replicates_kv_heads_past_their_count);
    tcase_add_test(tc, vllm_stacks_experts_split_over_tp);
    tcase_add_test(tc, vllm_expert_parallel_over_tp_times_dp);
    tcase_add_test(tc, mla_fused_a_projection_names_and_scales);
    tcase_add_test(tc, megatron_interleaves_qkv_per_query_group);
    tcase_add_test(tc, megatron_pads_the_vocabulary_per_tp);
    tcase_add_test(tc, megatron_tied_output_layer_on_the_last_stage);
    tcase_add_test(tc, sglang_dp_attention);
    tcase_add_test(tc, fsdp_chunks_like_torch_chunk);
    tcase_add_test(tc, kimi_k2_megatron_256_ranks);
    tcase_add_test(tc, engines_refuse_what_they_would_reject);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
