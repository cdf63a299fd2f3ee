/* A plugin and its manifest for the command (tool_plugins.h): the
 * loader's view of one registry entry, and manifests read on their own. */
#include <stdlib.h>

#include "error.h"
#include "registry.h"
#include "tool_plugins.h"

_Static_assert(WEX_TOOL_PLUGIN_FOUND == WEX__PLUGIN_FOUND &&
                   WEX_TOOL_PLUGIN_LOADED == WEX__PLUGIN_LOADED &&
                   WEX_TOOL_PLUGIN_FAILED == WEX__PLUGIN_FAILED,
               "the tool API names the loader's plugin states");

static void manifest_info(const wex__manifest *m, wex_tool_manifest_info *info)
{
    info->path = m->path;
    info->name = m->name;
    info->library = m->library;
    info->entry_point = m->entry_point;
    info->version = m->version;
    info->description = m->description;
    info->kind = m->kind;
    info->abi_min = m->abi_min;
    info->abi_max = m->abi_max;
    info->json = m->json;
    info->options_schema = m->options_schema;
}

wex_status wex_tool_plugin_load(wex_tool_registry *registry,
                                wex_tool_plugin *plugin)
{
    return wex__plugin_load(registry, plugin);
}

void wex_tool_plugin_get_info(const wex_tool_plugin *plugin,
                              wex_tool_plugin_info *info)
{
    manifest_info(&plugin->manifest, &info->manifest);
    info->state = plugin->state;
    info->abi_version = plugin->abi_version;
    info->error = plugin->error;
    info->shadowed = plugin->shadowed;
    info->shadowed_count = plugin->shadowed_count;
}

const wex_engine_ops *wex_tool_plugin_engine_ops(const wex_tool_plugin *p)
{
    return p->manifest.kind == WEX_KIND_ENGINE ? &p->ops.engine : NULL;
}

const wex_transport_ops *wex_tool_plugin_transport_ops(const wex_tool_plugin *p)
{
    return p->manifest.kind == WEX_KIND_TRANSPORT ? &p->ops.transport : NULL;
}

wex_plugin_state *wex_tool_plugin_state(const wex_tool_plugin *plugin)
{
    return plugin->plugin_state;
}

void wex_tool_plugin_fini(wex_tool_plugin *plugin)
{
    if (plugin->desc->fini != NULL)
        plugin->desc->fini(plugin->plugin_state);
    plugin->plugin_state = NULL;
}

wex_status wex_tool_plugin_init(wex_tool_plugin *plugin)
{
    wex_status st;

    if (plugin->desc->init == NULL)
        return WEX_OK;
    wex__error_clear();
    st = plugin->desc->init(&plugin->services, &plugin->plugin_state);
    if (st != WEX_OK)
        plugin->state = WEX__PLUGIN_FAILED; /* no fini for a failed init */
    return st;
}

wex_status wex_tool_manifest_load(const char *path,
                                  wex_tool_manifest **manifest_p)
{
    wex__manifest *m = calloc(1, sizeof(*m));
    wex_status st;

    *manifest_p = NULL;
    if (m == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
    st = wex__manifest_load(path, m);
    if (st != WEX_OK) {
        free(m);
        return st;
    }
    *manifest_p = m;
    return WEX_OK;
}

void wex_tool_manifest_get_info(const wex_tool_manifest *manifest,
                                wex_tool_manifest_info *info)
{
    manifest_info(manifest, info);
}

void wex_tool_manifest_free(wex_tool_manifest *manifest)
{
    if (manifest == NULL)
        return;
    wex__manifest_fini(manifest);
    free(manifest);
}
