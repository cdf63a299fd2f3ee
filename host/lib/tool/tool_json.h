/*
 * JSON as libwex reads it (tool.h): files whose errors name the line and
 * column, JSON Schemas with libwex's own validator (so the command
 * refuses exactly what a job would), and the read-only documents
 * (wex_options) plugins are handed.
 */
#ifndef WEX_TOOL_JSON_H
#define WEX_TOOL_JSON_H

#include <cjson/cJSON.h>
#include <wex/host.h>

/* Reads and parses a JSON file; errors read "FILE:LINE:COLUMN: ...". A
 * file that is not regular, too big, or repeats a key is refused. */
wex_status wex_tool_json_load(const char *path, cJSON **doc_p);

/* Validates `doc` against `schema`: 0 when valid, > 0 the number of
 * problems, < 0 when the schema itself is malformed (or memory ran
 * short). *first_p (when not NULL) gets the first problem as one
 * malloc'd line, "POINTER: MESSAGE" with "(root)" for the document
 * itself, or NULL when there is none to tell; free it. */
int wex_tool_schema_validate(const cJSON *schema, const cJSON *doc,
                             char **first_p);
/* Fills in the "default" of every property `doc` lacks that `schema`
 * gives one, as libwex does to a plugin's options: 0, or < 0. */
int wex_tool_schema_apply_defaults(const cJSON *schema, cJSON *doc);

/* Checks a parallel config against the job schema's definition of one
 * ($defs/parallel), as a job's "source"/"destination" "parallel" is
 * checked; messages name `name` where a job's would name its file. */
wex_status wex_tool_check_parallel(const cJSON *parallel, const char *name);

/* The read-only document a plugin reads `root` through (its options, a
 * parallel config), for calling a plugin's ops directly; `root` (NULL
 * for an empty document) must outlive it. NULL when out of memory. */
wex_options *wex_tool_options_make(const cJSON *root);
void wex_tool_options_free(wex_options *options);

#endif /* WEX_TOOL_JSON_H */
