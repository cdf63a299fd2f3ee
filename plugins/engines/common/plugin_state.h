/* The per-load state every in-tree engine keeps: the host's services.
 * The ws_ prefix ("wex shared", the engines' shared helpers) marks
 * plugins/engines/common's names, private to the in-tree engine
 * adapters. */
#ifndef WEX_ENGINE_COMMON_PLUGIN_STATE_H
#define WEX_ENGINE_COMMON_PLUGIN_STATE_H

#include <wex/plugin.h>

struct wex_plugin_state {
    const wex_host_services *host;
};

/* The descriptor's init and fini. */
wex_status ws_plugin_init(const wex_host_services *host,
                          wex_plugin_state **state_p);
void ws_plugin_fini(wex_plugin_state *state);

#endif /* WEX_ENGINE_COMMON_PLUGIN_STATE_H */
