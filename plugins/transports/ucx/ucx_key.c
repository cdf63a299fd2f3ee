#include "ucx_key.h"

#include <string.h>

#include "../common/key_header.h"

/* FNV-1a over the key with the checksum field read as zero: every step
 * is a bijection of the state, so any one altered byte changes it. */
static uint64_t checksum(const uint8_t *p, size_t len)
{
    uint64_t hash = 0xcbf29ce484222325ull;

    for (size_t i = 0; i < len; i++) {
        uint8_t b = i >= 48 && i < 56 ? 0 : p[i];
        hash = (hash ^ b) * 0x100000001b3ull;
    }
    return hash;
}

size_t ucx_key_length(const ucx_key *key)
{
    return UCX_KEY_HEADER + (size_t)key->worker_address_len + key->rkey_len +
           key->host_len;
}

size_t ucx_key_encode(const ucx_key *key, void *out, size_t cap)
{
    uint8_t *p = out;
    size_t len = ucx_key_length(key);

    if (key->worker_address_len == 0 || key->rkey_len == 0 ||
        key->host_len > UCX_HOST_MAX || len > cap)
        return 0;
    wt_key_put_header(p, UCX_KEY_MAGIC, UCX_KEY_VERSION);
    wex_put_le(p + 6, key->host_len, 1);
    wex_put_le(p + 7, 0, 1);
    wex_put_le(p + 8, key->pid, 4);
    wex_put_le(p + 12, key->worker_address_len, 4);
    wex_put_le(p + 16, key->rkey_len, 4);
    wex_put_le(p + 20, 0, 4);
    wex_put_le(p + 24, key->rank, 8);
    wex_put_le(p + 32, key->address, 8);
    wex_put_le(p + 40, key->size, 8);
    p += UCX_KEY_HEADER;
    memcpy(p, key->worker_address, key->worker_address_len);
    p += key->worker_address_len;
    memcpy(p, key->rkey, key->rkey_len);
    p += key->rkey_len;
    memcpy(p, key->host, key->host_len);
    wex_put_le((uint8_t *)out + 48, checksum(out, len), 8);
    return len;
}

int ucx_key_decode(const void *data, size_t len, ucx_key *key, char *why,
                   size_t why_cap)
{
    const uint8_t *p = data;
    uint64_t v, want;

    memset(key, 0, sizeof(*key));
    if (wt_key_header(data, len, UCX_KEY_HEADER, UCX_KEY_MAGIC, UCX_KEY_VERSION,
                      "a ucx key", why, why_cap) != 0)
        return -1;
    key->host_len = (uint32_t)wex_get_le(p + 6, 1);
    key->pid = (uint32_t)wex_get_le(p + 8, 4);
    key->worker_address_len = (uint32_t)wex_get_le(p + 12, 4);
    key->rkey_len = (uint32_t)wex_get_le(p + 16, 4);
    if (key->host_len > UCX_HOST_MAX)
        return WT_WHY("host name length %u, more than %u", key->host_len,
                      UCX_HOST_MAX);
    if (key->worker_address_len == 0 || key->rkey_len == 0 ||
        key->worker_address_len > len || key->rkey_len > len)
        return WT_WHY("worker address length %u or rkey length %u is out of "
                      "range",
                      key->worker_address_len, key->rkey_len);
    if (len != ucx_key_length(key))
        return WT_WHY("%zu bytes, expected %zu for a %u-byte worker address, "
                      "a %u-byte rkey and a %u-byte host name",
                      len, ucx_key_length(key), key->worker_address_len,
                      key->rkey_len, key->host_len);
    if ((v = wex_get_le(p + 48, 8)) != (want = checksum(p, len)))
        return WT_WHY("checksum 0x%016llx, expected 0x%016llx: the key was "
                      "altered in transit",
                      (unsigned long long)v, (unsigned long long)want);
    if (wex_get_le(p + 7, 1) != 0 || wex_get_le(p + 20, 4) != 0)
        return WT_WHY("reserved field is not zero");
    key->rank = wex_get_le(p + 24, 8);
    key->address = wex_get_le(p + 32, 8);
    key->size = wex_get_le(p + 40, 8);
    if (key->pid == 0 || key->pid > INT32_MAX)
        return WT_WHY("bad destination pid %u", key->pid);
    if (key->size == 0)
        return WT_WHY("buffer size 0");
    if (key->address == 0 || key->address + key->size < key->address)
        return WT_WHY("buffer address 0x%llx + %llu bytes is not a valid "
                      "range",
                      (unsigned long long)key->address,
                      (unsigned long long)key->size);
    p += UCX_KEY_HEADER;
    key->worker_address = p;
    p += key->worker_address_len;
    key->rkey = p;
    p += key->rkey_len;
    memcpy(key->host, p, key->host_len);
    for (uint32_t i = 0; i < key->host_len; i++)
        if ((unsigned char)key->host[i] < 0x21 ||
            (unsigned char)key->host[i] > 0x7e)
            return WT_WHY("host name byte %u is not printable ASCII", i);
    key->host[key->host_len] = '\0';
    return 0;
}
