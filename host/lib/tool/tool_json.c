/* JSON files, schemas and plugin documents for the command
 * (tool_json.h): libwex's json and jsonschema folders. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "json_file.h"
#include "json_pointer.h"
#include "jsonschema.h"
#include "options.h"
#include "schema_store.h"
#include "tool_json.h"

wex_status wex_tool_json_load(const char *path, cJSON **doc_p)
{
    return wex__json_load(path, doc_p);
}

/* "POINTER: MESSAGE" of the first error, malloc'd, or NULL. */
static char *first_error(const wex__schema_result *res)
{
    const char *pointer, *message;
    char *line;
    size_t cap;

    if (res->count == 0)
        return NULL;
    pointer = res->errors[0].pointer[0] ? res->errors[0].pointer : "(root)";
    message = res->errors[0].message;
    cap = strlen(pointer) + strlen(message) + 3;
    line = malloc(cap);
    if (line != NULL)
        snprintf(line, cap, "%s: %s", pointer, message);
    return line;
}

int wex_tool_schema_validate(const cJSON *schema, const cJSON *doc,
                             char **first_p)
{
    wex__schema_result res = {0, NULL};
    int rc = wex__schema_validate(schema, doc, &res);

    if (first_p != NULL)
        *first_p = rc != 0 ? first_error(&res) : NULL;
    wex__schema_result_free(&res);
    return rc;
}

int wex_tool_schema_apply_defaults(const cJSON *schema, cJSON *doc)
{
    return wex__schema_apply_defaults(schema, doc);
}

wex_status wex_tool_check_parallel(const cJSON *parallel, const char *name)
{
    const cJSON *schema =
        wex__json_pointer_get(wex__schema("job"), "/$defs/parallel");

    /* the job schema always has it; without it there is nothing to
     * hold the config to */
    if (schema == NULL)
        return WEX_OK;
    return wex__schema_check_with(schema, parallel, name, "", NULL);
}

wex_options *wex_tool_options_make(const cJSON *root)
{
    wex_options *options = malloc(sizeof(*options));

    if (options != NULL)
        *options = wex__options_view(root);
    return options;
}

void wex_tool_options_free(wex_options *options)
{
    free(options);
}
