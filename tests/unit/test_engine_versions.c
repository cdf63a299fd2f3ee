/*
 * Facts of the serving engines that changed between releases, one test
 * per fact, each under the options/version it holds for and the one it
 * does not, citing the file of the release it was read from (the wheels
 * vllm-0.34.0, vllm-0.13.0, sglang-0.5.23, sglang-0.5.9 and sglang-0.5.2).
 * The releases' names and a version the adapter does not know are tested
 * last.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "engine_fixture.h"

#define L3 "model.layers.3.mlp."
#define TINY WEX_TEST_DATA "/models/Qwen3-tiny-vocab-1000.config.json"

/* The piece of `tensor` holding canonical `canonical` starts at row
 * `offset` of it and spans `extent` rows. */
static void rows_of(const described *d, const char *tensor_name,
                    const char *canonical, uint64_t offset, uint64_t extent)
{
    const wex__piece *p = piece(d, tensor_name, canonical, 0);

    ck_assert_msg(p != NULL, "%s holds no piece of %s", tensor_name, canonical);
    ck_assert_uint_eq(p->offset[0], offset);
    ck_assert_uint_eq(p->extent[0], extent);
}

/* Mismatch 1. Tied embeddings with pp > 1. SGLang 0.5.23
 * models/qwen3.py (Qwen3ForCausalLM.__init__: lm_head =
 * model.embed_tokens only when pp_group.world_size == 1, else a
 * ParallelLMHead; load_weights copies model.embed_tokens.weight into
 * lm_head.weight on the last rank) and models/qwen2.py (Qwen2Model builds
 * embed_tokens on the first rank only); models/llama.py ties lm_head to
 * model.embed_tokens, a PPMissingLayer on the last stage. vLLM 0.34
 * models/qwen2.py (Qwen2Model builds embed_tokens on the first rank or,
 * tied, the last). Unchanged in SGLang 0.5.2 and 0.5.9. */
START_TEST(sglang_tied_head_on_the_last_stage)
{
    const char *versions[] = {"{\"version\":\"0.5.23\"}",
                              "{\"version\":\"0.5.2\"}"};
    described d;

    for (size_t v = 0; v < 2; v++) {
        /* Qwen3-0.6B, tp 2 x pp 2: rank 3 is stage 1, tp rank 1 */
        describe(&d, "Qwen3-0.6B", "sglang", "{\"tp\":2,\"pp\":2}", versions[v],
                 3);
        rows_of(&d, "lm_head.weight", "model.embed_tokens.weight", 75968,
                75968);
        ck_assert(!has_tensor(&d, "model.embed_tokens.weight"));
        describe_rank(&d, 1); /* stage 0 */
        rows_of(&d, "model.embed_tokens.weight", "model.embed_tokens.weight",
                75968, 75968);
        ck_assert(!has_tensor(&d, "lm_head.weight"));
        release(&d);
    }
    /* pp 1: lm_head is the embedding itself, held once */
    describe(&d, "Qwen3-0.6B", "sglang", "{\"tp\":2}", NULL, 1);
    ck_assert(has_tensor(&d, "model.embed_tokens.weight"));
    ck_assert(!has_tensor(&d, "lm_head.weight"));
    release(&d);
    /* vLLM's last stage holds an embed_tokens of its own */
    describe(&d, "Qwen3-0.6B", "vllm", "{\"tp\":2,\"pp\":2}", NULL, 3);
    rows_of(&d, "model.embed_tokens.weight", "model.embed_tokens.weight", 75968,
            75968);
    ck_assert(!has_tensor(&d, "lm_head.weight"));
    release(&d);
    refused("Llama-3.2-1B", "sglang", "{\"tp\":2,\"pp\":2}", NULL,
            "parallel/pp: SGLang's LlamaForCausalLM ties lm_head");
}
END_TEST

/* Mismatch 2. The embedding under DP attention. SGLang 0.5.23
 * models/qwen2.py and qwen2_moe.py (VocabParallelEmbedding(...,
 * use_attn_tp_group=is_dp_attention_enabled())), models/deepseek_v2.py
 * (get_embedding_tp_kwargs(), layers/vocab_parallel_embedding.py); the
 * same in 0.5.9; SGLang 0.5.2 models/qwen2.py
 * (enable_tp=not is_dp_attention_enabled(): whole). models/llama.py and
 * mixtral.py pass neither: split over tp in all three. */
START_TEST(sglang_dp_attention_splits_the_embedding)
{
    const char *split[] = {NULL, "{\"version\":\"0.5.23\"}",
                           "{\"version\":\"0.5.9\"}"};
    described d;

    /* Qwen3-30B-A3B, tp 4, attn_dp 2: rank 3 is attention rank 1 */
    for (size_t v = 0; v < 3; v++) {
        describe(&d, "Qwen3-30B-A3B", "sglang", "{\"tp\":4,\"attn_dp\":2}",
                 split[v], 3);
        rows_of(&d, "model.embed_tokens.weight", "model.embed_tokens.weight",
                75968, 75968);
        /* lm_head stays on the full tp */
        rows_of(&d, "lm_head.weight", "lm_head.weight", 3 * 37984, 37984);
        release(&d);
    }
    describe(&d, "Qwen3-30B-A3B", "sglang", "{\"tp\":4,\"attn_dp\":2}",
             "{\"version\":\"0.5.2\"}", 3);
    rows_of(&d, "model.embed_tokens.weight", "model.embed_tokens.weight", 0,
            151936);
    release(&d);
    /* Llama: over tp whatever the release */
    for (size_t v = 0; v < 2; v++) {
        describe(&d, "Llama-3.1-8B", "sglang", "{\"tp\":4,\"attn_dp\":2}",
                 v ? "{\"version\":\"0.5.2\"}" : NULL, 3);
        rows_of(&d, "model.embed_tokens.weight", "model.embed_tokens.weight",
                3 * 32064, 32064);
        release(&d);
    }
}
END_TEST

/* Mismatch 5. The DeepSeek MTP drafter's head. vLLM 0.34
 * v1/worker/gpu/spec_decode/eagle/utils.py (load_eagle_model:
 * share_target_lm_head installs the target's lm_head on a drafter that
 * declares no has_own_lm_head, as DeepSeekMTP in
 * model_executor/models/deepseek_mtp.py does not, and replaces every
 * layer's shared_head.head by it). vLLM 0.13 v1/spec_decode/eagle.py
 * (load_model: shares only when the model has has_own_lm_head = False):
 * the drafter keeps the checkpoint's shared_head.head. */
START_TEST(vllm_mtp_drafter_shares_the_target_head)
{
    described d;

    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8}",
             "{\"model\":\"mtp-drafter\"}", 7);
    ck_assert(!has_tensor_with(&d, "shared_head.head"));
    ck_assert(has_tensor(&d, "model.layers.61.shared_head.norm.weight"));
    ck_assert(has_tensor(&d, "model.layers.61.eh_proj.weight"));
    release(&d);
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8}",
             "{\"model\":\"mtp-drafter\",\"version\":\"0.13\"}", 7);
    rows_of(&d, "model.layers.61.shared_head.head.weight",
            "model.layers.61.shared_head.head.weight", 7 * 16160, 16160);
    release(&d);
    /* the target's lm_head, which the 0.34 drafter computes logits with,
     * is the main model's */
    describe(&d, "DeepSeek-V3", "vllm", "{\"tp\":8}", NULL, 7);
    rows_of(&d, "lm_head.weight", "lm_head.weight", 7 * 16160, 16160);
    release(&d);
}
END_TEST

/* Mismatch 6. Shared experts under sequence-parallel MoE. vLLM 0.34
 * config/parallel.py (ParallelConfig.__post_init__: "pplx" and "naive"
 * "removed", replaced by allgather_reducescatter;
 * use_sequence_parallel_moe names allgather_reducescatter, deepep_*,
 * flashinfer_nvlink_one_sided, passthrough, mori*, nixl_ep) and
 * model_executor/models/deepseek_v2.py (DeepseekV2MLP disable_tp =
 * is_sequence_parallel). vLLM 0.13 config/parallel.py (the backends
 * naive, pplx, deepep_*, allgather_reducescatter, flashinfer_all2allv;
 * pplx not sequence parallel). */
START_TEST(vllm_removed_backends_run_sequence_parallel)
{
    const char *gu = L3 "shared_experts.gate_up_proj.weight";
    const char *par = "{\"tp\":8,\"dp\":2,\"ep\":16}";
    described d;

    /* DeepSeek-V3, one server of tp 8 x dp 2 with ep 16, rank 9 */
    describe(&d, "DeepSeek-V3", "vllm", par, "{\"all2all_backend\":\"pplx\"}",
             9);
    ck_assert_uint_eq(tensor(&d, gu, NULL)->shape[0], 4096);
    release(&d);
    describe(&d, "DeepSeek-V3", "vllm", par,
             "{\"all2all_backend\":\"pplx\",\"version\":\"0.13\"}", 9);
    ck_assert_uint_eq(tensor(&d, gu, NULL)->shape[0], 512);
    release(&d);
    /* new in 0.34: deepep_v2 sequence parallel, moonep not */
    describe(&d, "DeepSeek-V3", "vllm", par,
             "{\"all2all_backend\":\"deepep_v2\"}", 9);
    ck_assert_uint_eq(tensor(&d, gu, NULL)->shape[0], 4096);
    release(&d);
    describe(&d, "DeepSeek-V3", "vllm", par, "{\"all2all_backend\":\"moonep\"}",
             9);
    ck_assert_uint_eq(tensor(&d, gu, NULL)->shape[0], 512);
    release(&d);
    refused("DeepSeek-V3", "vllm", par,
            "{\"all2all_backend\":\"deepep_v2\",\"version\":\"0.13\"}",
            "options/all2all_backend: vLLM 0.13 has no \"deepep_v2\"");
}
END_TEST

/* Mismatch 7. A vocabulary whose 64-padded size does not divide tp.
 * SGLang 0.5.23 layers/vocab_parallel_embedding.py
 * (VocabParallelEmbedding.__init__: padding_size *= tp_size when
 * pad_vocab_size(org_vocab_size, padding_size) % tp_size != 0); SGLang
 * 0.5.9 does so only on CPUs (_is_cpu), and vLLM 0.34
 * (model_executor/layers/vocab_parallel_embedding.py) never: both refuse
 * such a job. */
START_TEST(sglang_pads_the_vocabulary_to_64_tp)
{
    described d;

    /* 1000 rows: 1024 padded to 64 is not a multiple of 3; padded to
     * 192 it is 1152, 384 rows a rank */
    describe(&d, TINY, "sglang", "{\"tp\":3}", NULL, 2);
    ck_assert_uint_eq(tensor(&d, "model.embed_tokens.weight", NULL)->shape[0],
                      384);
    rows_of(&d, "model.embed_tokens.weight", "model.embed_tokens.weight", 768,
            232);
    rows_of(&d, "lm_head.weight", "lm_head.weight", 768, 232);
    describe_rank(&d, 0);
    rows_of(&d, "lm_head.weight", "lm_head.weight", 0, 384);
    release(&d);
    refused(TINY, "sglang", "{\"tp\":3}", "{\"version\":\"0.5.9\"}",
            "the padded vocabulary (1024) must be divisible by tp (3)");
    refused(TINY, "vllm", "{\"tp\":3}", NULL,
            "the padded vocabulary (1024) must be divisible by tp (3)");
}
END_TEST

START_TEST(unknown_versions_are_refused_naming_the_known)
{
    described d;

    refused("Qwen3-8B", "vllm", "{\"tp\":2}", "{\"version\":\"0.20\"}",
            "options/version: expected one of \"0.34\", \"0.13\"");
    refused("Qwen3-8B", "sglang", "{\"tp\":2}", "{\"version\":\"0.5\"}",
            "options/version: expected one of \"0.5.23\", \"0.5.9\", "
            "\"0.5.2\"");
    /* the default is the newest */
    describe(&d, "Qwen3-0.6B", "sglang", "{\"tp\":2,\"pp\":2}", NULL, 3);
    ck_assert(has_tensor(&d, "lm_head.weight"));
    release(&d);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("engine_versions");
    TCase *tc = tcase_create("versions");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sglang_tied_head_on_the_last_stage);
    tcase_add_test(tc, sglang_dp_attention_splits_the_embedding);
    tcase_add_test(tc, vllm_mtp_drafter_shares_the_target_head);
    tcase_add_test(tc, vllm_removed_backends_run_sequence_parallel);
    tcase_add_test(tc, sglang_pads_the_vocabulary_to_64_tp);
    tcase_add_test(tc, unknown_versions_are_refused_naming_the_known);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
