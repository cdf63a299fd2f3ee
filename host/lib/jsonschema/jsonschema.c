/*
 * JSON Schema subset validator: see jsonschema.h for the supported keywords
 * and the documented differences from python-jsonschema. The schema is
 * checked by jsonschema_check.c first, so evaluation here trusts the types
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
    v->status = wex__js_errors_push_buf(&v->fatal, &pointer, msg) < 0 ? -ENOMEM
                                                                      : -EINVAL;
    return v->status;
}

/* Evaluates `schema` against a member (key != NULL) or an element of the
 * instance, extending the JSON Pointer for the duration. */
static int descend(struct validator *v, const cJSON *schema, const cJSON *child,
                   const char *key, size_t index)
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
    cJSON_ArrayForEach(name, value)
    {
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
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
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

static int kw_ref(struct validator *v, const cJSON *schema, const cJSON *value,
                  const cJSON *inst)
{
    const cJSON *target = wex__js_resolve(v->root, value->valuestring);

    (void)schema;
    if (v->ref_hops >= WEX__SCHEMA_MAX_REF_HOPS) {
        struct wex__js_buf msg = {0};

        wex__js_puts(&msg, "$ref ");
        wex__js_quote(&msg, value->valuestring);
        wex__js_printf(&msg,
                       " followed %d times without descending into "
                       "the document (a reference cycle) at document "
                       "location ",
                       WEX__SCHEMA_MAX_REF_HOPS);
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
static int run_trials(struct validator *v, const cJSON *alts, const cJSON *inst,
                      struct wex__js_trial *trials, bool until_match)
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

    wex__js_printf(&msg,
                   "expected %s of %d alternatives to match, "
                   "0 matched; ",
                   how, cJSON_GetArraySize(alts));
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
        wex__js_printf(&msg,
                       "expected exactly one of %zu alternatives to "
                       "match, %zu matched (alternatives",
                       n, matched);
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
typedef int (*leaf_fn)(const cJSON *schema, const cJSON *value,
                       const cJSON *inst, struct wex__js_buf *msg);

/* Evaluation order, which is also the order errors are reported in. A
 * keyword is either a leaf check (jsonschema_leaf.c) or evaluates
 * subschemas here. */
static const struct keyword {
    const char *name;
    leaf_fn leaf;
    keyword_fn fn;
} keywords[] = {
    {"type", wex__js_kw_type, NULL},
    {"const", wex__js_kw_const, NULL},
    {"enum", wex__js_kw_enum, NULL},
    {"minimum", wex__js_kw_bound, NULL},
    {"exclusiveMinimum", wex__js_kw_bound, NULL},
    {"maximum", wex__js_kw_bound, NULL},
    {"exclusiveMaximum", wex__js_kw_bound, NULL},
    {"minLength", wex__js_kw_length, NULL},
    {"maxLength", wex__js_kw_length, NULL},
    {"minItems", wex__js_kw_count, NULL},
    {"maxItems", wex__js_kw_count, NULL},
    {"uniqueItems", wex__js_kw_unique, NULL},
    {"items", NULL, kw_items},
    {"required", NULL, kw_required},
    {"properties", NULL, kw_properties},
    {"additionalProperties", NULL, kw_additional},
    {"$ref", NULL, kw_ref},
    {"allOf", NULL, kw_all_of},
    {"anyOf", NULL, kw_any_of},
    {"oneOf", NULL, kw_one_of},
};

static int run_leaf(struct validator *v, leaf_fn leaf, const cJSON *schema,
                    const cJSON *value, const cJSON *inst)
{
    struct wex__js_buf msg = {0};
    int outcome = leaf(schema, value, inst, &msg);

    if (outcome == 0) {
        wex__js_free(&msg);
        return 0;
    }
    return report(v, &msg, outcome == WEX__JS_WEAK);
}

static int evaluate(struct validator *v, const cJSON *schema, const cJSON *inst)
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
        wex__js_printf(&msg,
                       "evaluation nested deeper than %d schemas "
                       "at document location ",
                       WEX__SCHEMA_MAX_FRAMES);
        wex__js_quote(&msg, v->path.len ? v->path.data : "");
        return fatal(v, "", &msg);
    }
    v->frames++;
    for (i = 0; i < sizeof(keywords) / sizeof(keywords[0]) && !stopped(v);
         i++) {
        const cJSON *value =
            cJSON_GetObjectItemCaseSensitive(schema, keywords[i].name);

        if (value && keywords[i].leaf)
            run_leaf(v, keywords[i].leaf, schema, value, inst);
        else if (value)
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
        rc = wex__js_errors_push_str(
            &errors, "schema:", "no schema or no document given");
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
