/*
 * Why no alternative of an anyOf/oneOf matched: the alternative a const or
 * enum discriminator selects, or else the one that got furthest.
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
                ? cJSON_GetObjectItemCaseSensitive(alt, "properties")
                : NULL;
    sub = cJSON_IsObject(props) ? cJSON_GetObjectItemCaseSensitive(props, name)
                                : NULL;
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
    cJSON_ArrayForEach(
        item, cJSON_GetObjectItemCaseSensitive(
                  sel, "enum")) if (wex__js_equal(item, value)) return true;
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
                ? cJSON_GetObjectItemCaseSensitive(first, "properties")
                : NULL;
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
    const cJSON *value =
        name ? cJSON_GetObjectItemCaseSensitive(inst, name) : NULL;
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
