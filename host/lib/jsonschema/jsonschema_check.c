/*
 * The up-front schema check: every known keyword of a schema, and of every
 * subschema and $ref target, has a well-formed value before any document
 * is validated against it.
 */
#include "jsonschema_priv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ */
/* Up-front schema check                                               */
/* ------------------------------------------------------------------ */

/* A schema to check, and the location its errors are reported at. */
struct target {
    const cJSON *node;
    const char *where; /* "" for the root, else a $ref's fragment */
};

struct checker {
    const cJSON *root;
    struct wex__js_buf path; /* schema location being checked */
    struct target *targets;  /* the root, then each distinct $ref target */
    size_t ntargets;
    size_t cap;
    int depth;
    struct wex__js_errors *errors;
};

static int check_schema(struct checker *c, const cJSON *schema);

/* Records why the schema is malformed, at the current location. */
static int malformed(struct checker *c, struct wex__js_buf *msg)
{
    struct wex__js_buf pointer = {0};

    if (c->path.failed) {
        wex__js_free(msg);
        return -ENOMEM;
    }
    wex__js_puts(&pointer, "schema:");
    if (c->path.data)
        wex__js_puts(&pointer, c->path.data);
    return wex__js_errors_push_buf(c->errors, &pointer, msg) < 0 ? -ENOMEM
                                                                 : -EINVAL;
}

static int expected(struct checker *c, const char *what, const cJSON *got)
{
    struct wex__js_buf msg = {0};

    wex__js_puts(&msg, "expected ");
    wex__js_puts(&msg, what);
    wex__js_puts(&msg, ", got ");
    wex__js_describe(&msg, got);
    return malformed(c, &msg);
}

static bool is_type_name(const cJSON *value)
{
    static const char *const names[] = {"array",  "boolean", "integer", "null",
                                        "number", "object",  "string"};
    size_t i;

    for (i = 0; cJSON_IsString(value) && i < sizeof(names) / sizeof(*names);
         i++)
        if (!strcmp(value->valuestring, names[i]))
            return true;
    return false;
}

static bool is_string(const cJSON *value)
{
    return cJSON_IsString(value);
}

/* Array items that each satisfy `ok` and are all distinct. */
static int check_distinct(struct checker *c, const cJSON *array,
                          bool (*ok)(const cJSON *), const char *what)
{
    size_t i = 0, mark = c->path.len;
    const cJSON *item, *prev;
    int rc = 0;

    for (item = array->child; item && rc == 0; item = item->next, i++) {
        wex__js_printf(&c->path, "/%zu", i);
        if (!ok(item))
            rc = expected(c, what, item);
        for (prev = array->child; rc == 0 && prev != item; prev = prev->next) {
            struct wex__js_buf msg = {0};

            if (!wex__js_equal(prev, item))
                continue;
            wex__js_puts(&msg, "expected distinct items, got ");
            wex__js_value(&msg, item);
            wex__js_puts(&msg, " twice");
            rc = malformed(c, &msg);
        }
        wex__js_truncate(&c->path, mark);
    }
    return rc;
}

#define TYPE_NAME                                                              \
    "a type name (array, boolean, integer, null, number, "                     \
    "object, string)"

static int check_type(struct checker *c, const cJSON *value)
{
    if (is_type_name(value))
        return 0;
    if (!cJSON_IsArray(value) || !value->child)
        return expected(c, TYPE_NAME " or a non-empty array of them", value);
    return check_distinct(c, value, is_type_name, TYPE_NAME);
}

static int check_required(struct checker *c, const cJSON *value)
{
    if (!cJSON_IsArray(value))
        return expected(c, "an array of property names", value);
    return check_distinct(c, value, is_string, "a property name (string)");
}

static int check_array(struct checker *c, const cJSON *value)
{
    return cJSON_IsArray(value) ? 0 : expected(c, "an array", value);
}

static int check_number(struct checker *c, const cJSON *value)
{
    return cJSON_IsNumber(value) ? 0 : expected(c, "a number", value);
}

static int check_count(struct checker *c, const cJSON *value)
{
    if (cJSON_IsNumber(value) && value->valuedouble >= 0 &&
        wex__js_is_integral(value->valuedouble))
        return 0;
    return expected(c, "a non-negative integer", value);
}

static int check_bool(struct checker *c, const cJSON *value)
{
    return cJSON_IsBool(value) ? 0 : expected(c, "true or false", value);
}

/* properties, $defs, definitions: an object of schemas. */
static int check_schema_map(struct checker *c, const cJSON *value)
{
    size_t mark = c->path.len;
    const cJSON *member;
    int rc = 0;

    if (!cJSON_IsObject(value))
        return expected(c, "an object of schemas", value);
    for (member = value->child; member && rc == 0; member = member->next) {
        wex__js_token(&c->path, member->string);
        rc = check_schema(c, member);
        wex__js_truncate(&c->path, mark);
    }
    return rc;
}

/* allOf, anyOf, oneOf: a non-empty array of schemas. */
static int check_schema_list(struct checker *c, const cJSON *value)
{
    size_t i = 0, mark = c->path.len;
    const cJSON *item;
    int rc = 0;

    if (!cJSON_IsArray(value) || !value->child)
        return expected(c, "a non-empty array of schemas", value);
    for (item = value->child; item && rc == 0; item = item->next, i++) {
        wex__js_printf(&c->path, "/%zu", i);
        rc = check_schema(c, item);
        wex__js_truncate(&c->path, mark);
    }
    return rc;
}

/* Queues a schema to be checked once. A $ref target may lie where the walk
 * from the root never goes (under a keyword this validator ignores);
 * checking it later rather than from the $ref keeps chains of references
 * from adding up to the nesting limit. */
static int add_target(struct checker *c, const cJSON *node, const char *where)
{
    struct target *targets;
    size_t i, cap;

    for (i = 0; i < c->ntargets; i++)
        if (c->targets[i].node == node)
            return 0;
    if (c->ntargets == c->cap) {
        cap = c->cap ? c->cap * 2 : 16;
        targets = realloc(c->targets, cap * sizeof(*targets));
        if (!targets)
            return -ENOMEM;
        c->targets = targets;
        c->cap = cap;
    }
    c->targets[c->ntargets].node = node;
    c->targets[c->ntargets].where = where;
    c->ntargets++;
    return 0;
}

static int check_ref(struct checker *c, const cJSON *value)
{
    const char *ref = cJSON_IsString(value) ? value->valuestring : NULL;
    const cJSON *target = wex__js_resolve(c->root, ref);
    struct wex__js_buf msg = {0};

    if (!ref)
        return expected(c, "a string", value);
    if (target)
        return add_target(c, target, ref + 1);
    wex__js_puts(&msg, "cannot resolve $ref ");
    wex__js_quote(&msg, ref);
    if (ref[0] == '#' && (ref[1] == '/' || ref[1] == '\0'))
        wex__js_puts(&msg, ": nothing at that location in this schema");
    else
        wex__js_puts(&msg, ": only local references (\"#\", \"#/...\") "
                           "are supported");
    return malformed(c, &msg);
}

/* const and default take any value; unknown keywords are not looked at. */
static const struct check {
    const char *name;
    int (*fn)(struct checker *c, const cJSON *value);
} checks[] = {
    {"type", check_type},
    {"enum", check_array},
    {"minimum", check_number},
    {"exclusiveMinimum", check_number},
    {"maximum", check_number},
    {"exclusiveMaximum", check_number},
    {"minLength", check_count},
    {"maxLength", check_count},
    {"minItems", check_count},
    {"maxItems", check_count},
    {"uniqueItems", check_bool},
    {"items", check_schema},
    {"required", check_required},
    {"properties", check_schema_map},
    {"additionalProperties", check_schema},
    {"$ref", check_ref},
    {"$defs", check_schema_map},
    {"definitions", check_schema_map},
    {"allOf", check_schema_list},
    {"anyOf", check_schema_list},
    {"oneOf", check_schema_list},
};

static int check_schema(struct checker *c, const cJSON *schema)
{
    size_t i, mark = c->path.len;
    struct wex__js_buf msg = {0};
    int rc = 0;

    if (cJSON_IsBool(schema))
        return 0;
    if (!cJSON_IsObject(schema))
        return expected(c, "a schema (an object or true/false)", schema);
    if (c->depth >= WEX__SCHEMA_MAX_DEPTH) {
        wex__js_printf(&msg, "expected schemas nested at most %d deep",
                       WEX__SCHEMA_MAX_DEPTH);
        return malformed(c, &msg);
    }
    c->depth++;
    for (i = 0; i < sizeof(checks) / sizeof(*checks) && rc == 0; i++) {
        const cJSON *value =
            cJSON_GetObjectItemCaseSensitive(schema, checks[i].name);

        if (!value)
            continue;
        wex__js_token(&c->path, checks[i].name);
        rc = checks[i].fn(c, value);
        wex__js_truncate(&c->path, mark);
    }
    c->depth--;
    return rc;
}

int wex__js_check_schema(const cJSON *schema, struct wex__js_errors *errors)
{
    struct checker c = {.root = schema, .errors = errors};
    size_t i;
    int rc = add_target(&c, schema, "");

    /* check_ref appends to the list while it is being walked. */
    for (i = 0; rc == 0 && i < c.ntargets; i++) {
        wex__js_truncate(&c.path, 0);
        wex__js_puts(&c.path, c.targets[i].where);
        rc = check_schema(&c, c.targets[i].node);
        if (rc == 0 && c.path.failed)
            rc = -ENOMEM;
    }
    wex__js_free(&c.path);
    free(c.targets);
    return rc;
}
