/* wex layout --engine NAME --help-options: what an engine's options are,
 * read from its manifest's options schema without loading the plugin. */
#include "layout_options.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "cli.h"
#include "tool_plugins.h"

/* Prints `text` wrapped at 78 columns, every line indented by `indent`. */
static void wrapped(const char *text, int indent)
{
    const int width = 78 - indent;
    const char *p = text;

    while (*p != '\0') {
        int len = (int)strlen(p), cut = len;
        if (len > width) {
            cut = width;
            while (cut > 0 && p[cut] != ' ')
                cut--;
            if (cut == 0)
                cut = width;
        }
        printf("%*s%.*s\n", indent, "", cut, p);
        p += cut;
        while (*p == ' ')
            p++;
    }
}

/* "integer 1..2147483647", "boolean", "one of \"a\", \"b\"". */
static void value_kind(const cJSON *prop, char *buf, size_t cap)
{
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(prop, "enum");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(prop, "type");
    const cJSON *lo = cJSON_GetObjectItemCaseSensitive(prop, "minimum");
    const cJSON *hi = cJSON_GetObjectItemCaseSensitive(prop, "maximum");
    size_t n = 0;

    buf[0] = '\0';
    if (cJSON_IsArray(en)) {
        const cJSON *v;
        n = (size_t)snprintf(buf, cap, "one of");
        cJSON_ArrayForEach(v, en)
        {
            char *t = cJSON_PrintUnformatted(v);
            if (n < cap)
                n += (size_t)snprintf(buf + n, cap - n, "%s %s",
                                      v == en->child ? "" : ",", t ? t : "?");
            free(t);
        }
        return;
    }
    if (cJSON_IsString(type))
        n = (size_t)snprintf(buf, cap, "%s", type->valuestring);
    if (cJSON_IsNumber(lo) && cJSON_IsNumber(hi) && n < cap)
        snprintf(buf + n, cap - n, " %.0f..%.0f", lo->valuedouble,
                 hi->valuedouble);
    else if (cJSON_IsNumber(lo) && n < cap)
        snprintf(buf + n, cap - n, " >= %.0f", lo->valuedouble);
}

static void print_option(const cJSON *prop)
{
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(prop, "description");
    const cJSON *def = cJSON_GetObjectItemCaseSensitive(prop, "default");
    char kind[512];
    char *d = def ? cJSON_PrintUnformatted(def) : NULL;

    value_kind(prop, kind, sizeof(kind));
    printf("  %s: %s%s%s\n", prop->string, kind, d ? "; default " : "",
           d ? d : "");
    free(d);
    if (cJSON_IsString(desc))
        wrapped(desc->valuestring, 6);
}

static void print_capabilities(const cJSON *manifest)
{
    const cJSON *caps =
        cJSON_GetObjectItemCaseSensitive(manifest, "capabilities");
    const cJSON *c;

    if (!cJSON_IsArray(caps))
        return;
    printf("capabilities:");
    cJSON_ArrayForEach(c, caps)
    {
        if (cJSON_IsString(c))
            printf(" %s", c->valuestring);
    }
    printf("\n");
}

int layout_print_options(const char *engine)
{
    wex_tool_registry *r = NULL;
    const wex_tool_plugin *p;
    wex_tool_plugin_info info;
    const cJSON *props, *prop;
    char *names;

    if (wex_tool_registry_scan(&r) != WEX_OK) {
        fprintf(stderr, "wex layout: %s\n", wex_last_error());
        return CLI_EXIT_USAGE;
    }
    p = wex_tool_registry_find(r, WEX_KIND_ENGINE, engine);
    if (p == NULL) {
        names = wex_tool_registry_names(r, WEX_KIND_ENGINE);
        fprintf(stderr,
                "wex layout: --engine: no engine plugin named "
                "\"%s\" (available: %s)\n",
                engine, names ? names : "");
        free(names);
        wex_tool_registry_free(r);
        return CLI_EXIT_USAGE;
    }
    wex_tool_plugin_get_info(p, &info);
    printf("engine %s %s (%s)\n", info.manifest.name, info.manifest.version,
           info.manifest.path);
    wrapped(info.manifest.description, 2);
    print_capabilities(info.manifest.json);
    props = cJSON_GetObjectItemCaseSensitive(info.manifest.options_schema,
                                             "properties");
    if (cJSON_GetArraySize(props) == 0) {
        printf("options: none\n");
    } else {
        printf("options (--options '{\"NAME\": VALUE, ...}', or a job "
               "side's \"options\"):\n");
        cJSON_ArrayForEach(prop, props) print_option(prop);
    }
    wex_tool_registry_free(r);
    return CLI_EXIT_OK;
}
