/*
 * JSON Schema subset validator: see jsonschema.h for the supported keywords
 * and the documented differences from python-jsonschema. The schema is
 * checked by jsonschema_support.c first, so evaluation here trusts the types
 * of known keywords' values.
 */
#include "jsonschema.h"
#include "jsonschema_priv.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct validator {
    const cJSON *root;             /* the schema; $ref resolves against it */
    struct wex__js_buf path;       /* JSON Pointer of the instance evaluated */
    struct wex__js_errors *errors; /* swapped for a scratch list in trials */
    struct wex__js_errors fatal;   /* the error explaining a negative status */
    bool first_only;               /* in an anyOf/oneOf trial: stop at one */
    int depth;                     /* document nesting of the instance */
    int ref_hops;                  /* $refs followed since the last descent */
    int frames;                    /* nested evaluate() calls: bounds stack */
    int status;                    /* 0, or -ENOMEM/-EINVAL: abandon all */
};

static int evaluate(struct validator *v, const cJSON *schema,
                    const cJSON *inst);

static bool stopped(const struct validator *v)
{
    return v->status < 0 || (v->first_only && v->errors->count > 0);
}

/* Records an error at the current instance; `weak` marks a plain type
 * mismatch, the least telling reason an alternative failed. Takes `msg`. */
static int report(struct validator *v, struct wex__js_buf *msg, bool weak)
{
    char *pointer = wex__js_strdup(&v->path);

    if (wex__js_errors_push(v->errors, pointer, wex__js_steal(msg), weak) < 0)
        v->status = -ENOMEM;
    return v->status;
}

/* Aborts the validation: the schema cannot be evaluated for this document.
 * `where` is a JSON Pointer into the schema. Takes `msg`. */
static int fatal(struct validator *v, const char *where,
                 struct wex__js_buf *msg)
{
    struct wex__js_buf pointer = {0};

    wex__js_puts(&pointer, "schema:");
    wex__js_puts(&pointer, where);
    v->status = wex__js_errors_push_buf(&v->fatal, &pointer, msg) < 0
                    ? -ENOMEM
                    : -EINVAL;
    return v->status;
}

/* Evaluates `schema` against a member (key != NULL) or an element of the
 * instance, extending the JSON Pointer for the duration. */
static int descend(struct validator *v, const cJSON *schema,
                   const cJSON *child, const char *key, size_t index)
{
    size_t mark = v->path.len;
    int hops = v->ref_hops;

    if (cJSON_IsTrue(schema))
        return 0;
    if (key)
        wex__js_token(&v->path, key);
    else
        wex__js_printf(&v->path, "/%zu", index);
    if (v->path.failed)
        return v->status = -ENOMEM;
    if (v->depth >= WEX__SCHEMA_MAX_DEPTH) {
        struct wex__js_buf msg = {0};

        wex__js_printf(&msg, "document nested deeper than %d levels",
                       WEX__SCHEMA_MAX_DEPTH);
        report(v, &msg, false);
    } else {
        /* A $ref cycle must consume document to terminate: count hops
         * afresh below this level. */
        v->depth++;
        v->ref_hops = 0;
        evaluate(v, schema, child);
        v->depth--;
        v->ref_hops = hops;
    }
    wex__js_truncate(&v->path, mark);
    return v->status;
}

/* ------------------------------------------------------------------ */
/* Keywords: each returns v->status; the instance may be of any type.  */
/* ------------------------------------------------------------------ */

static int kw_type(struct validator *v, const cJSON *schema,
                   const cJSON *value, const cJSON *inst)
{
    struct wex__js_buf msg = {0};
    const cJSON *name;

    (void)schema;
    if (cJSON_IsString(value)) {
        if (wex__js_type_matches(value->valuestring, inst))
            return 0;
    } else {
        cJSON_ArrayForEach(name, value)
            if (wex__js_type_matches(name->valuestring, inst))
                return 0;
    }
    wex__js_puts(&msg, "expected ");
    if (cJSON_IsString(value)) {
        wex__js_puts(&msg, value->valuestring);
    } else {
        cJSON_ArrayForEach(name, value) {
            if (name != value->child)
                wex__js_puts(&msg, name->next ? ", " : " or ");
            wex__js_puts(&msg, name->valuestring);
        }
    }
    wex__js_puts(&msg, ", got ");
    wex__js_describe(&msg, inst);
    return report(v, &msg, true);
}

static int kw_const(struct validator *v, const cJSON *schema,
                    const cJSON *value, const cJSON *inst)
{
    struct wex__js_buf msg = {0};

    (void)schema;
    if (wex__js_equal(value, inst))
        return 0;
    wex__js_puts(&msg, "expected ");
    wex__js_value(&msg, value);
    wex__js_puts(&msg, ", got ");
    wex__js_value(&msg, inst);
    return report(v, &msg, false);
}

/* Appends "A, B, C" (at most WEX__SCHEMA_LIST_MAX of them, then a count). */
static void append_value_list(struct wex__js_buf *sb, const cJSON *array)
{
    int n = cJSON_GetArraySize(array), i = 0;
    const cJSON *item;

    cJSON_ArrayForEach(item, array) {
        if (i == WEX__SCHEMA_LIST_MAX) {
            wex__js_printf(sb, ", ... (%d more)", n - i);
            break;
        }
        if (i++)
            wex__js_puts(sb, ", ");
        wex__js_value(sb, item);
    }
}

static int kw_enum(struct validator *v, const cJSON *schema,
                   const cJSON *value, const cJSON *inst)
{
    struct wex__js_buf msg = {0};
    const cJSON *item;
    int n = cJSON_GetArraySize(value);

    (void)schema;
    cJSON_ArrayForEach(item, value)
        if (wex__js_equal(item, inst))
            return 0;
    if (n == 0) {
        wex__js_puts(&msg, "expected nothing (the enum is empty)");
    } else {
        wex__js_puts(&msg, n == 1 ? "expected " : "expected one of ");
        append_value_list(&msg, value);
    }
    wex__js_puts(&msg, ", got ");
    wex__js_value(&msg, inst);
    return report(v, &msg, false);
}

/* minimum, maximum, exclusiveMinimum, exclusiveMaximum. */
static int kw_bound(struct validator *v, const cJSON *schema,
                    const cJSON *value, const cJSON *inst)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const char *kw = value->string, *op;
    double x, limit = value->valuedouble;
    struct wex__js_buf msg = {0};
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
    wex__js_printf(&msg, "expected %s %s ", integer ? "integer" : "number",
                   op);
    wex__js_value(&msg, value);
    wex__js_puts(&msg, ", got ");
    wex__js_value(&msg, inst);
    return report(v, &msg, false);
}

/* minLength, maxLength: in code points, as JSON Schema and python count. */
static int kw_length(struct validator *v, const cJSON *schema,
                     const cJSON *value, const cJSON *inst)
{
    bool min = !strcmp(value->string, "minLength");
    struct wex__js_buf msg = {0};
    size_t n;

    (void)schema;
    if (!cJSON_IsString(inst))
        return 0;
    n = wex__js_utf8_length(inst->valuestring);
    /* Compare as doubles: the limit may exceed any size_t. */
    if (min ? (double)n >= value->valuedouble
            : (double)n <= value->valuedouble)
        return 0;
    wex__js_printf(&msg, "expected string of at %s ", min ? "least" : "most");
    wex__js_value(&msg, value);
    wex__js_printf(&msg, " character%s, got %zu: ",
                   value->valuedouble == 1 ? "" : "s", n);
    wex__js_value(&msg, inst);
    return report(v, &msg, false);
}

/* minItems, maxItems. */
static int kw_count(struct validator *v, const cJSON *schema,
                    const cJSON *value, const cJSON *inst)
{
    bool min = !strcmp(value->string, "minItems");
    struct wex__js_buf msg = {0};
    int n;

    (void)schema;
    if (!cJSON_IsArray(inst))
        return 0;
    n = cJSON_GetArraySize(inst);
    if (min ? n >= value->valuedouble : n <= value->valuedouble)
        return 0;
    wex__js_printf(&msg, "expected at %s ", min ? "least" : "most");
    wex__js_value(&msg, value);
    wex__js_printf(&msg, " item%s, got %d",
                   value->valuedouble == 1 ? "" : "s", n);
    return report(v, &msg, false);
}

static int kw_unique(struct validator *v, const cJSON *schema,
                     const cJSON *value, const cJSON *inst)
{
    const cJSON *a, *b;
    size_t i = 0, j;

    (void)schema;
    if (!cJSON_IsTrue(value) || !cJSON_IsArray(inst))
        return 0;
    /* Quadratic, but the arrays schemas constrain this way are short. */
    for (a = inst->child; a; a = a->next, i++) {
        for (b = a->next, j = i + 1; b; b = b->next, j++) {
            struct wex__js_buf msg = {0};

            if (!wex__js_equal(a, b))
                continue;
            wex__js_printf(&msg, "expected unique items, but items %zu "
                           "and %zu are both ", i, j);
            wex__js_value(&msg, a);
            return report(v, &msg, false);
        }
    }
    return 0;
}

static int kw_items(struct validator *v, const cJSON *schema,
                    const cJSON *value, const cJSON *inst)
{
    const cJSON *item;
    size_t i = 0;

    (void)schema;
    if (!cJSON_IsArray(inst))
        return 0;
    for (item = inst->child; item && !stopped(v); item = item->next)
        descend(v, value, item, NULL, i++);
    return v->status;
}

static int kw_required(struct validator *v, const cJSON *schema,
                       const cJSON *value, const cJSON *inst)
{
    const cJSON *name;

    (void)schema;
    if (!cJSON_IsObject(inst))
        return 0;
    cJSON_ArrayForEach(name, value) {
        struct wex__js_buf msg = {0};

        if (stopped(v))
            break;
        if (cJSON_GetObjectItemCaseSensitive(inst, name->valuestring))
            continue;
        wex__js_puts(&msg, "missing required property ");
        wex__js_quote(&msg, name->valuestring);
        report(v, &msg, false);
    }
    return v->status;
}

static int kw_properties(struct validator *v, const cJSON *schema,
                         const cJSON *value, const cJSON *inst)
{
    const cJSON *prop;

    (void)schema;
    if (!cJSON_IsObject(inst))
        return 0;
    for (prop = value->child; prop && !stopped(v); prop = prop->next) {
        const cJSON *child =
            cJSON_GetObjectItemCaseSensitive(inst, prop->string);

        if (child)
            descend(v, prop, child, prop->string, 0);
    }
    return v->status;
}

static int report_unknown(struct validator *v, const cJSON *props,
                          const char *key)
{
    const char *suggestion = wex__js_suggest(key, props);
    struct wex__js_buf msg = {0};
    const cJSON *prop;
    int i = 0;

    wex__js_puts(&msg, "unknown property ");
    wex__js_quote(&msg, key);
    if (suggestion) {
        wex__js_puts(&msg, ", did you mean ");
        wex__js_quote(&msg, suggestion);
        wex__js_puts(&msg, "?");
    }
    if (!props || !props->child)
        wex__js_puts(&msg, " (no properties are allowed here)");
    else
        wex__js_puts(&msg, " (allowed: ");
    for (prop = props ? props->child : NULL; prop; prop = prop->next) {
        if (i == WEX__SCHEMA_LIST_MAX) {
            wex__js_printf(&msg, ", ... (%d more)",
                           cJSON_GetArraySize(props) - i);
            break;
        }
        if (i++)
            wex__js_puts(&msg, ", ");
        wex__js_name(&msg, prop->string);
    }
    if (i)
        wex__js_puts(&msg, ")");
    return report(v, &msg, false);
}

static int kw_additional(struct validator *v, const cJSON *schema,
                         const cJSON *value, const cJSON *inst)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema,
                                                          "properties");
    const cJSON *member;

    if (!cJSON_IsObject(inst) || cJSON_IsTrue(value))
        return 0;
    for (member = inst->child; member && !stopped(v); member = member->next) {
        if (props && cJSON_GetObjectItemCaseSensitive(props, member->string))
            continue;
        if (cJSON_IsFalse(value))
            report_unknown(v, props, member->string);
        else
            descend(v, value, member, member->string, 0);
    }
    return v->status;
}

static int kw_ref(struct validator *v, const cJSON *schema,
                  const cJSON *value, const cJSON *inst)
{
    const cJSON *target = wex__js_resolve(v->root, value->valuestring);

    (void)schema;
    if (v->ref_hops >= WEX__SCHEMA_MAX_REF_HOPS) {
        struct wex__js_buf msg = {0};

        wex__js_puts(&msg, "$ref ");
        wex__js_quote(&msg, value->valuestring);
        wex__js_printf(&msg, " followed %d times without descending into "
                       "the document (a reference cycle) at document "
                       "location ", WEX__SCHEMA_MAX_REF_HOPS);
        wex__js_quote(&msg, v->path.len ? v->path.data : "");
        return fatal(v, value->valuestring + 1, &msg);
    }
    /* The up-front check resolved every $ref, so target is never NULL. */
    v->ref_hops++;
    evaluate(v, target, inst);
    v->ref_hops--;
    return v->status;
}

static int kw_all_of(struct validator *v, const cJSON *schema,
                     const cJSON *value, const cJSON *inst)
{
    const cJSON *sub;

    (void)schema;
    for (sub = value->child; sub && !stopped(v); sub = sub->next)
        evaluate(v, sub, inst);
    return v->status;
}

/* ------------------------------------------------------------------ */
/* anyOf / oneOf                                                       */
/* ------------------------------------------------------------------ */

/* Evaluates each alternative into a scratch list that stops at the first
 * error, keeping that error per alternative for the explanation. With
 * `until_match`, stops at the first alternative that matches (anyOf). */
static int run_trials(struct validator *v, const cJSON *alts,
                      const cJSON *inst, struct wex__js_trial *trials,
                      bool until_match)
{
    struct wex__js_errors *saved = v->errors, scratch = {0};
    bool saved_first = v->first_only;
    const cJSON *sub;
    size_t i = 0;

    v->errors = &scratch;
    v->first_only = true;
    for (sub = alts->child; sub; sub = sub->next, i++) {
        evaluate(v, sub, inst);
        if (v->status < 0)
            break;
        trials[i].matched = scratch.count == 0;
        if (!trials[i].matched) {
            trials[i].pointer = scratch.items[0].pointer;
            trials[i].message = scratch.items[0].message;
            trials[i].weak = scratch.first_weak;
            scratch.items[0].pointer = scratch.items[0].message = NULL;
        }
        wex__js_errors_clear(&scratch);
        if (until_match && trials[i].matched)
            break;
    }
    wex__js_errors_clear(&scratch);
    v->errors = saved;
    v->first_only = saved_first;
    return v->status;
}

static void free_trials(struct wex__js_trial *trials, size_t n)
{
    size_t i;

    for (i = 0; trials && i < n; i++) {
        free(trials[i].pointer);
        free(trials[i].message);
    }
    free(trials);
}

/* Shared by anyOf and oneOf when no alternative matched. */
static int report_no_match(struct validator *v, const char *how,
                           const cJSON *alts, const cJSON *inst,
                           const struct wex__js_trial *trials)
{
    struct wex__js_buf msg = {0};

    wex__js_printf(&msg, "expected %s of %d alternatives to match, "
                   "0 matched; ", how, cJSON_GetArraySize(alts));
    wex__js_explain_no_match(&msg, v->root, alts, inst, trials,
                             v->path.len ? v->path.data : "");
    return report(v, &msg, false);
}

static int kw_any_of(struct validator *v, const cJSON *schema,
                     const cJSON *value, const cJSON *inst)
{
    size_t i, n = (size_t)cJSON_GetArraySize(value);
    struct wex__js_trial *trials = calloc(n, sizeof(*trials));

    (void)schema;
    if (!trials)
        return v->status = -ENOMEM;
    if (run_trials(v, value, inst, trials, true) < 0)
        goto out;
    for (i = 0; i < n; i++)
        if (trials[i].matched)
            goto out;
    report_no_match(v, "at least one", value, inst, trials);
out:
    free_trials(trials, n);
    return v->status;
}

static int kw_one_of(struct validator *v, const cJSON *schema,
                     const cJSON *value, const cJSON *inst)
{
    size_t i, matched = 0, n = (size_t)cJSON_GetArraySize(value);
    struct wex__js_trial *trials = calloc(n, sizeof(*trials));
    struct wex__js_buf msg = {0};

    (void)schema;
    if (!trials)
        return v->status = -ENOMEM;
    if (run_trials(v, value, inst, trials, false) < 0)
        goto out;
    for (i = 0; i < n; i++)
        matched += trials[i].matched;
    if (matched == 0) {
        report_no_match(v, "exactly one", value, inst, trials);
    } else if (matched > 1) {
        wex__js_printf(&msg, "expected exactly one of %zu alternatives to "
                       "match, %zu matched (alternatives", n, matched);
        for (i = 0, matched = 0; i < n; i++)
            if (trials[i].matched)
                wex__js_printf(&msg, "%s %zu", matched++ ? "," : "", i);
        wex__js_puts(&msg, ")");
        report(v, &msg, false);
    }
out:
    free_trials(trials, n);
    return v->status;
}

/* ------------------------------------------------------------------ */
/* Evaluation                                                          */
/* ------------------------------------------------------------------ */

typedef int (*keyword_fn)(struct validator *v, const cJSON *schema,
                          const cJSON *value, const cJSON *inst);

/* Evaluation order, which is also the order errors are reported in. */
static const struct keyword {
    const char *name;
    keyword_fn fn;
} keywords[] = {
    {"type", kw_type},
    {"const", kw_const},
    {"enum", kw_enum},
    {"minimum", kw_bound},
    {"exclusiveMinimum", kw_bound},
    {"maximum", kw_bound},
    {"exclusiveMaximum", kw_bound},
    {"minLength", kw_length},
    {"maxLength", kw_length},
    {"minItems", kw_count},
    {"maxItems", kw_count},
    {"uniqueItems", kw_unique},
    {"items", kw_items},
    {"required", kw_required},
    {"properties", kw_properties},
    {"additionalProperties", kw_additional},
    {"$ref", kw_ref},
    {"allOf", kw_all_of},
    {"anyOf", kw_any_of},
    {"oneOf", kw_one_of},
};

static int evaluate(struct validator *v, const cJSON *schema,
                    const cJSON *inst)
{
    struct wex__js_buf msg = {0};
    size_t i;

    if (cJSON_IsTrue(schema))
        return 0;
    if (!cJSON_IsObject(schema)) {
        wex__js_puts(&msg, "expected no value here (the schema is false), "
                           "got ");
        wex__js_value(&msg, inst);
        return report(v, &msg, true);
    }
    if (v->frames >= WEX__SCHEMA_MAX_FRAMES) {
        wex__js_printf(&msg, "evaluation nested deeper than %d schemas "
                       "at document location ", WEX__SCHEMA_MAX_FRAMES);
        wex__js_quote(&msg, v->path.len ? v->path.data : "");
        return fatal(v, "", &msg);
    }
    v->frames++;
    for (i = 0; i < sizeof(keywords) / sizeof(keywords[0]) && !stopped(v);
         i++) {
        const cJSON *value =
            cJSON_GetObjectItemCaseSensitive(schema, keywords[i].name);

        if (value)
            keywords[i].fn(v, schema, value, inst);
    }
    v->frames--;
    return v->status;
}

static void move_to_result(struct wex__js_errors *list,
                           wex__schema_result *result)
{
    result->count = list->count;
    result->errors = list->items;
    memset(list, 0, sizeof(*list));
}

int wex__schema_validate(const cJSON *schema, const cJSON *document,
                         wex__schema_result *result)
{
    struct validator v = {.root = schema};
    struct wex__js_errors errors = {0};
    int rc;

    if (!result)
        return -EINVAL;
    result->count = 0;
    result->errors = NULL;
    if (!schema || !document) {
        rc = wex__js_errors_push_str(&errors, "schema:",
                                     "no schema or no document given");
        rc = rc < 0 ? rc : -EINVAL;
        goto out;
    }
    rc = wex__js_check_schema(schema, &errors);
    if (rc < 0)
        goto out;
    v.errors = &errors;
    evaluate(&v, schema, document);
    rc = v.status;
    if (rc < 0) {
        /* Partial findings would mislead: report only why we stopped. */
        wex__js_errors_clear(&errors);
        if (rc == -EINVAL)
            errors = v.fatal;
        else
            wex__js_errors_clear(&v.fatal);
        goto out;
    }
    rc = errors.count > INT_MAX ? INT_MAX : (int)errors.count;
out:
    if (rc == -ENOMEM)
        wex__js_errors_clear(&errors);
    move_to_result(&errors, result);
    wex__js_free(&v.path);
    return rc;
}

void wex__schema_result_free(wex__schema_result *result)
{
    struct wex__js_errors list;

    if (!result)
        return;
    list.items = result->errors;
    list.count = list.cap = result->count;
    list.first_weak = false;
    wex__js_errors_clear(&list);
    result->count = 0;
    result->errors = NULL;
}

/* ------------------------------------------------------------------ */
/* Defaults                                                            */
/* ------------------------------------------------------------------ */

struct filler {
    const cJSON *root;
    int depth; /* as in struct validator */
    int ref_hops;
    int frames;
    /* Properties whose default was inserted on the way down: a default that
     * (through $ref) implies itself again would otherwise grow forever. */
    const cJSON *inserted[WEX__SCHEMA_MAX_DEPTH];
    int ninserted;
};

static int fill(struct filler *f, const cJSON *schema, cJSON *inst);

/* The default a property's subschema declares, directly or behind $ref. */
static const cJSON *find_default(const cJSON *root, const cJSON *schema)
{
    int hops;

    for (hops = 0; cJSON_IsObject(schema) && hops <= WEX__SCHEMA_MAX_REF_HOPS;
         hops++) {
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(schema, "default");
        const cJSON *ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");

        if (def)
            return def;
        if (!cJSON_IsString(ref))
            return NULL;
        schema = wex__js_resolve(root, ref->valuestring);
    }
    return NULL;
}

static int fill_child(struct filler *f, const cJSON *schema, cJSON *child)
{
    int hops = f->ref_hops, rc;

    if (f->depth >= WEX__SCHEMA_MAX_DEPTH)
        return 0;
    f->depth++;
    f->ref_hops = 0;
    rc = fill(f, schema, child);
    f->depth--;
    f->ref_hops = hops;
    return rc;
}

static bool inserted_above(const struct filler *f, const cJSON *prop)
{
    int i;

    for (i = 0; i < f->ninserted; i++)
        if (f->inserted[i] == prop)
            return true;
    return false;
}

/* Adds a copy of the property's default, and its own defaults beneath. */
static int insert_default(struct filler *f, const cJSON *prop, cJSON *inst)
{
    const cJSON *def = find_default(f->root, prop);
    cJSON *copy;
    int rc;

    if (!def || inserted_above(f, prop) ||
        f->ninserted >= WEX__SCHEMA_MAX_DEPTH)
        return 0;
    copy = cJSON_Duplicate(def, 1);
    if (!copy || !cJSON_AddItemToObject(inst, prop->string, copy)) {
        cJSON_Delete(copy);
        return -ENOMEM;
    }
    f->inserted[f->ninserted++] = prop;
    rc = fill_child(f, prop, copy);
    f->ninserted--;
    return rc;
}

static int fill_properties(struct filler *f, const cJSON *props, cJSON *inst)
{
    const cJSON *prop;
    int rc = 0;

    for (prop = props->child; prop && rc == 0; prop = prop->next) {
        cJSON *child = cJSON_GetObjectItemCaseSensitive(inst, prop->string);

        rc = child ? fill_child(f, prop, child)
                   : insert_default(f, prop, inst);
    }
    return rc;
}

static int fill(struct filler *f, const cJSON *schema, cJSON *inst)
{
    const cJSON *props, *items, *ref, *all, *sub;
    cJSON *elem;
    int rc = 0;

    if (!cJSON_IsObject(schema) || f->frames >= WEX__SCHEMA_MAX_FRAMES)
        return 0;
    f->frames++;
    /* The schema's own properties first: the most specific defaults win. */
    props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    if (cJSON_IsObject(props) && cJSON_IsObject(inst))
        rc = fill_properties(f, props, inst);
    items = cJSON_GetObjectItemCaseSensitive(schema, "items");
    if (items && cJSON_IsArray(inst))
        for (elem = inst->child; elem && rc == 0; elem = elem->next)
            rc = fill_child(f, items, elem);
    ref = cJSON_GetObjectItemCaseSensitive(schema, "$ref");
    if (rc == 0 && cJSON_IsString(ref) &&
        f->ref_hops < WEX__SCHEMA_MAX_REF_HOPS) {
        f->ref_hops++;
        rc = fill(f, wex__js_resolve(f->root, ref->valuestring), inst);
        f->ref_hops--;
    }
    all = cJSON_GetObjectItemCaseSensitive(schema, "allOf");
    if (cJSON_IsArray(all))
        for (sub = all->child; sub && rc == 0; sub = sub->next)
            rc = fill(f, sub, inst);
    f->frames--;
    return rc;
}

int wex__schema_apply_defaults(const cJSON *schema, cJSON *document)
{
    struct filler f = {.root = schema};

    if (!schema || !document)
        return -EINVAL;
    return fill(&f, schema, document);
}
