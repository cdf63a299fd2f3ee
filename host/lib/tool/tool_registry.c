/* The registry of plugins for the command (tool_plugins.h): what
 * services/host_registry.h scans and plugin/registry.h holds. */
#include "host_registry.h"
#include "registry.h"
#include "tool_plugins.h"

wex_status wex_tool_registry_scan(wex_tool_registry **registry_p)
{
    return wex__registry_scan(registry_p);
}

wex_status wex_tool_registry_default(wex_tool_registry **registry_p)
{
    return wex__registry_default(registry_p);
}

void wex_tool_registry_free(wex_tool_registry *registry)
{
    wex__registry_free(registry);
}

size_t wex_tool_registry_count(const wex_tool_registry *registry)
{
    return registry->count;
}

wex_tool_plugin *wex_tool_registry_plugin(const wex_tool_registry *registry,
                                          size_t index)
{
    return registry->plugins[index];
}

wex_tool_plugin *wex_tool_registry_find(wex_tool_registry *registry,
                                        uint32_t kind, const char *name)
{
    return wex__registry_find(registry, kind, name);
}

char *wex_tool_registry_names(const wex_tool_registry *registry, uint32_t kind)
{
    return wex__registry_names(registry, kind);
}

size_t wex_tool_registry_bad_count(const wex_tool_registry *registry)
{
    return registry->bad_count;
}

void wex_tool_registry_bad(const wex_tool_registry *registry, size_t index,
                           const char **path_p, const char **error_p)
{
    *path_p = registry->bad[index].path;
    *error_p = registry->bad[index].error;
}

size_t wex_tool_registry_search_count(const wex_tool_registry *registry)
{
    return registry->search_count;
}

const char *wex_tool_registry_search(const wex_tool_registry *registry,
                                     size_t index)
{
    return registry->search[index];
}
