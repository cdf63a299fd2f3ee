/* What the in-tree transports share: failing with a message, reading an
 * integer option, the monotonic clock, checking a destination's key. */
#ifndef WEX_TRANSPORT_COMMON_H
#define WEX_TRANSPORT_COMMON_H

#include <stdint.h>
#include <wex/plugin.h>

/* Sets the host's last error and evaluates to `status`. */
#define FAIL(h, status, ...)                                               \
    ((h)->set_error((h)->ctx, (status), __VA_ARGS__), (status))

/* Reads integer option `ptr` (a JSON pointer) into *v when it is set,
 * refusing values outside lo..hi with a message naming it; leaves *v,
 * the default, alone when it is not. */
wex_status wt_option_i64(const wex_host_services *h, const wex_options *o,
                         const char *ptr, int64_t lo, int64_t hi, int64_t *v);

/* Milliseconds on the monotonic clock: deadlines. */
double wt_now_ms(void);

/* The checks every transport makes of a destination's key before using
 * it, in one wording. wt_key_decoded: the key was at most
 * WEX_TRANSPORT_KEY_MAX bytes and `decode_rc` (the transport's decoder,
 * not called for a longer key) is 0, else `why` says what is wrong.
 * wt_key_rank: the key is destination rank `peer_rank`'s. */
wex_status wt_key_decoded(const wex_host_services *h, const char *transport,
                          uint64_t peer_rank, uint64_t key_len, int decode_rc,
                          const char *why);
wex_status wt_key_rank(const wex_host_services *h, uint64_t key_rank,
                       uint64_t peer_rank);

#endif /* WEX_TRANSPORT_COMMON_H */
