#include "engine.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "schema_store.h"

wex_status wex__engine_check_options(wex__registry *registry, const char *name,
                                     const cJSON *options)
{
    wex__plugin *plugin = wex__registry_find(registry, WEX_KIND_ENGINE, name);
    char who[96];

    if (plugin == NULL || options == NULL ||
        plugin->manifest.options_schema == NULL)
        return WEX_OK;
    snprintf(who, sizeof(who), "engine %s", name);
    return wex__schema_check_with(plugin->manifest.options_schema, options, who,
                                  "/options", NULL);
}

wex_status wex__engine_open(wex__registry *r, const char *name,
                            const wex_model *model, const cJSON *parallel,
                            const cJSON *options, wex__engine **engine_p)
{
    wex__plugin *plugin = wex__registry_find(r, WEX_KIND_ENGINE, name);
    wex_engine_args args;
    wex__engine *e;
    wex_status status;

    if (plugin == NULL) {
        char *names = wex__registry_names(r, WEX_KIND_ENGINE);
        status = wex__error(WEX_ERR_INVALID,
                            "no engine plugin named \"%s\" (available: %s)",
                            name, names && names[0] ? names : "none");
        free(names);
        return status;
    }
    status = wex__plugin_load(r, plugin);
    if (status != WEX_OK)
        return status;
    e = calloc(1, sizeof(*e));
    if (e == NULL)
        return wex__error(WEX_ERR_NOMEM, "engine: out of memory");
    e->plugin = plugin;
    e->ops = &plugin->ops.engine;
    e->model = model;
    e->parallel = wex__options_view(parallel);
    e->options = wex__options_view(options);
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.model = model;
    args.parallel = &e->parallel;
    args.options = &e->options;
    wex__error_clear();
    status = e->ops->ctx_create(plugin->plugin_state, &args, &e->ctx);
    if (status == WEX_OK)
        status = e->ops->rank_count(e->ctx, &e->ranks);
    if (status != WEX_OK) {
        if (wex__last_error()[0] == '\0')
            wex__error(status, "failed without a message");
        wex__error_prefix(status, "engine %s", name);
        wex__engine_close(e);
        return status;
    }
    *engine_p = e;
    return WEX_OK;
}

void wex__engine_close(wex__engine *e)
{
    if (e == NULL)
        return;
    if (e->ctx != NULL)
        e->ops->ctx_destroy(e->ctx);
    free(e);
}

wex_status wex__engine_describe(wex__engine *e, uint64_t rank,
                                wex__rank_layout *layout)
{
    wex_layout_builder builder = {e->model, layout};
    wex_status status;

    wex__rank_layout_init(layout, rank);
    if (rank >= e->ranks)
        return wex__error(WEX_ERR_INVALID,
                          "engine %s: rank %llu is outside 0..%llu",
                          e->plugin->manifest.name, (unsigned long long)rank,
                          (unsigned long long)(e->ranks - 1));
    wex__error_clear();
    status = e->ops->describe_rank(e->ctx, rank, &builder);
    if (status != WEX_OK) {
        if (wex__last_error()[0] == '\0')
            wex__error(status, "failed without a message");
        return wex__error_prefix(status, "engine %s", e->plugin->manifest.name);
    }
    return WEX_OK;
}
