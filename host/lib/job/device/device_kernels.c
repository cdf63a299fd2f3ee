/* The kernels of libwex_cuda.so (fp8 quantization, delta apply and
 * encoding), driven
 * for a job's device memory (device_memory.h). Like the CUDA runtime, the library is loaded
 * the first time it is needed, never linked. */
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wex/abi.h>

#include "delta.h"
#include "delta_chunks.h"
#include "delta_scan_chunks.h"
#include "digest_blocks.h"
#include "digest_update.h"
#include "device_internal.h"
#include "error.h"
#include "quantize_kernels.h"
#include "self_dir.h"

struct wex__device_kernels {
    void *dl;
    wex_cuda_box_amax_fn box_amax;
    wex_cuda_box_quantize_fn box_quantize;
    wex_cuda_delta_apply_fn delta_apply;
    wex_cuda_delta_count_fn delta_count;
    wex_cuda_delta_encode_fn delta_encode;
    wex_cuda_digest_blocks_fn digest_blocks;
    float *cells; /* device: a box's amaxes or multipliers */
    uint64_t cells_cap;
    uint8_t *quantized; /* device: the rows quantized, before staging */
    uint64_t quantized_cap;
    uint8_t *payload; /* device: a delta payload, then its chunks' index */
    uint64_t payload_cap;
    wex_delta_chunk *index; /* host: the index, made here */
    uint64_t index_cap;
    /* a source's encoding: device scratch for the counts, the slots and
     * the payload; the counts and slots on the host */
    uint8_t *encoding;
    uint64_t encoding_cap;
    uint32_t *counts;
    wex_delta_slot *slots;
    uint64_t slots_cap; /* chunks + 1 of both */
    /* an operation's digest: the blocks' digests, then a short last
     * block, on the device and (one copy) on the host */
    uint8_t *digests;
    uint64_t digests_cap;
    uint64_t *block_digests;
    uint64_t block_digests_cap; /* words */
};

#define KERNELS_NAME "libwex_cuda.so"

/* Beside the code running now: libwex.so's directory (LIBDIR), or, for a
 * program linked with the host statically (the wex command, the tests),
 * WEX_BINDIR_TO_LIBDIR away from its BINDIR. */
static void *open_beside_self(char *tried, size_t tried_size, char *found,
                              size_t found_size)
{
    static const char *const relative[] = {
        ".",
#ifdef WEX_BINDIR_TO_LIBDIR
        WEX_BINDIR_TO_LIBDIR,
#endif
    };
    char self[PATH_MAX], path[PATH_MAX + 64];
    void *dl = NULL;

    if (wex__self_dir(self, sizeof(self)) != 0)
        return NULL;
    for (size_t i = 0; dl == NULL && i < sizeof(relative) / sizeof(*relative);
         i++) {
        snprintf(path, sizeof(path), "%s/%s/" KERNELS_NAME, self, relative[i]);
        if (access(path, F_OK) != 0)
            continue;
        if ((dl = dlopen(path, RTLD_NOW | RTLD_LOCAL)) == NULL)
            snprintf(tried, tried_size, "%s", dlerror());
        else
            snprintf(found, found_size, "%s", path);
    }
    return dl;
}

static wex_status load(wex__device *dev)
{
    wex__device_kernels *k;
    const char *chosen = secure_getenv("WEX_CUDA_KERNELS");
    char tried[512] = "not found beside libwex (it is built where nvcc is)";
    char found[PATH_MAX + 64] = KERNELS_NAME;
    wex_cuda_kernels_abi_fn abi;

    if (dev->kernels != NULL)
        return WEX_OK;
    if ((k = calloc(1, sizeof(*k))) == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    if (chosen != NULL && chosen[0] != '\0') {
        snprintf(found, sizeof(found), "%s", chosen);
        if ((k->dl = dlopen(chosen, RTLD_NOW | RTLD_LOCAL)) == NULL)
            snprintf(tried, sizeof(tried), "WEX_CUDA_KERNELS: %s", dlerror());
    } else if ((k->dl = open_beside_self(tried, sizeof(tried), found,
                                         sizeof(found))) == NULL) {
        /* then wherever the loader looks */
        k->dl = dlopen(KERNELS_NAME, RTLD_NOW | RTLD_LOCAL);
    }
    if (k->dl == NULL) {
        free(k);
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "quantizing, or encoding or applying deltas, in "
                          "device memory "
                          "needs the CUDA kernels of " KERNELS_NAME ": %s",
                          tried);
    }
    abi = (wex_cuda_kernels_abi_fn)dlsym(k->dl, "wex_cuda_kernels_abi");
    k->box_amax = (wex_cuda_box_amax_fn)dlsym(k->dl, "wex_cuda_box_amax");
    k->box_quantize =
        (wex_cuda_box_quantize_fn)dlsym(k->dl, "wex_cuda_box_quantize");
    k->delta_apply =
        (wex_cuda_delta_apply_fn)dlsym(k->dl, "wex_cuda_delta_apply");
    k->delta_count =
        (wex_cuda_delta_count_fn)dlsym(k->dl, "wex_cuda_delta_count");
    k->delta_encode =
        (wex_cuda_delta_encode_fn)dlsym(k->dl, "wex_cuda_delta_encode");
    k->digest_blocks =
        (wex_cuda_digest_blocks_fn)dlsym(k->dl, "wex_cuda_digest_blocks");
    if (abi == NULL || k->box_amax == NULL || k->box_quantize == NULL ||
        k->delta_apply == NULL || k->delta_count == NULL ||
        k->delta_encode == NULL || k->digest_blocks == NULL ||
        abi() != WEX_CUDA_KERNELS_ABI) {
        dlclose(k->dl);
        free(k);
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "%s is not the kernels "
                          "library of this libwex (" KERNELS_NAME ", kernels "
                          "ABI %d expected)",
                          found, WEX_CUDA_KERNELS_ABI);
    }
    dev->kernels = k;
    return WEX_OK;
}

void wex__device_kernels_free(wex__device *dev)
{
    wex__device_kernels *k = dev->kernels;

    if (k == NULL)
        return;
    if (k->cells != NULL)
        dev->api.Free(k->cells);
    if (k->quantized != NULL)
        dev->api.Free(k->quantized);
    if (k->payload != NULL)
        dev->api.Free(k->payload);
    if (k->encoding != NULL)
        dev->api.Free(k->encoding);
    if (k->digests != NULL)
        dev->api.Free(k->digests);
    free(k->block_digests);
    free(k->index);
    free(k->counts);
    free(k->slots);
    /* the library stays loaded, as the runtime does */
    free(k);
    dev->kernels = NULL;
}

/* Device scratch of at least `bytes`, grown as boxes need. */
static wex_status scratch(wex__device *dev, void **buf, uint64_t *cap,
                          uint64_t bytes)
{
    cuda_error e;

    if (bytes <= *cap)
        return WEX_OK;
    if (*buf != NULL)
        dev->api.Free(*buf);
    *buf = NULL;
    *cap = 0;
    e = dev->api.Malloc(buf, bytes);
    if (e != CUDA_SUCCESS) {
        *buf = NULL;
        return wex__cuda_fail(dev, e, "device scratch for quantizing");
    }
    *cap = bytes;
    return WEX_OK;
}

static uint64_t cells_across(uint32_t phase, uint64_t n)
{
    return (phase + n + 127) / 128;
}

wex_status wex__device_box_amax(wex__device *dev, const void *src,
                                uint32_t dtype, uint64_t ld, uint64_t rows,
                                uint64_t cols, uint32_t row_phase,
                                uint32_t col_phase, float *amax)
{
    uint64_t bytes = cells_across(row_phase, rows) *
                     cells_across(col_phase, cols) * sizeof(float);
    wex_status st = load(dev);
    cuda_error e;

    if (st == WEX_OK)
        st = scratch(dev, (void **)&dev->kernels->cells,
                     &dev->kernels->cells_cap, bytes);
    if (st != WEX_OK)
        return st;
    e = dev->kernels->box_amax(src, dtype, ld, rows, cols, row_phase, col_phase,
                               dev->kernels->cells, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.MemcpyAsync(amax, dev->kernels->cells, bytes,
                                 CUDA_MEMCPY_DEVICE_TO_HOST, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.StreamSynchronize(dev->stream);
    return e == CUDA_SUCCESS ? WEX_OK
                             : wex__cuda_fail(dev, e, "the amax kernel");
}

wex_status wex__device_box_quantize_rows(wex__device *dev, const void *src,
                                         uint32_t dtype, uint64_t ld,
                                         uint64_t cols, uint32_t row_phase,
                                         uint32_t col_phase, const float *mult,
                                         uint64_t mult_ld, uint64_t first,
                                         uint64_t count, const void **host_p)
{
    /* the rows asked for start at another phase, in a later cell row */
    uint64_t at = row_phase + first, bytes = count * cols;
    uint64_t cell_rows = cells_across((uint32_t)(at % 128), count);
    const float *m = mult + at / 128 * mult_ld;
    wex__device_kernels *k;
    wex_status st;
    cuda_error e;

    *host_p = NULL;
    if (count == 0 || cols > WEX__STAGING_BYTES / count ||
        bytes > WEX__STAGING_BYTES - dev->used)
        return WEX_OK;
    st = load(dev);
    k = dev->kernels;
    if (st == WEX_OK)
        st = scratch(dev, (void **)&k->cells, &k->cells_cap,
                     cell_rows * mult_ld * sizeof(float));
    if (st == WEX_OK)
        st = scratch(dev, (void **)&k->quantized, &k->quantized_cap, bytes);
    if (st != WEX_OK)
        return st;
    e = dev->api.MemcpyAsync(k->cells, m, cell_rows * mult_ld * sizeof(float),
                             CUDA_MEMCPY_HOST_TO_DEVICE, dev->stream);
    if (e == CUDA_SUCCESS)
        e = k->box_quantize(
            (const unsigned char *)src + first * ld * wex_dtype_size(dtype),
            dtype, ld, count, cols, (uint32_t)(at % 128), col_phase, k->cells,
            mult_ld, k->quantized, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.MemcpyAsync(dev->staging + dev->used, k->quantized, bytes,
                                 CUDA_MEMCPY_DEVICE_TO_HOST, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.StreamSynchronize(dev->stream);
    if (e != CUDA_SUCCESS)
        return wex__cuda_fail(dev, e, "the quantization kernel");
    *host_p = dev->staging + dev->used;
    dev->used += bytes;
    return WEX_OK;
}

int wex__device_kernels_ready(wex__device *dev)
{
    if (dev == NULL)
        return 0;
    if (dev->kernels_missing[0] != '\0') { /* a dlopen a call is dear */
        wex__error(WEX_ERR_UNSUPPORTED, "%s", dev->kernels_missing);
        return 0;
    }
    if (load(dev) == WEX_OK)
        return 1;
    snprintf(dev->kernels_missing, sizeof(dev->kernels_missing), "%s",
             wex__last_error());
    return 0;
}

wex_status wex__device_delta_apply(wex__device *dev, void *dst,
                                   const wex_delta_map *map,
                                   const uint8_t *payload,
                                   const uint8_t *on_device, uint64_t len,
                                   unsigned elem, uint64_t elems)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint64_t index_at = (len + 15) & ~(uint64_t)15, index_bytes;
    wex_status st = load(dev);
    wex__device_kernels *k = dev->kernels;
    int64_t count;
    cuda_error e;

    if (st != WEX_OK)
        return st;
    if (chunks > k->index_cap) {
        wex_delta_chunk *grown = realloc(k->index, chunks * sizeof(*grown));
        if (grown == NULL)
            return wex__error(WEX_ERR_NOMEM, "out of memory");
        k->index = grown;
        k->index_cap = chunks;
    }
    count = wex__delta_chunks(payload, (size_t)len, elem, elems, k->index,
                              (size_t)chunks);
    if (count < 0)
        return wex__error(WEX_ERR_INTERNAL,
                          "a checked delta payload does not index");
    if (count == 0)
        return WEX_OK;
    /* the payload, then its index, in one device buffer: the copies and
     * the kernel are queued in order on the stream, so the next payload
     * waits for this kernel */
    index_bytes = (uint64_t)count * sizeof(wex_delta_chunk);
    st = scratch(dev, (void **)&k->payload, &k->payload_cap,
                 index_at + index_bytes);
    if (st != WEX_OK)
        return st;
    e = on_device != NULL
            ? CUDA_SUCCESS
            : dev->api.MemcpyAsync(k->payload, payload, len,
                                   CUDA_MEMCPY_HOST_TO_DEVICE, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.MemcpyAsync(k->payload + index_at, k->index, index_bytes,
                                 CUDA_MEMCPY_HOST_TO_DEVICE, dev->stream);
    /* k->index is written again by the next call: being pageable (not
     * pinned), the copy has read it when MemcpyAsync returns */
    if (e == CUDA_SUCCESS)
        e = k->delta_apply(on_device != NULL ? on_device : k->payload,
                           (const wex_delta_chunk *)(k->payload + index_at),
                           (uint32_t)count, map, dst, dev->stream);
    return e == CUDA_SUCCESS ? WEX_OK
                             : wex__cuda_fail(dev, e, "the delta kernel");
}

/* Host room for a stream of `chunks` chunks' counts and slots. */
static wex_status slot_room(wex__device_kernels *k, uint64_t chunks)
{
    uint32_t *counts;
    wex_delta_slot *slots;

    if (chunks + 1 <= k->slots_cap)
        return WEX_OK;
    counts = realloc(k->counts, (chunks + 1) * sizeof(*counts));
    if (counts != NULL)
        k->counts = counts;
    slots = realloc(k->slots, (chunks + 1) * sizeof(*slots));
    if (slots != NULL)
        k->slots = slots;
    if (counts == NULL || slots == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    k->slots_cap = chunks + 1;
    return WEX_OK;
}

wex_status wex__device_delta_encode(wex__device *dev, const void *cur,
                                    const wex_delta_map *map, void *snap,
                                    uint64_t elems, uint8_t *out, uint64_t cap,
                                    int64_t *len_p, uint64_t *changed_p)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint64_t slots_at = (chunks * sizeof(uint32_t) + 63) & ~(uint64_t)63;
    uint64_t payload_at = slots_at + (chunks + 1) * sizeof(wex_delta_slot),
             changed = 0;
    wex_status st = load(dev);
    wex__device_kernels *k = dev->kernels;
    size_t count = 0;
    int64_t len;
    cuda_error e;

    *len_p = -1;
    *changed_p = 0;
    if (st == WEX_OK)
        st = slot_room(k, chunks);
    if (st == WEX_OK)
        st = scratch(dev, (void **)&k->encoding, &k->encoding_cap,
                     payload_at + cap);
    if (st != WEX_OK)
        return st;
    /* the count pass, and its counts back for the layout */
    e = k->delta_count(cur, map, snap, elems, (uint32_t *)k->encoding,
                       dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.MemcpyAsync(k->counts, k->encoding,
                                 chunks * sizeof(uint32_t),
                                 CUDA_MEMCPY_DEVICE_TO_HOST, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.StreamSynchronize(dev->stream);
    if (e != CUDA_SUCCESS)
        return wex__cuda_fail(dev, e, "the delta count kernel");
    len = wex__delta_slots(k->counts, elems, map->elem, k->slots, &count);
    if (len < 0)
        return wex__error(WEX_ERR_INTERNAL,
                          "the delta count kernel counted past a chunk");
    for (uint64_t c = 0; c < chunks; c++)
        changed += k->counts[c];
    /* the write pass: the payload where it fits its room, else the
     * snapshot alone */
    e = dev->api.MemcpyAsync(k->encoding + slots_at, k->slots,
                             count * sizeof(wex_delta_slot),
                             CUDA_MEMCPY_HOST_TO_DEVICE, dev->stream);
    if (e == CUDA_SUCCESS)
        e = k->delta_encode(
            cur, map, snap, (const wex_delta_slot *)(k->encoding + slots_at),
            (uint32_t)count,
            (uint64_t)len <= cap ? k->encoding + payload_at : NULL,
            dev->stream);
    if (e == CUDA_SUCCESS && (uint64_t)len <= cap)
        e = dev->api.MemcpyAsync(out, k->encoding + payload_at, (size_t)len,
                                 CUDA_MEMCPY_DEVICE_TO_HOST, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.StreamSynchronize(dev->stream);
    if (e != CUDA_SUCCESS)
        return wex__cuda_fail(dev, e, "the delta encoding kernel");
    *len_p = (uint64_t)len <= cap ? len : -1;
    *changed_p = changed;
    return WEX_OK;
}

wex_status wex__device_digest(wex__device *dev, const void *stream,
                              uint64_t len, uint64_t *digest_p)
{
    uint64_t count = wex_digest_block_count(len), last;
    /* the blocks' digests, then room for a short last block */
    uint64_t words = count + WEX_XXH3_MIDSIZE_MAX / sizeof(uint64_t);
    wex_status st = load(dev);
    wex__device_kernels *k = dev->kernels;
    cuda_error e;

    if (st == WEX_OK)
        st = scratch(dev, (void **)&k->digests, &k->digests_cap,
                     words * sizeof(uint64_t));
    if (st == WEX_OK && words > k->block_digests_cap) {
        uint64_t *grown = realloc(k->block_digests, words * sizeof(*grown));
        if (grown == NULL)
            return wex__error(WEX_ERR_NOMEM, "out of memory");
        k->block_digests = grown;
        k->block_digests_cap = words;
    }
    if (st != WEX_OK)
        return st;
    if (count == 0) {
        *digest_p = wex__digest_of_blocks(NULL, 0);
        return WEX_OK;
    }
    e = k->digest_blocks(stream, len, (uint64_t *)k->digests,
                         k->digests + count * sizeof(uint64_t), dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.MemcpyAsync(k->block_digests, k->digests,
                                 words * sizeof(uint64_t),
                                 CUDA_MEMCPY_DEVICE_TO_HOST, dev->stream);
    if (e == CUDA_SUCCESS)
        e = dev->api.StreamSynchronize(dev->stream);
    if (e != CUDA_SUCCESS)
        return wex__cuda_fail(dev, e, "the digest kernel");
    /* a short last block: the library's, here */
    last = wex_digest_block_len(len, count - 1);
    if (last <= WEX_XXH3_MIDSIZE_MAX)
        k->block_digests[count - 1] =
            XXH3_64bits(k->block_digests + count, (size_t)last);
    *digest_p = wex__digest_of_blocks(k->block_digests, count);
    return WEX_OK;
}
