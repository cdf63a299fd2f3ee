/*
 * Redundant experts and their placement in the serving engines (vLLM's
 * EPLB, SGLang's --ep-num-redundant-experts): physical slots per rank, the
 * logical expert each holds under linear placement as both engines start,
 * a map given instead, and every map or size the engines would not run,
 * refused in one line naming the layer and the slot.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine_fixture.h"

#define TINY WEX_TEST_DATA "/models/DeepSeek-V3-tiny-fp8.config.json"
#define W13(layer) "model.layers." #layer ".mlp.experts.w13_weight"
#define GATE(layer, x)                                                         \
    "model.layers." #layer ".mlp.experts." #x ".gate_proj.weight"

/* The logical expert whose gate rows slot `slot` of w13 holds. */
static int64_t slot_expert(const described *d, const char *w13, int layer,
                           uint64_t slot, int64_t experts)
{
    char name[128];

    for (int64_t x = 0; x < experts; x++) {
        int64_t c;
        uint64_t t;
        snprintf(name, sizeof(name),
                 "model.layers.%d.mlp.experts.%lld.gate_proj.weight", layer,
                 (long long)x);
        c = wex__model_find(d->model, name);
        tensor(d, w13, &t);
        for (size_t i = 0; i < d->layout.piece_count; i++) {
            const wex__piece *p = &d->layout.pieces[i];
            if (p->tensor == t && p->canonical == (uint64_t)c &&
                p->at[0] == slot)
                return x;
        }
    }
    ck_abort_msg("%s slot %llu holds no expert's gate rows", w13,
                 (unsigned long long)slot);
    return -1;
}

/* vLLM 0.34 distributed/eplb/eplb_state.py
 * (build_initial_global_physical_to_logical_map: slots 0..experts-1 hold
 * their own expert, redundant slot experts + i holds expert i % experts)
 * and model_executor/layers/fused_moe/layer.py (EPLB "only supports even
 * distribution of experts across ranks": global experts % ep == 0). */
START_TEST(vllm_linear_placement)
{
    described d;

    /* DeepSeek-V3, tp 8 = ep 8, 32 redundant: 288 slots, 36 a rank; rank
     * 7 holds slots 252..287 = experts 252..255, then 0..31 */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8,\"ep\":8}",
             "{\"redundant_experts\":32}", 7);
    ck_assert_uint_eq(tensor(&d, W13(3), NULL)->shape[0], 36);
    ck_assert_int_eq(slot_expert(&d, W13(3), 3, 0, 256), 252);
    ck_assert_int_eq(slot_expert(&d, W13(3), 3, 3, 256), 255);
    ck_assert_int_eq(slot_expert(&d, W13(3), 3, 4, 256), 0);
    ck_assert_int_eq(slot_expert(&d, W13(3), 3, 35, 256), 31);
    ck_assert_uint_eq(pieces_of(&d, GATE(3, 0)), 1);
    describe_rank(&d, 0);
    ck_assert_int_eq(slot_expert(&d, W13(3), 3, 35, 256), 35);
    release(&d);
    refused("DeepSeek-V3", "vllm", "{\"tp\":8,\"ep\":8}",
            "{\"redundant_experts\":30}",
            "options/redundant_experts: 256 experts + 30 redundant = 286 "
            "physical slots do not spread evenly over ep = 8");
}
END_TEST

/* SGLang 0.5.23 srt/eplb/expert_location.py
 * (ExpertLocationMetadata.init_trivial: arange(num_physical) %
 * num_logical per layer) and layers/moe/fused_moe_triton/layer.py
 * (num_global_routed % ep_size == 0, num_local = num_global / ep). */
START_TEST(sglang_linear_placement)
{
    described d;

    /* Qwen3-30B-A3B (128 experts), tp 4 = ep 4, 16 redundant: 144 slots,
     * 36 a rank; rank 3 holds 108..127, then 0..15 */
    describe(&d, "Qwen3-30B-A3B", "sglang", "{\"tp\":4,\"ep\":4}",
             "{\"redundant_experts\":16}", 3);
    ck_assert_uint_eq(tensor(&d, W13(0), NULL)->shape[0], 36);
    ck_assert_int_eq(slot_expert(&d, W13(0), 0, 19, 128), 127);
    ck_assert_int_eq(slot_expert(&d, W13(0), 0, 20, 128), 0);
    ck_assert_int_eq(slot_expert(&d, W13(0), 0, 35, 128), 15);
    release(&d);
    refused("Qwen3-30B-A3B", "sglang", "{\"tp\":4}",
            "{\"redundant_experts\":16}",
            "options/redundant_experts: redundant experts are placed over "
            "expert-parallel ranks");
    refused("Qwen3-8B", "sglang", "{\"tp\":4,\"ep\":1}",
            "{\"redundant_experts\":4}",
            "options/redundant_experts: 4 redundant experts, but the model "
            "has no routed experts");
}
END_TEST

/* A map: the tiny DeepSeek-V3 (4 experts, MoE layers 1 and 2), ep 2 with
 * 2 redundant slots. Layer 1 holds expert 0 twice on rank 0. */
START_TEST(a_map_places_each_slot)
{
    described d;
    const char *map = "{\"redundant_experts\":2,\"expert_placement\":"
                      "{\"physical_to_logical\":[[0,0,1,2,3,3],"
                      "[3,2,1,0,1,2]]}}";

    describe(&d, TINY, "vllm", "{\"tp\":2,\"ep\":2}", map, 0);
    ck_assert_uint_eq(tensor(&d, W13(1), NULL)->shape[0], 3);
    ck_assert_int_eq(slot_expert(&d, W13(1), 1, 0, 4), 0);
    ck_assert_int_eq(slot_expert(&d, W13(1), 1, 1, 4), 0);
    ck_assert_int_eq(slot_expert(&d, W13(1), 1, 2, 4), 1);
    /* one canonical expert, two slots: a piece in each */
    ck_assert_uint_eq(pieces_of(&d, GATE(1, 0)), 2);
    ck_assert_int_eq(slot_expert(&d, W13(2), 2, 0, 4), 3);
    describe_rank(&d, 1);
    ck_assert_int_eq(slot_expert(&d, W13(2), 2, 0, 4), 0);
    ck_assert_int_eq(slot_expert(&d, W13(2), 2, 2, 4), 2);
    /* the block scales follow their weights */
    ck_assert_uint_eq(
        tensor(&d, "model.layers.2.mlp.experts.w13_weight_scale_inv", NULL)
            ->shape[0],
        3);
    release(&d);
    /* "linear" is the default spelled out */
    describe(&d, TINY, "sglang", "{\"tp\":2,\"ep\":2}",
             "{\"redundant_experts\":2,\"expert_placement\":\"linear\"}", 1);
    ck_assert_int_eq(slot_expert(&d, W13(1), 1, 1, 4), 0);
    release(&d);
}
END_TEST

START_TEST(bad_maps_are_refused_naming_the_layer_and_slot)
{
    const char *par = "{\"tp\":2,\"ep\":2}";

    refused(TINY, "vllm", par,
            "{\"redundant_experts\":2,\"expert_placement\":"
            "{\"physical_to_logical\":[[0,1,2,3,0,1]]}}",
            "options/expert_placement/physical_to_logical: expected an array "
            "of 2 maps, one per MoE layer in layer order; got 1");
    refused(TINY, "vllm", par,
            "{\"redundant_experts\":2,\"expert_placement\":"
            "{\"physical_to_logical\":[[0,1,2,3,0,1],[0,1,2,3]]}}",
            "options/expert_placement/physical_to_logical/1: layer 2's map "
            "has 4 slots; expected an array of 6 (4 experts + 2 redundant)");
    refused(TINY, "sglang", par,
            "{\"redundant_experts\":2,\"expert_placement\":"
            "{\"physical_to_logical\":[[0,1,2,3,0,1],[0,1,2,3,4,1]]}}",
            "options/expert_placement/physical_to_logical/1/4: slot 4 of "
            "layer 2: expected a logical expert 0..3");
    refused(TINY, "vllm", par,
            "{\"redundant_experts\":2,\"expert_placement\":"
            "{\"physical_to_logical\":[[0,1,2,0,1,2],[0,1,2,3,0,1]]}}",
            "options/expert_placement/physical_to_logical/0: layer 1 holds "
            "logical expert 3 in no slot");
    refused(TINY, "vllm", par, "{\"expert_placement\":\"round_robin\"}",
            "options/expert_placement");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_placement");
    TCase *tc = tcase_create("placement");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, vllm_linear_placement);
    tcase_add_test(tc, sglang_linear_placement);
    tcase_add_test(tc, a_map_places_each_slot);
    tcase_add_test(tc, bad_maps_are_refused_naming_the_layer_and_slot);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
