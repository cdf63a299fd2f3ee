/*
 * The training engines against the engines' own sources: where the
 * `fsdp` and `megatron` adapters must put what torch FSDP2 and
 * Megatron-Core really hold (GitHub issue 20). Each test names the file
 * of the engine it was read from.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine_fixture.h"

/* ------------------------------------------------------------------ */
/* Case 5: FSDP2's local shards are unpadded                           */
/* ------------------------------------------------------------------ */

#define Q_NORM "model.layers.0.self_attn.q_norm.weight"

/* torch/distributed/fsdp/_fully_shard/_fsdp_param.py (torch 2.13),
 * FSDPParam._init_sharded_param: the shard is padded to chunks[0] rows
 * for the all-gather, then `padded_sharded_param.narrow(dim=shard_dim,
 * start=0, length=length)` with length the rows torch.chunk gave this
 * rank becomes the parameter: to_local() is [43], [43], [42] for a [128]
 * norm over 3 ranks, not [43] three times. */
START_TEST(fsdp_local_shapes_are_the_rows_held)
{
    static const uint64_t rows[3] = {43, 43, 42};
    described d;

    ck_assert_msg(open_engine(&d, "Qwen3-0.6B", "fsdp", "{\"dp\":3}", NULL) ==
                      WEX_OK,
                  "%s", wex__last_error());
    for (uint64_t r = 0; r < 3; r++) {
        describe_rank(&d, r);
        ck_assert_uint_eq(tensor(&d, Q_NORM, NULL)->shape[0], rows[r]);
        ck_assert_uint_eq(tensor(&d, Q_NORM, NULL)->bytes, rows[r] * 2);
        ck_assert_uint_eq(piece(&d, Q_NORM, Q_NORM, 0)->offset[0], 43 * r);
        ck_assert_uint_eq(piece(&d, Q_NORM, Q_NORM, 0)->extent[0], rows[r]);
    }
    /* 151936 rows: chunks of 50646, the last rank holding 50644. */
    ck_assert_uint_eq(tensor(&d, "model.embed_tokens.weight", NULL)->shape[0],
                      50644);
    ck_assert_uint_eq(tensor(&d, "model.embed_tokens.weight", NULL)->shape[1],
                      1024);
    release(&d);
}
END_TEST

/* Same source: `_chunk_with_empty` pads torch.chunk's list with empty
 * chunks, so a rank past the end holds a [0, ...] tensor (still named,
 * as the module still has the parameter), and holds no piece of it. */
START_TEST(fsdp_rank_past_the_end_holds_zero_rows)
{
    described d;
    uint64_t total = 0;

    /* [128] over 100 ranks: chunks of 2, ranks 64..99 hold nothing. */
    describe(&d, "Qwen3-0.6B", "fsdp", "{\"dp\":100}", NULL, 70);
    ck_assert_uint_eq(tensor(&d, Q_NORM, NULL)->ndim, 1);
    ck_assert_uint_eq(tensor(&d, Q_NORM, NULL)->shape[0], 0);
    ck_assert_uint_eq(tensor(&d, Q_NORM, NULL)->bytes, 0);
    ck_assert_uint_eq(pieces_of(&d, Q_NORM), 0);
    /* the embedding's 151936 rows fill 99.96 chunks of 1520 */
    ck_assert_uint_eq(tensor(&d, "model.embed_tokens.weight", NULL)->shape[0],
                      1520);
    /* every rank's rows add up to the tensor's, none padded */
    for (uint64_t r = 0; r < 100; r++) {
        describe_rank(&d, r);
        total += tensor(&d, Q_NORM, NULL)->shape[0];
        ck_assert_uint_eq(tensor(&d, Q_NORM, NULL)->shape[0], r < 64 ? 2 : 0);
    }
    ck_assert_uint_eq(total, 128);
    release(&d);
}
END_TEST

/* torch/distributed/fsdp/_fully_shard/_fsdp_init.py (torch 2.13):
 * _get_managed_states returns params and buffers; only the params become
 * FSDPParams (sharded), the buffers are only moved to the device
 * (_move_states_to_device), whole on every rank. DeepSeek-V3's router
 * bias is a buffer in transformers (DeepseekV3TopkRouter). */
START_TEST(fsdp_buffers_stay_whole)
{
    const char *bias = "model.layers.3.mlp.gate.e_score_correction_bias";
    described d;

    describe(&d, "DeepSeek-V3", "fsdp", "{\"dp\":3}", NULL, 2);
    ck_assert_uint_eq(tensor(&d, bias, NULL)->shape[0], 256);
    ck_assert_uint_eq(piece(&d, bias, bias, 0)->offset[0], 0);
    ck_assert_uint_eq(piece(&d, bias, bias, 0)->extent[0], 256);
    /* the router's weight beside it is a parameter: sharded */
    ck_assert_uint_eq(
        tensor(&d, "model.layers.3.mlp.gate.weight", NULL)->shape[0],
        256 - 2 * 86);
    release(&d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Case 6: Megatron's MoE default is SequentialMLP                     */
/* ------------------------------------------------------------------ */

#define EXPERTS "decoder.layers.0.mlp.experts."

/* megatron/core/transformer/transformer_config.py: `moe_grouped_gemm:
 * bool = False`; without it the layer spec builds SequentialMLP, one
 * module per local expert (local_experts.<j>.linear_fc1.weight), and
 * only --moe-grouped-gemm gives TEGroupedMLP's linear_fc1.weight<j>. */
START_TEST(megatron_moe_defaults_to_sequential_mlp)
{
    described d;

    describe(&d, "Qwen3-30B-A3B", "megatron", "{\"tp\":2,\"pp\":4}", NULL, 1);
    ck_assert(has_tensor(&d, EXPERTS "local_experts.5.linear_fc1.weight"));
    ck_assert(has_tensor(&d, EXPERTS "local_experts.5.linear_fc2.weight"));
    ck_assert(!has_tensor(&d, EXPERTS "linear_fc1.weight5"));
    /* [gate; up] of expert 5 (768 rows each) split over etp = tp = 2 */
    ck_assert_uint_eq(
        tensor(&d, EXPERTS "local_experts.5.linear_fc1.weight", NULL)->shape[0],
        768);
    release(&d);

    describe(&d, "Qwen3-30B-A3B", "megatron", "{\"tp\":2,\"pp\":4}",
             "{\"moe_grouped_gemm\":true}", 1);
    ck_assert(has_tensor(&d, EXPERTS "linear_fc1.weight5"));
    ck_assert(has_tensor(&d, EXPERTS "linear_fc2.weight5"));
    ck_assert_uint_eq(count_prefixed(&d, EXPERTS "local_experts."), 0);
    release(&d);

    refused("Qwen3-30B-A3B", "megatron", "{\"tp\":2}",
            "{\"moe_grouped_gemm\":\"yes\"}", "options/moe_grouped_gemm");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Case 7: Megatron's multi-token prediction layers                    */
/* ------------------------------------------------------------------ */

#define DSV3_PP2 "{\"tp\":2,\"pp\":2,\"first_stage_layers\":30}"
#define MTP "mtp.layers.0."
#define MTP_EMBED "model.layers.61.embed_tokens.weight"
#define MTP_HEAD "model.layers.61.shared_head.head.weight"

/* megatron/core/transformer/multi_token_prediction.py,
 * MultiTokenPredictionLayer.__init__: enorm, hnorm, eh_proj (the
 * backend's column_parallel_linear, hidden * 2 -> hidden: output rows
 * over tp), mtp_model_layer (renamed from transformer_layer in 2026-02)
 * and final_layernorm; nothing else. The embedding and output layer are
 * the model's (GPTModel passes `embedding=self.embedding` and
 * output_layer to it; megatron/core/models/gpt/gpt_model.py builds
 * self.embedding on the stage where `self.pre_process or
 * self.mtp_process`). */
START_TEST(megatron_mtp_layer_names_and_shared_embedding)
{
    described d;
    const char *eh = MTP "eh_proj.weight";

    ck_assert_msg(open_engine(&d, "DeepSeek-V3", "megatron", DSV3_PP2, NULL) ==
                      WEX_OK,
                  "%s", wex__last_error());
    /* the last stage: tp ranks 2 and 3 */
    for (uint64_t r = 2; r < 4; r++) {
        describe_rank(&d, r);
        ck_assert(has_tensor(&d, MTP "enorm.weight"));
        ck_assert(has_tensor(&d, MTP "hnorm.weight"));
        ck_assert(has_tensor(&d, MTP "final_layernorm.weight"));
        ck_assert_uint_eq(tensor(&d, eh, NULL)->shape[0], 7168 / 2);
        ck_assert_uint_eq(tensor(&d, eh, NULL)->shape[1], 2 * 7168);
        ck_assert_uint_eq(
            piece(&d, eh, "model.layers.61.eh_proj.weight", 0)->offset[0],
            (r - 2) * 3584);
        ck_assert(has_tensor(&d, MTP "mtp_model_layer.input_layernorm.weight"));
        ck_assert(has_tensor(&d, MTP "mtp_model_layer.self_attention."
                                     "linear_kv_down_proj.weight"));
        ck_assert(has_tensor(&d, MTP "mtp_model_layer.mlp.router.weight"));
        ck_assert_uint_eq(count_prefixed(&d, MTP "transformer_layer."), 0);
        /* no MTP-owned embedding or head */
        ck_assert(!has_tensor(&d, MTP "embed_tokens.weight"));
        ck_assert(!has_tensor(&d, MTP "output_layer.weight"));
        ck_assert_uint_eq(pieces_of(&d, MTP_EMBED), 0);
        ck_assert_uint_eq(pieces_of(&d, MTP_HEAD), 0);
        /* the MTP stage builds the model's embedding for MTP's inputs */
        ck_assert_uint_eq(piece(&d, "embedding.word_embeddings.weight",
                                "model.embed_tokens.weight", 0)
                              ->offset[0],
                          (r - 2) * 64640);
        ck_assert(has_tensor(&d, "output_layer.weight"));
    }
    /* the first stage holds no MTP and only the model's embedding */
    describe_rank(&d, 0);
    ck_assert_uint_eq(count_prefixed(&d, "mtp."), 0);
    ck_assert_uint_eq(pieces_of(&d, MTP_EMBED), 0);
    ck_assert_uint_eq(pieces_of(&d, MTP_HEAD), 0);
    release(&d);
}
END_TEST

/* Same source, MultiTokenPredictionLayer.sharded_state_dict: releases
 * before the rename (and every release's distributed checkpoints) name
 * the inner layer transformer_layer; options/mtp_layer_name selects it. */
START_TEST(megatron_mtp_layer_name_option)
{
    described d;

    describe(&d, "DeepSeek-V3", "megatron", DSV3_PP2,
             "{\"mtp_layer_name\":\"transformer_layer\"}", 3);
    ck_assert(has_tensor(&d, MTP "transformer_layer.mlp.router.weight"));
    ck_assert_uint_eq(count_prefixed(&d, MTP "mtp_model_layer."), 0);
    release(&d);
    refused("DeepSeek-V3", "megatron", DSV3_PP2,
            "{\"mtp_layer_name\":\"block\"}", "options/mtp_layer_name");
}
END_TEST

/* Same source, mtp_on_this_rank / get_mtp_num_layers_to_build: Megatron
 * builds MTP only with mtp_num_layers set; 0 leaves it out, and the last
 * stage then needs no embedding. More than the checkpoint has is
 * refused. */
START_TEST(megatron_mtp_num_layers_option)
{
    described d;

    describe(&d, "DeepSeek-V3", "megatron", DSV3_PP2, "{\"mtp_num_layers\":0}",
             3);
    ck_assert_uint_eq(count_prefixed(&d, "mtp."), 0);
    ck_assert(!has_tensor(&d, "embedding.word_embeddings.weight"));
    ck_assert(has_tensor(&d, "output_layer.weight"));
    release(&d);
    describe(&d, "DeepSeek-V3", "megatron", DSV3_PP2, "{\"mtp_num_layers\":1}",
             3);
    ck_assert(has_tensor(&d, MTP "enorm.weight"));
    release(&d);
    refused("DeepSeek-V3", "megatron", DSV3_PP2, "{\"mtp_num_layers\":2}",
            "options/mtp_num_layers");
    refused("DeepSeek-V3", "megatron", DSV3_PP2, "{\"mtp_num_layers\":-1}",
            "options/mtp_num_layers");
    refused("Qwen3-8B", "megatron", "{\"tp\":2}", "{\"mtp_num_layers\":1}",
            "options/mtp_num_layers");
}
END_TEST

/* ------------------------------------------------------------------ */
/* Case 9: Megatron holds an fp8 checkpoint as bf16                    */
/* ------------------------------------------------------------------ */

/* Every local tensor of every rank is `dtype` (Megatron's router
 * expert_bias float32: megatron_expert_bias_is_float32), none a block
 * scale. */
static void all_floats(const char *model, const char *engine,
                       const char *parallel, const char *options,
                       uint32_t dtype)
{
    described d;

    ck_assert_msg(open_engine(&d, model, engine, parallel, options) == WEX_OK,
                  "%s", wex__last_error());
    for (uint64_t r = 0; r < d.engine->ranks; r++) {
        describe_rank(&d, r);
        for (size_t i = 0; i < d.layout.tensor_count; i++) {
            const wex__local_tensor *t = &d.layout.tensors[i];
            size_t n = strlen(t->name);
            ck_assert_msg(n < 10 || strcmp(t->name + n - 10, "_scale_inv") != 0,
                          "%s %s rank %llu holds %s", engine, model,
                          (unsigned long long)r, t->name);
            ck_assert_msg(
                t->dtype == dtype || (strstr(t->name, ".router.expert_bias") &&
                                      t->dtype == WEX_DTYPE_F32),
                "%s %s rank %llu: %s is %s", engine, model,
                (unsigned long long)r, t->name, wex_dtype_name(t->dtype));
        }
    }
    release(&d);
}

/* megatron/core/transformer/transformer_config.py (fp8, fp8_recipe) and
 * megatron/core/extensions/transformer_engine.py: Megatron's parameters
 * are bf16 (params_dtype); Transformer Engine keeps its fp8 scaling state
 * inside its modules, not as `*_scale_inv` parameters. (This held before
 * issue 20 too: the test pins it.) */
START_TEST(megatron_holds_fp8_checkpoints_as_bf16)
{
    char tiny[1024];

    snprintf(tiny, sizeof(tiny), "%s/models/DeepSeek-V3-tiny-fp8.config.json",
             WEX_TEST_DATA);
    all_floats(tiny, "megatron", "{\"tp\":2,\"pp\":3}", NULL, WEX_DTYPE_BF16);
    all_floats(tiny, "megatron", "{\"tp\":2}", "{\"dtype\":\"fp32\"}",
               WEX_DTYPE_F32);
    all_floats(tiny, "fsdp", "{\"dp\":3}", NULL, WEX_DTYPE_BF16);
    /* the full model's last stage: MoE experts and MTP */
    {
        described d;
        describe(&d, "DeepSeek-V3", "megatron",
                 "{\"tp\":8,\"pp\":8,\"ep\":32,\"etp\":1,\"dp\":4,"
                 "\"first_stage_layers\":6,\"last_stage_layers\":7}",
                 NULL, 255);
        for (size_t i = 0; i < d.layout.tensor_count; i++) {
            const char *name = d.layout.tensors[i].name;
            ck_assert_msg(strstr(name, "_scale_inv") == NULL, "%s", name);
            ck_assert_msg(d.layout.tensors[i].dtype ==
                              (strstr(name, ".router.expert_bias")
                                   ? WEX_DTYPE_F32
                                   : WEX_DTYPE_BF16),
                          "%s", name);
        }
        release(&d);
    }
}
END_TEST

/* megatron-core 0.16.1, megatron/core/transformer/moe/router.py:
 * TopKRouter registers `expert_bias` as a float32 buffer
 * (torch.zeros(..., dtype=torch.float32)) and keeps it float32 around
 * forward and state-dict load and save, in a bf16 model; the router's
 * weight is the model's dtype. */
START_TEST(megatron_expert_bias_is_float32)
{
    const char *bias = "decoder.layers.3.mlp.router.expert_bias";
    described d;

    describe(&d, "DeepSeek-V3", "megatron", "{}", NULL, 0);
    ck_assert_uint_eq(tensor(&d, bias, NULL)->dtype, WEX_DTYPE_F32);
    ck_assert_uint_eq(tensor(&d, bias, NULL)->bytes, 256 * 4);
    ck_assert_uint_eq(
        tensor(&d, "decoder.layers.3.mlp.router.weight", NULL)->dtype,
        WEX_DTYPE_BF16);
    release(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_training");
    TCase *tc = tcase_create("training");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, fsdp_local_shapes_are_the_rows_held);
    tcase_add_test(tc, fsdp_rank_past_the_end_holds_zero_rows);
    tcase_add_test(tc, fsdp_buffers_stay_whole);
    tcase_add_test(tc, megatron_moe_defaults_to_sequential_mlp);
    tcase_add_test(tc, megatron_mtp_layer_names_and_shared_embedding);
    tcase_add_test(tc, megatron_mtp_layer_name_option);
    tcase_add_test(tc, megatron_mtp_num_layers_option);
    tcase_add_test(tc, megatron_holds_fp8_checkpoints_as_bf16);
    tcase_add_test(tc, megatron_expert_bias_is_float32);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
