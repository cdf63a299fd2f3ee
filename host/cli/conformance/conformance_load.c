/*
 * Loading the plugin under test as the host does, for every check that
 * runs its code, and the check of init and fini themselves (C13).
 */
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "conformance.h"
#include "tool_base.h"

/* ---- C13: init and fini ------------------------------------------------- */

wex_tool_plugin *conf_load_plugin(const conf_ctx *ctx, const char *manifests,
                                  wex_tool_registry **registry_p)
{
    const wex_tool_manifest_info *m = &ctx->manifest;
    wex_tool_registry *r = NULL;
    wex_tool_plugin *p;
    const char *path, *error;

    *registry_p = NULL;
    setenv("WEX_PLUGIN_MANIFESTS", manifests, 1);
    if (wex_tool_registry_scan(&r) != WEX_OK)
        return NULL;
    *registry_p = r;
    p = wex_tool_registry_find(r, m->kind, m->name);
    if (p == NULL) {
        error = "the registry did not list the plugin";
        if (wex_tool_registry_bad_count(r) > 0)
            wex_tool_registry_bad(r, 0, &path, &error);
        wex_tool_error(WEX_ERR_INVALID, "%s", error);
        return NULL;
    }
    if (wex_tool_plugin_load(r, p) != WEX_OK)
        return NULL;
    return p;
}

static void init_fini_child(conf_ctx *ctx, void *arg)
{
    wex_tool_registry *r;
    wex_tool_plugin *p;
    wex_status st;

    (void)arg;
    conf_begin(CONF_INIT_FINI);
    p = conf_load_plugin(ctx, ctx->manifest_path, &r);
    if (p == NULL) {
        conf_report(CONF_INIT_FINI, CONF_FAIL, "the host's loader: %s",
                    wex_last_error());
        return;
    }
    /* the loader ran negotiate and init; now fini, init, and the
     * registry's own fini */
    wex_tool_plugin_fini(p);
    st = wex_tool_plugin_init(p);
    if (st != WEX_OK) {
        conf_report(CONF_INIT_FINI, CONF_FAIL,
                    "init after fini failed (%s): %s", wex_status_string(st),
                    wex_last_error()[0] ? wex_last_error() : "no message");
        return;
    }
    wex_tool_registry_free(r);
    conf_report(CONF_INIT_FINI, CONF_PASS,
                "loaded by the host (services struct_size %zu), then fini, "
                "init, fini",
                sizeof(wex_host_services));
}

void conf_check_init_fini(conf_ctx *ctx)
{
    static const int ids[] = {CONF_INIT_FINI};

    conf_run_child(ctx, "init/fini", ids, 1, init_fini_child, NULL);
}
