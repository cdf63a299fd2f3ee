/*
 * Delta payloads in device memory (quantize_kernels.h): applied
 * (wex_cuda_delta_apply), a CUDA block a chunk, running the chunk program
 * of delta_chunks.h that the host's tests run on the CPU: each thread
 * counts the set bits of its part of the chunk's bitmap, the block sums
 * the counts before each part, and each thread writes its part's
 * elements. And encoded (wex_cuda_delta_count, wex_cuda_delta_encode),
 * running the program of delta_scan_chunks.h the same way.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "delta_chunks.h"
#include "delta_scan_chunks.h"
#include "quantize_kernels.h"

#define THREADS 256u

/* 256 counts: an exclusive scan in one thread is enough */
__device__ static void scan_before(uint32_t *before)
{
    if (threadIdx.x == 0)
        for (uint32_t k = 0, sum = 0; k < THREADS; k++) {
            uint32_t v = before[k];
            before[k] = sum;
            sum += v;
        }
}

__global__ static void delta_apply(const uint8_t *payload,
                                   const wex_delta_chunk *chunks,
                                   wex_delta_map map, uint8_t *dst)
{
    __shared__ uint32_t before[THREADS];
    const wex_delta_chunk c = chunks[blockIdx.x];
    uint32_t t = threadIdx.x;

    before[t] = wex_delta_count(&c, payload, t, THREADS);
    __syncthreads();
    scan_before(before);
    __syncthreads();
    wex_delta_emit(&c, payload, t, THREADS, before[t], &map, dst);
}

extern "C" int wex_cuda_delta_apply(const uint8_t *payload,
                                    const struct wex_delta_chunk *chunks,
                                    uint32_t count,
                                    const struct wex_delta_map *map,
                                    uint8_t *dst, void *stream)
{
    if (count == 0)
        return cudaSuccess;
    delta_apply<<<count, THREADS, 0, (cudaStream_t)stream>>>(payload, chunks,
                                                             *map, dst);
    return cudaGetLastError();
}

__global__ static void delta_count(const uint8_t *cur, wex_delta_map map,
                                   const uint8_t *snap, uint64_t elems,
                                   uint32_t *counts)
{
    __shared__ uint32_t part[THREADS];
    uint64_t base = (uint64_t)blockIdx.x * WEX_DELTA_CHUNK_ELEMS;
    uint32_t t = threadIdx.x;
    uint32_t u = (uint32_t)(elems - base < WEX_DELTA_CHUNK_ELEMS
                                ? elems - base
                                : WEX_DELTA_CHUNK_ELEMS);

    part[t] = wex_delta_scan_count(cur, &map, snap, base, u, t, THREADS);
    __syncthreads();
    for (uint32_t half = THREADS / 2; half > 0; half /= 2) {
        if (t < half)
            part[t] += part[t + half];
        __syncthreads();
    }
    if (t == 0)
        counts[blockIdx.x] = part[0];
}

__global__ static void delta_encode(const uint8_t *cur, wex_delta_map map,
                                    uint8_t *snap, const wex_delta_slot *slots,
                                    uint8_t *payload)
{
    __shared__ uint32_t before[THREADS];
    __shared__ uint32_t bits[WEX_DELTA_SCAN_BITS / 4];
    const wex_delta_slot c = slots[blockIdx.x];
    uint32_t t = threadIdx.x;

    wex_delta_scan_clear(bits, t, THREADS);
    before[t] =
        c.kind == WEX_DELTA_KIND_HEAD
            ? 0
            : wex_delta_scan_count(cur, &map, snap, c.base, c.u, t, THREADS);
    __syncthreads();
    scan_before(before);
    __syncthreads();
    wex_delta_scan_write(&c, cur, &map, snap, t, THREADS, before[t], bits,
                         payload);
    __syncthreads();
    if (payload != NULL)
        wex_delta_scan_flush(&c, bits, t, THREADS, payload);
}

extern "C" int wex_cuda_delta_count(const uint8_t *cur,
                                    const struct wex_delta_map *map,
                                    const uint8_t *snap, uint64_t elems,
                                    uint32_t *counts, void *stream)
{
    uint64_t chunks =
        (elems + WEX_DELTA_CHUNK_ELEMS - 1) / WEX_DELTA_CHUNK_ELEMS;

    if (chunks == 0)
        return cudaSuccess;
    if (chunks > 0x7fffffffu)
        return cudaErrorInvalidValue;
    delta_count<<<(unsigned)chunks, THREADS, 0, (cudaStream_t)stream>>>(
        cur, *map, snap, elems, counts);
    return cudaGetLastError();
}

extern "C" int
wex_cuda_delta_encode(const uint8_t *cur, const struct wex_delta_map *map,
                      uint8_t *snap, const struct wex_delta_slot *slots,
                      uint32_t count, uint8_t *payload, void *stream)
{
    if (count == 0)
        return cudaSuccess;
    delta_encode<<<count, THREADS, 0, (cudaStream_t)stream>>>(cur, *map, snap,
                                                              slots, payload);
    return cudaGetLastError();
}
