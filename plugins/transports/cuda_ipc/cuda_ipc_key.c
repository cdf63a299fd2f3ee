#include "cuda_ipc_key.h"

#include <string.h>

#include "../common/key_header.h"

size_t cuda_ipc_key_encode(const cuda_ipc_key *key, void *out, size_t cap)
{
    uint8_t *p = out;

    if (cap < CUDA_IPC_KEY_BYTES)
        return 0;
    wt_key_put_header(p, CUDA_IPC_KEY_MAGIC, CUDA_IPC_KEY_VERSION);
    wex_put_le(p + 6, 0, 2);
    wex_put_le(p + 8, key->pid, 4);
    wex_put_le(p + 12, key->device, 4);
    wex_put_le(p + 16, key->rank, 8);
    wex_put_le(p + 24, key->alloc_base, 8);
    wex_put_le(p + 32, key->alloc_size, 8);
    wex_put_le(p + 40, key->offset, 8);
    wex_put_le(p + 48, key->bytes, 8);
    memcpy(p + 56, key->handle, CUDA_IPC_HANDLE_BYTES);
    return CUDA_IPC_KEY_BYTES;
}

int cuda_ipc_key_decode(const void *data, size_t len, cuda_ipc_key *key,
                        char *why, size_t why_cap)
{
    const uint8_t *p = data;

    memset(key, 0, sizeof(*key));
    if (data == NULL || len != CUDA_IPC_KEY_BYTES)
        return WT_WHY("%zu bytes, a cuda-ipc key has %u", len,
                      CUDA_IPC_KEY_BYTES);
    if (wt_key_header(data, len, CUDA_IPC_KEY_BYTES, CUDA_IPC_KEY_MAGIC,
                      CUDA_IPC_KEY_VERSION, "a cuda-ipc key", why,
                      why_cap) != 0)
        return -1;
    if (wex_get_le(p + 6, 2) != 0)
        return WT_WHY("reserved field is not zero");
    key->pid = (uint32_t)wex_get_le(p + 8, 4);
    key->device = (uint32_t)wex_get_le(p + 12, 4);
    key->rank = wex_get_le(p + 16, 8);
    key->alloc_base = wex_get_le(p + 24, 8);
    key->alloc_size = wex_get_le(p + 32, 8);
    key->offset = wex_get_le(p + 40, 8);
    key->bytes = wex_get_le(p + 48, 8);
    memcpy(key->handle, p + 56, CUDA_IPC_HANDLE_BYTES);
    if (key->pid == 0 || key->pid > INT32_MAX)
        return WT_WHY("bad destination pid %u", key->pid);
    if (key->alloc_base == 0 || key->alloc_size == 0 ||
        key->alloc_base + key->alloc_size < key->alloc_base)
        return WT_WHY("allocation 0x%llx + %llu bytes is not a valid range",
                      (unsigned long long)key->alloc_base,
                      (unsigned long long)key->alloc_size);
    if (key->bytes == 0 || key->offset > key->alloc_size ||
        key->bytes > key->alloc_size - key->offset)
        return WT_WHY("buffer of %llu bytes at offset %llu overruns its "
                      "%llu-byte allocation",
                      (unsigned long long)key->bytes,
                      (unsigned long long)key->offset,
                      (unsigned long long)key->alloc_size);
    return 0;
}
