/*
 * Building a catalog: the builder the family files add tensors to
 * (catalog.h, "Building a catalog"), its two passes, and the name hash
 * the model's index is keyed on.
 */
#include "catalog.h"
#include "error.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A hostile or mistyped config (a billion layers) must fail fast instead
 * of exhausting memory. The largest real model we know of (Kimi-K2, fp8
 * with scales) has ~140k tensors; this leaves room for 30x that. It also
 * keeps tensor indices within the uint32_t hash slots. */
#define MAX_TENSORS WEX__CATALOG_MAX_TENSORS

/* Longest name prefix ("model.layers.60.mlp.experts.383."). */
#define PREFIX_MAX 256

/* ------------------------------------------------------------------ */
/* Name hashing                                                        */
/* ------------------------------------------------------------------ */

/* Eight bytes per step: names are ~60 bytes with long shared prefixes,
 * and Kimi-K2 has ~140k of them. The value never leaves the process, so
 * byte order does not matter. No seed: names come from config.json, whose
 * author gains nothing by making their own lookups slow. */
uint64_t wex__catalog_hash(const char *s, size_t n)
{
    const uint64_t k = UINT64_C(0xbf58476d1ce4e5b9);
    uint64_t h = UINT64_C(0x9e3779b97f4a7c15) ^ n;
    uint64_t w;

    for (; n >= 8; s += 8, n -= 8) {
        memcpy(&w, s, 8);
        h = (h ^ w) * k;
        h ^= h >> 31;
    }
    w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * k;
    h ^= h >> 32;
    h *= UINT64_C(0x94d049bb133111eb);
    return h ^ (h >> 29);
}

/* ------------------------------------------------------------------ */
/* Builder                                                             */
/* ------------------------------------------------------------------ */

/* Families run twice: a measuring pass counts tensors and name bytes (and
 * reports every config error) without storing anything, then a filling
 * pass writes into arrays allocated to the exact size. Nothing grows or
 * moves, so names can be pointed at right away and no memory is touched
 * twice: for Kimi-K2 (~140k tensors) page faults, not arithmetic, are the
 * cost of a load. A family is a pure function of the config, so both
 * passes add the same tensors; the builder checks that anyway. */
struct wex__catalog {
    const char *source;
    int measuring;
    wex__tensor *tensors;
    uint64_t *hashes; /* hash of each name, computed while it is hot */
    uint64_t count;
    uint64_t capacity;
    char *names; /* every name, NUL-terminated, back to back */
    size_t names_len;
    size_t names_capacity;
    char prefix[PREFIX_MAX];
    size_t prefix_len;
    uint64_t total_bytes;
    uint64_t total_elements;
    wex_status status; /* sticky: the first failure */
};

static void fail(wex__catalog *cat, wex_status status, const char *fmt, ...)
    WEX_PRINTF(3, 4);

static void fail(wex__catalog *cat, wex_status status, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    cat->status = wex__verror(status, fmt, ap);
    va_end(ap);
}

/* A failure about one tensor, named in full. */
static void fail_tensor(wex__catalog *cat, wex_status status, const char *stem,
                        const char *leaf, const char *why)
{
    fail(cat, status, "%s: %.*s%s%s: %s", cat->source, (int)cat->prefix_len,
         cat->prefix, stem, leaf ? leaf : "", why);
}

wex_status wex__catalog_status(const wex__catalog *cat)
{
    return cat->status;
}

int wex__catalog_ok(const wex__catalog *cat)
{
    return cat->status == WEX_OK;
}

void wex__catalog_prefix(wex__catalog *cat, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (cat->status != WEX_OK)
        return;
    va_start(ap, fmt);
    n = vsnprintf(cat->prefix, sizeof(cat->prefix), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(cat->prefix)) {
        fail(cat, WEX_ERR_INTERNAL, "%s: tensor name prefix too long",
             cat->source);
        return;
    }
    cat->prefix_len = (size_t)n;
}

/* Fills t's shape, elements and bytes; 0 on a zero dimension or overflow. */
static int size_tensor(wex__tensor *t, uint32_t dtype, uint32_t ndim,
                       const uint64_t *shape, uint64_t *elements_p)
{
    uint64_t elements = 1;
    uint32_t i;

    t->dtype = dtype;
    t->ndim = ndim;
    memset(t->shape, 0, sizeof(t->shape));
    for (i = 0; i < ndim; i++) {
        if (shape[i] == 0 ||
            __builtin_mul_overflow(elements, shape[i], &elements))
            return 0;
        t->shape[i] = shape[i];
    }
    *elements_p = elements;
    return !__builtin_mul_overflow(elements, wex_dtype_size(dtype), &t->bytes);
}

/* Writes the name and the tensor into the exactly-sized arrays. */
static void store(wex__catalog *cat, wex__tensor *t, const char *stem,
                  size_t stem_len, const char *leaf, size_t leaf_len)
{
    size_t len = cat->prefix_len + stem_len + leaf_len;
    char *name;

    if (cat->count == cat->capacity ||
        cat->names_capacity - cat->names_len < len + 1) {
        fail(cat, WEX_ERR_INTERNAL,
             "%s: the catalog's measuring and filling passes disagree",
             cat->source);
        return;
    }
    /* Plain copies, no formatting: this runs ~140k times for Kimi-K2. */
    name = cat->names + cat->names_len;
    memcpy(name, cat->prefix, cat->prefix_len);
    memcpy(name + cat->prefix_len, stem, stem_len);
    memcpy(name + cat->prefix_len + stem_len, leaf, leaf_len);
    name[len] = '\0';
    t->name = name;
    cat->tensors[cat->count] = *t;
    cat->hashes[cat->count] = wex__catalog_hash(name, len);
    cat->names_len += len + 1;
    cat->count++;
}

void wex__catalog_add(wex__catalog *cat, const char *stem, const char *leaf,
                      uint32_t dtype, uint32_t ndim, const uint64_t *shape)
{
    size_t stem_len = strlen(stem);
    size_t leaf_len = leaf ? strlen(leaf) : 0;
    wex__tensor t;
    uint64_t elements;

    if (cat->status != WEX_OK)
        return;
    if (ndim == 0 || ndim > WEX_MAX_DIMS || wex_dtype_size(dtype) == 0) {
        fail_tensor(cat, WEX_ERR_INTERNAL, stem, leaf, "bad dtype or rank");
        return;
    }
    if (!size_tensor(&t, dtype, ndim, shape, &elements) ||
        __builtin_add_overflow(cat->total_bytes, t.bytes, &cat->total_bytes)) {
        fail_tensor(cat, WEX_ERR_INVALID, stem, leaf,
                    "size is zero or overflows 64 bits");
        return;
    }
    cat->total_elements += elements; /* <= total_bytes: cannot overflow */
    if (!cat->measuring) {
        store(cat, &t, stem, stem_len, leaf ? leaf : "", leaf_len);
        return;
    }
    if (cat->count == MAX_TENSORS) {
        fail(cat, WEX_ERR_INVALID,
             "%s: the config describes more than %llu tensors", cat->source,
             (unsigned long long)MAX_TENSORS);
        return;
    }
    cat->count++;
    cat->names_len += cat->prefix_len + stem_len + leaf_len + 1;
}

/* Runs the family's measuring pass, allocates, runs its filling pass. */
static wex_status run_family(wex__catalog *cat, wex__family_fn build,
                             const wex__cfg *cfg)
{
    wex_status st;

    cat->measuring = 1;
    st = build(cat, cfg);
    if (st == WEX_OK)
        st = cat->status;
    if (st != WEX_OK)
        return st;
    if (cat->count == 0)
        return wex__error(WEX_ERR_INTERNAL, "%s: the catalog is empty",
                          cfg->source);
    cat->tensors = malloc(cat->count * sizeof(*cat->tensors));
    cat->hashes = malloc(cat->count * sizeof(*cat->hashes));
    cat->names = malloc(cat->names_len);
    if (cat->tensors == NULL || cat->hashes == NULL || cat->names == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", cfg->source);
    cat->capacity = cat->count;
    cat->names_capacity = cat->names_len;
    cat->measuring = 0;
    cat->count = 0;
    cat->names_len = 0;
    cat->prefix_len = 0;
    cat->total_bytes = 0;
    cat->total_elements = 0;
    st = build(cat, cfg);
    if (st == WEX_OK)
        st = cat->status;
    if (st == WEX_OK && cat->count != cat->capacity)
        st = wex__error(WEX_ERR_INTERNAL,
                        "%s: the catalog's measuring and filling passes "
                        "disagree",
                        cfg->source);
    return st;
}

/* Moves the builder's arrays into `model`. */
static void take_tensors(wex_model *model, wex__catalog *cat)
{
    model->tensors = cat->tensors;
    model->hashes = cat->hashes;
    model->names = cat->names;
    model->count = cat->count;
    model->total_bytes = cat->total_bytes;
    model->total_elements = cat->total_elements;
    cat->tensors = NULL;
    cat->hashes = NULL;
    cat->names = NULL;
}

wex_status wex__catalog_run(const wex__cfg *cfg, wex__family_fn build,
                            wex_model *model)
{
    wex__catalog cat;
    wex_status st;

    memset(&cat, 0, sizeof(cat));
    cat.source = cfg->source;
    st = run_family(&cat, build, cfg);
    if (st == WEX_OK)
        take_tensors(model, &cat);
    free(cat.tensors);
    free(cat.hashes);
    free(cat.names);
    return st;
}
