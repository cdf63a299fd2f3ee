/* What the in-tree transports share beyond what every plugin does
 * (plugins/common: the per-load state, failing with a message, reading
 * options): the monotonic clock, and the checks every transport makes of
 * its arguments (ctx_create's, a registration's, a key's, a put's), each
 * in one wording.
 *
 * Names here start with wt_ ("wex transport"): they belong to this
 * folder's static library, private to the in-tree transports that link
 * it, and are no part of the SDK. */
#ifndef WEX_TRANSPORT_COMMON_H
#define WEX_TRANSPORT_COMMON_H

#include <stdint.h>
#include <wex/plugin.h>

/* Milliseconds on the monotonic clock: deadlines. */
double wt_now_ms(void);

/* ctx_create's arguments: at least ABI 1.0's wex_transport_args
 * (WEX_ERR_ABI otherwise, so every member of 1.0 may be read), a side
 * that is source or destination, a rank below that side's count, options
 * present (the host passes an empty object when a job sets none) and a
 * peer list when peer_count says there are peers. */
wex_status wt_check_args(const wex_host_services *h,
                         const wex_transport_args *args);

/* mem_register's arguments: memory of kind `kind` (WEX_MEMORY_HOST or
 * WEX_MEMORY_CUDA), the only one `transport` moves (WEX_ERR_UNSUPPORTED
 * otherwise), and a non-empty range that does not wrap around. */
wex_status wt_check_register(const wex_host_services *h, const char *transport,
                             uint32_t kind, const void *address, uint64_t bytes,
                             uint32_t memory_kind);

/* mem_key's arguments on a context of side `side` and rank `rank`: only
 * destination ranks expose buffers (WEX_ERR_UNSUPPORTED), and none of
 * the pointers is NULL. */
wex_status wt_check_mem_key(const wex_host_services *h, uint32_t side,
                            uint64_t rank, const void *mem, const void *key,
                            const uint64_t *key_len);

/* The checks every transport makes of a destination's key before using
 * it, in one wording: the key was at most WEX_TRANSPORT_KEY_MAX bytes,
 * `decode_rc` (the transport's decoder, not called for a longer key) is
 * 0, else `why` says what is wrong, and *key_rank (read only once the key
 * decoded) is `peer_rank`, the destination rank it was published for.
 * How a key's own bytes begin is key_header.h's. */
wex_status wt_key_check(const wex_host_services *h, const char *transport,
                        uint64_t peer_rank, uint64_t key_len, int decode_rc,
                        const char *why, const uint64_t *key_rank);

/* `bytes` at `offset` lie inside a `size`-byte buffer; no sum that could
 * overflow is formed. */
static inline int wt_span_inside(uint64_t offset, uint64_t bytes, uint64_t size)
{
    return offset <= size && bytes <= size - offset;
}

/* A put of `bytes` at `offset` into destination rank `rank`'s `size`-byte
 * buffer stays inside it (WEX_ERR_INVALID "... overruns ..."). */
wex_status wt_check_put(const wex_host_services *h, uint64_t rank,
                        uint64_t size, uint64_t offset, uint64_t bytes);

#endif /* WEX_TRANSPORT_COMMON_H */
