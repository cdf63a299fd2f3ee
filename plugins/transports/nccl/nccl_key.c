#include "nccl_key.h"

#include <string.h>

#include "../common/key_header.h"

size_t nccl_key_size(uint64_t source_ranks)
{
    return NCCL_KEY_HEADER + (size_t)((source_ranks + 7) / 8);
}

size_t nccl_key_encode(const nccl_key *key, const uint64_t *peers,
                       uint64_t peer_count, void *out, size_t cap)
{
    uint8_t *p = out;
    size_t len;

    if (key->source_ranks == 0 || key->source_ranks > (uint64_t)cap * 8)
        return 0;
    len = nccl_key_size(key->source_ranks);
    if (len > cap)
        return 0;
    memset(p, 0, len);
    wt_key_put_header(p, NCCL_KEY_MAGIC, NCCL_KEY_VERSION);
    wex_put_le(p + 8, key->rank, 8);
    wex_put_le(p + 16, key->bytes, 8);
    wex_put_le(p + 24, key->source_ranks, 8);
    memcpy(p + 40, key->id, NCCL_KEY_ID_BYTES);
    for (uint64_t i = 0; i < peer_count; i++) {
        if (peers[i] >= key->source_ranks)
            return 0;
        p[NCCL_KEY_HEADER + peers[i] / 8] |= (uint8_t)(1u << (peers[i] % 8));
    }
    return len;
}

int nccl_key_decode(const void *data, size_t len, nccl_key *key, char *why,
                    size_t why_cap)
{
    const uint8_t *p = data;

    memset(key, 0, sizeof(*key));
    if (wt_key_header(data, len, NCCL_KEY_HEADER, NCCL_KEY_MAGIC,
                      NCCL_KEY_VERSION, "an nccl key", why, why_cap) != 0)
        return -1;
    if (wex_get_le(p + 6, 2) != 0 || wex_get_le(p + 32, 8) != 0)
        return WT_WHY("reserved field is not zero");
    key->rank = wex_get_le(p + 8, 8);
    key->bytes = wex_get_le(p + 16, 8);
    key->source_ranks = wex_get_le(p + 24, 8);
    if (key->bytes == 0)
        return WT_WHY("buffer size 0");
    if (key->source_ranks == 0 || key->source_ranks > (uint64_t)len * 8 ||
        len != nccl_key_size(key->source_ranks))
        return WT_WHY("%zu bytes do not fit a member bitmap of %llu source "
                      "ranks", len, (unsigned long long)key->source_ranks);
    if (key->source_ranks % 8 != 0 &&
        (p[len - 1] >> (key->source_ranks % 8)) != 0)
        return WT_WHY("member bits set past the last source rank");
    memcpy(key->id, p + 40, NCCL_KEY_ID_BYTES);
    key->members = p + NCCL_KEY_HEADER;
    return 0;
}

static int bit(const uint8_t *bits, uint64_t i)
{
    return (bits[i / 8] >> (i % 8)) & 1;
}

int nccl_key_member(const nccl_key *key, uint64_t source, int *comm_rank,
                    int *comm_size)
{
    uint64_t below = 0, all = 0;

    if (source >= key->source_ranks || !bit(key->members, source))
        return -1;
    for (uint64_t i = 0; i < key->source_ranks; i++) {
        all += (uint64_t)bit(key->members, i);
        below += (uint64_t)(i < source && bit(key->members, i));
    }
    *comm_rank = (int)(1 + below);
    *comm_size = (int)(1 + all);
    return 0;
}
