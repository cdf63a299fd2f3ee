/*
 * Support for the JSON Schema validator (jsonschema.c): message strings,
 * error lists, JSON equality and pointers, the up-front schema check and the
 * explanation of a failed anyOf/oneOf.
 */
#include "jsonschema_priv.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Values quoted in messages are cut beyond this many bytes. */
#define VALUE_MAX 80

/* ------------------------------------------------------------------ */
/* Strings                                                             */
/* ------------------------------------------------------------------ */

void wex__js_append(struct wex__js_buf *sb, const char *s, size_t n)
{
    size_t cap;
    char *data;

    if (sb->failed)
        return;
    if (sb->len + n + 1 > sb->cap) {
        for (cap = sb->cap ? sb->cap : 64; cap < sb->len + n + 1; cap *= 2)
            ;
        data = realloc(sb->data, cap);
        if (!data) {
            sb->failed = true;
            return;
        }
        sb->data = data;
        sb->cap = cap;
    }
    memcpy(sb->data + sb->len, s, n);
    sb->len += n;
    sb->data[sb->len] = '\0';
}

void wex__js_puts(struct wex__js_buf *sb, const char *s)
{
    wex__js_append(sb, s, strlen(s));
}

void wex__js_printf(struct wex__js_buf *sb, const char *fmt, ...)
{
    char buf[256];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(buf))
        sb->failed = true;
    else
        wex__js_append(sb, buf, (size_t)n);
}

void wex__js_quote(struct wex__js_buf *sb, const char *s)
{
    const unsigned char *p;

    wex__js_puts(sb, "\"");
    for (p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            wex__js_printf(sb, "\\%c", *p);
        else if (*p == '\n')
            wex__js_puts(sb, "\\n");
        else if (*p == '\t')
            wex__js_puts(sb, "\\t");
        else if (*p < 0x20)
            wex__js_printf(sb, "\\u%04x", *p);
        else
            wex__js_append(sb, (const char *)p, 1);
    }
    wex__js_puts(sb, "\"");
}

void wex__js_name(struct wex__js_buf *sb, const char *s)
{
    const char *p;

    for (p = s; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
              (*p >= '0' && *p <= '9') || strchr("_-.$@", *p)))
            break;
    if (*s && !*p)
        wex__js_puts(sb, s);
    else
        wex__js_quote(sb, s);
}

void wex__js_value(struct wex__js_buf *sb, const cJSON *value)
{
    char *text = cJSON_PrintUnformatted(value);
    size_t n;

    if (!text) {
        sb->failed = true;
        return;
    }
    n = strlen(text);
    if (n <= VALUE_MAX) {
        wex__js_append(sb, text, n);
    } else {
        /* Back up to a character boundary so the cut stays valid UTF-8. */
        n = VALUE_MAX - 3;
        while (n > 0 && ((unsigned char)text[n] & 0xc0) == 0x80)
            n--;
        wex__js_append(sb, text, n);
        wex__js_puts(sb, "...");
    }
    cJSON_free(text);
}

static const char *json_type_name(const cJSON *value)
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

void wex__js_describe(struct wex__js_buf *sb, const cJSON *value)
{
    if (cJSON_IsNull(value)) {
        wex__js_puts(sb, "null");
        return;
    }
    wex__js_puts(sb, json_type_name(value));
    wex__js_puts(sb, " ");
    wex__js_value(sb, value);
}

void wex__js_token(struct wex__js_buf *sb, const char *key)
{
    const char *p;

    wex__js_puts(sb, "/");
    for (p = key; *p; p++) {
        if (*p == '~')
            wex__js_puts(sb, "~0");
        else if (*p == '/')
            wex__js_puts(sb, "~1");
        else
            wex__js_append(sb, p, 1);
    }
}

void wex__js_truncate(struct wex__js_buf *sb, size_t len)
{
    if (sb->failed || len >= sb->len)
        return;
    sb->len = len;
    sb->data[len] = '\0';
}

char *wex__js_strdup(const struct wex__js_buf *sb)
{
    if (sb->failed)
        return NULL;
    return strdup(sb->data ? sb->data : "");
}

char *wex__js_steal(struct wex__js_buf *sb)
{
    char *text = sb->failed ? NULL : sb->data ? sb->data : strdup("");

    if (text == sb->data)
        sb->data = NULL;
    wex__js_free(sb);
    return text;
}

void wex__js_free(struct wex__js_buf *sb)
{
    free(sb->data);
    memset(sb, 0, sizeof(*sb));
}

/* ------------------------------------------------------------------ */
/* Error lists                                                         */
/* ------------------------------------------------------------------ */

int wex__js_errors_push(struct wex__js_errors *list, char *pointer,
                        char *message, bool weak)
{
    wex__schema_error *items;
    size_t cap;

    if (!pointer || !message)
        goto fail;
    if (list->count == list->cap) {
        cap = list->cap ? list->cap * 2 : 8;
        items = realloc(list->items, cap * sizeof(*items));
        if (!items)
            goto fail;
        list->items = items;
        list->cap = cap;
    }
    if (list->count == 0)
        list->first_weak = weak;
    list->items[list->count].pointer = pointer;
    list->items[list->count].message = message;
    list->count++;
    return 0;
fail:
    free(pointer);
    free(message);
    return -ENOMEM;
}

int wex__js_errors_push_buf(struct wex__js_errors *list,
                            struct wex__js_buf *pointer,
                            struct wex__js_buf *message)
{
    return wex__js_errors_push(list, wex__js_steal(pointer),
                               wex__js_steal(message), false);
}

int wex__js_errors_push_str(struct wex__js_errors *list, const char *pointer,
                            const char *message)
{
    return wex__js_errors_push(list, strdup(pointer), strdup(message), false);
}

void wex__js_errors_clear(struct wex__js_errors *list)
{
    size_t i;

    for (i = 0; i < list->count; i++) {
        free(list->items[i].pointer);
        free(list->items[i].message);
    }
    free(list->items);
    memset(list, 0, sizeof(*list));
}

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
    case cJSON_Number:
        return a->valuedouble == b->valuedouble;
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
        cJSON_ArrayForEach(x, a) {
            y = cJSON_GetObjectItemCaseSensitive(b, x->string);
            if (!y || !equal_at(x, y, depth + 1))
                return false;
        }
        return true;
    default: /* null, true, false: the type is the value */
        return true;
    }
}

bool wex__js_equal(const cJSON *a, const cJSON *b)
{
    return equal_at(a, b, 0);
}

/* Whole-number check without libm: every finite double of magnitude
 * 2^53 or more is a whole number, and smaller ones fit a long long. */
static bool is_integral(double d)
{
    if (!isfinite(d))
        return false;
    if (d >= 9007199254740992.0 || d <= -9007199254740992.0)
        return true;
    return d == (double)(long long)d;
}

bool wex__js_type_matches(const char *name, const cJSON *value)
{
    if (!strcmp(name, "integer"))
        return cJSON_IsNumber(value) && is_integral(value->valuedouble);
    return !strcmp(name, json_type_name(value));
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

/* Whether the JSON Pointer token tok[0..n) (with ~0/~1 escapes) is `key`. */
static bool token_is(const char *tok, size_t n, const char *key)
{
    size_t i = 0;
    char c;

    while (i < n) {
        c = tok[i++];
        if (c == '~') {
            if (i == n || (tok[i] != '0' && tok[i] != '1'))
                return false;
            c = tok[i++] == '0' ? '~' : '/';
        }
        if (*key++ != c)
            return false;
    }
    return *key == '\0';
}

static const cJSON *pointer_step(const cJSON *node, const char *tok, size_t n)
{
    const cJSON *child;
    long index = 0;
    size_t i;

    if (cJSON_IsObject(node)) {
        cJSON_ArrayForEach(child, node)
            if (child->string && token_is(tok, n, child->string))
                return child;
        return NULL;
    }
    /* Array indices are plain decimals without leading zeros. */
    if (!cJSON_IsArray(node) || n == 0 || (n > 1 && tok[0] == '0'))
        return NULL;
    for (i = 0; i < n; i++) {
        if (tok[i] < '0' || tok[i] > '9' || index > INT_MAX / 10)
            return NULL;
        index = index * 10 + (tok[i] - '0');
    }
    return index > INT_MAX ? NULL : cJSON_GetArrayItem(node, (int)index);
}

const cJSON *wex__js_resolve(const cJSON *root, const char *ref)
{
    const char *p, *end;

    if (!ref || ref[0] != '#')
        return NULL;
    for (p = ref + 1; root && *p; p = end) {
        if (*p != '/')
            return NULL;
        end = strchr(p + 1, '/');
        if (!end)
            end = p + strlen(p);
        root = pointer_step(root, p + 1, (size_t)(end - p - 1));
    }
    return root;
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
        target = cJSON_IsString(ref)
                     ? wex__js_resolve(root, ref->valuestring) : NULL;
        if (!target)
            break;
        schema = target;
    }
    return schema;
}

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
    static const char *const names[] = {"array", "boolean", "integer", "null",
                                        "number", "object", "string"};
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

#define TYPE_NAME "a type name (array, boolean, integer, null, number, " \
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
        is_integral(value->valuedouble))
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

/* ------------------------------------------------------------------ */
/* Explaining a failed anyOf/oneOf                                     */
/* ------------------------------------------------------------------ */

/* The subschema for property `name` in alternative `alt`, when it pins the
 * value down with const or enum (a discriminator such as "kind"). */
static const cJSON *selector(const cJSON *root, const cJSON *alt,
                             const char *name)
{
    const cJSON *props, *sub;

    alt = wex__js_deref(root, alt);
    props = cJSON_IsObject(alt)
                ? cJSON_GetObjectItemCaseSensitive(alt, "properties") : NULL;
    sub = cJSON_IsObject(props)
              ? cJSON_GetObjectItemCaseSensitive(props, name) : NULL;
    sub = wex__js_deref(root, sub);
    if (!cJSON_IsObject(sub))
        return NULL;
    if (cJSON_GetObjectItemCaseSensitive(sub, "const") ||
        cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(sub, "enum")))
        return sub;
    return NULL;
}

static bool selector_accepts(const cJSON *sel, const cJSON *value)
{
    const cJSON *pinned = cJSON_GetObjectItemCaseSensitive(sel, "const");
    const cJSON *item;

    if (pinned)
        return wex__js_equal(pinned, value);
    cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(sel, "enum"))
        if (wex__js_equal(item, value))
            return true;
    return false;
}

/* A property that every alternative pins with const/enum, or NULL. */
static const char *find_discriminator(const cJSON *root, const cJSON *alts)
{
    const cJSON *first, *props, *prop, *alt;

    if (!alts->child || !alts->child->next)
        return NULL;
    first = wex__js_deref(root, alts->child);
    props = cJSON_IsObject(first)
                ? cJSON_GetObjectItemCaseSensitive(first, "properties") : NULL;
    if (!cJSON_IsObject(props))
        return NULL;
    for (prop = props->child; prop; prop = prop->next) {
        for (alt = alts->child; alt; alt = alt->next)
            if (!selector(root, alt, prop->string))
                break;
        if (!alt)
            return prop->string;
    }
    return NULL;
}

/* Appends one of a bounded list of values; *n counts all offered. */
static void append_listed(struct wex__js_buf *sb, const cJSON *item, int *n)
{
    if (*n < WEX__SCHEMA_LIST_MAX) {
        wex__js_puts(sb, *n ? ", " : "");
        wex__js_value(sb, item);
    }
    (*n)++;
}

/* The values the discriminator takes across all alternatives. */
static void append_selector_values(struct wex__js_buf *sb, const cJSON *root,
                                   const cJSON *alts, const char *name)
{
    const cJSON *alt, *sel, *pinned, *item;
    int n = 0;

    for (alt = alts->child; alt; alt = alt->next) {
        sel = selector(root, alt, name);
        pinned = cJSON_GetObjectItemCaseSensitive(sel, "const");
        if (pinned) {
            append_listed(sb, pinned, &n);
            continue;
        }
        cJSON_ArrayForEach(item, cJSON_GetObjectItemCaseSensitive(sel, "enum"))
            append_listed(sb, item, &n);
    }
    if (n > WEX__SCHEMA_LIST_MAX)
        wex__js_printf(sb, ", ... (%d more)", n - WEX__SCHEMA_LIST_MAX);
}

/* The alternative whose selector accepts `value`: its index, -1 for none,
 * -2 when several do (then it does not discriminate). */
static int select_alternative(const cJSON *root, const cJSON *alts,
                              const char *name, const cJSON *value)
{
    const cJSON *alt;
    int i = 0, pick = -1;

    for (alt = alts->child; alt; alt = alt->next, i++) {
        if (!selector_accepts(selector(root, alt, name), value))
            continue;
        if (pick >= 0)
            return -2;
        pick = i;
    }
    return pick;
}

/* The alternative that got furthest: its first error lies deepest in the
 * document; at equal depth a bare type mismatch counts as less far. */
static size_t best_trial(const struct wex__js_trial *trials, size_t n)
{
    size_t i, best = 0, score, best_score = 0;

    for (i = 0; i < n; i++) {
        score = 2 * strlen(trials[i].pointer) + !trials[i].weak;
        if (score > best_score) {
            best = i;
            best_score = score;
        }
    }
    return best;
}

/* "failed at /p: message", quoting the pointer if a name in it would break
 * the line. */
static void append_failure(struct wex__js_buf *sb,
                           const struct wex__js_trial *trial, const char *here)
{
    const char *p;

    wex__js_puts(sb, "failed");
    if (strcmp(trial->pointer, here) != 0) {
        for (p = trial->pointer; *p && (unsigned char)*p >= 0x20; p++)
            ;
        wex__js_puts(sb, " at ");
        if (*p)
            wex__js_quote(sb, trial->pointer);
        else
            wex__js_puts(sb, trial->pointer);
    }
    wex__js_puts(sb, ": ");
    wex__js_puts(sb, trial->message);
}

void wex__js_explain_no_match(struct wex__js_buf *msg, const cJSON *root,
                              const cJSON *alts, const cJSON *inst,
                              const struct wex__js_trial *trials,
                              const char *here)
{
    const char *name =
        cJSON_IsObject(inst) ? find_discriminator(root, alts) : NULL;
    const cJSON *value = name
                             ? cJSON_GetObjectItemCaseSensitive(inst, name)
                             : NULL;
    int pick = value ? select_alternative(root, alts, name, value) : -2;

    if (name && !value) {
        wex__js_puts(msg, "missing property ");
        wex__js_quote(msg, name);
        wex__js_puts(msg, ", which selects the alternative (one of ");
        append_selector_values(msg, root, alts, name);
        wex__js_puts(msg, ")");
    } else if (pick == -1) {
        wex__js_puts(msg, "property ");
        wex__js_quote(msg, name);
        wex__js_puts(msg, " selects the alternative and must be one of ");
        append_selector_values(msg, root, alts, name);
        wex__js_puts(msg, ", got ");
        wex__js_value(msg, value);
    } else if (pick >= 0) {
        wex__js_quote(msg, name);
        wex__js_puts(msg, " is ");
        wex__js_value(msg, value);
        wex__js_printf(msg, ", which selects alternative %d; it ", pick);
        append_failure(msg, &trials[pick], here);
    } else {
        size_t best = best_trial(trials, (size_t)cJSON_GetArraySize(alts));

        wex__js_printf(msg, "alternative %zu ", best);
        append_failure(msg, &trials[best], here);
    }
}
