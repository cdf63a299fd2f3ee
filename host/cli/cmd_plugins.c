/* wex plugins: what is on the search path, and whether it loads. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "error.h"
#include "host_registry.h"
#include "registry.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex plugins [--json] [--no-load]\n"
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

static const char *status_name(const wex__plugin *p)
{
    switch (p->state) {
    case WEX__PLUGIN_LOADED: return "loaded";
    case WEX__PLUGIN_FAILED: return "failed";
    default: return "found";
    }
}

static void abi_text(const wex__manifest *m, char *buf, size_t cap)
{
    snprintf(buf, cap, "%u.%u-%u.%u", WEX_VERSION_MAJOR(m->abi_min),
             WEX_VERSION_MINOR(m->abi_min), WEX_VERSION_MAJOR(m->abi_max),
             WEX_VERSION_MINOR(m->abi_max));
}

static void print_text(const wex__registry *r)
{
    char abi[32];

    printf("%-12s %-10s %-9s %-9s %-8s %s\n", "NAME", "KIND", "VERSION",
           "ABI", "STATUS", "LIBRARY");
    for (size_t i = 0; i < r->count; i++) {
        const wex__plugin *p = r->plugins[i];
        abi_text(&p->manifest, abi, sizeof(abi));
        printf("%-12s %-10s %-9s %-9s %-8s %s\n", p->manifest.name,
               wex__kind_name(p->manifest.kind), p->manifest.version, abi,
               status_name(p), p->manifest.library);
        if (p->state == WEX__PLUGIN_FAILED)
            printf("  error: %s\n", p->error);
        for (size_t s = 0; s < p->shadowed_count; s++)
            printf("  shadows: %s\n", p->shadowed[s]);
    }
    for (size_t i = 0; i < r->bad_count; i++)
        printf("invalid manifest: %s\n", r->bad[i].error);
    if (r->count == 0 && r->bad_count == 0) {
        printf("no plugins found; searched:");
        for (size_t i = 0; i < r->search_count; i++)
            printf(" %s", r->search[i]);
        printf("%s\n", r->search_count ? "" : " (nothing)");
    }
}

static cJSON *plugin_json(const wex__plugin *p)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *shadowed = cJSON_AddArrayToObject(o, "shadowed");
    char abi[16];

    cJSON_AddStringToObject(o, "name", p->manifest.name);
    cJSON_AddStringToObject(o, "kind", wex__kind_name(p->manifest.kind));
    cJSON_AddStringToObject(o, "version", p->manifest.version);
    cJSON_AddStringToObject(o, "description", p->manifest.description);
    snprintf(abi, sizeof(abi), "%u.%u", WEX_VERSION_MAJOR(p->manifest.abi_min),
             WEX_VERSION_MINOR(p->manifest.abi_min));
    cJSON_AddStringToObject(o, "abi_min", abi);
    snprintf(abi, sizeof(abi), "%u.%u", WEX_VERSION_MAJOR(p->manifest.abi_max),
             WEX_VERSION_MINOR(p->manifest.abi_max));
    cJSON_AddStringToObject(o, "abi_max", abi);
    if (p->state == WEX__PLUGIN_LOADED) {
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

static void print_json(const wex__registry *r)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *plugins = cJSON_AddArrayToObject(doc, "plugins");
    cJSON *bad = cJSON_AddArrayToObject(doc, "invalid_manifests");
    cJSON *search = cJSON_AddArrayToObject(doc, "search_path");
    char *text;

    for (size_t i = 0; i < r->search_count; i++)
        cJSON_AddItemToArray(search, cJSON_CreateString(r->search[i]));
    for (size_t i = 0; i < r->count; i++)
        cJSON_AddItemToArray(plugins, plugin_json(r->plugins[i]));
    for (size_t i = 0; i < r->bad_count; i++) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "manifest", r->bad[i].path);
        cJSON_AddStringToObject(o, "error", r->bad[i].error);
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
    wex__registry *r = NULL;
    cli_parser p;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cli_parser_init(&p, "wex plugins", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_JSON:
            json = 1;
            break;
        case OPT_NO_LOAD:
            load = 0;
            break;
        default:
            return cli_other_option(&p, c, usage);
        }
    }
    if (wex__registry_scan(&r) != WEX_OK) {
        fprintf(stderr, "wex plugins: %s\n", wex__last_error());
        return CLI_EXIT_FAILED;
    }
    for (size_t i = 0; load && i < r->count; i++)
        if (wex__plugin_load(r, r->plugins[i]) != WEX_OK)
            failures++;
    if (json)
        print_json(r);
    else
        print_text(r);
    failures += (int)r->bad_count;
    wex__registry_free(r);
    return failures ? CLI_EXIT_FAILED : CLI_EXIT_OK;
}
