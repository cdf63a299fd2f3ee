/*
 * Model catalog tests: every config in WEX_MODELS_DIR reproduces its
 * checkpoint's tensor count, total bytes and parameter count; golden names
 * and shapes per family; config variants (biases, tying, MoE layouts, fp8,
 * MTP); precise errors; find() round trips; determinism.
 *
 * WEX_MODELS_DIR comes from the environment or, failing that, from the
 * compile-time define of the same name. There is deliberately no guess
 * relative to the working directory.
 */
#include "catalog.h"
#include "error.h"
#include "json_file.h"

#include <check.h>
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Expected values                                                     */
/* ------------------------------------------------------------------ */

/* bytes == metadata.total_size of the checkpoint's safetensors index;
 * params == every element (fp8 scales included), i.e. the count the
 * Hugging Face Hub shows. Sources:
 *  - Qwen3-8B: 399 tensors / 16,381,470,720 bytes (index.json); 8.19B
 *    official.
 *  - Llama-3.2-1B, Llama-3.1-8B, Llama-3.1-70B, Qwen2.5-7B-Instruct,
 *    Qwen3-30B-A3B, Mixtral-8x7B: Hub safetensors parameter counts.
 *  - Qwen3-235B-A22B: 235B official; our formula (same code as 30B-A3B).
 *  - DeepSeek-V3: 91,991 tensors / 688,574,839,360 bytes, read from the
 *    checkpoint's safetensors headers (simpx/model-inspect README); 671B
 *    main + ~14B MTP = the Hub's "685B".
 *  - Kimi-K2-Instruct: the Hub shows 1026.5B parameters.
 * Qwen3-0.6B: see test_qwen3_0_6b_materialized_head. */
typedef struct model_case {
    const char *file;
    const char *architecture;
    uint64_t tensors;
    uint64_t bytes;
    uint64_t params;
} model_case;

static const model_case models[] = {
    {"Qwen3-0.6B.config.json", "Qwen3ForCausalLM", 310, 1192099840, 596049920},
    {"Qwen3-8B.config.json", "Qwen3ForCausalLM", 399, 16381470720, 8190735360},
    {"Qwen3-30B-A3B.config.json", "Qwen3MoeForCausalLM", 18867, 61064245248,
     30532122624},
    {"Qwen3-235B-A22B.config.json", "Qwen3MoeForCausalLM", 36945, 470187269120,
     235093634560},
    {"Qwen2.5-7B-Instruct.config.json", "Qwen2ForCausalLM", 339, 15231233024,
     7615616512},
    {"Llama-3.2-1B.config.json", "LlamaForCausalLM", 146, 2471628800,
     1235814400},
    {"Llama-3.1-8B.config.json", "LlamaForCausalLM", 291, 16060522496,
     8030261248},
    {"Llama-3.1-70B.config.json", "LlamaForCausalLM", 723, 141107412992,
     70553706496},
    {"Mixtral-8x7B.config.json", "MixtralForCausalLM", 995, 93405585408,
     46702792704},
    {"DeepSeek-V3.config.json", "DeepseekV3ForCausalLM", 91991, 688574839360,
     684531386000},
    {"Kimi-K2-Instruct.config.json", "DeepseekV3ForCausalLM", 139583,
     1029173249888, 1026470727640},
};

#define NMODELS ((int)(sizeof(models) / sizeof(models[0])))

/* ------------------------------------------------------------------ */
/* Helpers                                                             */
/* ------------------------------------------------------------------ */

/* For per-tensor loops: in fork mode every ck_assert reports its location
 * to the parent through a pipe, which costs seconds over ~140k tensors;
 * this only talks to Check when the condition fails. */
#define REQUIRE(cond, ...)                                                     \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg(__VA_ARGS__);                                         \
    } while (0)

static const char *models_dir(void)
{
    const char *dir = getenv("WEX_MODELS_DIR");

    if (dir != NULL && dir[0] != '\0')
        return dir;
#ifdef WEX_MODELS_DIR
    return WEX_MODELS_DIR;
#else
    ck_abort_msg("set WEX_MODELS_DIR to the directory of model configs");
    return NULL;
#endif
}

static void model_path(const char *file, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/%s", models_dir(), file);

    ck_assert(n > 0 && (size_t)n < size);
}

static wex_model *load(const char *file)
{
    char path[4096];
    wex_model *model = NULL;
    wex_status st;

    model_path(file, path, sizeof(path));
    st = wex__model_load(path, &model);
    ck_assert_msg(st == WEX_OK, "%s", wex__last_error());
    ck_assert_ptr_nonnull(model);
    return model;
}

static cJSON *load_json(const char *file)
{
    char path[4096];
    cJSON *doc = NULL;

    model_path(file, path, sizeof(path));
    ck_assert_msg(wex__json_load(path, &doc) == WEX_OK, "%s",
                  wex__last_error());
    return doc;
}

static wex_model *from_json(const cJSON *doc)
{
    wex_model *model = NULL;
    wex_status st = wex__model_from_json(doc, "test.json", &model);

    ck_assert_msg(st == WEX_OK, "%s", wex__last_error());
    return model;
}

/* Builds `doc` expecting failure `status` with exactly `message`, or,
 * when `exact` is 0, a message containing `message`. */
static void expect_error(const cJSON *doc, wex_status status,
                         const char *message, int exact)
{
    wex_model *model = (wex_model *)1;
    wex_status st;

    wex__error_clear();
    st = wex__model_from_json(doc, "test.json", &model);
    ck_assert_ptr_null(model);
    ck_assert_msg(st == status, "status %d, want %d (%s)", st, status,
                  wex__last_error());
    if (exact)
        ck_assert_str_eq(wex__last_error(), message);
    else
        ck_assert_msg(strstr(wex__last_error(), message) != NULL,
                      "\"%s\" lacks \"%s\"", wex__last_error(), message);
}

static void set_number(cJSON *doc, const char *key, double v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    ck_assert_ptr_nonnull(cJSON_AddNumberToObject(doc, key, v));
}

static void set_bool(cJSON *doc, const char *key, int v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    ck_assert_ptr_nonnull(cJSON_AddBoolToObject(doc, key, v));
}

static void set_string(cJSON *doc, const char *key, const char *v)
{
    cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    ck_assert_ptr_nonnull(cJSON_AddStringToObject(doc, key, v));
}

static void set_null(cJSON *doc, const char *key)
{
    cJSON_DeleteItemFromObjectCaseSensitive(doc, key);
    ck_assert_ptr_nonnull(cJSON_AddNullToObject(doc, key));
}

/* A small valid Llama config to break in error tests. */
static cJSON *small_llama(void)
{
    cJSON *doc = cJSON_Parse(
        "{\"architectures\": [\"LlamaForCausalLM\"], \"vocab_size\": 1000,"
        " \"hidden_size\": 64, \"num_hidden_layers\": 2,"
        " \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
        " \"intermediate_size\": 128, \"torch_dtype\": \"bfloat16\"}");

    ck_assert_ptr_nonnull(doc);
    return doc;
}

/* Asserts `name` exists with this dtype and shape (ndim 1 or 2). */
static void check_tensor(const wex_model *model, const char *name,
                         uint32_t dtype, uint32_t ndim, uint64_t d0,
                         uint64_t d1)
{
    int64_t i = wex__model_find(model, name);
    const wex__tensor *t;

    ck_assert_msg(i >= 0, "%s: %s missing", model->architecture, name);
    t = &model->tensors[i];
    ck_assert_str_eq(t->name, name);
    ck_assert_msg(t->dtype == dtype, "%s: dtype %s, want %s", name,
                  wex_dtype_name(t->dtype), wex_dtype_name(dtype));
    ck_assert_msg(t->ndim == ndim, "%s: ndim %u, want %u", name, t->ndim, ndim);
    ck_assert_msg(t->shape[0] == d0, "%s: shape[0] %" PRIu64 ", want %" PRIu64,
                  name, t->shape[0], d0);
    if (ndim > 1)
        ck_assert_msg(t->shape[1] == d1,
                      "%s: shape[1] %" PRIu64 ", want %" PRIu64, name,
                      t->shape[1], d1);
}

static void check_absent(const wex_model *model, const char *name)
{
    ck_assert_msg(wex__model_find(model, name) == -1, "%s present", name);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);

    return n >= m && strcmp(s + n - m, suffix) == 0;
}

/* Tensors whose name ends with `suffix`, and their elements. */
static uint64_t count_suffix(const wex_model *model, const char *suffix,
                             uint64_t *elements_p)
{
    uint64_t i, n = 0, e = 0;

    for (i = 0; i < model->count; i++) {
        if (ends_with(model->tensors[i].name, suffix)) {
            n++;
            e += wex__tensor_elements(&model->tensors[i]);
        }
    }
    if (elements_p)
        *elements_p = e;
    return n;
}

/* Every per-model invariant that does not need expected numbers. */
static void check_consistent(const wex_model *model)
{
    uint64_t i, bytes = 0, elements = 0;
    const wex__tensor *t;
    char absent[512];

    ck_assert_uint_gt(model->count, 0);
    ck_assert_str_eq(model->tensors[0].name, "model.embed_tokens.weight");
    for (i = 0; i < model->count; i++) {
        t = &model->tensors[i];
        REQUIRE(t->ndim >= 1 && t->ndim <= WEX_MAX_DIMS, "%s: ndim %u", t->name,
                t->ndim);
        REQUIRE(t->bytes == wex__tensor_elements(t) * wex_dtype_size(t->dtype),
                "%s: bytes", t->name);
        bytes += t->bytes;
        elements += wex__tensor_elements(t);
        /* find() round-trips every name; a near miss is absent. */
        REQUIRE(wex__model_find(model, t->name) == (int64_t)i,
                "%s: find() does not round-trip", t->name);
        snprintf(absent, sizeof(absent), "%sx", t->name);
        REQUIRE(wex__model_find(model, absent) == -1, "%s found", absent);
    }
    ck_assert_uint_eq(bytes, model->total_bytes);
    ck_assert_uint_eq(elements, model->total_elements);
    ck_assert_int_eq(wex__model_find(model, ""), -1);
    ck_assert_int_eq(wex__model_find(model, "model.layers.0"), -1);
}

/* fp8 invariant: each F8 weight is followed by its scale, of the
 * block-rounded shape, and each scale has its weight. */
static void check_fp8_pairs(const wex_model *model)
{
    char name[512];
    const wex__tensor *t, *s;
    uint64_t i, weights = 0, scales = 0;
    int64_t j;
    size_t n;

    for (i = 0; i < model->count; i++) {
        t = &model->tensors[i];
        if (t->dtype == WEX_DTYPE_F8_E4M3) {
            weights++;
            REQUIRE(ends_with(t->name, ".weight"), "%s: fp8", t->name);
            snprintf(name, sizeof(name), "%s_scale_inv", t->name);
            j = wex__model_find(model, name);
            REQUIRE(j == (int64_t)i + 1, "%s: scale not next", name);
            s = &model->tensors[j];
            REQUIRE(s->dtype == WEX_DTYPE_F32 && s->ndim == 2 &&
                        s->shape[0] == (t->shape[0] + 127) / 128 &&
                        s->shape[1] == (t->shape[1] + 127) / 128,
                    "%s: wrong dtype or shape", name);
        } else if (ends_with(t->name, "_scale_inv")) {
            scales++;
            n = strlen(t->name) - strlen("_scale_inv");
            snprintf(name, sizeof(name), "%.*s", (int)n, t->name);
            j = wex__model_find(model, name);
            REQUIRE(j >= 0 && model->tensors[j].dtype == WEX_DTYPE_F8_E4M3,
                    "%s: no fp8 weight", t->name);
        }
    }
    ck_assert_uint_gt(weights, 0);
    ck_assert_uint_eq(weights, scales);
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ------------------------------------------------------------------ */
/* Every model: counts, bytes, parameters                              */
/* ------------------------------------------------------------------ */

START_TEST(test_model_totals)
{
    const model_case *c = &models[_i];
    wex_model *model = load(c->file);

    ck_assert_str_eq(model->architecture, c->architecture);
    ck_assert_msg(model->count == c->tensors,
                  "%s: %" PRIu64 " tensors, want %" PRIu64, c->file,
                  model->count, c->tensors);
    ck_assert_msg(model->total_bytes == c->bytes,
                  "%s: %" PRIu64 " bytes, want %" PRIu64, c->file,
                  model->total_bytes, c->bytes);
    ck_assert_msg(model->total_elements == c->params,
                  "%s: %" PRIu64 " params, want %" PRIu64, c->file,
                  model->total_elements, c->params);
    check_consistent(model);
    /* The config lent to plugins is the model's own copy. */
    ck_assert_ptr_eq(model->config_view.root, model->config);
    ck_assert_str_eq(
        cJSON_GetArrayItem(
            cJSON_GetObjectItemCaseSensitive(model->config, "architectures"), 0)
            ->valuestring,
        c->architecture);
    wex__model_free(model);
}
END_TEST

/* Every config in the directory loads; every expected model is there. */
START_TEST(test_models_dir_complete)
{
    DIR *dir = opendir(models_dir());
    struct dirent *e;
    int seen[NMODELS] = {0};
    int i, known, files = 0;
    wex_model *model;

    ck_assert_msg(dir != NULL, "cannot open %s", models_dir());
    while ((e = readdir(dir)) != NULL) {
        if (!ends_with(e->d_name, ".config.json"))
            continue;
        files++;
        known = 0;
        for (i = 0; i < NMODELS; i++) {
            if (strcmp(models[i].file, e->d_name) == 0) {
                seen[i] = known = 1;
            }
        }
        model = load(e->d_name);
        check_consistent(model);
        ck_assert_msg(known, "%s: add its expected numbers to models[]",
                      e->d_name);
        wex__model_free(model);
    }
    closedir(dir);
    for (i = 0; i < NMODELS; i++)
        ck_assert_msg(seen[i], "%s missing from %s", models[i].file,
                      models_dir());
    ck_assert_int_eq(files, NMODELS);
}
END_TEST

/* bf16 checkpoints store two bytes per parameter. */
START_TEST(test_bf16_bytes)
{
    const model_case *c = &models[_i];

    if (strstr(c->file, "DeepSeek") || strstr(c->file, "Kimi"))
        return; /* fp8: see test_deepseek_fp8 */
    ck_assert_uint_eq(c->bytes, 2 * c->params);
}
END_TEST

/* The published Qwen/Qwen3-0.6B model.safetensors holds 751,632,384
 * parameters (1,503,300,328 bytes on disk) although its config says
 * tie_word_embeddings: true: the file materializes a redundant
 * lm_head.weight. A catalog is a pure function of config.json and a tied
 * model has one embedding matrix (engines load it once), so the catalog
 * leaves the copy out; this pins the difference to exactly that one
 * [vocab, hidden] tensor. */
START_TEST(test_qwen3_0_6b_materialized_head)
{
    wex_model *model = load("Qwen3-0.6B.config.json");

    check_absent(model, "lm_head.weight");
    ck_assert_uint_eq(model->total_elements + 151936ull * 1024, 751632384ull);
    wex__model_free(model);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Golden names and shapes                                             */
/* ------------------------------------------------------------------ */

START_TEST(test_golden_qwen3)
{
    wex_model *m = load("Qwen3-8B.config.json");
    static const char *const layer0[] = {
        "model.layers.0.self_attn.q_proj.weight",
        "model.layers.0.self_attn.k_proj.weight",
        "model.layers.0.self_attn.v_proj.weight",
        "model.layers.0.self_attn.o_proj.weight",
        "model.layers.0.self_attn.q_norm.weight",
        "model.layers.0.self_attn.k_norm.weight",
        "model.layers.0.mlp.gate_proj.weight",
        "model.layers.0.mlp.up_proj.weight",
        "model.layers.0.mlp.down_proj.weight",
        "model.layers.0.input_layernorm.weight",
        "model.layers.0.post_attention_layernorm.weight",
    };
    size_t i;

    /* Canonical order: embedding, layer 0 in documented order, ...,
     * final norm, lm_head. */
    for (i = 0; i < sizeof(layer0) / sizeof(layer0[0]); i++)
        ck_assert_str_eq(m->tensors[1 + i].name, layer0[i]);
    ck_assert_str_eq(m->tensors[m->count - 2].name, "model.norm.weight");
    ck_assert_str_eq(m->tensors[m->count - 1].name, "lm_head.weight");

    check_tensor(m, "model.embed_tokens.weight", WEX_DTYPE_BF16, 2, 151936,
                 4096);
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_BF16, 2,
                 4096, 4096);
    check_tensor(m, "model.layers.35.self_attn.k_proj.weight", WEX_DTYPE_BF16,
                 2, 1024, 4096);
    check_tensor(m, "model.layers.35.self_attn.q_norm.weight", WEX_DTYPE_BF16,
                 1, 128, 0);
    check_tensor(m, "model.layers.35.mlp.down_proj.weight", WEX_DTYPE_BF16, 2,
                 4096, 12288);
    check_tensor(m, "lm_head.weight", WEX_DTYPE_BF16, 2, 151936, 4096);
    check_absent(m, "model.layers.36.input_layernorm.weight");
    check_absent(m, "model.layers.0.self_attn.q_proj.bias");
    wex__model_free(m);

    /* head_dim 128 with 16 heads: q is wider than hidden (1024). */
    m = load("Qwen3-0.6B.config.json");
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_BF16, 2,
                 2048, 1024);
    check_tensor(m, "model.layers.27.self_attn.o_proj.weight", WEX_DTYPE_BF16,
                 2, 1024, 2048);
    ck_assert_str_eq(m->tensors[m->count - 1].name, "model.norm.weight");
    wex__model_free(m);
}
END_TEST

START_TEST(test_golden_qwen3_moe)
{
    wex_model *m = load("Qwen3-30B-A3B.config.json");

    check_tensor(m, "model.layers.0.mlp.gate.weight", WEX_DTYPE_BF16, 2, 128,
                 2048);
    check_tensor(m, "model.layers.47.mlp.experts.127.down_proj.weight",
                 WEX_DTYPE_BF16, 2, 2048, 768);
    check_tensor(m, "model.layers.0.mlp.experts.0.gate_proj.weight",
                 WEX_DTYPE_BF16, 2, 768, 2048);
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_BF16, 2,
                 4096, 2048);
    check_tensor(m, "model.layers.0.self_attn.k_norm.weight", WEX_DTYPE_BF16, 1,
                 128, 0);
    check_absent(m, "model.layers.0.mlp.gate_proj.weight");
    check_absent(m, "model.layers.0.mlp.experts.128.up_proj.weight");
    /* The router precedes the experts (Qwen3MoeSparseMoeBlock order). */
    ck_assert_int_lt(
        wex__model_find(m, "model.layers.3.mlp.gate.weight"),
        wex__model_find(m, "model.layers.3.mlp.experts.0.gate_proj.weight"));
    wex__model_free(m);

    m = load("Qwen3-235B-A22B.config.json");
    check_tensor(m, "model.layers.93.mlp.experts.127.gate_proj.weight",
                 WEX_DTYPE_BF16, 2, 1536, 4096);
    check_tensor(m, "model.layers.93.self_attn.q_proj.weight", WEX_DTYPE_BF16,
                 2, 8192, 4096);
    check_tensor(m, "model.layers.93.self_attn.v_proj.weight", WEX_DTYPE_BF16,
                 2, 512, 4096);
    wex__model_free(m);
}
END_TEST

START_TEST(test_golden_qwen2)
{
    wex_model *m = load("Qwen2.5-7B-Instruct.config.json");

    check_tensor(m, "model.layers.0.self_attn.q_proj.bias", WEX_DTYPE_BF16, 1,
                 3584, 0);
    check_tensor(m, "model.layers.0.self_attn.k_proj.bias", WEX_DTYPE_BF16, 1,
                 512, 0);
    check_tensor(m, "model.layers.27.self_attn.v_proj.bias", WEX_DTYPE_BF16, 1,
                 512, 0);
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_BF16, 2,
                 3584, 3584);
    check_tensor(m, "model.layers.0.mlp.up_proj.weight", WEX_DTYPE_BF16, 2,
                 18944, 3584);
    check_tensor(m, "lm_head.weight", WEX_DTYPE_BF16, 2, 152064, 3584);
    check_absent(m, "model.layers.0.self_attn.o_proj.bias");
    check_absent(m, "model.layers.0.self_attn.q_norm.weight");
    /* A bias directly follows its weight. */
    ck_assert_int_eq(
        wex__model_find(m, "model.layers.0.self_attn.q_proj.bias"),
        wex__model_find(m, "model.layers.0.self_attn.q_proj.weight") + 1);
    wex__model_free(m);
}
END_TEST

START_TEST(test_golden_llama)
{
    wex_model *m = load("Llama-3.2-1B.config.json");

    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_BF16, 2,
                 2048, 2048);
    check_tensor(m, "model.layers.15.self_attn.k_proj.weight", WEX_DTYPE_BF16,
                 2, 512, 2048);
    check_tensor(m, "model.layers.15.mlp.gate_proj.weight", WEX_DTYPE_BF16, 2,
                 8192, 2048);
    check_absent(m, "lm_head.weight"); /* tie_word_embeddings: true */
    check_absent(m, "model.layers.0.self_attn.q_proj.bias");
    wex__model_free(m);

    m = load("Llama-3.1-8B.config.json");
    check_tensor(m, "model.layers.31.mlp.down_proj.weight", WEX_DTYPE_BF16, 2,
                 4096, 14336);
    check_tensor(m, "lm_head.weight", WEX_DTYPE_BF16, 2, 128256, 4096);
    check_absent(m, "model.layers.0.self_attn.q_norm.weight");
    wex__model_free(m);

    m = load("Llama-3.1-70B.config.json");
    check_tensor(m, "model.layers.79.self_attn.k_proj.weight", WEX_DTYPE_BF16,
                 2, 1024, 8192);
    check_tensor(m, "model.layers.79.self_attn.o_proj.weight", WEX_DTYPE_BF16,
                 2, 8192, 8192);
    check_tensor(m, "model.layers.0.mlp.up_proj.weight", WEX_DTYPE_BF16, 2,
                 28672, 8192);
    check_absent(m, "model.layers.80.input_layernorm.weight");
    wex__model_free(m);
}
END_TEST

START_TEST(test_golden_mixtral)
{
    wex_model *m = load("Mixtral-8x7B.config.json");
    int64_t w1;

    check_tensor(m, "model.layers.31.block_sparse_moe.experts.7.w2.weight",
                 WEX_DTYPE_BF16, 2, 4096, 14336);
    check_tensor(m, "model.layers.0.block_sparse_moe.experts.0.w1.weight",
                 WEX_DTYPE_BF16, 2, 14336, 4096);
    check_tensor(m, "model.layers.0.block_sparse_moe.experts.0.w3.weight",
                 WEX_DTYPE_BF16, 2, 14336, 4096);
    check_tensor(m, "model.layers.0.block_sparse_moe.gate.weight",
                 WEX_DTYPE_BF16, 2, 8, 4096);
    check_tensor(m, "model.layers.0.self_attn.k_proj.weight", WEX_DTYPE_BF16, 2,
                 1024, 4096);
    check_tensor(m, "lm_head.weight", WEX_DTYPE_BF16, 2, 32000, 4096);
    check_absent(m, "model.layers.0.block_sparse_moe.experts.8.w1.weight");
    check_absent(m, "model.layers.0.mlp.gate_proj.weight");
    /* w1, w2, w3: MixtralBlockSparseTop2MLP registration order. */
    w1 = wex__model_find(m,
                         "model.layers.5.block_sparse_moe.experts.3.w1.weight");
    ck_assert_str_eq(m->tensors[w1 + 1].name,
                     "model.layers.5.block_sparse_moe.experts.3.w2.weight");
    ck_assert_str_eq(m->tensors[w1 + 2].name,
                     "model.layers.5.block_sparse_moe.experts.3.w3.weight");
    wex__model_free(m);
}
END_TEST

/* Shapes cross-checked with the DeepSeek-V3 checkpoint's headers. */
START_TEST(test_golden_deepseek_v3)
{
    wex_model *m = load("DeepSeek-V3.config.json");
    const uint32_t f8 = WEX_DTYPE_F8_E4M3, f32 = WEX_DTYPE_F32;
    const uint32_t bf16 = WEX_DTYPE_BF16;

    check_tensor(m, "model.embed_tokens.weight", bf16, 2, 129280, 7168);
    check_tensor(m, "model.layers.0.self_attn.q_a_proj.weight", f8, 2, 1536,
                 7168);
    check_tensor(m, "model.layers.0.self_attn.q_a_proj.weight_scale_inv", f32,
                 2, 12, 56);
    check_tensor(m, "model.layers.0.self_attn.q_a_layernorm.weight", bf16, 1,
                 1536, 0);
    check_tensor(m, "model.layers.0.self_attn.q_b_proj.weight", f8, 2, 24576,
                 1536);
    check_tensor(m, "model.layers.0.self_attn.q_b_proj.weight_scale_inv", f32,
                 2, 192, 12);
    check_tensor(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.weight", f8, 2,
                 576, 7168);
    check_tensor(m,
                 "model.layers.0.self_attn.kv_a_proj_with_mqa."
                 "weight_scale_inv",
                 f32, 2, 5, 56);
    check_tensor(m, "model.layers.0.self_attn.kv_a_layernorm.weight", bf16, 1,
                 512, 0);
    check_tensor(m, "model.layers.0.self_attn.kv_b_proj.weight", f8, 2, 32768,
                 512);
    check_tensor(m, "model.layers.0.self_attn.kv_b_proj.weight_scale_inv", f32,
                 2, 256, 4);
    check_tensor(m, "model.layers.0.self_attn.o_proj.weight", f8, 2, 7168,
                 16384);
    check_tensor(m, "model.layers.0.self_attn.o_proj.weight_scale_inv", f32, 2,
                 56, 128);
    check_tensor(m, "model.layers.2.mlp.gate_proj.weight", f8, 2, 18432, 7168);
    check_tensor(m, "model.layers.2.mlp.gate_proj.weight_scale_inv", f32, 2,
                 144, 56);
    check_tensor(m, "model.layers.2.mlp.down_proj.weight_scale_inv", f32, 2, 56,
                 144);
    check_absent(m, "model.layers.3.mlp.gate_proj.weight");
    check_absent(m, "model.layers.2.mlp.gate.weight");
    /* Layer 3 is the first MoE layer. */
    check_tensor(m, "model.layers.3.mlp.experts.255.down_proj.weight", f8, 2,
                 7168, 2048);
    check_tensor(m, "model.layers.3.mlp.experts.255.down_proj.weight_scale_inv",
                 f32, 2, 56, 16);
    check_tensor(m, "model.layers.3.mlp.experts.0.gate_proj.weight_scale_inv",
                 f32, 2, 16, 56);
    check_tensor(m, "model.layers.3.mlp.gate.weight", bf16, 2, 256, 7168);
    check_absent(m, "model.layers.3.mlp.gate.weight_scale_inv");
    check_tensor(m, "model.layers.3.mlp.gate.e_score_correction_bias", f32, 1,
                 256, 0);
    check_tensor(m, "model.layers.60.mlp.shared_experts.down_proj.weight", f8,
                 2, 7168, 2048);
    check_tensor(m,
                 "model.layers.60.mlp.shared_experts.up_proj.weight_scale_inv",
                 f32, 2, 16, 56);
    check_tensor(m, "model.layers.60.post_attention_layernorm.weight", bf16, 1,
                 7168, 0);
    check_tensor(m, "model.norm.weight", bf16, 1, 7168, 0);
    check_tensor(m, "lm_head.weight", bf16, 2, 129280, 7168);
    check_absent(m, "lm_head.weight_scale_inv");
    check_absent(m, "model.embed_tokens.weight_scale_inv");
    /* MTP: layer 61, after lm_head. */
    check_tensor(m, "model.layers.61.embed_tokens.weight", bf16, 2, 129280,
                 7168);
    check_tensor(m, "model.layers.61.enorm.weight", bf16, 1, 7168, 0);
    check_tensor(m, "model.layers.61.hnorm.weight", bf16, 1, 7168, 0);
    check_tensor(m, "model.layers.61.eh_proj.weight", bf16, 2, 7168, 14336);
    check_absent(m, "model.layers.61.eh_proj.weight_scale_inv");
    check_tensor(m, "model.layers.61.shared_head.norm.weight", bf16, 1, 7168,
                 0);
    check_tensor(m, "model.layers.61.shared_head.head.weight", bf16, 2, 129280,
                 7168);
    check_tensor(m, "model.layers.61.mlp.experts.255.up_proj.weight", f8, 2,
                 2048, 7168);
    check_tensor(m, "model.layers.61.self_attn.q_b_proj.weight_scale_inv", f32,
                 2, 192, 12);
    check_tensor(m, "model.layers.61.mlp.gate.e_score_correction_bias", f32, 1,
                 256, 0);
    check_absent(m, "model.layers.62.input_layernorm.weight");
    ck_assert_int_eq(wex__model_find(m, "lm_head.weight") + 1,
                     wex__model_find(m, "model.layers.61.embed_tokens.weight"));
    ck_assert_str_eq(m->tensors[m->count - 1].name,
                     "model.layers.61.shared_head.head.weight");
    check_fp8_pairs(m);
    wex__model_free(m);
}
END_TEST

START_TEST(test_golden_kimi_k2)
{
    wex_model *m = load("Kimi-K2-Instruct.config.json");
    const uint32_t f8 = WEX_DTYPE_F8_E4M3, f32 = WEX_DTYPE_F32;

    check_tensor(m, "model.embed_tokens.weight", WEX_DTYPE_BF16, 2, 163840,
                 7168);
    check_tensor(m, "model.layers.0.mlp.gate_proj.weight", f8, 2, 18432, 7168);
    check_tensor(m, "model.layers.1.mlp.experts.383.gate_proj.weight", f8, 2,
                 2048, 7168);
    check_tensor(m, "model.layers.60.mlp.gate.weight", WEX_DTYPE_BF16, 2, 384,
                 7168);
    check_tensor(m, "model.layers.60.mlp.gate.e_score_correction_bias", f32, 1,
                 384, 0);
    check_tensor(m, "model.layers.0.self_attn.q_b_proj.weight", f8, 2, 12288,
                 1536);
    check_tensor(m, "model.layers.0.self_attn.q_b_proj.weight_scale_inv", f32,
                 2, 96, 12);
    check_tensor(m, "model.layers.0.self_attn.kv_b_proj.weight", f8, 2, 16384,
                 512);
    check_tensor(m, "model.layers.0.self_attn.o_proj.weight", f8, 2, 7168,
                 8192);
    check_absent(m, "model.layers.0.mlp.gate.weight");
    check_absent(m, "model.layers.61.enorm.weight"); /* no MTP layers */
    ck_assert_str_eq(m->tensors[m->count - 1].name, "lm_head.weight");
    check_fp8_pairs(m);
    wex__model_free(m);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Config variants                                                     */
/* ------------------------------------------------------------------ */

START_TEST(test_llama_biases)
{
    cJSON *doc = load_json("Llama-3.1-8B.config.json");
    wex_model *base = from_json(doc), *m;

    set_bool(doc, "attention_bias", 1);
    m = from_json(doc);
    check_consistent(m);
    ck_assert_uint_eq(m->count, base->count + 32 * 4);
    ck_assert_uint_eq(m->total_elements,
                      base->total_elements + 32ull * (4096 + 1024 * 2 + 4096));
    check_tensor(m, "model.layers.0.self_attn.o_proj.bias", WEX_DTYPE_BF16, 1,
                 4096, 0);
    check_tensor(m, "model.layers.0.self_attn.k_proj.bias", WEX_DTYPE_BF16, 1,
                 1024, 0);
    wex__model_free(m);

    set_bool(doc, "attention_bias", 0);
    set_bool(doc, "mlp_bias", 1);
    m = from_json(doc);
    ck_assert_uint_eq(m->count, base->count + 32 * 3);
    check_tensor(m, "model.layers.0.mlp.down_proj.bias", WEX_DTYPE_BF16, 1,
                 4096, 0);
    check_tensor(m, "model.layers.0.mlp.gate_proj.bias", WEX_DTYPE_BF16, 1,
                 14336, 0);
    wex__model_free(m);
    wex__model_free(base);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_tied_and_dtypes)
{
    cJSON *doc = load_json("Qwen3-8B.config.json");
    wex_model *m;

    set_bool(doc, "tie_word_embeddings", 1);
    m = from_json(doc);
    ck_assert_uint_eq(m->count, 398);
    check_absent(m, "lm_head.weight");
    wex__model_free(m);

    set_bool(doc, "tie_word_embeddings", 0);
    set_string(doc, "torch_dtype", "float32");
    m = from_json(doc);
    ck_assert_uint_eq(m->total_bytes, 4 * 8190735360ull);
    ck_assert_uint_eq(m->tensors[0].dtype, WEX_DTYPE_F32);
    wex__model_free(m);

    /* transformers >= 4.56 writes "dtype". */
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "torch_dtype");
    set_string(doc, "dtype", "float16");
    m = from_json(doc);
    ck_assert_uint_eq(m->tensors[5].dtype, WEX_DTYPE_F16);
    wex__model_free(m);

    /* Neither: bf16. */
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "dtype");
    m = from_json(doc);
    ck_assert_uint_eq(m->total_bytes, 16381470720ull);
    wex__model_free(m);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_head_dim_derived)
{
    cJSON *doc = load_json("Qwen3-8B.config.json");
    wex_model *m;

    /* 4096 / 32 == 128 == the explicit head_dim: same catalog. */
    set_null(doc, "head_dim");
    m = from_json(doc);
    ck_assert_uint_eq(m->total_bytes, 16381470720ull);
    wex__model_free(m);
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "head_dim");
    m = from_json(doc);
    ck_assert_uint_eq(m->total_bytes, 16381470720ull);
    wex__model_free(m);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_qwen3_moe_dense_layers)
{
    cJSON *doc = load_json("Qwen3-30B-A3B.config.json");
    cJSON *only = cJSON_CreateIntArray((const int[]){0, 5, 99}, 3);
    wex_model *m;

    cJSON_ReplaceItemInObjectCaseSensitive(doc, "mlp_only_layers", only);
    m = from_json(doc);
    check_consistent(m);
    check_tensor(m, "model.layers.0.mlp.gate_proj.weight", WEX_DTYPE_BF16, 2,
                 6144, 2048);
    check_tensor(m, "model.layers.5.mlp.down_proj.weight", WEX_DTYPE_BF16, 2,
                 2048, 6144);
    check_absent(m, "model.layers.0.mlp.gate.weight");
    check_absent(m, "model.layers.5.mlp.experts.0.up_proj.weight");
    check_tensor(m, "model.layers.1.mlp.gate.weight", WEX_DTYPE_BF16, 2, 128,
                 2048);
    ck_assert_uint_eq(m->count, 18867 - 2 * (1 + 128 * 3) + 2 * 3);
    wex__model_free(m);

    /* decoder_sparse_step 2: layers 1, 3, 5, ... are sparse. */
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "mlp_only_layers",
                                           cJSON_CreateArray());
    set_number(doc, "decoder_sparse_step", 2);
    m = from_json(doc);
    check_tensor(m, "model.layers.0.mlp.up_proj.weight", WEX_DTYPE_BF16, 2,
                 6144, 2048);
    check_tensor(m, "model.layers.1.mlp.experts.127.up_proj.weight",
                 WEX_DTYPE_BF16, 2, 768, 2048);
    check_absent(m, "model.layers.46.mlp.gate.weight");
    wex__model_free(m);
    cJSON_Delete(doc);
}
END_TEST

/* The same model without fp8 is the fp8 one minus every scale, in bf16. */
START_TEST(test_deepseek_unquantized)
{
    cJSON *doc = load_json("DeepSeek-V3.config.json");
    wex_model *fp8 = from_json(doc), *m;
    uint64_t scales, scale_elements, i;

    cJSON_DeleteItemFromObjectCaseSensitive(doc, "quantization_config");
    m = from_json(doc);
    check_consistent(m);
    scales = count_suffix(fp8, "_scale_inv", &scale_elements);
    ck_assert_uint_eq(scales, 45808);
    ck_assert_uint_eq(count_suffix(m, "_scale_inv", NULL), 0);
    ck_assert_uint_eq(m->count, fp8->count - scales);
    ck_assert_uint_eq(m->total_elements, fp8->total_elements - scale_elements);
    /* bf16 everywhere but the F32 router biases (58 MoE layers + MTP). */
    ck_assert_uint_eq(m->total_bytes, 2 * m->total_elements + 2 * 256 * 59);
    for (i = 0; i < m->count; i++)
        REQUIRE(m->tensors[i].dtype == WEX_DTYPE_BF16 ||
                    ends_with(m->tensors[i].name, "e_score_correction_bias"),
                "%s: not bf16", m->tensors[i].name);
    /* Main model 671B, MTP module ~14B (DeepSeek's README_WEIGHTS.md). */
    ck_assert_uint_eq(m->total_elements, 684489845504ull);
    wex__model_free(m);

    set_number(doc, "num_nextn_predict_layers", 0);
    m = from_json(doc);
    ck_assert_uint_eq(m->total_elements, 671026419200ull);
    check_absent(m, "model.layers.61.enorm.weight");
    wex__model_free(m);
    wex__model_free(fp8);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_deepseek_variants)
{
    cJSON *doc = load_json("DeepSeek-V3.config.json");
    cJSON *quant;
    wex_model *m;

    /* No q LoRA (DeepSeek-V2-Lite style): a plain q_proj. */
    set_null(doc, "q_lora_rank");
    m = from_json(doc);
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_F8_E4M3,
                 2, 24576, 7168);
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight_scale_inv",
                 WEX_DTYPE_F32, 2, 192, 56);
    check_absent(m, "model.layers.0.self_attn.q_a_proj.weight");
    check_absent(m, "model.layers.0.self_attn.q_a_layernorm.weight");
    wex__model_free(m);
    set_number(doc, "q_lora_rank", 1536);

    /* moe_layer_freq 2: MoE on even layers from first_k_dense_replace. */
    set_number(doc, "moe_layer_freq", 2);
    m = from_json(doc);
    check_tensor(m, "model.layers.3.mlp.gate_proj.weight", WEX_DTYPE_F8_E4M3, 2,
                 18432, 7168);
    check_tensor(m, "model.layers.4.mlp.gate.weight", WEX_DTYPE_BF16, 2, 256,
                 7168);
    check_tensor(m, "model.layers.61.mlp.gate_proj.weight", WEX_DTYPE_F8_E4M3,
                 2, 18432, 7168);
    wex__model_free(m);
    set_number(doc, "moe_layer_freq", 1);

    /* Other block sizes round up. */
    quant = cJSON_GetObjectItemCaseSensitive(doc, "quantization_config");
    cJSON_ReplaceItemInObjectCaseSensitive(
        quant, "weight_block_size",
        cJSON_CreateIntArray((const int[]){100, 300}, 2));
    m = from_json(doc);
    check_tensor(m,
                 "model.layers.0.self_attn.kv_a_proj_with_mqa."
                 "weight_scale_inv",
                 WEX_DTYPE_F32, 2, 6, 24);
    wex__model_free(m);

    /* attention_bias: q_a, kv_a and o get a bias (modeling_deepseek.py);
     * biases are not quantized and follow the weight's scale. */
    set_bool(doc, "attention_bias", 1);
    m = from_json(doc);
    check_tensor(m, "model.layers.0.self_attn.q_a_proj.bias", WEX_DTYPE_BF16, 1,
                 1536, 0);
    check_tensor(m, "model.layers.0.self_attn.kv_a_proj_with_mqa.bias",
                 WEX_DTYPE_BF16, 1, 576, 0);
    check_tensor(m, "model.layers.0.self_attn.o_proj.bias", WEX_DTYPE_BF16, 1,
                 7168, 0);
    check_absent(m, "model.layers.0.self_attn.q_b_proj.bias");
    check_absent(m, "model.layers.0.self_attn.kv_b_proj.bias");
    ck_assert_int_eq(
        wex__model_find(m, "model.layers.0.self_attn.o_proj.bias"),
        wex__model_find(m, "model.layers.0.self_attn.o_proj.weight_scale_inv") +
            1);
    ck_assert_uint_eq(m->count, 91991 + 62 * 3);
    wex__model_free(m);
    set_bool(doc, "attention_bias", 0);

    /* Without noaux_tc routing there is no correction bias. */
    set_string(doc, "topk_method", "greedy");
    m = from_json(doc);
    check_absent(m, "model.layers.3.mlp.gate.e_score_correction_bias");
    wex__model_free(m);
    cJSON_Delete(doc);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

/* A hostile layer count is refused before wex allocates anything for it
 * (found by the catalog fuzzer: a 2 GiB calloc for Qwen3-MoE). */
START_TEST(test_error_absurd_layer_count)
{
    cJSON *doc = load_json("Qwen3-30B-A3B.config.json");

    set_number(doc, "num_hidden_layers", 2147483647.0);
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /num_hidden_layers: expected at most 1310 layers "
                 "of 128 experts (a catalog of at most 1048576 tensors, "
                 "docs/limits.md), got 2147483647",
                 1);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_error_unknown_architecture)
{
    cJSON *doc = small_llama();

    cJSON_ReplaceItemInObjectCaseSensitive(
        doc, "architectures",
        cJSON_CreateStringArray((const char *[]){"GPT2LMHeadModel"}, 1));
    expect_error(doc, WEX_ERR_UNSUPPORTED,
                 "test.json: /architectures/0: unsupported architecture "
                 "\"GPT2LMHeadModel\" (supported: LlamaForCausalLM, "
                 "Qwen2ForCausalLM, Qwen3ForCausalLM, Qwen3MoeForCausalLM, "
                 "MixtralForCausalLM, DeepseekV3ForCausalLM)",
                 1);
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "architectures");
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /architectures: expected a non-empty array of "
                 "strings, missing",
                 1);
    cJSON_AddItemToObject(doc, "architectures", cJSON_CreateArray());
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /architectures: expected a non-empty array of "
                 "strings, got an array",
                 1);
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "architectures",
                                           cJSON_Parse("[5]"));
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /architectures/0: expected a string, got 5", 1);
    cJSON_Delete(doc);

    doc = cJSON_CreateArray();
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: expected a JSON object at the top level", 1);
    cJSON_Delete(doc);
}
END_TEST

/* Each supported name dispatches to a family (which then wants fields). */
START_TEST(test_every_listed_architecture_dispatches)
{
    char list[512], *arch, *save = NULL;
    cJSON *doc;

    snprintf(list, sizeof(list), "%s", wex__catalog_architectures());
    for (arch = strtok_r(list, ", ", &save); arch != NULL;
         arch = strtok_r(NULL, ", ", &save)) {
        doc = cJSON_CreateObject();
        cJSON_AddItemToObject(
            doc, "architectures",
            cJSON_CreateStringArray((const char *[]){arch}, 1));
        expect_error(doc, WEX_ERR_INVALID,
                     "test.json: /vocab_size: expected a positive integer, "
                     "missing",
                     1);
        cJSON_Delete(doc);
    }
}
END_TEST

START_TEST(test_error_fields)
{
    cJSON *doc = small_llama();
    wex_model *m;

    m = from_json(doc);
    ck_assert_uint_eq(m->count, 1 + 2 * 9 + 2);
    wex__model_free(m);

    cJSON_DeleteItemFromObjectCaseSensitive(doc, "hidden_size");
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /hidden_size: expected a positive integer, "
                 "missing",
                 1);
    set_number(doc, "hidden_size", 64);

    set_string(doc, "num_attention_heads", "4");
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /num_attention_heads: expected a positive "
                 "integer, got \"4\"",
                 1);
    set_number(doc, "num_attention_heads", 0);
    expect_error(doc, WEX_ERR_INVALID,
                 "/num_attention_heads: expected a positive integer, got 0", 0);
    set_number(doc, "num_attention_heads", -4);
    expect_error(doc, WEX_ERR_INVALID, "got -4", 0);
    set_number(doc, "num_attention_heads", 4.5);
    expect_error(doc, WEX_ERR_INVALID, "got 4.5", 0);
    set_null(doc, "num_attention_heads");
    expect_error(doc, WEX_ERR_INVALID,
                 "/num_attention_heads: expected a positive integer, got "
                 "null",
                 0);
    set_number(doc, "num_attention_heads", 4);

    set_number(doc, "num_hidden_layers", 1e12);
    expect_error(doc, WEX_ERR_INVALID,
                 "/num_hidden_layers: expected a positive integer (at most "
                 "2147483647), got 1000000000000",
                 0);
    set_number(doc, "num_hidden_layers", 1e300);
    expect_error(doc, WEX_ERR_INVALID, "(at most 2147483647), got 1e+300", 0);
    set_number(doc, "num_hidden_layers", 2);

    set_string(doc, "torch_dtype", "int8");
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /torch_dtype: expected one of \"bfloat16\", "
                 "\"float16\", \"float32\", got \"int8\"",
                 1);
    set_string(doc, "torch_dtype", "bfloat16");

    set_string(doc, "tie_word_embeddings", "yes");
    expect_error(doc, WEX_ERR_INVALID,
                 "/tie_word_embeddings: expected a boolean, got \"yes\"", 0);
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "tie_word_embeddings");

    cJSON_AddItemToObject(doc, "quantization_config", cJSON_CreateObject());
    expect_error(doc, WEX_ERR_UNSUPPORTED, "/quantization_config", 0);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_error_heads_do_not_divide_hidden)
{
    cJSON *doc = small_llama();
    wex_model *m;

    set_number(doc, "num_attention_heads", 3);
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /hidden_size (64) is not divisible by "
                 "/num_attention_heads (3) and /head_dim is absent",
                 1);
    /* An explicit head_dim makes any head count fine. */
    set_number(doc, "head_dim", 16);
    m = from_json(doc);
    check_tensor(m, "model.layers.0.self_attn.q_proj.weight", WEX_DTYPE_BF16, 2,
                 48, 64);
    wex__model_free(m);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_error_nested_pointers)
{
    cJSON *doc = load_json("Qwen3-30B-A3B.config.json");
    cJSON *quant;

    cJSON_ReplaceItemInObjectCaseSensitive(doc, "mlp_only_layers",
                                           cJSON_Parse("[1, \"2\"]"));
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /mlp_only_layers/1: expected a non-negative "
                 "integer, got \"2\"",
                 1);
    cJSON_ReplaceItemInObjectCaseSensitive(doc, "mlp_only_layers",
                                           cJSON_CreateObject());
    expect_error(doc, WEX_ERR_INVALID,
                 "/mlp_only_layers: expected an array of non-negative "
                 "integers, got an object",
                 0);
    cJSON_Delete(doc);

    doc = load_json("DeepSeek-V3.config.json");
    quant = cJSON_GetObjectItemCaseSensitive(doc, "quantization_config");
    cJSON_ReplaceItemInObjectCaseSensitive(quant, "weight_block_size",
                                           cJSON_Parse("[128, 0]"));
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /quantization_config/weight_block_size/1: "
                 "expected a positive integer, got 0",
                 1);
    cJSON_ReplaceItemInObjectCaseSensitive(quant, "weight_block_size",
                                           cJSON_Parse("[128]"));
    expect_error(doc, WEX_ERR_INVALID,
                 "/quantization_config/weight_block_size: expected an array "
                 "of two positive integers",
                 0);
    cJSON_ReplaceItemInObjectCaseSensitive(quant, "weight_block_size",
                                           cJSON_Parse("[128, 128]"));
    set_string(quant, "quant_method", "awq");
    expect_error(doc, WEX_ERR_UNSUPPORTED,
                 "test.json: /quantization_config/quant_method: \"awq\" is "
                 "not supported (supported: \"fp8\")",
                 1);
    set_string(quant, "quant_method", "fp8");
    set_string(quant, "activation_scheme", "static");
    expect_error(doc, WEX_ERR_UNSUPPORTED, "activation_scheme", 0);
    set_string(quant, "activation_scheme", "dynamic");
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "kv_lora_rank");
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /kv_lora_rank: expected a positive integer, "
                 "missing",
                 1);
    cJSON_Delete(doc);
}
END_TEST

/* Sizes that overflow 64 bits, and configs describing absurdly many
 * tensors, fail cleanly instead of wrapping or exhausting memory. */
START_TEST(test_error_limits)
{
    cJSON *doc = small_llama();

    set_number(doc, "vocab_size", 2147483647);
    set_number(doc, "hidden_size", 2147483647);
    set_number(doc, "num_attention_heads", 1);
    set_number(doc, "num_key_value_heads", 1);
    expect_error(doc, WEX_ERR_INVALID, "overflows 64 bits", 0);
    cJSON_Delete(doc);

    doc = load_json("Mixtral-8x7B.config.json");
    set_number(doc, "num_hidden_layers", 100000);
    set_number(doc, "num_local_experts", 100000);
    expect_error(doc, WEX_ERR_INVALID,
                 "test.json: /num_hidden_layers: expected at most 1 layers "
                 "of 100000 experts (a catalog of at most 1048576 tensors, "
                 "docs/limits.md), got 100000",
                 1);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(test_error_files)
{
    char path[] = "/tmp/wex_catalog_XXXXXX";
    wex_model *m = (wex_model *)1;
    int fd;

    ck_assert_int_ne(wex__model_load("/nonexistent/config.json", &m), WEX_OK);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), "/nonexistent/config.json"));

    fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{\n  \"a\": 1,\n  oops\n}\n", 21), 21);
    close(fd);
    ck_assert_int_eq(wex__model_load(path, &m), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), path));
    ck_assert_ptr_nonnull(strstr(wex__last_error(), ":3:"));

    /* Valid JSON, wrong content: errors name the file too. */
    fd = open(path, O_WRONLY | O_TRUNC);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, "{\"architectures\": [\"X\"]}", 24), 24);
    close(fd);
    ck_assert_int_eq(wex__model_load(path, &m), WEX_ERR_UNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), path));
    unlink(path);
    wex__model_free(NULL);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Determinism, ownership, speed                                       */
/* ------------------------------------------------------------------ */

static void assert_same(const wex_model *a, const wex_model *b)
{
    const wex__tensor *x, *y;
    uint64_t i;

    ck_assert_uint_eq(a->count, b->count);
    ck_assert_uint_eq(a->total_bytes, b->total_bytes);
    ck_assert_uint_eq(a->total_elements, b->total_elements);
    ck_assert_str_eq(a->architecture, b->architecture);
    for (i = 0; i < a->count; i++) {
        x = &a->tensors[i];
        y = &b->tensors[i];
        REQUIRE(strcmp(x->name, y->name) == 0 && x->dtype == y->dtype &&
                    x->ndim == y->ndim && x->bytes == y->bytes &&
                    memcmp(x->shape, y->shape, sizeof(x->shape)) == 0,
                "tensor %" PRIu64 " differs: %s vs %s", i, x->name, y->name);
    }
}

START_TEST(test_deterministic)
{
    const model_case *c = &models[_i];
    wex_model *a = load(c->file), *b = load(c->file), *d;
    cJSON *doc = load_json(c->file);

    assert_same(a, b);
    d = from_json(doc);
    /* The model owns a copy: the caller's document can go. */
    cJSON_Delete(doc);
    assert_same(a, d);
    ck_assert_ptr_nonnull(
        cJSON_GetObjectItemCaseSensitive(d->config, "hidden_size"));
    wex__model_free(a);
    wex__model_free(b);
    wex__model_free(d);
}
END_TEST

/* A quadratic step would take minutes at ~140k tensors; the real figure
 * is ~30 ms optimised. The bound is loose for sanitizer builds. */
START_TEST(test_kimi_load_is_fast)
{
    double t0 = now_ms();
    wex_model *m = load("Kimi-K2-Instruct.config.json");
    double ms = now_ms() - t0;

    ck_assert_msg(ms < 3000.0, "Kimi-K2 took %.1f ms to load", ms);
    wex__model_free(m);
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *catalog_suite(void)
{
    Suite *s = suite_create("catalog");
    TCase *tc;

    tc = tcase_create("models");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_model_totals, 0, NMODELS);
    tcase_add_loop_test(tc, test_bf16_bytes, 0, NMODELS);
    tcase_add_loop_test(tc, test_deterministic, 0, NMODELS);
    tcase_add_test(tc, test_models_dir_complete);
    tcase_add_test(tc, test_qwen3_0_6b_materialized_head);
    tcase_add_test(tc, test_kimi_load_is_fast);
    suite_add_tcase(s, tc);

    tc = tcase_create("golden");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_golden_qwen3);
    tcase_add_test(tc, test_golden_qwen3_moe);
    tcase_add_test(tc, test_golden_qwen2);
    tcase_add_test(tc, test_golden_llama);
    tcase_add_test(tc, test_golden_mixtral);
    tcase_add_test(tc, test_golden_deepseek_v3);
    tcase_add_test(tc, test_golden_kimi_k2);
    suite_add_tcase(s, tc);

    tc = tcase_create("variants");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_llama_biases);
    tcase_add_test(tc, test_tied_and_dtypes);
    tcase_add_test(tc, test_head_dim_derived);
    tcase_add_test(tc, test_qwen3_moe_dense_layers);
    tcase_add_test(tc, test_deepseek_unquantized);
    tcase_add_test(tc, test_deepseek_variants);
    suite_add_tcase(s, tc);

    tc = tcase_create("errors");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_error_unknown_architecture);
    tcase_add_test(tc, test_error_absurd_layer_count);
    tcase_add_test(tc, test_every_listed_architecture_dispatches);
    tcase_add_test(tc, test_error_fields);
    tcase_add_test(tc, test_error_heads_do_not_divide_hidden);
    tcase_add_test(tc, test_error_nested_pointers);
    tcase_add_test(tc, test_error_limits);
    tcase_add_test(tc, test_error_files);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(catalog_suite());
    int failed;

    srunner_set_fork_status(sr, CK_FORK);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
