/*
 * Loading the plugin under test as the host does, for every check that
 * runs its code, and the check of init and fini themselves (C13).
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"
#include "error.h"
#include "host_registry.h"

/* ---- C13: init and fini ------------------------------------------------- */

wex__plugin *conf_load_plugin(const conf_ctx *ctx, const char *manifests,
                              wex__registry **registry_p)
{
    const wex__manifest *m = &ctx->manifest;
    wex__registry *r = NULL;
    wex__plugin *p;

    *registry_p = NULL;
    setenv("WEX_PLUGIN_MANIFESTS", manifests, 1);
    if (wex__registry_scan(&r) != WEX_OK)
        return NULL;
    *registry_p = r;
    p = wex__registry_find(r, m->kind, m->name);
    if (p == NULL) {
        wex__error(WEX_ERR_INVALID, "%s",
                   r->bad_count ? r->bad[0].error
                                : "the registry did not list the plugin");
        return NULL;
    }
    if (wex__plugin_load(r, p) != WEX_OK)
        return NULL;
    return p;
}

static void init_fini_child(conf_ctx *ctx, void *arg)
{
    wex__registry *r;
    wex__plugin *p;
    wex_status st;

    (void)arg;
    conf_begin(CONF_INIT_FINI);
    p = conf_load_plugin(ctx, ctx->manifest_path, &r);
    if (p == NULL) {
        conf_report(CONF_INIT_FINI, CONF_FAIL, "the host's loader: %s",
                    wex__last_error());
        return;
    }
    /* the loader ran negotiate and init; now fini, init, and the
     * registry's own fini */
    if (p->desc->fini != NULL)
        p->desc->fini(p->plugin_state);
    p->plugin_state = NULL;
    if (p->desc->init != NULL) {
        wex__error_clear();
        st = p->desc->init(&p->services, &p->plugin_state);
        if (st != WEX_OK) {
            p->state = WEX__PLUGIN_FAILED; /* no fini for a failed init */
            conf_report(CONF_INIT_FINI, CONF_FAIL,
                        "init after fini failed (%s): %s",
                        wex_status_string(st),
                        wex__last_error()[0] ? wex__last_error()
                                             : "no message");
            return;
        }
    }
    wex__registry_free(r);
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
