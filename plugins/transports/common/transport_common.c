#include "transport_common.h"

#include <stdlib.h>
#include <time.h>

#include "transport_state.h"

wex_status wt_option_i64(const wex_host_services *h, const wex_options *o,
                         const char *ptr, int64_t lo, int64_t hi, int64_t *v)
{
    if (o == NULL || h->opt_type(o, ptr) == WEX_JSON_MISSING)
        return WEX_OK;
    if (h->opt_get_i64(o, ptr, v) != WEX_OK || *v < lo || *v > hi)
        return FAIL(h, WEX_ERR_INVALID, "%s: expected an integer in "
                    "%lld..%lld", ptr, (long long)lo, (long long)hi);
    return WEX_OK;
}

double wt_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

wex_status wt_key_decoded(const wex_host_services *h, const char *transport,
                          uint64_t peer_rank, uint64_t key_len, int decode_rc,
                          const char *why)
{
    if (key_len > WEX_TRANSPORT_KEY_MAX)
        return FAIL(h, WEX_ERR_INVALID,
                    "key for destination rank %llu: %llu bytes, more than "
                    "any %s key",
                    (unsigned long long)peer_rank,
                    (unsigned long long)key_len, transport);
    if (decode_rc != 0)
        return FAIL(h, WEX_ERR_INVALID,
                    "key for destination rank %llu is not a valid %s key: "
                    "%s",
                    (unsigned long long)peer_rank, transport, why);
    return WEX_OK;
}

wex_status wt_key_rank(const wex_host_services *h, uint64_t key_rank,
                       uint64_t peer_rank)
{
    if (key_rank != peer_rank)
        return FAIL(h, WEX_ERR_INVALID,
                    "the key is destination rank %llu's, not rank %llu's",
                    (unsigned long long)key_rank,
                    (unsigned long long)peer_rank);
    return WEX_OK;
}

wex_status wt_plugin_init(const wex_host_services *host,
                          wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    *state_p = state;
    return WEX_OK;
}

void wt_plugin_fini(wex_plugin_state *state)
{
    free(state);
}
