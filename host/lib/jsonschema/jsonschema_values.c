/*
 * What the validator asks of JSON values: JSON Schema equality, type
 * names, string lengths in code points, the closest property name to a
 * misspelt one, and $ref targets.
 */
#include "jsonschema_priv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "json_pointer.h"

/* ------------------------------------------------------------------ */
/* JSON helpers                                                        */
/* ------------------------------------------------------------------ */

/* Deeper than cJSON_Parse ever builds; only hand-built trees get here. */
#define EQUAL_MAX_DEPTH (CJSON_NESTING_LIMIT + 1)

static bool equal_at(const cJSON *a, const cJSON *b, int depth)
{
    const cJSON *x, *y;

    if ((a->type & 0xff) != (b->type & 0xff) || depth > EQUAL_MAX_DEPTH)
        return false;
    switch (a->type & 0xff) {
    case cJSON_Number: return a->valuedouble == b->valuedouble;
    case cJSON_String:
    case cJSON_Raw:
        return a->valuestring && b->valuestring &&
               strcmp(a->valuestring, b->valuestring) == 0;
    case cJSON_Array:
        for (x = a->child, y = b->child; x && y; x = x->next, y = y->next)
            if (!equal_at(x, y, depth + 1))
                return false;
        return !x && !y;
    case cJSON_Object:
        if (cJSON_GetArraySize(a) != cJSON_GetArraySize(b))
            return false;
        cJSON_ArrayForEach(x, a)
        {
            y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y || !equal_at(x, y, depth + 1))
                return false;
        }
        return true;
    default: /* null, true, false: the type is the value */ return true;
    }
}

bool wex__js_equal(const cJSON *a, const cJSON *b)
{
    return equal_at(a, b, 0);
}

/* Whole-number check without libm: every finite double of magnitude
 * 2^53 or more is a whole number, and smaller ones fit a long long. */
bool wex__js_is_integral(double d)
{
    if (!isfinite(d))
        return false;
    if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
        return true;
    return d == (double)(long long)d;
}

const char *wex__js_type_name(const cJSON *value)
{
    if (cJSON_IsBool(value))
        return "boolean";
    if (cJSON_IsNumber(value))
        return "number";
    if (cJSON_IsString(value))
        return "string";
    if (cJSON_IsArray(value))
        return "array";
    if (cJSON_IsObject(value))
        return "object";
    if (cJSON_IsNull(value))
        return "null";
    return "invalid"; /* cJSON_Raw or a corrupt node: matches no type */
}

bool wex__js_type_matches(const char *name, const cJSON *value)
{
    if (!strcmp(name, "integer"))
        return cJSON_IsNumber(value) && wex__js_is_integral(value->valuedouble);
    return !strcmp(name, wex__js_type_name(value));
}

size_t wex__js_utf8_length(const char *s)
{
    size_t n = 0;

    /* Count every byte that does not continue a multi-byte sequence. */
    for (; *s; s++)
        n += ((unsigned char)*s & 0xc0) != 0x80;
    return n;
}

/* Names longer than this get no spelling suggestion. */
#define SUGGEST_MAX 64

/* Optimal string alignment distance (Levenshtein plus transpositions, so
 * "nmae" is one edit from "name"), for names up to SUGGEST_MAX bytes. */
static size_t edit_distance(const char *a, const char *b)
{
    size_t rows[3][SUGGEST_MAX + 1];
    size_t la = strlen(a), lb = strlen(b), i, j, best;
    size_t *prev2 = rows[0], *prev = rows[1], *cur = rows[2], *t;

    for (j = 0; j <= lb; j++)
        prev[j] = j;
    for (i = 1; i <= la; i++) {
        cur[0] = i;
        for (j = 1; j <= lb; j++) {
            best = prev[j - 1] + (a[i - 1] != b[j - 1]);
            if (prev[j] + 1 < best)
                best = prev[j] + 1;
            if (cur[j - 1] + 1 < best)
                best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] &&
                a[i - 2] == b[j - 1] && prev2[j - 2] + 1 < best)
                best = prev2[j - 2] + 1;
            cur[j] = best;
        }
        t = prev2;
        prev2 = prev;
        prev = cur;
        cur = t;
    }
    return prev[lb];
}

const char *wex__js_suggest(const char *key, const cJSON *props)
{
    const cJSON *prop;
    const char *best = NULL;
    size_t d, best_d = 3, len = strlen(key);

    if (len > SUGGEST_MAX || !cJSON_IsObject(props))
        return NULL;
    for (prop = props->child; prop; prop = prop->next) {
        if (strlen(prop->string) > SUGGEST_MAX)
            continue;
        d = edit_distance(key, prop->string);
        /* Close, and small next to the name: "a" is not a typo of "b". */
        if (d < best_d && 3 * d <= len) {
            best = prop->string;
            best_d = d;
        }
    }
    return best;
}

const cJSON *wex__js_resolve(const cJSON *root, const char *ref)
{
    if (ref == NULL || ref[0] != '#')
        return NULL;
    return wex__json_pointer_get(root, ref + 1);
}

const cJSON *wex__js_deref(const cJSON *root, const cJSON *schema)
{
    const cJSON *ref, *target;
    int hops;

    for (hops = 0; hops < WEX__SCHEMA_MAX_REF_HOPS; hops++) {
        if (!cJSON_IsObject(schema) ||
            cJSON_GetObjectItemCaseSensitive(schema, "properties"))
            break;
        ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
        target = cJSON_IsString(ref) ? wex__js_resolve(root, ref->valuestring)
                                     : NULL;
        if (!target)
            break;
        schema = target;
    }
    return schema;
}
