/*
 * An operation's digest in device memory (quantize_kernels.h,
 * wex_cuda_digest_blocks): a thread a block of the stream, each running
 * the XXH3-64 long path of digest_blocks.h that the host's tests run on
 * the CPU against the library.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include "digest_blocks.h"
#include "quantize_kernels.h"

#define THREADS 128u

__global__ static void digest_blocks(const uint8_t *stream, uint64_t len,
                                     uint64_t *digests, uint8_t *tail)
{
    uint64_t b = (uint64_t)blockIdx.x * THREADS + threadIdx.x;

    if (b < wex_digest_block_count(len))
        wex_digest_one_block(stream, len, b, digests, tail);
}

extern "C" int wex_cuda_digest_blocks(const uint8_t *stream, uint64_t len,
                                      uint64_t *digests, uint8_t *tail,
                                      void *stream_handle)
{
    uint64_t grid = (wex_digest_block_count(len) + THREADS - 1) / THREADS;

    if (grid == 0)
        return cudaSuccess;
    if (grid > 0x7fffffffu)
        return cudaErrorInvalidValue;
    digest_blocks<<<(unsigned)grid, THREADS, 0, (cudaStream_t)stream_handle>>>(
        stream, len, digests, tail);
    return cudaGetLastError();
}
