/* The JSON schemas libwex carries inside itself (schemas/NAME.schema.json). */
#ifndef WEX_HOST_SCHEMA_STORE_H
#define WEX_HOST_SCHEMA_STORE_H

#include <cjson/cJSON.h>
#include <wex/abi.h>

/* The raw text of schemas/NAME.schema.json, or NULL (generated file). */
const char *wex__embedded_schema(const char *name);

/* The parsed schema NAME ("manifest", "job", ...), parsed once and kept
 * for the life of the process. NULL only when NAME is unknown. */
const cJSON *wex__schema(const char *name);

/* Validates `doc` against schema NAME. On failure the thread's error
 * reads "FILE: POINTER: MESSAGE" for the first problem; when `all_p` is
 * not NULL every problem is also returned there, one "FILE: POINTER:
 * MESSAGE" line each (caller frees with free()). */
wex_status wex__schema_check(const char *name, const cJSON *doc,
                             const char *file, char **all_p);

/* The same against an arbitrary schema (a plugin's options schema);
 * `prefix` is prepended to every document pointer ("/source/options"). */
wex_status wex__schema_check_with(const cJSON *schema, const cJSON *doc,
                                  const char *file, const char *prefix,
                                  char **all_p);

#endif /* WEX_HOST_SCHEMA_STORE_H */
