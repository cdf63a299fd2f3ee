/*
 * The keywords that check one value against the keyword's own value and
 * need no subschema (type, const, enum, the numeric bounds, lengths, item
 * counts, uniqueItems). Each returns 0 when the instance satisfies it,
 * else writes why into `msg` and returns WEX__JS_WEAK (a plain type
 * mismatch) or WEX__JS_FAILED; jsonschema.c records the error.
 */
#include "jsonschema_priv.h"

#include <stdbool.h>
#include <string.h>

int wex__js_kw_type(const cJSON *schema, const cJSON *value, const cJSON *inst,
                    struct wex__js_buf *msg)
{
    const cJSON *name;

    (void)schema;
    if (cJSON_IsString(value)) {
        if (wex__js_type_matches(value->valuestring, inst))
            return 0;
    } else {
        cJSON_ArrayForEach(
            name,
            value) if (wex__js_type_matches(name->valuestring, inst)) return 0;
    }
    wex__js_puts(msg, "expected ");
    if (cJSON_IsString(value)) {
        wex__js_puts(msg, value->valuestring);
    } else {
        cJSON_ArrayForEach(name, value)
        {
            if (name != value->child)
                wex__js_puts(msg, name->next ? ", " : " or ");
            wex__js_puts(msg, name->valuestring);
        }
    }
    wex__js_puts(msg, ", got ");
    wex__js_describe(msg, inst);
    return WEX__JS_WEAK;
}

int wex__js_kw_const(const cJSON *schema, const cJSON *value, const cJSON *inst,
                     struct wex__js_buf *msg)
{

    (void)schema;
    if (wex__js_equal(value, inst))
        return 0;
    wex__js_puts(msg, "expected ");
    wex__js_value(msg, value);
    wex__js_puts(msg, ", got ");
    wex__js_value(msg, inst);
    return WEX__JS_FAILED;
}

/* Appends "A, B, C" (at most WEX__SCHEMA_LIST_MAX of them, then a count). */
static void append_value_list(struct wex__js_buf *sb, const cJSON *array)
{
    int n = cJSON_GetArraySize(array), i = 0;
    const cJSON *item;

    cJSON_ArrayForEach(item, array)
    {
        if (i == WEX__SCHEMA_LIST_MAX) {
            wex__js_printf(sb, ", ... (%d more)", n - i);
            break;
        }
        if (i++)
            wex__js_puts(sb, ", ");
        wex__js_value(sb, item);
    }
}

int wex__js_kw_enum(const cJSON *schema, const cJSON *value, const cJSON *inst,
                    struct wex__js_buf *msg)
{
    const cJSON *item;
    int n = cJSON_GetArraySize(value);

    (void)schema;
    cJSON_ArrayForEach(item, value) if (wex__js_equal(item, inst)) return 0;
    if (n == 0) {
        wex__js_puts(msg, "expected nothing (the enum is empty)");
    } else {
        wex__js_puts(msg, n == 1 ? "expected " : "expected one of ");
        append_value_list(msg, value);
    }
    wex__js_puts(msg, ", got ");
    wex__js_value(msg, inst);
    return WEX__JS_FAILED;
}

/* minimum, maximum, exclusiveMinimum, exclusiveMaximum. */
int wex__js_kw_bound(const cJSON *schema, const cJSON *value, const cJSON *inst,
                     struct wex__js_buf *msg)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const char *kw = value->string, *op;
    double x, limit = value->valuedouble;
    bool ok, integer;

    if (!cJSON_IsNumber(inst))
        return 0;
    x = inst->valuedouble;
    if (!strcmp(kw, "minimum")) {
        ok = x >= limit;
        op = ">=";
    } else if (!strcmp(kw, "maximum")) {
        ok = x <= limit;
        op = "<=";
    } else if (!strcmp(kw, "exclusiveMinimum")) {
        ok = x > limit;
        op = ">";
    } else {
        ok = x < limit;
        op = "<";
    }
    if (ok)
        return 0;
    /* Say "integer" when the schema asks for one: "expected integer >= 1". */
    integer = cJSON_IsString(type) && !strcmp(type->valuestring, "integer");
    wex__js_printf(msg, "expected %s %s ", integer ? "integer" : "number", op);
    wex__js_value(msg, value);
    wex__js_puts(msg, ", got ");
    wex__js_value(msg, inst);
    return WEX__JS_FAILED;
}

/* minLength, maxLength: in code points, as JSON Schema and python count. */
int wex__js_kw_length(const cJSON *schema, const cJSON *value,
                      const cJSON *inst, struct wex__js_buf *msg)
{
    bool min = !strcmp(value->string, "minLength");
    size_t n;

    (void)schema;
    if (!cJSON_IsString(inst))
        return 0;
    n = wex__js_utf8_length(inst->valuestring);
    /* Compare as doubles: the limit may exceed any size_t. */
    if (min ? (double)n >= value->valuedouble : (double)n <= value->valuedouble)
        return 0;
    wex__js_printf(msg, "expected string of at %s ", min ? "least" : "most");
    wex__js_value(msg, value);
    wex__js_printf(
        msg, " character%s, got %zu: ", value->valuedouble == 1 ? "" : "s", n);
    wex__js_value(msg, inst);
    return WEX__JS_FAILED;
}

/* minItems, maxItems. */
int wex__js_kw_count(const cJSON *schema, const cJSON *value, const cJSON *inst,
                     struct wex__js_buf *msg)
{
    bool min = !strcmp(value->string, "minItems");
    int n;

    (void)schema;
    if (!cJSON_IsArray(inst))
        return 0;
    n = cJSON_GetArraySize(inst);
    if (min ? n >= value->valuedouble : n <= value->valuedouble)
        return 0;
    wex__js_printf(msg, "expected at %s ", min ? "least" : "most");
    wex__js_value(msg, value);
    wex__js_printf(msg, " item%s, got %d", value->valuedouble == 1 ? "" : "s",
                   n);
    return WEX__JS_FAILED;
}

int wex__js_kw_unique(const cJSON *schema, const cJSON *value,
                      const cJSON *inst, struct wex__js_buf *msg)
{
    const cJSON *a, *b;
    size_t i = 0, j;

    (void)schema;
    if (!cJSON_IsTrue(value) || !cJSON_IsArray(inst))
        return 0;
    /* Quadratic, but the arrays schemas constrain this way are short. */
    for (a = inst->child; a; a = a->next, i++) {
        for (b = a->next, j = i + 1; b; b = b->next, j++) {

            if (!wex__js_equal(a, b))
                continue;
            wex__js_printf(msg,
                           "expected unique items, but items %zu "
                           "and %zu are both ",
                           i, j);
            wex__js_value(msg, a);
            return WEX__JS_FAILED;
        }
    }
    return 0;
}
