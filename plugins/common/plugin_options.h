/* Reading a plugin's options (the `options` of its entry in a job
 * config), the same way in every kind: an option that is absent leaves
 * the caller's default alone; one that is set but not what the plugin
 * takes is refused with WEX_ERR_INVALID and one line naming it,
 * "options/<name>: expected ...". The host has already checked the
 * options against the manifest's schema, so these refusals guard against
 * a host or a caller that did not.
 *
 * `ptr` is a JSON pointer into the options ("/flush_timeout_ms"); a NULL
 * document reads as empty. The wp_ prefix: plugins/common, private to the
 * in-tree plugins (plugin_state.h). */
#ifndef WEX_PLUGIN_COMMON_PLUGIN_OPTIONS_H
#define WEX_PLUGIN_COMMON_PLUGIN_OPTIONS_H

#include <stdint.h>
#include <wex/plugin.h>

/* An integer in lo..hi. */
wex_status wp_option_i64(const wex_host_services *h, const wex_options *o,
                         const char *ptr, int64_t lo, int64_t hi, int64_t *v);

/* true or false, as 1 or 0. */
wex_status wp_option_bool(const wex_host_services *h, const wex_options *o,
                          const char *ptr, int32_t *v);

/* A string among `names` (NULL-terminated), as its index there. */
wex_status wp_option_enum(const wex_host_services *h, const wex_options *o,
                          const char *ptr, const char *const *names, int *v);

#endif /* WEX_PLUGIN_COMMON_PLUGIN_OPTIONS_H */
