#include "shm_key.h"

#include <string.h>

#include "../common/key_header.h"

size_t shm_key_encode(const shm_key *key, void *out, size_t cap)
{
    uint8_t *p = out;
    size_t len = SHM_KEY_HEADER + key->name_len;

    if (key->name_len == 0 || key->name_len > SHM_NAME_MAX || len > cap)
        return 0;
    wt_key_put_header(p, SHM_KEY_MAGIC, SHM_KEY_VERSION);
    wex_put_le(p + 6, key->kind, 1);
    wex_put_le(p + 7, key->name_len, 1);
    wex_put_le(p + 8, key->pid, 4);
    wex_put_le(p + 12, 0, 4);
    wex_put_le(p + 16, key->rank, 8);
    wex_put_le(p + 24, key->buffer_id, 8);
    wex_put_le(p + 32, key->size, 8);
    wex_put_le(p + 40, key->address, 8);
    memcpy(p + SHM_KEY_HEADER, key->name, key->name_len);
    return len;
}

int shm_key_decode(const void *data, size_t len, shm_key *key, char *why,
                   size_t why_cap)
{
    const uint8_t *p = data;

    memset(key, 0, sizeof(*key));
    if (wt_key_header(data, len, SHM_KEY_HEADER, SHM_KEY_MAGIC, SHM_KEY_VERSION,
                      "an shm key", why, why_cap) != 0)
        return -1;
    key->kind = (uint32_t)wex_get_le(p + 6, 1);
    if (key->kind != SHM_KIND_MEMFD && key->kind != SHM_KIND_PRIVATE)
        return WT_WHY("unknown buffer kind %u", key->kind);
    key->name_len = (uint32_t)wex_get_le(p + 7, 1);
    if (key->name_len == 0 || key->name_len > SHM_NAME_MAX)
        return WT_WHY("socket name length %u outside 1..%u", key->name_len,
                      SHM_NAME_MAX);
    if (len != SHM_KEY_HEADER + key->name_len)
        return WT_WHY("%zu bytes, expected %u for a %u-byte socket name", len,
                      SHM_KEY_HEADER + key->name_len, key->name_len);
    key->pid = (uint32_t)wex_get_le(p + 8, 4);
    if (key->pid == 0 || key->pid > INT32_MAX)
        return WT_WHY("bad destination pid %u", key->pid);
    if (wex_get_le(p + 12, 4) != 0)
        return WT_WHY("reserved field is not zero");
    key->rank = wex_get_le(p + 16, 8);
    key->buffer_id = wex_get_le(p + 24, 8);
    key->size = wex_get_le(p + 32, 8);
    key->address = wex_get_le(p + 40, 8);
    if (key->buffer_id == 0)
        return WT_WHY("buffer id 0");
    if (key->size == 0)
        return WT_WHY("buffer size 0");
    if (key->address == 0 || key->address + key->size < key->address)
        return WT_WHY("buffer address 0x%llx + %llu bytes is not a valid "
                      "range",
                      (unsigned long long)key->address,
                      (unsigned long long)key->size);
    memcpy(key->name, p + SHM_KEY_HEADER, key->name_len);
    for (uint32_t i = 0; i < key->name_len; i++)
        if ((unsigned char)key->name[i] < 0x21 ||
            (unsigned char)key->name[i] > 0x7e)
            return WT_WHY("socket name byte %u is not printable ASCII", i);
    key->name[key->name_len] = '\0';
    return 0;
}
