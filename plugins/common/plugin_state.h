/* The per-load state of a plugin that keeps nothing but the host's
 * services, and the descriptor's init and fini for it: every in-tree
 * plugin's but shm's, whose state also holds what is process-wide there
 * (shm_internal.h).
 *
 * Names here start with wp_ ("wex plugin"): they belong to
 * plugins/common, a static library private to the in-tree plugins of
 * every kind, and are no part of the SDK. An out-of-tree plugin writes
 * these few lines itself (samples/plugins/replicated). */
#ifndef WEX_PLUGIN_COMMON_PLUGIN_STATE_H
#define WEX_PLUGIN_COMMON_PLUGIN_STATE_H

#include <wex/plugin.h>

struct wex_plugin_state {
    const wex_host_services *host; /* valid until fini returns */
};

/* The descriptor's init and fini: .init = wp_plugin_init,
 * .fini = wp_plugin_fini. */
wex_status wp_plugin_init(const wex_host_services *host,
                          wex_plugin_state **state_p);
void wp_plugin_fini(wex_plugin_state *state);

#endif /* WEX_PLUGIN_COMMON_PLUGIN_STATE_H */
