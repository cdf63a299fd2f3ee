/* Failing with a message: what every fallible plugin call does on its
 * way out (docs/plugins.md, PLP_HOST_5). A macro rather than a function
 * so the host's set_error checks the format against its arguments
 * (WEX_PRINTF) at every call, and so the message is formatted once, by
 * the host. The WP_ prefix: plugins/common, private to the in-tree
 * plugins (plugin_state.h). */
#ifndef WEX_PLUGIN_COMMON_PLUGIN_FAIL_H
#define WEX_PLUGIN_COMMON_PLUGIN_FAIL_H

#include <wex/plugin.h>

/* Sets the host's last error (`h` is the services pointer; one line, no
 * newline) and evaluates to `status`:
 *     return WP_FAIL(h, WEX_ERR_INVALID, "options/depth: ...");  */
#define WP_FAIL(h, status, ...)                                                \
    ((h)->set_error((h)->ctx, (status), __VA_ARGS__), (status))

#endif /* WEX_PLUGIN_COMMON_PLUGIN_FAIL_H */
