/*
 * The hf and fsdp engines' options/modules: what a transformers model's
 * modules hold (plugins/engines/common/module_layout.h). transformers 5.25
 * stacks each MoE layer's experts (conversion_mapping.py: the "mixtral"
 * and "qwen2_moe" converters, MergeModulelist(dim=0) then
 * Concatenate(dim=1) into experts.gate_up_proj, MergeModulelist(dim=0)
 * into experts.down_proj; MixtralExperts builds gate_up_proj
 * [E, 2 * intermediate, hidden] and splits it with .chunk(2, dim=-1)),
 * renames Mixtral's block_sparse_moe to mlp (WeightRenaming), and keeps
 * DeepseekV3TopkRouter's weight and e_score_correction_bias in float32
 * (modeling_deepseek_v3.py, _keep_in_fp32_modules_strict). Both 4.57 and
 * 5.25 build num_hidden_layers layers and skip DeepSeek-V3's MTP layer.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine_fixture.h"

#define TF5 "{\"modules\": \"transformers-5\"}"

/* Mixtral's experts as MixtralExperts holds them: gate (w1) rows, then
 * up (w3) rows, per expert; w2 as down_proj; the router under mlp. */
START_TEST(mixtral_experts_stack_gate_then_up)
{
    const char *gate_up = "model.layers.0.mlp.experts.gate_up_proj";
    const char *down = "model.layers.0.mlp.experts.down_proj";
    const wex__local_tensor *t;
    described d, ckpt;

    describe(&d, "Mixtral-8x7B", "hf", "{}", TF5, 0);
    t = tensor(&d, gate_up, NULL);
    ck_assert_uint_eq(t->ndim, 3);
    ck_assert_uint_eq(t->shape[0], 8);
    ck_assert_uint_eq(t->shape[1], 2 * 14336);
    ck_assert_uint_eq(t->shape[2], 4096);
    ck_assert_uint_eq(piece(&d, gate_up,
                            "model.layers.0.block_sparse_moe.experts.5.w1."
                            "weight",
                            0)
                          ->at[1],
                      0);
    {
        const wex__piece *up =
            piece(&d, gate_up,
                  "model.layers.0.block_sparse_moe.experts.5.w3.weight", 0);
        ck_assert_uint_eq(up->at[0], 5);
        ck_assert_uint_eq(up->at[1], 14336);
        ck_assert_uint_eq(up->at[2], 0);
        ck_assert_uint_eq(up->extent[0], 14336);
    }
    t = tensor(&d, down, NULL);
    ck_assert_uint_eq(t->shape[0], 8);
    ck_assert_uint_eq(t->shape[1], 4096);
    ck_assert_uint_eq(t->shape[2], 14336);
    ck_assert_uint_eq(
        piece(&d, down, "model.layers.0.block_sparse_moe.experts.7.w2.weight",
              0)
            ->at[0],
        7);
    ck_assert(has_tensor(&d, "model.layers.0.mlp.gate.weight"));
    ck_assert(!has_tensor_with(&d, "block_sparse_moe"));
    ck_assert(!has_tensor_with(&d, "experts.0."));
    /* the same bytes as the checkpoint, every canonical tensor once */
    describe(&ckpt, "Mixtral-8x7B", "hf", "{}", NULL, 0);
    ck_assert_uint_eq(d.layout.bytes, ckpt.layout.bytes);
    ck_assert_uint_eq(d.layout.piece_count, ckpt.layout.piece_count);
    release(&ckpt);
    release(&d);
}
END_TEST

/* DeepSeek-V3 held as bf16: stacked experts, the router in float32 (a
 * converting piece from the checkpoint's bf16), no MTP layer. */
START_TEST(deepseek_router_float32_and_no_mtp_layer)
{
    const char *router = "model.layers.3.mlp.gate.weight";
    const char *bias = "model.layers.3.mlp.gate.e_score_correction_bias";
    const wex__local_tensor *t;
    described d;

    describe(&d, "DeepSeek-V3", "hf", "{}",
             "{\"modules\": \"transformers-5\", \"dtype\": \"bf16\"}", 0);
    t = tensor(&d, router, NULL);
    ck_assert_uint_eq(t->dtype, WEX_DTYPE_F32);
    ck_assert_uint_eq(piece(&d, router, router, 0)->transform,
                      WEX_TRANSFORM_CONVERT);
    ck_assert_uint_eq(tensor(&d, bias, NULL)->dtype, WEX_DTYPE_F32);
    t = tensor(&d, "model.layers.3.mlp.experts.gate_up_proj", NULL);
    ck_assert_uint_eq(t->shape[0], 256);
    ck_assert_uint_eq(t->shape[1], 2 * 2048);
    ck_assert_uint_eq(t->shape[2], 7168);
    ck_assert_uint_eq(t->dtype, WEX_DTYPE_BF16);
    /* the shared experts and the dense layers stay modules of their own */
    ck_assert(has_tensor(&d, "model.layers.3.mlp.shared_experts.gate_proj."
                             "weight"));
    ck_assert(has_tensor(&d, "model.layers.0.mlp.gate_proj.weight"));
    ck_assert_uint_eq(count_prefixed(&d, "model.layers.61."), 0);
    /* a MoE layer's modules: 7 of MLA, the router's weight and bias, 2
     * stacked experts, 3 shared experts, 2 norms */
    ck_assert_uint_eq(count_prefixed(&d, "model.layers.60."), 16);
    release(&d);
}
END_TEST

/* transformers-4: the checkpoint's names, without the MTP layer;
 * "checkpoint" (the default) keeps it. */
START_TEST(transformers_4_names_without_mtp)
{
    described d, ckpt;

    describe(&d, "DeepSeek-V3", "hf", "{}", "{\"modules\": \"transformers-4\"}",
             0);
    describe(&ckpt, "DeepSeek-V3", "hf", "{}", NULL, 0);
    ck_assert(has_tensor(&d, "model.layers.3.mlp.experts.0.gate_proj.weight"));
    ck_assert_uint_eq(count_prefixed(&d, "model.layers.61."), 0);
    ck_assert_uint_gt(count_prefixed(&ckpt, "model.layers.61."), 0);
    ck_assert_uint_eq(d.layout.tensor_count + count_prefixed(&ckpt,
                                                             "model.layers."
                                                             "61."),
                      ckpt.layout.tensor_count);
    release(&ckpt);
    release(&d);
}
END_TEST

/* fsdp shards a stacked parameter on its dim 0, as FSDP2 does any
 * parameter: Qwen3-30B-A3B's 128 experts over 3 ranks in chunks of 43. */
START_TEST(fsdp_shards_stacked_experts_by_expert)
{
    const char *gate_up = "model.layers.0.mlp.experts.gate_up_proj";
    const wex__local_tensor *t;
    described d;

    describe(&d, "Qwen3-30B-A3B", "fsdp", "{\"dp\":3}", TF5, 2);
    t = tensor(&d, gate_up, NULL);
    ck_assert_uint_eq(t->shape[0], 128 - 2 * 43);
    ck_assert_uint_eq(t->shape[1], 2 * 768);
    ck_assert_uint_eq(t->shape[2], 2048);
    ck_assert_uint_eq(
        piece(&d, gate_up, "model.layers.0.mlp.experts.86.gate_proj.weight", 0)
            ->at[0],
        0);
    ck_assert_uint_eq(
        piece(&d, gate_up, "model.layers.0.mlp.experts.127.up_proj.weight", 0)
            ->at[0],
        41);
    ck_assert_uint_eq(pieces_of(&d, "model.layers.0.mlp.experts.85.gate_proj."
                                    "weight"),
                      0);
    release(&d);
}
END_TEST

START_TEST(bad_modules_refused)
{
    refused("Mixtral-8x7B", "hf", "{}", "{\"modules\": \"transformers-6\"}",
            "modules");
    /* fp8 experts cannot be stacked as the checkpoint holds them */
    refused("DeepSeek-V3", "hf", "{}", TF5, "hold them as floats");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_modules");
    TCase *tc = tcase_create("modules");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, mixtral_experts_stack_gate_then_up);
    tcase_add_test(tc, deepseek_router_float32_and_no_mtp_layer);
    tcase_add_test(tc, transformers_4_names_without_mtp);
    tcase_add_test(tc, fsdp_shards_stacked_experts_by_expert);
    tcase_add_test(tc, bad_modules_refused);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
