/*
 * How every in-tree transport's memory key begins: a u32 magic that
 * names the transport's format and a u16 version, little-endian, at
 * bytes 0 and 4. Each key codec (shm_key.c, ucx_key.c, cuda_ipc_key.c,
 * nccl_key.c) writes and checks that start here and lays out the rest
 * itself.
 *
 * Header-only, and included by a path relative to the codecs, so a codec
 * still compiles on its own (tests/unit/test_gpu_transport_keys.c
 * builds the GPU codecs without the transports' library). The wt_
 * prefix ("wex transport") marks helpers private to the in-tree
 * transports.
 */
#ifndef WEX_TRANSPORT_KEY_HEADER_H
#define WEX_TRANSPORT_KEY_HEADER_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <wex/bytes.h>

/* In a decoder with parameters `why` and `why_cap`: writes the reason
 * and evaluates to -1. */
#define WT_WHY(...) (snprintf(why, why_cap, __VA_ARGS__), -1)

static inline void wt_key_put_header(uint8_t *p, uint32_t magic,
                                     uint32_t version)
{
    wex_put_le(p + 0, magic, 4);
    wex_put_le(p + 4, version, 2);
}

/* The key has at least `header` bytes and starts with `magic` and
 * `version`: 0, or -1 with the reason in `why`. `a_key` names the format
 * in messages ("an shm key"). */
static inline int wt_key_header(const void *data, size_t len, size_t header,
                                uint32_t magic, uint32_t version,
                                const char *a_key, char *why, size_t why_cap)
{
    const uint8_t *p = data;
    uint64_t v;

    if (data == NULL || len < header)
        return WT_WHY("%zu bytes, shorter than the %zu-byte header", len,
                      header);
    if ((v = wex_get_le(p, 4)) != magic)
        return WT_WHY("bad magic 0x%08llx (not %s)", (unsigned long long)v,
                      a_key);
    if ((v = wex_get_le(p + 4, 2)) != version)
        return WT_WHY("key version %llu, this plugin reads %u",
                      (unsigned long long)v, (unsigned)version);
    return 0;
}

#endif /* WEX_TRANSPORT_KEY_HEADER_H */
