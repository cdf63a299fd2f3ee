/*
 * The serving engines (vllm, sglang) against what vLLM and SGLang really
 * build, one test per setting where they differ from the plain TP x EP
 * picture: SGLang's shared-expert fusion and all-to-all backends, vLLM's
 * internal data parallelism and sequence-parallel MoE, the MTP drafter
 * both load beside the main model, and vLLM's architectures that keep the
 * embedding and head on every pipeline stage. Each test names the engine
 * source it was read from.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine_fixture.h"

#define ASSERT_SHAPE2(t, a, b)                                                 \
    do {                                                                       \
        ck_assert_uint_eq((t)->shape[0], (a));                                 \
        ck_assert_uint_eq((t)->shape[1], (b));                                 \
    } while (0)

#define L3 "model.layers.3.mlp."
#define SH_GATE L3 "shared_experts.gate_proj.weight"

/* Case 1. SGLang python/sglang/srt/models/deepseek_v2.py,
 * DeepseekV2ForCausalLM.determine_num_fused_shared_experts (fusion for
 * DeepseekV3ForCausalLM, 256 routed experts, n_shared_experts 1, off
 * under expert parallelism and DeepEP-class backends) and DeepseekV2MoE
 * (num_experts = n_routed_experts + num_fused_shared_experts);
 * models/deepseek_common/deepseek_weight_loader.py do_load_weights
 * (mlp.shared_experts renamed mlp.experts.<n_routed_experts>). */
START_TEST(sglang_fuses_the_deepseek_shared_expert)
{
    described d;
    const wex__piece *p;

    /* TP 8, rank 5: 257 experts, each's 2048 rows split 8 ways; slot 256
     * is the shared expert, which is not held on its own. */
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8}", NULL, 5);
    ASSERT_SHAPE2(tensor(&d, L3 "experts.w13_weight", NULL), 257, 512);
    ck_assert_uint_eq(tensor(&d, L3 "experts.w2_weight", NULL)->shape[0], 257);
    ck_assert_uint_eq(
        tensor(&d, L3 "experts.w13_weight_scale_inv", NULL)->shape[0], 257);
    p = piece(&d, L3 "experts.w13_weight", SH_GATE, 0);
    ck_assert_uint_eq(p->at[0], 256);
    ck_assert_uint_eq(p->offset[0], 5 * 256);
    ck_assert_uint_eq(p->extent[0], 256);
    p = piece(&d, L3 "experts.w2_weight", L3 "shared_experts.down_proj.weight",
              0);
    ck_assert_uint_eq(p->at[0], 256);
    ck_assert_uint_eq(p->offset[1], 5 * 256);
    ck_assert(!has_tensor_with(&d, "shared_experts"));
    /* the router still scores the 256 routed experts */
    ck_assert_uint_eq(tensor(&d, L3 "gate.weight", NULL)->shape[0], 256);
    release(&d);

    /* --disable-shared-experts-fusion */
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8}",
             "{\"shared_experts_fusion\":\"off\"}", 5);
    ck_assert_uint_eq(tensor(&d, L3 "experts.w13_weight", NULL)->shape[0], 256);
    ASSERT_SHAPE2(tensor(&d, L3 "shared_experts.gate_up_proj.weight", NULL),
                  512, 7168);
    release(&d);

    /* auto is off under expert parallelism ... */
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8,\"ep\":8}", NULL, 0);
    ck_assert_uint_eq(tensor(&d, L3 "experts.w13_weight", NULL)->shape[0], 32);
    ck_assert(has_tensor(&d, L3 "shared_experts.gate_up_proj.weight"));
    release(&d);
    /* ... and for 384 routed experts (Kimi-K2) */
    describe(&d, "Kimi-K2-Instruct", "sglang", "{\"tp\":8}", NULL, 0);
    ck_assert_uint_eq(
        tensor(&d, "model.layers.1.mlp.experts.w13_weight", NULL)->shape[0],
        384);
    ck_assert(has_tensor(
        &d, "model.layers.1.mlp.shared_experts.gate_up_proj.weight"));
    release(&d);
    /* "on" fuses Kimi-K2's too */
    describe(&d, "Kimi-K2-Instruct", "sglang", "{\"tp\":8}",
             "{\"shared_experts_fusion\":\"on\"}", 0);
    ck_assert_uint_eq(
        tensor(&d, "model.layers.1.mlp.experts.w13_weight", NULL)->shape[0],
        385);
    release(&d);

    refused("DeepSeek-V3", "sglang", "{\"tp\":8,\"ep\":8}",
            "{\"shared_experts_fusion\":\"on\"}",
            "options/shared_experts_fusion");
    refused("Qwen3-30B-A3B", "sglang", "{\"tp\":2}",
            "{\"shared_experts_fusion\":\"on\"}",
            "options/shared_experts_fusion");
    refused("DeepSeek-V3", "sglang", "{\"tp\":8}",
            "{\"shared_experts_fusion\":\"yes\"}",
            "options/shared_experts_fusion: expected one of \"auto\", \"on\", "
            "\"off\"");
}
END_TEST

/* Case 2. vLLM vllm/model_executor/layers/fused_moe/config.py,
 * FusedMoEParallelConfig.make / flatten_tp_across_dp: the experts of one
 * server with --data-parallel-size are split over tp * dp ranks (moe rank
 * dp_rank * tp + tp_rank) without expert parallelism, and spread over them
 * with it; separate servers (replicas) split over their own tp. */
START_TEST(vllm_internal_dp_splits_experts_over_tp_times_dp)
{
    described d;
    const char *w13 = "model.layers.0.mlp.experts.w13_weight";
    const char *w2 = "model.layers.0.mlp.experts.w2_weight";
    const wex__piece *p;

    /* Qwen3-30B-A3B, tp 2 dp 2, rank 2 (dp 1, tp 0): moe rank 2 of 4 holds
     * rows 384..575 of each expert's 768-row gate and up. */
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2}",
             "{\"data_parallel\":\"internal\"}", 2);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[0], 128);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[1], 384);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[2], 2048);
    ck_assert_uint_eq(tensor(&d, w2, NULL)->shape[2], 192);
    p = piece(&d, w13, "model.layers.0.mlp.experts.5.up_proj.weight", 0);
    ck_assert_uint_eq(p->offset[0], 384);
    ck_assert_uint_eq(p->extent[0], 192);
    ck_assert_uint_eq(p->at[0], 5);
    ck_assert_uint_eq(p->at[1], 192);
    ck_assert_uint_eq(
        piece(&d, w2, "model.layers.0.mlp.experts.5.down_proj.weight", 0)
            ->offset[1],
        384);
    /* attention stays split over the server's tp */
    ck_assert_uint_eq(
        tensor(&d, "model.layers.0.self_attn.qkv_proj.weight", NULL)->shape[0],
        (32 / 2 + 2 * 4 / 2) * 128);
    release(&d);

    /* replicas (the default): each server splits over its own tp */
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2}", NULL, 2);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[1], 768);
    release(&d);

    /* ep = tp * dp still means internal DP when the option is absent */
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2,\"ep\":4}", NULL,
             3);
    ck_assert_uint_eq(tensor(&d, w13, NULL)->shape[0], 32);
    release(&d);

    refused("Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2,\"ep\":4}",
            "{\"data_parallel\":\"replicas\"}", "parallel/ep");
    refused("Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2,\"ep\":4}",
            "{\"data_parallel\":\"replicas\"}", "options/data_parallel");
    refused("Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2,\"ep\":2}",
            "{\"data_parallel\":\"internal\"}",
            "parallel/ep: with options/data_parallel \"internal\"");
    refused("Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"dp\":2}",
            "{\"data_parallel\":\"router\"}", "options/data_parallel");
    /* DeepSeek-V3's 2048-row experts over 32 ranks cut its fp8 blocks */
    refused("DeepSeek-V3", "vllm", "{\"tp\":8,\"dp\":4}",
            "{\"data_parallel\":\"internal\"}",
            "parallel/dp: tp * dp splits "
            "model.layers.3.mlp.experts.0.gate_proj.weight "
            "rows 32 ways");
}
END_TEST

/* Case 3. vLLM vllm/config/parallel.py,
 * ParallelConfig.use_sequence_parallel_moe (all2all_backend in
 * allgather_reducescatter (the default), naive, deepep_high_throughput,
 * deepep_low_latency, mori; enable_expert_parallel; tp > 1; dp > 1) and
 * vllm/model_executor/models/deepseek_v2.py, DeepseekV2MoE /
 * DeepseekV2MLP(is_sequence_parallel): the shared experts' linears get
 * disable_tp, whole on every rank. */
START_TEST(vllm_sequence_parallel_moe_keeps_shared_experts_whole)
{
    described d;
    const char *gu = L3 "shared_experts.gate_up_proj.weight";
    const char *down = L3 "shared_experts.down_proj.weight";
    const wex__piece *p;

    /* DeepSeek-V3, one server of tp 8 x dp 2 with ep 16, rank 9 */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8,\"dp\":2,\"ep\":16}", NULL,
             9);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 4096, 7168);
    ASSERT_SHAPE2(tensor(&d, down, NULL), 7168, 2048);
    p = piece(&d, gu, L3 "shared_experts.up_proj.weight", 0);
    ck_assert_uint_eq(p->offset[0], 0);
    ck_assert_uint_eq(p->extent[0], 2048);
    ck_assert_uint_eq(p->at[0], 2048);
    ASSERT_SHAPE2(
        tensor(&d, L3 "shared_experts.gate_up_proj.weight_scale_inv", NULL), 32,
        56);
    /* the dense layers' MLP stays split over tp */
    ck_assert_uint_eq(
        tensor(&d, "model.layers.0.mlp.gate_up_proj.weight", NULL)->shape[0],
        2 * 18432 / 8);
    release(&d);

    /* pplx handles replicated tokens: not sequence parallel in vLLM
     * 0.13 (0.34 replaced it: test_engine_versions) */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8,\"dp\":2,\"ep\":16}",
             "{\"all2all_backend\":\"pplx\",\"version\":\"0.13\"}", 9);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 512, 7168);
    release(&d);
    /* without DP (separate servers, ep = tp) neither */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8,\"dp\":2,\"ep\":8}", NULL,
             9);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 512, 7168);
    release(&d);
    /* nor without expert parallelism */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8,\"dp\":2}",
             "{\"data_parallel\":\"internal\"}", 9);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 512, 7168);
    release(&d);

    refused("DeepSeek-V3", "vllm", "{\"tp\":8}",
            "{\"all2all_backend\":\"nccl\"}", "options/all2all_backend");
}
END_TEST

/* Case 4. SGLang python/sglang/srt/models/deepseek_v2.py, DeepseekV2MoE
 * (_shared_expert_use_tp1: deepep, mooncake, nixl, mori, ascend_fuseep,
 * flashinfer, megamoe build the shared experts with tp_size = 1) and
 * python/sglang/srt/arg_groups/overrides.py, _a2a_ep_size
 * (_A2A_EP_SPANNING_BACKENDS set ep_size to tp_size). */
START_TEST(sglang_a2a_backends_keep_shared_experts_whole)
{
    described d;
    const char *gu = L3 "shared_experts.gate_up_proj.weight";

    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8,\"ep\":8}",
             "{\"moe_a2a_backend\":\"deepep\"}", 3);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 4096, 7168);
    ASSERT_SHAPE2(tensor(&d, L3 "shared_experts.down_proj.weight", NULL), 7168,
                  2048);
    ck_assert_uint_eq(
        piece(&d, gu, L3 "shared_experts.up_proj.weight", 0)->at[0], 2048);
    /* experts spread whole over ep = tp */
    ck_assert_uint_eq(tensor(&d, L3 "experts.w13_weight", NULL)->shape[0], 32);
    ck_assert_uint_eq(tensor(&d, L3 "experts.w13_weight", NULL)->shape[1],
                      4096);
    release(&d);

    /* with DP attention too */
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8,\"ep\":8,\"attn_dp\":8}",
             "{\"moe_a2a_backend\":\"mooncake\"}", 6);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 4096, 7168);
    release(&d);

    /* the default backend ("none") splits them over tp */
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8,\"ep\":8}", NULL, 3);
    ASSERT_SHAPE2(tensor(&d, gu, NULL), 512, 7168);
    release(&d);

    refused(
        "DeepSeek-V3", "sglang", "{\"tp\":8}",
        "{\"moe_a2a_backend\":\"deepep\"}",
        "parallel/ep: options/moe_a2a_backend \"deepep\" makes SGLang set ep "
        "to tp; expected ep = 8, got 1");
    refused("DeepSeek-V3", "sglang", "{\"tp\":8,\"ep\":8}",
            "{\"moe_a2a_backend\":\"pplx\"}", "options/moe_a2a_backend");
}
END_TEST

/* Case 7. vLLM vllm/model_executor/models/deepseek_v2.py (load_weights
 * skips the spec layers past num_hidden_layers),
 * models/deepseek_mtp.py (DeepSeekMTP.load_weights,
 * _rewrite_spec_layer_name: model.layers.61.{enorm, hnorm, eh_proj,
 * shared_head} and model.layers.61.mtp_block.*) and
 * v1/spec_decode/eagle.py load_model (the target's embedding shared at
 * pp 1). SGLang models/deepseek_nextn.py (DeepseekModelNextN: model.enorm,
 * hnorm, eh_proj, decoder, shared_head.norm) and
 * deepseek_weight_loader.py (is_nextn: layer 61 renamed model. /
 * model.decoder., embed_tokens and shared_head.head skipped; the main
 * model skips layers >= num_hidden_layers). */
START_TEST(mtp_layers_belong_to_the_drafter_only)
{
    described d;
    const char *engines[] = {"vllm", "sglang"};
    const wex__piece *p;

    for (size_t i = 0; i < 2; i++) {
        describe(&d, "DeepSeek-V3", engines[i], "{\"tp\":8}", NULL, 7);
        ck_assert_msg(!has_tensor_with(&d, "layers.61."), "%s main",
                      engines[i]);
        ck_assert_msg(!has_tensor_with(&d, "mtp_block"), "%s main", engines[i]);
        ck_assert(has_tensor(&d, "model.layers.60.input_layernorm.weight"));
        release(&d);
    }

    /* vLLM's drafter: the checkpoint's names, decoder under mtp_block
     * (0.13, holding a head of its own; 0.34 shares the target's:
     * test_engine_versions) */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8}",
             "{\"model\":\"mtp-drafter\",\"version\":\"0.13\"}", 7);
    ASSERT_SHAPE2(tensor(&d, "model.layers.61.eh_proj.weight", NULL), 7168,
                  14336);
    ck_assert(has_tensor(&d, "model.layers.61.enorm.weight"));
    ck_assert(has_tensor(&d, "model.layers.61.shared_head.norm.weight"));
    ASSERT_SHAPE2(
        tensor(&d,
               "model.layers.61.mtp_block.self_attn.fused_qkv_a_proj.weight",
               NULL),
        2112, 7168);
    ck_assert(
        has_tensor(&d, "model.layers.61.mtp_block.mlp.experts.w13_weight"));
    /* its own shared_head.head, vocabulary-parallel like lm_head */
    p = piece(&d, "model.layers.61.shared_head.head.weight",
              "model.layers.61.shared_head.head.weight", 0);
    ck_assert_uint_eq(p->offset[0], 7 * 16160);
    ck_assert(!has_tensor_with(&d, "embed_tokens"));
    ck_assert(!has_tensor(&d, "lm_head.weight"));
    ck_assert(!has_tensor(&d, "model.layers.0.input_layernorm.weight"));
    release(&d);

    /* SGLang's NextN drafter: renamed, no embedding or head of its own */
    describe(&d, "DeepSeek-V3", "sglang", "{\"tp\":8}",
             "{\"model\":\"mtp-drafter\"}", 7);
    ASSERT_SHAPE2(tensor(&d, "model.eh_proj.weight", NULL), 7168, 14336);
    ck_assert(has_tensor(&d, "model.enorm.weight"));
    ck_assert(has_tensor(&d, "model.hnorm.weight"));
    ck_assert(has_tensor(&d, "model.shared_head.norm.weight"));
    ck_assert(has_tensor(
        &d, "model.decoder.self_attn.fused_qkv_a_proj_with_mqa.weight"));
    ck_assert_ptr_nonnull(piece(&d, "model.decoder.input_layernorm.weight",
                                "model.layers.61.input_layernorm.weight", 0));
    /* the drafter fuses its shared expert like the target */
    ck_assert_uint_eq(
        tensor(&d, "model.decoder.mlp.experts.w13_weight", NULL)->shape[0],
        257);
    ck_assert(!has_tensor_with(&d, "shared_head.head"));
    ck_assert(!has_tensor_with(&d, "embed_tokens"));
    ck_assert(!has_tensor_with(&d, "layers."));
    release(&d);

    refused("Qwen3-8B", "vllm", "{\"tp\":2}", "{\"model\":\"mtp-drafter\"}",
            "options/model");
    refused("DeepSeek-V3", "sglang", "{\"tp\":8,\"pp\":2}",
            "{\"model\":\"mtp-drafter\"}", "parallel/pp");
    refused("DeepSeek-V3", "vllm", "{\"tp\":8}", "{\"model\":\"draft\"}",
            "options/model: expected one of \"main\", \"mtp-drafter\"");
}
END_TEST

/* Case 8. vLLM vllm/model_executor/models/qwen3_moe.py (Qwen3MoeModel
 * builds embed_tokens and norm, Qwen3MoeForCausalLM lm_head, with no
 * PPMissingLayer; load_weights fills them on every stage), and likewise
 * qwen2_moe.py and mixtral.py; llama.py, qwen2.py and deepseek_v2.py put
 * them on the first / last stage only. */
START_TEST(vllm_qwen3_moe_keeps_embedding_and_head_on_every_stage)
{
    described d;

    /* Qwen3-30B-A3B, tp 2 pp 2: rank 0 (stage 0) and rank 2 (stage 1) */
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"pp\":2}", NULL, 0);
    ck_assert(has_tensor(&d, "model.embed_tokens.weight"));
    ck_assert(has_tensor(&d, "model.norm.weight"));
    ck_assert_uint_eq(
        piece(&d, "lm_head.weight", "lm_head.weight", 0)->extent[0], 75968);
    ck_assert(!has_tensor(&d, "model.layers.24.input_layernorm.weight"));
    release(&d);
    describe(&d, "Qwen3-30B-A3B", "vllm", "{\"tp\":2,\"pp\":2}", NULL, 3);
    ck_assert_uint_eq(
        piece(&d, "model.embed_tokens.weight", "model.embed_tokens.weight", 0)
            ->offset[0],
        75968);
    ck_assert(has_tensor(&d, "lm_head.weight"));
    release(&d);
    describe(&d, "Mixtral-8x7B", "vllm", "{\"pp\":4}", NULL, 1);
    ck_assert(has_tensor(&d, "model.embed_tokens.weight"));
    ck_assert(has_tensor(&d, "lm_head.weight"));
    release(&d);

    /* dense Qwen3 (qwen2.py's Qwen2Model): the ends only */
    describe(&d, "Qwen3-8B", "vllm", "{\"tp\":2,\"pp\":2}", NULL, 0);
    ck_assert(has_tensor(&d, "model.embed_tokens.weight"));
    ck_assert(!has_tensor(&d, "lm_head.weight"));
    ck_assert(!has_tensor(&d, "model.norm.weight"));
    release(&d);
    /* SGLang is unchanged */
    describe(&d, "Qwen3-30B-A3B", "sglang", "{\"tp\":2,\"pp\":2}", NULL, 0);
    ck_assert(!has_tensor(&d, "lm_head.weight"));
    release(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_serving");
    TCase *tc = tcase_create("serving");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sglang_fuses_the_deepseek_shared_expert);
    tcase_add_test(tc, vllm_internal_dp_splits_experts_over_tp_times_dp);
    tcase_add_test(tc, vllm_sequence_parallel_moe_keeps_shared_experts_whole);
    tcase_add_test(tc, sglang_a2a_backends_keep_shared_experts_whole);
    tcase_add_test(tc, mtp_layers_belong_to_the_drafter_only);
    tcase_add_test(tc, vllm_qwen3_moe_keeps_embedding_and_head_on_every_stage);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
