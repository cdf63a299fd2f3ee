#include "plugin_options.h"

#include <stdio.h>
#include <string.h>

#include "plugin_fail.h"

static int absent(const wex_host_services *h, const wex_options *o,
                  const char *ptr)
{
    return o == NULL || h->opt_type(o, ptr) == WEX_JSON_MISSING;
}

wex_status wp_option_i64(const wex_host_services *h, const wex_options *o,
                         const char *ptr, int64_t lo, int64_t hi, int64_t *v)
{
    char range[64], got[40] = "";
    int64_t n;

    if (absent(h, o, ptr))
        return WEX_OK;
    if (h->opt_get_i64(o, ptr, &n) == WEX_OK) {
        if (n >= lo && n <= hi) {
            *v = n;
            return WEX_OK;
        }
        snprintf(got, sizeof(got), ", got %lld", (long long)n);
    }
    if (hi == INT64_MAX)
        snprintf(range, sizeof(range), "of at least %lld", (long long)lo);
    else
        snprintf(range, sizeof(range), "from %lld to %lld", (long long)lo,
                 (long long)hi);
    return WP_FAIL(h, WEX_ERR_INVALID, "options%s: expected an integer %s%s",
                   ptr, range, got);
}

wex_status wp_option_bool(const wex_host_services *h, const wex_options *o,
                          const char *ptr, int32_t *v)
{
    int32_t b;

    if (absent(h, o, ptr))
        return WEX_OK;
    if (h->opt_get_bool(o, ptr, &b) != WEX_OK)
        return WP_FAIL(h, WEX_ERR_INVALID, "options%s: expected true or false",
                       ptr);
    *v = b != 0;
    return WEX_OK;
}

wex_status wp_option_enum(const wex_host_services *h, const wex_options *o,
                          const char *ptr, const char *const *names, int *v)
{
    const char *got = NULL;
    char expected[256];
    size_t used = 0;

    if (absent(h, o, ptr))
        return WEX_OK;
    if (h->opt_get_str(o, ptr, &got) == WEX_OK)
        for (int i = 0; names[i] != NULL; i++)
            if (strcmp(got, names[i]) == 0) {
                *v = i;
                return WEX_OK;
            }
    /* "auto", "put", "am" */
    expected[0] = '\0';
    for (int i = 0; names[i] != NULL && used < sizeof(expected); i++)
        used += (size_t)snprintf(expected + used, sizeof(expected) - used,
                                 "%s\"%s\"", i ? ", " : "", names[i]);
    return WP_FAIL(h, WEX_ERR_INVALID, "options%s: expected one of %s%s%s%s",
                   ptr, expected, got ? ", got \"" : "", got ? got : "",
                   got ? "\"" : "");
}
