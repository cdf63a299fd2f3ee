/* wex plugins: what is on the search path, and whether it loads. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "cli.h"
#include "cli_args.h"
#include "tool_plugins.h"

static void usage(FILE *out)
{
    fprintf(out, "usage: wex plugins [--json] [--no-load]\n"
                 "\n"
                 "Lists every plugin manifest on the search path: name, kind, "
                 "version, ABI\nrange, library path and status. Each plugin is "
                 "loaded, negotiated and\ninitialised to report its status "
                 "(loaded, or failed with the reason);\n--no-load reads the "
                 "manifests only. Manifests that cannot be used and\ncopies "
                 "shadowed by an earlier plugin of the same name are listed "
                 "too.\n"
                 "\n"
                 "  --json      one JSON document on stdout\n"
                 "  --no-load   do not load the libraries\n"
                 "\n"
                 "Exit status: 0 when every manifest is valid and every plugin "
                 "loaded,\n1 otherwise.\n");
}

static const char *status_name(const wex_tool_plugin_info *p)
{
    switch (p->state) {
    case WEX_TOOL_PLUGIN_LOADED: return "loaded";
    case WEX_TOOL_PLUGIN_FAILED: return "failed";
    default: return "found";
    }
}

static void abi_text(const wex_tool_manifest_info *m, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u-%u.%u", WEX_VERSION_MAJOR(m->abi_min),
             WEX_VERSION_MINOR(m->abi_min), WEX_VERSION_MAJOR(m->abi_max),
             WEX_VERSION_MINOR(m->abi_max));
}

static void print_text(const wex_tool_registry *r)
{
    size_t count = wex_tool_registry_count(r);
    size_t bad = wex_tool_registry_bad_count(r);
    size_t searched = wex_tool_registry_search_count(r);
    const char *path, *error;
    char abi[32];

    printf("%-12s %-10s %-9s %-9s %-8s %s\n", "NAME", "KIND", "VERSION", "ABI",
           "STATUS", "LIBRARY");
    for (size_t i = 0; i < count; i++) {
        wex_tool_plugin_info p;
        wex_tool_plugin_get_info(wex_tool_registry_plugin(r, i), &p);
        abi_text(&p.manifest, abi, sizeof(abi));
        printf("%-12s %-10s %-9s %-9s %-8s %s\n", p.manifest.name,
               wex_tool_kind_name(p.manifest.kind), p.manifest.version, abi,
               status_name(&p), p.manifest.library);
        if (p.state == WEX_TOOL_PLUGIN_FAILED)
            printf("  error: %s\n", p.error);
        for (size_t s = 0; s < p.shadowed_count; s++)
            printf("  shadows: %s\n", p.shadowed[s]);
    }
    for (size_t i = 0; i < bad; i++) {
        wex_tool_registry_bad(r, i, &path, &error);
        printf("invalid manifest: %s\n", error);
    }
    if (count == 0 && bad == 0) {
        printf("no plugins found; searched:");
        for (size_t i = 0; i < searched; i++)
            printf(" %s", wex_tool_registry_search(r, i));
        printf("%s\n", searched ? "" : " (nothing)");
    }
}

static cJSON *plugin_json(const wex_tool_plugin_info *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *shadowed = cJSON_AddArrayToObject(o, "shadowed");
    char abi[16];

    cJSON_AddStringToObject(o, "name", p->manifest.name);
    cJSON_AddStringToObject(o, "kind", wex_tool_kind_name(p->manifest.kind));
    cJSON_AddStringToObject(o, "version", p->manifest.version);
    cJSON_AddStringToObject(o, "description", p->manifest.description);
    snprintf(abi, sizeof(abi), "%u.%u", WEX_VERSION_MAJOR(p->manifest.abi_min),
             WEX_VERSION_MINOR(p->manifest.abi_min));
    cJSON_AddStringToObject(o, "abi_min", abi);
    snprintf(abi, sizeof(abi), "%u.%u", WEX_VERSION_MAJOR(p->manifest.abi_max),
             WEX_VERSION_MINOR(p->manifest.abi_max));
    cJSON_AddStringToObject(o, "abi_max", abi);
    if (p->state == WEX_TOOL_PLUGIN_LOADED) {
        snprintf(abi, sizeof(abi), "%u.%u", WEX_VERSION_MAJOR(p->abi_version),
                 WEX_VERSION_MINOR(p->abi_version));
        cJSON_AddStringToObject(o, "abi", abi);
    }
    cJSON_AddStringToObject(o, "manifest", p->manifest.path);
    cJSON_AddStringToObject(o, "library", p->manifest.library);
    cJSON_AddStringToObject(o, "status", status_name(p));
    if (p->error)
        cJSON_AddStringToObject(o, "error", p->error);
    for (size_t s = 0; s < p->shadowed_count; s++)
        cJSON_AddItemToArray(shadowed, cJSON_CreateString(p->shadowed[s]));
    return o;
}

static void print_json(const wex_tool_registry *r)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *plugins = cJSON_AddArrayToObject(doc, "plugins");
    cJSON *bad = cJSON_AddArrayToObject(doc, "invalid_manifests");
    cJSON *search = cJSON_AddArrayToObject(doc, "search_path");
    const char *path, *error;
    char *text;

    for (size_t i = 0; i < wex_tool_registry_search_count(r); i++)
        cJSON_AddItemToArray(
            search, cJSON_CreateString(wex_tool_registry_search(r, i)));
    for (size_t i = 0; i < wex_tool_registry_count(r); i++) {
        wex_tool_plugin_info p;
        wex_tool_plugin_get_info(wex_tool_registry_plugin(r, i), &p);
        cJSON_AddItemToArray(plugins, plugin_json(&p));
    }
    for (size_t i = 0; i < wex_tool_registry_bad_count(r); i++) {
        cJSON *o = cJSON_CreateObject();
        wex_tool_registry_bad(r, i, &path, &error);
        cJSON_AddStringToObject(o, "manifest", path);
        cJSON_AddStringToObject(o, "error", error);
        cJSON_AddItemToArray(bad, o);
    }
    text = cJSON_Print(doc);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(doc);
}

int cmd_plugins(int argc, char **argv)
{
    enum { OPT_JSON = CLI_LONG_ONLY, OPT_NO_LOAD };
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"no-load", no_argument, NULL, OPT_NO_LOAD},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int json = 0, load = 1, failures = 0, c;
    wex_tool_registry *r = NULL;
    cli_parser p;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cli_parser_init(&p, "wex plugins", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_JSON: json = 1; break;
        case OPT_NO_LOAD: load = 0; break;
        default: return cli_other_option(&p, c, usage);
        }
    }
    if (wex_tool_registry_scan(&r) != WEX_OK) {
        fprintf(stderr, "wex plugins: %s\n", wex_last_error());
        return CLI_EXIT_FAILED;
    }
    for (size_t i = 0; load && i < wex_tool_registry_count(r); i++)
        if (wex_tool_plugin_load(r, wex_tool_registry_plugin(r, i)) != WEX_OK)
            failures++;
    if (json)
        print_json(r);
    else
        print_text(r);
    failures += (int)wex_tool_registry_bad_count(r);
    wex_tool_registry_free(r);
    return failures ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}
