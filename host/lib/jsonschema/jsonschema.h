/*
 * A JSON Schema validator for the subset of draft 2020-12 that wex's own
 * schemas (job config, plugin manifests, reports) use, with one-line error
 * messages that say what was expected and what was found.
 *
 * Supported keywords:
 *   type (a name or an array of names; "integer" is any number without a
 *   fractional part, so 1.0 is an integer), const, enum, minimum, maximum,
 *   exclusiveMinimum, exclusiveMaximum (numeric form), minLength, maxLength
 *   (counted in Unicode code points), items (a single schema), minItems,
 *   maxItems, uniqueItems, required, properties, additionalProperties (a
 *   boolean or a schema), allOf, anyOf, oneOf, $ref (local only, see below),
 *   $defs and definitions (as $ref targets), default (annotation only, used
 *   by wex__schema_apply_defaults), and the boolean schemas true and false.
 *
 * Every other keyword (title, description, $schema, $id, examples, format,
 * pattern, patternProperties, not, if/then/else, minProperties, ...) is
 * IGNORED: its value is neither checked nor applied, so a schema using one
 * accepts documents that a full validator would reject.
 *
 * The schema is checked up front, including subschemas the document never
 * reaches; a malformed known keyword (a misspelt type name, a negative
 * minLength, an empty oneOf, an unresolvable $ref) fails the call even when
 * the document would not have needed it.
 *
 * $ref: resolved against the schema passed in as the root ("#",
 * "#/$defs/x", "#/definitions/x", any JSON Pointer with ~0/~1 escapes).
 * Remote references, "#anchor" fragments, percent-encoded pointers and $id
 * scopes are not supported. As in 2020-12, keywords next to $ref apply too.
 *
 * Known differences from python-jsonschema's Draft202012Validator (the
 * reference in tests/schema/crosscheck.py):
 *  - numbers are compared as doubles (cJSON's representation), so integers
 *    beyond 2^53 lose precision;
 *  - python's enum compares nested values with Python ==, so [1] matches
 *    an enum entry [true]; here true and 1 never compare equal, at any
 *    depth (python's const and uniqueItems agree with this);
 *  - a $ref that python would only fail to resolve when the document
 *    reaches it fails here up front;
 *  - a $ref cycle that does not descend into the document (python:
 *    RecursionError) is a malformed-schema error here once evaluation goes
 *    round it WEX__SCHEMA_MAX_REF_HOPS times; inside anyOf/oneOf, where an
 *    alternative stops at its first error, a cycle behind that error is
 *    never entered and the alternative simply fails;
 *  - limits python does not have: a document nested deeper than
 *    WEX__SCHEMA_MAX_DEPTH levels (when the schema descends that far) gets
 *    a validation error there; schemas nested deeper than
 *    WEX__SCHEMA_MAX_DEPTH levels, and evaluation nested deeper than
 *    WEX__SCHEMA_MAX_FRAMES schemas, are malformed-schema errors.
 *
 * No global state: calls are thread-safe on distinct (or read-only shared)
 * inputs. The library never prints.
 */
#ifndef WEX_HOST_JSONSCHEMA_H
#define WEX_HOST_JSONSCHEMA_H

#include <cjson/cJSON.h>
#include <stddef.h>

#define WEX__SCHEMA_MAX_DEPTH 256
#define WEX__SCHEMA_MAX_REF_HOPS 64
#define WEX__SCHEMA_MAX_FRAMES 2048

typedef struct wex__schema_error {
    /* RFC 6901 JSON Pointer into the document, "" = root; '~' and '/' in
     * names are escaped as ~0 and ~1. For a malformed schema it names the
     * schema location instead, prefixed with "schema:". */
    char *pointer;
    /* One line saying what was expected and what was found, e.g.
     * "expected integer >= 1, got 0". */
    char *message;
} wex__schema_error;

typedef struct wex__schema_result {
    size_t count;
    wex__schema_error *errors;
} wex__schema_result;

/*
 * Validates `document` against `schema` and collects every error (inside
 * anyOf/oneOf only the outcome is reported: one error at that location,
 * naming the alternative that came closest).
 *
 * Returns 0 when valid (result is empty), > 0 the number of errors in
 * *result, -EINVAL for a malformed schema or a NULL argument (then, unless
 * result is NULL, result->errors[0] explains, its pointer "schema:..."), or
 * -ENOMEM (result is empty). Always free the result with
 * wex__schema_result_free, whatever the return value.
 */
int wex__schema_validate(const cJSON *schema, const cJSON *document,
                         wex__schema_result *result);

/* Frees what wex__schema_validate stored and empties *result. NULL and an
 * already empty result are fine. */
void wex__schema_result_free(wex__schema_result *result);

/*
 * Fills in "default" values: for every object in `document` reached by a
 * schema with "properties", a missing property whose subschema has a
 * "default" (directly or behind $ref) gets a deep copy of it. Follows $ref,
 * allOf, properties (including properties it has just filled in) and items;
 * never oneOf/anyOf, where the applicable branch is ambiguous. Meant to run
 * after a successful wex__schema_validate: malformed parts are skipped and
 * descent stops silently at the limits above. Returns 0, -EINVAL for NULL
 * arguments, or -ENOMEM (the document may then be partly filled).
 */
int wex__schema_apply_defaults(const cJSON *schema, cJSON *document);

#endif /* WEX_HOST_JSONSCHEMA_H */
