/*
 * The model catalog: which family builds an architecture, the finished
 * model with its name index, and loading config.json from a file. The
 * builder is catalog_builder.c; the families are catalog_llama.c and
 * catalog_deepseek.c.
 */
#include "catalog.h"
#include "error.h"
#include "json_file.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *architecture;
    wex__family_fn build;
} families[] = {
    {"LlamaForCausalLM", wex__family_llama},
    {"Qwen2ForCausalLM", wex__family_qwen2},
    {"Qwen3ForCausalLM", wex__family_qwen3},
    {"Qwen3MoeForCausalLM", wex__family_qwen3_moe},
    {"MixtralForCausalLM", wex__family_mixtral},
    {"DeepseekV3ForCausalLM", wex__family_deepseek_v3},
};

/* Kept beside the table; test_catalog checks that each one dispatches. */
const char *wex__catalog_architectures(void)
{
    return "LlamaForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
           "Qwen3MoeForCausalLM, MixtralForCausalLM, DeepseekV3ForCausalLM";
}

/* ------------------------------------------------------------------ */
/* Name index                                                          */
/* ------------------------------------------------------------------ */

/* Slot of `name` (hash `h`): its own, or the empty one where it belongs. */
static uint64_t probe(const wex_model *model, const char *name, uint64_t h)
{
    uint64_t s = h & model->slot_mask;
    uint32_t j;

    while ((j = model->slots[s]) != 0) {
        if (model->hashes[j - 1] == h &&
            strcmp(model->tensors[j - 1].name, name) == 0)
            break;
        s = (s + 1) & model->slot_mask;
    }
    return s;
}

/* model->scale_of and weight_of: every `<weight>_scale_inv` beside a 2-D
 * e4m3 weight is that weight's block scales (the rule wex__scale_of
 * states by name). */
static wex_status index_scales(wex_model *model, const char *source)
{
    static const char suffix[] = "_scale_inv";
    const size_t k = sizeof(suffix) - 1;
    uint64_t n = model->count ? model->count : 1;
    char stem[1024];

    model->scale_of = malloc(n * sizeof(*model->scale_of));
    model->weight_of = malloc(n * sizeof(*model->weight_of));
    if (model->scale_of == NULL || model->weight_of == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", source);
    for (uint64_t i = 0; i < model->count; i++)
        model->scale_of[i] = model->weight_of[i] = -1;
    for (uint64_t i = 0; i < model->count; i++) {
        const char *name = model->tensors[i].name;
        size_t len = strlen(name);
        const wex__tensor *w;
        int64_t j;
        if (len <= k || len >= sizeof(stem) ||
            memcmp(name + len - k, suffix, k) != 0)
            continue;
        memcpy(stem, name, len - k);
        stem[len - k] = '\0';
        j = wex__model_find(model, stem);
        if (j < 0)
            continue;
        w = &model->tensors[j];
        if (w->dtype != WEX_DTYPE_F8_E4M3 || w->ndim != 2)
            continue;
        model->scale_of[j] = (int64_t)i;
        model->weight_of[i] = j;
    }
    return WEX_OK;
}

/* Builds model->slots; a duplicate name is a family bug. */
static wex_status build_index(wex_model *model, const char *source)
{
    uint64_t cap = 16;
    uint64_t i, s;

    while (cap < model->count * 2)
        cap *= 2;
    model->slots = calloc(cap, sizeof(*model->slots));
    if (model->slots == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", source);
    model->slot_mask = cap - 1;
    for (i = 0; i < model->count; i++) {
        s = probe(model, model->tensors[i].name, model->hashes[i]);
        if (model->slots[s] != 0)
            return wex__error(WEX_ERR_INTERNAL, "%s: tensor %s listed twice",
                              source, model->tensors[i].name);
        model->slots[s] = (uint32_t)(i + 1);
    }
    return WEX_OK;
}

int64_t wex__model_find(const wex_model *model, const char *name)
{
    uint64_t s = probe(model, name, wex__catalog_hash(name, strlen(name)));

    return (int64_t)model->slots[s] - 1;
}

uint64_t wex__tensor_elements(const wex__tensor *t)
{
    uint64_t n = 1;
    uint32_t i;

    for (i = 0; i < t->ndim; i++)
        n *= t->shape[i];
    return n;
}

/* ------------------------------------------------------------------ */
/* The model                                                           */
/* ------------------------------------------------------------------ */

void wex__model_free(wex_model *model)
{
    if (model == NULL)
        return;
    free(model->architecture);
    free(model->config_text);
    cJSON_Delete(model->config);
    free(model->tensors);
    free(model->names);
    free(model->hashes);
    free(model->slots);
    free(model->scale_of);
    free(model->weight_of);
    free(model);
}

static wex_status find_family(const wex__cfg *cfg, const char **arch_p,
                              wex__family_fn *build_p)
{
    const cJSON *archs = wex__cfg_get(cfg, "/architectures");
    const cJSON *arch = cJSON_GetArrayItem(archs, 0);
    size_t i;

    if (!cJSON_IsArray(archs) || arch == NULL)
        return wex__cfg_expected(cfg, "/architectures",
                                 "a non-empty array of strings", archs);
    if (!cJSON_IsString(arch))
        return wex__cfg_expected(cfg, "/architectures/0", "a string", arch);
    for (i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
        if (strcmp(arch->valuestring, families[i].architecture) == 0) {
            *arch_p = arch->valuestring;
            *build_p = families[i].build;
            return WEX_OK;
        }
    }
    return wex__error(WEX_ERR_UNSUPPORTED,
                      "%s: /architectures/0: unsupported architecture "
                      "\"%.100s\" (supported: %s)",
                      cfg->source, arch->valuestring,
                      wex__catalog_architectures());
}

/* A number field, 0 when it is absent or not a count (the family's own
 * reader then says what is wrong with it). */
static uint64_t count_field(const wex__cfg *cfg, const char *pointer)
{
    const cJSON *item = wex__cfg_get(cfg, pointer);

    if (!cJSON_IsNumber(item) || item->valuedouble < 0 ||
        item->valuedouble > (double)WEX__CFG_INT_MAX)
        return 0;
    return (uint64_t)item->valuedouble;
}

/* The size guard (docs/limits.md): from the config alone, before one
 * tensor is allocated, an upper estimate of the catalog's tensors, so a
 * config of 200,000 layers is refused at once instead of after
 * gigabytes. A layer holds at most 16 tensors besides its experts' 3,
 * and an fp8 checkpoint doubles them with their scales. */
static wex_status check_size(const wex__cfg *cfg)
{
    static const char *const experts_at[] = {
        "/n_routed_experts", "/num_local_experts", "/num_experts"};
    uint64_t experts = 0, per_layer, layers;

    for (size_t i = 0; i < sizeof(experts_at) / sizeof(experts_at[0]); i++) {
        uint64_t n = count_field(cfg, experts_at[i]);
        experts = n > experts ? n : experts;
    }
    per_layer = 2 * (16 + 3 * experts);
    layers = count_field(cfg, "/num_hidden_layers") +
             count_field(cfg, "/num_nextn_predict_layers");
    if (layers <= WEX__CATALOG_MAX_TENSORS / per_layer)
        return WEX_OK;
    return wex__error(
        WEX_ERR_INVALID,
        "%s: /num_hidden_layers: expected at most %llu layers "
        "of %llu experts (a catalog of at most %u tensors, "
        "docs/limits.md), got %llu",
        cfg->source, (unsigned long long)(WEX__CATALOG_MAX_TENSORS / per_layer),
        (unsigned long long)experts, (unsigned)WEX__CATALOG_MAX_TENSORS,
        (unsigned long long)layers);
}

/* Builds the model of `config`, taking ownership of it either way. */
static wex_status build_model(cJSON *config, const char *source,
                              wex_model **model_p)
{
    wex__cfg cfg = {config, source};
    wex_model *model = NULL;
    const char *arch = NULL;
    wex__family_fn build = NULL;
    wex_status st;

    *model_p = NULL;
    if (!cJSON_IsObject(config)) {
        st = wex__error(WEX_ERR_INVALID,
                        "%s: expected a JSON object at the top level", source);
        goto out;
    }
    st = find_family(&cfg, &arch, &build);
    if (st == WEX_OK)
        st = check_size(&cfg);
    if (st != WEX_OK)
        goto out;
    model = calloc(1, sizeof(*model));
    if (model == NULL || (model->architecture = strdup(arch)) == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "%s: out of memory", source);
        goto out;
    }
    st = wex__catalog_run(&cfg, build, model);
    if (st != WEX_OK)
        goto out;
    st = build_index(model, source);
    if (st == WEX_OK)
        st = index_scales(model, source);
    if (st != WEX_OK)
        goto out;
    model->config = config;
    model->config_view = wex__options_view(config);
    config = NULL;
    *model_p = model;
    model = NULL;
out:
    wex__model_free(model);
    cJSON_Delete(config);
    return st;
}

wex_status wex__model_from_json(const cJSON *config, const char *source,
                                wex_model **model_p)
{
    cJSON *copy;

    *model_p = NULL;
    copy = cJSON_Duplicate(config, 1);
    if (copy == NULL && config != NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", source);
    return build_model(copy, source, model_p);
}

wex_status wex__model_load(const char *config_path, wex_model **model_p)
{
    cJSON *config = NULL;
    char *text = NULL;
    size_t len = 0;
    wex_status st;

    *model_p = NULL;
    st = wex__read_file(config_path, &text, &len);
    if (st == WEX_OK)
        st = wex__json_parse(config_path, text, len, &config);
    if (st == WEX_OK)
        st = build_model(config, config_path, model_p);
    /* The file as written: a checkpoint saved by wex carries it verbatim
     * (cJSON would print 0.0 as 0, which transformers 5's typed configs
     * refuse for a float field). */
    if (st == WEX_OK)
        (*model_p)->config_text = text;
    else
        free(text);
    return st;
}
