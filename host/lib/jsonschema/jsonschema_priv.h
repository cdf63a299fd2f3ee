/*
 * Internals shared by the validator's files: jsonschema.c (evaluation),
 * jsonschema_leaf.c (keywords that need no subschema),
 * jsonschema_defaults.c, jsonschema_text.c (message strings, error
 * lists), jsonschema_values.c (equality, types, $ref targets),
 * jsonschema_check.c (the up-front schema check) and
 * jsonschema_explain.c (why no anyOf/oneOf alternative matched). Not for
 * use elsewhere.
 */
#ifndef WEX_HOST_JSONSCHEMA_PRIV_H
#define WEX_HOST_JSONSCHEMA_PRIV_H

#include <stdbool.h>
#include <stddef.h>

#include <cjson/cJSON.h>
#include <wex/abi.h>

#include "jsonschema.h"

/* The most enum values or property names one message lists. */
#define WEX__SCHEMA_LIST_MAX 12

/* Growable NUL-terminated string. A failed allocation sticks (`failed`),
 * so a message is built with plain calls and checked once at the end. */
struct wex__js_buf {
    char *data; /* NULL until something is appended */
    size_t len;
    size_t cap;
    bool failed;
};

void wex__js_append(struct wex__js_buf *sb, const char *s, size_t n);
void wex__js_puts(struct wex__js_buf *sb, const char *s);
/* For short, fixed-shape text only (numbers, indices, keywords): output
 * past 255 bytes marks the buffer failed. Never pass document strings. */
void wex__js_printf(struct wex__js_buf *sb, const char *fmt, ...)
    WEX_PRINTF(2, 3);
/* As a JSON string literal, so any text stays on one line. */
void wex__js_quote(struct wex__js_buf *sb, const char *s);
/* A property name: bare when plain, else as wex__js_quote. */
void wex__js_name(struct wex__js_buf *sb, const char *s);
/* Compact JSON, cut (on a UTF-8 boundary) beyond a message-friendly size. */
void wex__js_value(struct wex__js_buf *sb, const cJSON *value);
/* Type and value, e.g. `string "abc"`, `number 1.5`, `null`. */
void wex__js_describe(struct wex__js_buf *sb, const cJSON *value);
/* "/" and `key` with '~' and '/' escaped as ~0 and ~1 (RFC 6901). */
void wex__js_token(struct wex__js_buf *sb, const char *key);
void wex__js_truncate(struct wex__js_buf *sb, size_t len);
/* A malloc'd copy ("" when empty), NULL when out of memory or failed. */
char *wex__js_strdup(const struct wex__js_buf *sb);
/* Hands over the text (NULL when failed) and empties the buffer. */
char *wex__js_steal(struct wex__js_buf *sb);
void wex__js_free(struct wex__js_buf *sb);

/* A wex__schema_error array under construction. */
struct wex__js_errors {
    wex__schema_error *items;
    size_t count;
    size_t cap;
    bool first_weak; /* items[0] is a bare type mismatch */
};

/* Takes ownership of both strings, also on failure (-ENOMEM). */
int wex__js_errors_push(struct wex__js_errors *list, char *pointer,
                        char *message, bool weak);
/* Takes both buffers' text; -ENOMEM if either failed. */
int wex__js_errors_push_buf(struct wex__js_errors *list,
                            struct wex__js_buf *pointer,
                            struct wex__js_buf *message);
int wex__js_errors_push_str(struct wex__js_errors *list, const char *pointer,
                            const char *message);
void wex__js_errors_clear(struct wex__js_errors *list);

/* JSON Schema equality: numbers by value (1 == 1.0), true/false never equal
 * to numbers, objects regardless of member order. */
bool wex__js_equal(const cJSON *a, const cJSON *b);
/* A finite number without a fractional part (and any beyond 2^53). */
bool wex__js_is_integral(double d);
/* The JSON Schema type name of `value` ("invalid" for none). */
const char *wex__js_type_name(const cJSON *value);
/* `name` is a JSON Schema type name; "integer" accepts 1.0. */
bool wex__js_type_matches(const char *name, const cJSON *value);
/* Unicode code points in a UTF-8 string. */
size_t wex__js_utf8_length(const char *s);

/* The name in `props` (an object of schemas) that `key` most likely
 * misspells, or NULL when none is close. */
const char *wex__js_suggest(const char *key, const cJSON *props);

/* The node a local $ref ("#", "#/a/b~1c/0") names in `root`, or NULL. */
const cJSON *wex__js_resolve(const cJSON *root, const char *ref);
/* Follows $ref from schemas without "properties" of their own (a bounded
 * number of hops) and returns where it ends; for finding discriminators. */
const cJSON *wex__js_deref(const cJSON *root, const cJSON *schema);

/* Checks that every known keyword in `schema` (and in every subschema and
 * $ref target) has a well-formed value. On failure pushes one error with a
 * "schema:" pointer and returns -EINVAL (or -ENOMEM). */
int wex__js_check_schema(const cJSON *schema, struct wex__js_errors *errors);

/* How one anyOf/oneOf alternative fared; the error is the first it hit. */
struct wex__js_trial {
    bool matched;
    bool weak;
    char *pointer;
    char *message;
};

/* Appends why no alternative matched: the alternative a const/enum
 * discriminator selects, or else the one that got furthest. `here` is the
 * instance's pointer. */
void wex__js_explain_no_match(struct wex__js_buf *msg, const cJSON *root,
                              const cJSON *alts, const cJSON *inst,
                              const struct wex__js_trial *trials,
                              const char *here);

/* ---- leaf keywords (jsonschema_leaf.c) ------------------------------ */

#define WEX__JS_WEAK 1   /* failed: the instance has another type */
#define WEX__JS_FAILED 2 /* failed for any other reason */
int wex__js_kw_type(const cJSON *schema, const cJSON *value, const cJSON *inst,
                    struct wex__js_buf *msg);
int wex__js_kw_const(const cJSON *schema, const cJSON *value, const cJSON *inst,
                     struct wex__js_buf *msg);
int wex__js_kw_enum(const cJSON *schema, const cJSON *value, const cJSON *inst,
                    struct wex__js_buf *msg);
/* minimum, maximum, exclusiveMinimum, exclusiveMaximum */
int wex__js_kw_bound(const cJSON *schema, const cJSON *value, const cJSON *inst,
                     struct wex__js_buf *msg);
/* minLength, maxLength */
int wex__js_kw_length(const cJSON *schema, const cJSON *value,
                      const cJSON *inst, struct wex__js_buf *msg);
/* minItems, maxItems */
int wex__js_kw_count(const cJSON *schema, const cJSON *value, const cJSON *inst,
                     struct wex__js_buf *msg);
int wex__js_kw_unique(const cJSON *schema, const cJSON *value,
                      const cJSON *inst, struct wex__js_buf *msg);

#endif /* WEX_HOST_JSONSCHEMA_PRIV_H */
