/*
 * wex_options: the read-only JSON documents the host lends to plugins
 * (validated plugin options, parallel configs, a model's config.json),
 * and the opt_* services that read them by JSON Pointer.
 */
#ifndef WEX_HOST_OPTIONS_H
#define WEX_HOST_OPTIONS_H

#include <cjson/cJSON.h>
#include <wex/host.h>

struct wex_options {
    const cJSON *root; /* borrowed; the owner outlives every reader */
};

/* A view of `root`; never fails. `root` may be NULL (an empty document). */
static inline wex_options wex__options_view(const cJSON *root)
{
    wex_options view = {root};
    return view;
}

uint32_t wex__opt_type(const wex_options *doc, const char *pointer);
wex_status wex__opt_get_i64(const wex_options *doc, const char *pointer,
                            int64_t *value_p);
wex_status wex__opt_get_f64(const wex_options *doc, const char *pointer,
                            double *value_p);
wex_status wex__opt_get_bool(const wex_options *doc, const char *pointer,
                             int32_t *value_p);
wex_status wex__opt_get_str(const wex_options *doc, const char *pointer,
                            const char **value_p);
wex_status wex__opt_count(const wex_options *doc, const char *pointer,
                          uint64_t *count_p);
wex_status wex__opt_key(const wex_options *doc, const char *pointer,
                        uint64_t index, const char **key_p);

#endif /* WEX_HOST_OPTIONS_H */
