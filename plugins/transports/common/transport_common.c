#include "transport_common.h"

#include <time.h>

#include "plugin_fail.h"

double wt_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static const char *side_name(uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? "source" : "destination";
}

wex_status wt_check_args(const wex_host_services *h,
                         const wex_transport_args *args)
{
    uint64_t ranks;

    if (args == NULL || args->struct_size < WEX_TRANSPORT_ARGS_SIZE_1_0)
        return WP_FAIL(h, WEX_ERR_ABI,
                       "transport args too small (%u bytes, ABI 1.0 has %u)",
                       args ? args->struct_size : 0u,
                       (unsigned)WEX_TRANSPORT_ARGS_SIZE_1_0);
    if (args->side != WEX_SIDE_SOURCE && args->side != WEX_SIDE_DESTINATION)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "side %u is neither source nor "
                       "destination",
                       args->side);
    ranks = args->side == WEX_SIDE_SOURCE ? args->source_ranks
                                          : args->destination_ranks;
    if (ranks == 0)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "%s rank %llu: the job has no %s "
                       "ranks",
                       side_name(args->side), (unsigned long long)args->rank,
                       side_name(args->side));
    if (args->rank >= ranks)
        return WP_FAIL(h, WEX_ERR_INVALID, "%s rank %llu is outside 0..%llu",
                       side_name(args->side), (unsigned long long)args->rank,
                       (unsigned long long)(ranks - 1));
    if (args->options == NULL)
        return WP_FAIL(h, WEX_ERR_INVALID, "transport args without options");
    if (args->peer_count > 0 && args->peer_ranks == NULL)
        return WP_FAIL(h, WEX_ERR_INVALID, "%llu peer ranks but no list",
                       (unsigned long long)args->peer_count);
    return WEX_OK;
}

wex_status wt_check_register(const wex_host_services *h, const char *transport,
                             uint32_t kind, const void *address, uint64_t bytes,
                             uint32_t memory_kind)
{
    uint64_t at = (uint64_t)(uintptr_t)address;

    if (memory_kind != kind)
        return WP_FAIL(h, WEX_ERR_UNSUPPORTED,
                       "memory kind %u: %s moves %s memory only", memory_kind,
                       transport,
                       kind == WEX_MEMORY_CUDA ? "CUDA device" : "host");
    if (address == NULL || bytes == 0 || at + bytes < at)
        return WP_FAIL(h, WEX_ERR_INVALID, "mem_register of %p + %llu bytes",
                       address, (unsigned long long)bytes);
    return WEX_OK;
}

wex_status wt_check_mem_key(const wex_host_services *h, uint32_t side,
                            uint64_t rank, const void *mem, const void *key,
                            const uint64_t *key_len)
{
    if (side != WEX_SIDE_DESTINATION)
        return WP_FAIL(h, WEX_ERR_UNSUPPORTED,
                       "mem_key on source rank %llu: only destination ranks "
                       "expose buffers",
                       (unsigned long long)rank);
    if (mem == NULL || key == NULL || key_len == NULL)
        return WP_FAIL(h, WEX_ERR_INVALID, "mem_key: NULL argument");
    return WEX_OK;
}

wex_status wt_key_check(const wex_host_services *h, const char *transport,
                        uint64_t peer_rank, uint64_t key_len, int decode_rc,
                        const char *why, const uint64_t *key_rank)
{
    if (key_len > WEX_TRANSPORT_KEY_MAX)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "key for destination rank %llu: %llu bytes, more than "
                       "any %s key",
                       (unsigned long long)peer_rank,
                       (unsigned long long)key_len, transport);
    if (decode_rc != 0)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "key for destination rank %llu is not a valid %s key: "
                       "%s",
                       (unsigned long long)peer_rank, transport, why);
    if (*key_rank != peer_rank)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "the key is destination rank %llu's, not rank %llu's",
                       (unsigned long long)*key_rank,
                       (unsigned long long)peer_rank);
    return WEX_OK;
}

wex_status wt_check_put(const wex_host_services *h, uint64_t rank,
                        uint64_t size, uint64_t offset, uint64_t bytes)
{
    if (!wt_span_inside(offset, bytes, size))
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "put of %llu bytes at offset %llu overruns destination "
                       "rank %llu's %llu-byte buffer",
                       (unsigned long long)bytes, (unsigned long long)offset,
                       (unsigned long long)rank, (unsigned long long)size);
    return WEX_OK;
}
