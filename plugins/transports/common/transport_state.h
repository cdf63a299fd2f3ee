/* The per-load state of a transport that keeps nothing but the host's
 * services, and the descriptor's init and fini for it. The wt_ prefix
 * ("wex transport") marks helpers private to the in-tree transports that
 * link this folder's static library. */
#ifndef WEX_TRANSPORT_STATE_H
#define WEX_TRANSPORT_STATE_H

#include <wex/plugin.h>

struct wex_plugin_state {
    const wex_host_services *host;
};

wex_status wt_plugin_init(const wex_host_services *host,
                          wex_plugin_state **state_p);
void wt_plugin_fini(wex_plugin_state *state);

#endif /* WEX_TRANSPORT_STATE_H */
