/*
 * Little-endian integers in byte buffers: how plugins lay out the keys
 * and messages they exchange between processes, whatever the host's
 * byte order.
 */
#ifndef WEX_BYTES_H
#define WEX_BYTES_H

#include <stdint.h>

static inline void wex_put_le(uint8_t *p, uint64_t v, unsigned bytes)
{
    for (unsigned i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t wex_get_le(const uint8_t *p, unsigned bytes)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

#endif /* WEX_BYTES_H */
