#include "nccl_key.h"

#include <limits.h>
#include <string.h>

#include <wex/transport.h>

#include "../common/key_header.h"

size_t nccl_key_encode(const nccl_key *key, void *out, size_t cap)
{
    uint8_t *p = out;

    if (cap < NCCL_KEY_BYTES)
        return 0;
    memset(p, 0, NCCL_KEY_BYTES);
    wt_key_put_header(p, NCCL_KEY_MAGIC, NCCL_KEY_VERSION);
    wex_put_le(p + 8, key->rank, 8);
    wex_put_le(p + 16, key->bytes, 8);
    wex_put_le(p + 24, key->group_size, 8);
    return NCCL_KEY_BYTES;
}

int nccl_key_decode(const void *data, size_t len, nccl_key *key, char *why,
                    size_t why_cap)
{
    const uint8_t *p = data;

    memset(key, 0, sizeof(*key));
    if (wt_key_header(data, len, NCCL_KEY_BYTES, NCCL_KEY_MAGIC,
                      NCCL_KEY_VERSION, "an nccl key", why, why_cap) != 0)
        return -1;
    if (len != NCCL_KEY_BYTES)
        return WT_WHY("%zu bytes, not %u", len, NCCL_KEY_BYTES);
    if (wex_get_le(p + 6, 2) != 0 || wex_get_le(p + 32, 8) != 0)
        return WT_WHY("reserved field is not zero");
    key->rank = wex_get_le(p + 8, 8);
    key->bytes = wex_get_le(p + 16, 8);
    key->group_size = wex_get_le(p + 24, 8);
    if (key->bytes == 0)
        return WT_WHY("buffer size 0");
    if (key->group_size < 2 || key->group_size > INT_MAX ||
        key->rank >= key->group_size)
        return WT_WHY("destination rank %llu in a group of %llu",
                      (unsigned long long)key->rank,
                      (unsigned long long)key->group_size);
    return 0;
}

int64_t nccl_group_size(uint64_t source_ranks, uint64_t destination_ranks)
{
    if (source_ranks == 0 || destination_ranks == 0 || source_ranks > INT_MAX ||
        destination_ranks > INT_MAX - source_ranks)
        return -1;
    return (int64_t)(source_ranks + destination_ranks);
}

int64_t nccl_group_rank(uint32_t side, uint64_t rank, uint64_t source_ranks,
                        uint64_t destination_ranks)
{
    if (nccl_group_size(source_ranks, destination_ranks) < 0)
        return -1;
    if (side == WEX_SIDE_DESTINATION)
        return rank < destination_ranks ? (int64_t)rank : -1;
    if (side == WEX_SIDE_SOURCE)
        return rank < source_ranks ? (int64_t)(destination_ranks + rank) : -1;
    return -1;
}
