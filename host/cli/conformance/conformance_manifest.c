/*
 * The checks of what the host reads without loading anything: the
 * manifest (C01) and the options schema in it (C02).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wex/wex.h>

#include "conformance.h"
#include "tool_json.h"

/* ---- C01: the manifest -------------------------------------------------- */

void conf_check_manifest(conf_ctx *ctx)
{
    const wex_tool_manifest_info *m = &ctx->manifest;

    if (wex_tool_manifest_load(ctx->manifest_path, &ctx->manifest_file) !=
        WEX_OK) {
        conf_set(ctx, CONF_MANIFEST, CONF_FAIL, "%s", wex_last_error());
        return;
    }
    wex_tool_manifest_get_info(ctx->manifest_file, &ctx->manifest);
    ctx->manifest_ok = 1;
    if (access(m->library, R_OK) != 0) {
        conf_set(ctx, CONF_MANIFEST, CONF_FAIL,
                 "%s: library %s (named by /library_path): %s", m->path,
                 m->library, strerror(errno));
        return;
    }
    conf_set(ctx, CONF_MANIFEST, CONF_PASS,
             "%s plugin '%s' %s, ABI %u.%u..%u.%u", wex_tool_kind_name(m->kind),
             m->name, m->version, WEX_VERSION_MAJOR(m->abi_min),
             WEX_VERSION_MINOR(m->abi_min), WEX_VERSION_MAJOR(m->abi_max),
             WEX_VERSION_MINOR(m->abi_max));
}

/* ---- C02: the options schema -------------------------------------------- */

/* First error of validating `doc` against `schema`: 0 valid, 1 invalid,
 * -1 malformed schema; `why` gets "POINTER: MESSAGE". */
static int validate(const cJSON *schema, const cJSON *doc, char *why,
                    size_t cap)
{
    char *first = NULL;
    int rc = wex_tool_schema_validate(schema, doc, &first);

    if (rc != 0 && first != NULL)
        snprintf(why, cap, "%s", first);
    else if (rc < 0)
        snprintf(why, cap, "the validator failed (%d)", rc);
    free(first);
    return rc == 0 ? 0 : rc > 0 ? 1 : -1;
}

/* "type" absent, "object", or a list holding "object". */
static int allows_objects(const cJSON *schema)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(schema, "type");
    const cJSON *t;

    if (type == NULL)
        return 1;
    if (cJSON_IsString(type))
        return strcmp(type->valuestring, "object") == 0;
    cJSON_ArrayForEach(t, type) if (cJSON_IsString(t) &&
                                    strcmp(t->valuestring, "object") ==
                                        0) return 1;
    return 0;
}

void conf_check_options_schema(conf_ctx *ctx)
{
    const cJSON *schema = ctx->manifest.options_schema, *props, *prop;
    cJSON *empty = cJSON_CreateObject();
    char why[CONF_REASON_MAX - 64];
    int rc;

    if (schema == NULL) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "no /options_schema: the host cannot check the plugin's "
                 "options in job configs");
        goto out;
    }
    if (!cJSON_IsObject(schema)) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "/options_schema is a boolean schema; expected a JSON "
                 "Schema object describing the options object");
        goto out;
    }
    if (!allows_objects(schema)) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "/options_schema/type does not allow an object, but "
                 "options are always a JSON object");
        goto out;
    }
    rc = validate(schema, empty, why, sizeof(why));
    if (rc < 0) {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                 "/options_schema is not a schema the host can use: %s", why);
        goto out;
    }
    /* every property's own default is valid for it */
    props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    cJSON_ArrayForEach(prop, props)
    {
        const cJSON *dflt = cJSON_GetObjectItemCaseSensitive(prop, "default");
        if (dflt != NULL && validate(prop, dflt, why, sizeof(why)) != 0) {
            conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                     "/options_schema/properties/%s/default does not "
                     "validate against its own schema: %s",
                     prop->string, why);
            goto out;
        }
    }
    if (rc == 0) {
        /* {} is valid: filled with the defaults it must stay valid */
        if (wex_tool_schema_apply_defaults(schema, empty) != 0 ||
            validate(schema, empty, why, sizeof(why)) != 0) {
            conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_FAIL,
                     "{} with the schema's defaults filled in does not "
                     "validate: %s",
                     why);
            goto out;
        }
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_PASS,
                 "{} and its defaults validate");
    } else {
        conf_set(ctx, CONF_OPTIONS_SCHEMA, CONF_PASS,
                 "the schema compiles; {} is refused (%s)", why);
    }
out:
    cJSON_Delete(empty);
}
