/*
 * CUDA device memory for the runtime: allocating and checking device
 * pointers, and reading them on the CPU through pinned staging (digests)
 * or copying them out for transports that move host memory only.
 *
 * The CUDA runtime is dlopen'ed the first time a job touches device
 * memory, never linked: one libwex binary then serves hosts with and
 * without CUDA, and a job that only moves host memory never loads it.
 * Only the few entry points
 * below are used, with prototypes written here, so libwex also builds
 * where no CUDA toolkit is installed.
 */
#ifndef WEX_HOST_DEVICE_MEMORY_H
#define WEX_HOST_DEVICE_MEMORY_H

#include <stdint.h>
#include "digest_update.h"

#include <wex/host.h>

typedef struct wex__device wex__device;

/* Pinned staging per job: bounds what a step keeps in flight through it. */
#define WEX__STAGING_BYTES (64ull << 20)

/* Loads the CUDA runtime and checks there is a device; WEX_ERR_UNSUPPORTED
 * with "no CUDA runtime" or "no CUDA device" in the message otherwise. */
wex_status wex__device_open(wex__device **dev_p);
void wex__device_close(wex__device *dev);

/* Zeroed device memory on the current device; freed by wex__device_free. */
wex_status wex__device_alloc(wex__device *dev, uint64_t bytes, void **ptr_p);
void wex__device_free(wex__device *dev, void *ptr);
/* Zeroed pinned host memory (cudaMallocHost); freed by
 * wex__device_free_pinned. */
wex_status wex__device_alloc_pinned(wex__device *dev, uint64_t bytes,
                                    void **ptr_p);
void wex__device_free_pinned(wex__device *dev, void *ptr);
/* Queues a copy of host bytes into device memory; copy_in_end waits for
 * every copy queued, so many tensors cost one synchronisation. */
wex_status wex__device_copy_in(wex__device *dev, void *ptr, const void *host,
                               uint64_t bytes);
wex_status wex__device_copy_in_end(wex__device *dev);
/* Copies `bytes` from `src` to `dst`, both device memory, and waits. */
wex_status wex__device_copy_within(wex__device *dev, void *dst, const void *src,
                                   uint64_t bytes);
/* The same for `rows` rows of `width` bytes lying `pitch` apart, from
 * host memory into device memory laid out alike: one strided copy. */
wex_status wex__device_copy_in_rows(wex__device *dev, void *ptr,
                                    const void *host, uint64_t pitch,
                                    uint64_t width, uint64_t rows);
/* `bytes` at `ptr` are device (or managed) memory. */
wex_status wex__device_check(wex__device *dev, const void *ptr, uint64_t bytes);

/* Digests: hash_run queues device bytes into staging (copying
 * asynchronously, in order) and hash_end hashes whatever is queued, so
 * many small runs cost one synchronisation. Same digest as hashing the
 * bytes in place on the host. */
wex_status wex__device_hash_run(wex__device *dev, wex__digest *h,
                                const void *ptr, uint64_t bytes);
wex_status wex__device_hash_end(wex__device *dev, wex__digest *h);

/* Copies device bytes into staging and returns where they landed, or
 * NULL when staging has no room left for `bytes` (at most
 * WEX__STAGING_BYTES): the caller waits for what it put from staging,
 * then calls stage_reset. */
wex_status wex__device_stage_out(wex__device *dev, const void *ptr,
                                 uint64_t bytes, const void **host_p);
/* The same for `rows` rows of `width` bytes lying `pitch` apart in
 * device memory (the rows of a strided box): one strided copy
 * (cudaMemcpy2DAsync) and one synchronisation put them in staging one
 * after the other. */
wex_status wex__device_stage_rows(wex__device *dev, const void *ptr,
                                  uint64_t pitch, uint64_t width, uint64_t rows,
                                  const void **host_p);
void wex__device_stage_reset(wex__device *dev);

/* fp8-block-128 on the device (device_kernels.c), over a box of `rows` x
 * `cols` elements of float dtype `dtype` at `src`, `ld` elements a row,
 * whose element (0, 0) lies at (row_phase, col_phase) of its 128 x 128
 * block (quantize_kernels.h names its cells). The kernels come from
 * libwex_cuda.so (WEX_CUDA_KERNELS names another), loaded on first use.
 *
 * box_amax: the amax of every cell into `amax` (host memory, row-major,
 * (col_phase + cols + 127) / 128 cells a row), one synchronisation. */
wex_status wex__device_box_amax(wex__device *dev, const void *src,
                                uint32_t dtype, uint64_t ld, uint64_t rows,
                                uint64_t cols, uint32_t row_phase,
                                uint32_t col_phase, float *amax);
/* box_quantize_rows: rows [first, first + count) of the box quantized
 * with the multipliers `mult` (host memory, every cell of the box, mult_ld
 * a row) into staging, count * cols bytes row after row; *host_p is where
 * they landed, or NULL when staging has no room (as stage_out). */
wex_status wex__device_box_quantize_rows(wex__device *dev, const void *src,
                                         uint32_t dtype, uint64_t ld,
                                         uint64_t cols, uint32_t row_phase,
                                         uint32_t col_phase, const float *mult,
                                         uint64_t mult_ld, uint64_t first,
                                         uint64_t count, const void **host_p);

/* Whether the kernels of libwex_cuda.so load (the reason, in the
 * thread's error, when not). */
int wex__device_kernels_ready(wex__device *dev);
/* Applies a delta payload (host memory, delta.h) of a stream of `elems`
 * elements of `elem` bytes into device memory at `dst`, where the stream
 * lands as *map says (delta_chunks.h): the chunks' index read on the
 * host, index and payload copied to the device (the payload not when
 * `on_device` holds it there already), the kernel of libwex_cuda.so
 * queued. Queued in order with the copies: wex__device_copy_in_end waits
 * for it too. */
struct wex_delta_map;
wex_status wex__device_delta_apply(wex__device *dev, void *dst,
                                   const struct wex_delta_map *map,
                                   const uint8_t *payload,
                                   const uint8_t *on_device, uint64_t len,
                                   unsigned elem, uint64_t elems);
/* The digest (digest_update.h) of the `len` bytes at `stream` (device
 * memory) taken on the device, its blocks at once (digest_blocks.h):
 * only their digests cross the bus. */
wex_status wex__device_digest(wex__device *dev, const void *stream,
                              uint64_t len, uint64_t *digest_p);
/* Encodes the delta of the stream of `elems` elements at `cur` (device
 * memory, placed as *map says) against the snapshot at `snap` (device
 * memory, contiguous) on the device (delta_scan_chunks.h): the payload
 * the CPU's encoder makes, copied to out[0..cap) with its length in
 * *len_p (-1 when it outgrew cap), the changed elements in *changed_p,
 * and the snapshot brought up to date either way. */
wex_status wex__device_delta_encode(wex__device *dev, const void *cur,
                                    const struct wex_delta_map *map, void *snap,
                                    uint64_t elems, uint8_t *out, uint64_t cap,
                                    int64_t *len_p, uint64_t *changed_p);

#endif /* WEX_HOST_DEVICE_MEMORY_H */
