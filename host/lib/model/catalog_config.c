/*
 * Typed readers for config.json fields. Every failure names the document,
 * the field (as a JSON Pointer), what was expected and what was found, so
 * a user never has to guess which line of a 60-field config is wrong.
 *
 * Hugging Face writes Python's None as null; for optional fields null
 * means "use the default", exactly as the config classes treat None.
 */
#include "catalog.h"
#include "error.h"
#include "json_pointer.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const cJSON *wex__cfg_get(const wex__cfg *cfg, const char *pointer)
{
    return wex__json_pointer_get(cfg->root, pointer);
}

/* The shortest of %.15g and %.17g that reads back as `v`: "1e+300", not
 * "1.0000000000000001e+300"; "0.1", not "0.10000000000000001". */
static void describe_number(double v, char *buf, size_t size)
{
    snprintf(buf, size, "got %.15g", v);
    if (strtod(buf + 4, NULL) != v)
        snprintf(buf, size, "got %.17g", v);
}

/* "missing", "got null", "got 1.5", "got \"abc\"", ... for messages. */
static void describe(const cJSON *item, char *buf, size_t size)
{
    if (item == NULL)
        snprintf(buf, size, "missing");
    else if (cJSON_IsNull(item))
        snprintf(buf, size, "got null");
    else if (cJSON_IsBool(item))
        snprintf(buf, size, "got %s", cJSON_IsTrue(item) ? "true" : "false");
    else if (cJSON_IsNumber(item))
        describe_number(item->valuedouble, buf, size);
    else if (cJSON_IsString(item))
        snprintf(buf, size, "got \"%.40s\"%s", item->valuestring,
                 strlen(item->valuestring) > 40 ? "..." : "");
    else if (cJSON_IsArray(item))
        snprintf(buf, size, "got an array");
    else
        snprintf(buf, size, "got an object");
}

wex_status wex__cfg_expected(const wex__cfg *cfg, const char *pointer,
                             const char *what, const cJSON *found)
{
    char got[80];

    describe(found, got, sizeof(got));
    return wex__error(WEX_ERR_INVALID, "%s: %s: expected %s, %s", cfg->source,
                      pointer, what, got);
}

static int is_absent(const cJSON *item)
{
    return item == NULL || cJSON_IsNull(item);
}

static wex_status read_uint(const wex__cfg *cfg, const char *pointer,
                            const cJSON *item, uint64_t min, uint64_t *value_p)
{
    const char *what = min ? "a positive integer" : "a non-negative integer";
    double v;

    if (cJSON_IsNumber(item)) {
        v = item->valuedouble;
        if (v > (double)WEX__CFG_INT_MAX)
            return wex__cfg_expected(
                cfg, pointer,
                min ? "a positive integer (at most 2147483647)"
                    : "a non-negative integer (at most 2147483647)",
                item);
        /* In range now, so the cast is defined; it truncates fractions. */
        if (v >= (double)min && (double)(uint64_t)v == v) {
            *value_p = (uint64_t)v;
            return WEX_OK;
        }
    }
    return wex__cfg_expected(cfg, pointer, what, item);
}

wex_status wex__cfg_uint(const wex__cfg *cfg, const char *pointer, uint64_t min,
                         uint64_t *value_p)
{
    return read_uint(cfg, pointer, wex__cfg_get(cfg, pointer), min, value_p);
}

wex_status wex__cfg_uint_or(const wex__cfg *cfg, const char *pointer,
                            uint64_t min, uint64_t dflt, uint64_t *value_p)
{
    const cJSON *item = wex__cfg_get(cfg, pointer);

    if (is_absent(item)) {
        *value_p = dflt;
        return WEX_OK;
    }
    return read_uint(cfg, pointer, item, min, value_p);
}

wex_status wex__cfg_bool_or(const wex__cfg *cfg, const char *pointer, int dflt,
                            int *value_p)
{
    const cJSON *item = wex__cfg_get(cfg, pointer);

    if (is_absent(item)) {
        *value_p = dflt;
        return WEX_OK;
    }
    if (!cJSON_IsBool(item))
        return wex__cfg_expected(cfg, pointer, "a boolean", item);
    *value_p = cJSON_IsTrue(item);
    return WEX_OK;
}

wex_status wex__cfg_string_or(const wex__cfg *cfg, const char *pointer,
                              const char *dflt, const char **value_p)
{
    const cJSON *item = wex__cfg_get(cfg, pointer);

    if (is_absent(item)) {
        *value_p = dflt;
        return WEX_OK;
    }
    if (!cJSON_IsString(item))
        return wex__cfg_expected(cfg, pointer, "a string", item);
    *value_p = item->valuestring;
    return WEX_OK;
}

wex_status wex__cfg_uint_set(const wex__cfg *cfg, const char *pointer,
                             uint64_t limit, uint8_t *flags)
{
    const cJSON *list = wex__cfg_get(cfg, pointer);
    const cJSON *member;
    char where[160];
    uint64_t v = 0;
    int i = 0;
    wex_status st;

    if (is_absent(list))
        return WEX_OK;
    if (!cJSON_IsArray(list))
        return wex__cfg_expected(cfg, pointer,
                                 "an array of non-negative integers", list);
    cJSON_ArrayForEach(member, list)
    {
        snprintf(where, sizeof(where), "%s/%d", pointer, i++);
        st = read_uint(cfg, where, member, 0, &v);
        if (st != WEX_OK)
            return st;
        if (v < limit)
            flags[v] = 1;
    }
    return WEX_OK;
}

wex_status wex__cfg_dtype(const wex__cfg *cfg, uint32_t *dtype_p)
{
    static const struct {
        const char *name;
        uint32_t dtype;
    } known[] = {
        {"bfloat16", WEX_DTYPE_BF16},
        {"float16", WEX_DTYPE_F16},
        {"float32", WEX_DTYPE_F32},
    };
    /* transformers >= 4.56 writes "dtype"; older configs "torch_dtype". */
    const char *pointer = "/torch_dtype";
    const cJSON *item = wex__cfg_get(cfg, pointer);
    size_t i;

    if (is_absent(item)) {
        pointer = "/dtype";
        item = wex__cfg_get(cfg, pointer);
    }
    if (is_absent(item)) {
        *dtype_p = WEX_DTYPE_BF16;
        return WEX_OK;
    }
    if (cJSON_IsString(item)) {
        for (i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
            if (strcmp(item->valuestring, known[i].name) == 0) {
                *dtype_p = known[i].dtype;
                return WEX_OK;
            }
        }
    }
    return wex__cfg_expected(cfg, pointer,
                             "one of \"bfloat16\", \"float16\", "
                             "\"float32\"",
                             item);
}
