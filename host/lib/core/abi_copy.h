/*
 * Where the host meets an SDK struct whose struct_size may differ from
 * its own: a plugin or application built against an older or newer SDK.
 * Every such struct passes through one of these two helpers, so a member
 * appended after 1.0 is read as zero when the caller's struct predates it,
 * and the host never writes past the caller's capacity.
 */
#ifndef WEX_HOST_ABI_COPY_H
#define WEX_HOST_ABI_COPY_H

#include <stdint.h>
#include <string.h>

/* Copies the caller's `given` (its struct_size is its first member) into
 * the host's `full` of `full_size` bytes: what both know is copied, the
 * members the caller's version lacks are zero. The caller has already
 * checked that struct_size is at least the 1.0 size. */
static inline void wex__abi_in(void *full, size_t full_size, const void *given)
{
    uint32_t size;

    memcpy(&size, given, sizeof(size));
    memset(full, 0, full_size);
    memcpy(full, given, size < full_size ? size : full_size);
}

/* Writes the host's `full` into the caller's `given`, whose struct_size
 * says how many bytes it holds; struct_size itself is left as it was. */
static inline void wex__abi_out(void *given, const void *full, size_t full_size)
{
    uint32_t size;

    memcpy(&size, given, sizeof(size));
    memcpy(given, full, size < full_size ? size : full_size);
    memcpy(given, &size, sizeof(size));
}

#endif /* WEX_HOST_ABI_COPY_H */
