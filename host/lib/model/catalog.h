/*
 * The model catalog: the canonical tensors of a model (names, dtypes,
 * shapes exactly as its Hugging Face checkpoint stores them), computed as a
 * pure function of the model's config.json.
 *
 * A catalog is correct when its name set and total byte size reproduce the
 * checkpoint's model.safetensors.index.json (weight_map keys and
 * metadata.total_size). Engine adapters describe their local tensors as
 * pieces of these canonical tensors, so the catalog is the common language
 * of every engine.
 *
 * Canonical order (stable, documented, deterministic):
 *   model.embed_tokens.weight
 *   model.layers.0 .. model.layers.{num_hidden_layers-1}
 *   model.norm.weight
 *   lm_head.weight                       (absent when tie_word_embeddings)
 *   DeepSeek-V3 MTP layers               (model.layers.{num_hidden_layers}..)
 * Within a decoder layer the order is the module registration order of the
 * Hugging Face modeling code, i.e. what model.state_dict() yields: the
 * attention block, then the MLP block, then input_layernorm and
 * post_attention_layernorm. A quantized weight is followed by its scale.
 * Each family file documents its exact per-layer order.
 *
 * Files: catalog.c (families by architecture, model, name index,
 * loading), catalog_builder.c (the builder and the name hash),
 * catalog_config.c (typed config.json readers with precise errors),
 * catalog_llama.c (Llama, Qwen2, Qwen3, Qwen3-MoE, Mixtral),
 * catalog_deepseek.c (DeepSeek-V3, Kimi-K2).
 */
#ifndef WEX_HOST_CATALOG_H
#define WEX_HOST_CATALOG_H

#include <stdint.h>

#include <cjson/cJSON.h>
#include <wex/abi.h>
#include <wex/host.h>

#include "options.h"

/* ------------------------------------------------------------------ */
/* The model                                                           */
/* ------------------------------------------------------------------ */

/* The most tensors one catalog holds: far above any real model, low
 * enough that a hostile config cannot make wex allocate without bound. */
/* Also estimated from the config before building (docs/limits.md);
 * Kimi-K2 in fp8 has 139,583. */
#define WEX__CATALOG_MAX_TENSORS (UINT64_C(1) << 20)

typedef struct wex__tensor {
    char *name;     /* points into the model's name arena */
    uint32_t dtype; /* WEX_DTYPE_* */
    uint32_t ndim;
    uint64_t shape[WEX_MAX_DIMS];
    uint64_t bytes; /* elements * dtype size */
} wex__tensor;

struct wex_model {
    char *architecture;      /* architectures[0] */
    cJSON *config;           /* owned copy of config.json */
    char *config_text;       /* its text, when read from a file, or NULL */
    wex_options config_view; /* `config` as plugins read it (model_config) */
    wex__tensor *tensors;    /* canonical order */
    uint64_t count;
    uint64_t total_bytes;    /* == metadata.total_size of the checkpoint */
    uint64_t total_elements; /* parameters, quantization scales included */
    /* Every name, NUL-terminated, back to back: one allocation instead of
     * ~100k small ones for a trillion-parameter MoE. */
    char *names;
    /* Open-addressing hash table over names: slot holds tensor index + 1,
     * 0 when empty. Capacity is a power of two, at least twice count, so
     * probes stay short and find() is O(1). hashes[i] is the hash of
     * tensors[i].name, compared before the names themselves. */
    uint64_t *hashes;
    uint32_t *slots;
    uint64_t slot_mask;
    /* Per tensor: the block scales of an fp8 weight, and the weight of a
     * block-scale tensor; -1 for none (the rule: catalog.c, index_scales;
     * read through wex__scale_of). Layouts ask per piece, and a name
     * lookup each time was a third of describing a trillion-parameter
     * fp8 model. */
    int64_t *scale_of, *weight_of;
};

/* Builds the catalog of `config` (a parsed config.json, borrowed; the
 * model keeps its own copy). `source` names the document in error
 * messages ("Qwen3-8B/config.json"). */
wex_status wex__model_from_json(const cJSON *config, const char *source,
                                wex_model **model_p);

/* Reads and parses `config_path` (json_file.h), then as
 * wex__model_from_json. Errors name the file. */
wex_status wex__model_load(const char *config_path, wex_model **model_p);

void wex__model_free(wex_model *model); /* NULL is a no-op */

/* Index of the tensor called `name` in canonical order, -1 when absent. */
int64_t wex__model_find(const wex_model *model, const char *name);

/* Product of the tensor's shape. */
uint64_t wex__tensor_elements(const wex__tensor *t);

/* Architectures wex__model_from_json accepts, comma-separated, for help
 * and error text. */
const char *wex__catalog_architectures(void);

/* ------------------------------------------------------------------ */
/* Reading config.json (catalog_config.c)                              */
/* ------------------------------------------------------------------ */

/* A config document plus the name errors call it by. Values are addressed
 * by JSON Pointer ("/num_attention_heads",
 * "/quantization_config/weight_block_size/0"); errors quote the pointer so
 * a user can find the field, e.g.
 * "config.json: /num_attention_heads: expected a positive integer, missing".
 */
typedef struct wex__cfg {
    const cJSON *root;
    const char *source;
} wex__cfg;

/* Integers larger than this are refused: every size in a real config is
 * far below it, and the bound keeps products of two or three config values
 * far from 64-bit overflow. */
#define WEX__CFG_INT_MAX 0x7fffffffu

/* The value at `pointer` (RFC 6901, json_pointer.h), NULL when absent. */
const cJSON *wex__cfg_get(const wex__cfg *cfg, const char *pointer);

/* Fails with "SOURCE: POINTER: expected WHAT, got ..." describing `found`
 * (NULL reads "missing"). Returns WEX_ERR_INVALID. */
wex_status wex__cfg_expected(const wex__cfg *cfg, const char *pointer,
                             const char *what, const cJSON *found);

/* A required integer in [min, WEX__CFG_INT_MAX] (min is 0 or 1). */
wex_status wex__cfg_uint(const wex__cfg *cfg, const char *pointer, uint64_t min,
                         uint64_t *value_p);

/* As wex__cfg_uint, but absent or null (Python's None) yields `dflt`. */
wex_status wex__cfg_uint_or(const wex__cfg *cfg, const char *pointer,
                            uint64_t min, uint64_t dflt, uint64_t *value_p);

/* An optional boolean; absent or null yields `dflt`. */
wex_status wex__cfg_bool_or(const wex__cfg *cfg, const char *pointer, int dflt,
                            int *value_p);

/* An optional string; absent or null yields `dflt` (may be NULL). The
 * string is borrowed from the document. */
wex_status wex__cfg_string_or(const wex__cfg *cfg, const char *pointer,
                              const char *dflt, const char **value_p);

/* An optional array of non-negative integers: sets flags[v] = 1 for each
 * member v < limit (members >= limit match nothing, as in Python's
 * `i in list`). Absent or null is the empty list. */
wex_status wex__cfg_uint_set(const wex__cfg *cfg, const char *pointer,
                             uint64_t limit, uint8_t *flags);

/* The weights' element type: "torch_dtype" (or "dtype", its newer
 * spelling) of "bfloat16", "float16" or "float32"; bf16 when absent. */
wex_status wex__cfg_dtype(const wex__cfg *cfg, uint32_t *dtype_p);

/* ------------------------------------------------------------------ */
/* Building a catalog (catalog.c), used by the family files            */
/* ------------------------------------------------------------------ */

/* Families add tensors one by one under a name prefix. The builder keeps
 * the first failure (sticky, like ferror) and ignores later adds, so a
 * family reads as a plain list of tensors; wex__catalog_status() reports
 * the outcome once at the end. */
typedef struct wex__catalog wex__catalog;

/* Sets the prefix of the following names, e.g. "model.layers.3.". */
void wex__catalog_prefix(wex__catalog *cat, const char *fmt, ...)
    WEX_PRINTF(2, 3);

/* Adds the tensor called prefix + stem + leaf (leaf may be NULL). */
void wex__catalog_add(wex__catalog *cat, const char *stem, const char *leaf,
                      uint32_t dtype, uint32_t ndim, const uint64_t *shape);

static inline void wex__catalog_vec(wex__catalog *cat, const char *stem,
                                    const char *leaf, uint32_t dtype,
                                    uint64_t n)
{
    wex__catalog_add(cat, stem, leaf, dtype, 1, &n);
}

static inline void wex__catalog_mat(wex__catalog *cat, const char *stem,
                                    const char *leaf, uint32_t dtype,
                                    uint64_t rows, uint64_t cols)
{
    const uint64_t shape[2] = {rows, cols};

    wex__catalog_add(cat, stem, leaf, dtype, 2, shape);
}

/* WEX_OK, or the first failure of a prefix/add (its message is set). */
wex_status wex__catalog_status(const wex__catalog *cat);

/* Nonzero while nothing failed. Loops over layers and experts test it so
 * a config describing billions of tensors stops at the first failure
 * instead of spinning through no-op adds. */
int wex__catalog_ok(const wex__catalog *cat);

/* ------------------------------------------------------------------ */
/* Families                                                            */
/* ------------------------------------------------------------------ */

/* Each reads what it needs from `cfg`, returning a precise error for a
 * missing, mistyped or inconsistent field, and adds its tensors to `cat`
 * in canonical order. */
typedef wex_status (*wex__family_fn)(wex__catalog *cat, const wex__cfg *cfg);

/* Runs `build` over `cfg` into `model`'s tensors, names and totals. */
wex_status wex__catalog_run(const wex__cfg *cfg, wex__family_fn build,
                            wex_model *model);
/* The hash the model's name index is keyed on. */
uint64_t wex__catalog_hash(const char *s, size_t n);

wex_status wex__family_llama(wex__catalog *cat, const wex__cfg *cfg);
wex_status wex__family_qwen2(wex__catalog *cat, const wex__cfg *cfg);
wex_status wex__family_qwen3(wex__catalog *cat, const wex__cfg *cfg);
wex_status wex__family_qwen3_moe(wex__catalog *cat, const wex__cfg *cfg);
wex_status wex__family_mixtral(wex__catalog *cat, const wex__cfg *cfg);
wex_status wex__family_deepseek_v3(wex__catalog *cat, const wex__cfg *cfg);

#endif /* WEX_HOST_CATALOG_H */
