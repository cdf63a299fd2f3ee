/*
 * A delta payload applied in device memory (quantize_kernels.h,
 * wex_cuda_delta_apply): a CUDA block a chunk, running the chunk program
 * of delta_chunks.h that the host's tests run on the CPU. Each thread
 * counts the set bits of its part of the chunk's bitmap, the block sums
 * the counts before each part, and each thread writes its part's
 * elements.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "delta_chunks.h"
#include "quantize_kernels.h"

#define THREADS 256u

__global__ static void delta_apply(const uint8_t *payload,
                                   const wex_delta_chunk *chunks,
                                   wex_delta_map map, uint8_t *dst)
{
    __shared__ uint32_t before[THREADS];
    const wex_delta_chunk c = chunks[blockIdx.x];
    uint32_t t = threadIdx.x;

    before[t] = wex_delta_count(&c, payload, t, THREADS);
    __syncthreads();
    if (t == 0) /* 256 counts: an exclusive scan in one thread is enough */
        for (uint32_t k = 0, sum = 0; k < THREADS; k++) {
            uint32_t v = before[k];
            before[k] = sum;
            sum += v;
        }
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
