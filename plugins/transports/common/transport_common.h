/* What the in-tree transports share: failing with a message, reading an
 * integer option, the monotonic clock. */
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

#endif /* WEX_TRANSPORT_COMMON_H */
