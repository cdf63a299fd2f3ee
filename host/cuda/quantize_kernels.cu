/*
 * fp8-block-128 on the GPU (quantize_kernels.h): each element goes
 * through the very conversions of numbers.h that the CPU quantizer uses
 * (wex__e4m3_word_quantized), compiled for the device, and its product is
 * rounded once (the library is built with -fmad=false), so both make the
 * same bytes. The multipliers come from the host, which computes
 * them from the agreed amaxes as the CPU path does.
 */
#include <cuda_runtime.h>
#include <stdint.h>

#include <wex/abi.h>

#include "numbers.h"
#include "quantize_kernels.h"

#define BLOCK 128u
#define THREADS 256u

__device__ static float load(uint32_t dtype, const unsigned char *src,
                             uint64_t i)
{
    if (dtype == WEX_DTYPE_BF16)
        return wex__bf16_to_f32(((const uint16_t *)src)[i]);
    if (dtype == WEX_DTYPE_F16)
        return wex__f16_to_f32(((const uint16_t *)src)[i]);
    return ((const float *)src)[i];
}

/* One CUDA block per cell. |x| as bits orders as |x|, and a NaN's bits
 * are above infinity's: the max of the bits is the amax, NaN kept. */
__global__ static void box_amax(const unsigned char *src, uint32_t dtype,
                                uint64_t ld, uint64_t rows, uint64_t cols,
                                uint32_t row_phase, uint32_t col_phase,
                                float *amax)
{
    __shared__ uint32_t best;
    uint64_t i = blockIdx.y, j = blockIdx.x;
    uint64_t r0 = i * BLOCK > row_phase ? i * BLOCK - row_phase : 0;
    uint64_t c0 = j * BLOCK > col_phase ? j * BLOCK - col_phase : 0;
    uint64_t r1 = (i + 1) * BLOCK - row_phase, c1 = (j + 1) * BLOCK - col_phase;
    uint32_t m = 0;

    r1 = r1 < rows ? r1 : rows;
    c1 = c1 < cols ? c1 : cols;
    if (threadIdx.x == 0)
        best = 0;
    __syncthreads();
    for (uint64_t k = threadIdx.x, w = c1 - c0; k < (r1 - r0) * w;
         k += blockDim.x) {
        uint32_t a =
            wex__f32_bits(load(dtype, src, (r0 + k / w) * ld + c0 + k % w)) &
            0x7fffffffu;
        m = a > m ? a : m;
    }
    for (int s = 16; s > 0; s /= 2) {
        uint32_t o = __shfl_down_sync(0xffffffffu, m, s);
        m = o > m ? o : m;
    }
    if ((threadIdx.x & 31u) == 0)
        atomicMax(&best, m);
    __syncthreads();
    if (threadIdx.x == 0)
        amax[i * gridDim.x + j] = wex__f32_of_bits(best);
}

/* Rows over the grid's y, columns over its x: consecutive threads read
 * and write consecutive elements. */
__global__ static void box_quantize(const unsigned char *src, uint32_t dtype,
                                    uint64_t ld, uint64_t rows, uint64_t cols,
                                    uint32_t row_phase, uint32_t col_phase,
                                    const float *mult, uint64_t mult_ld,
                                    uint8_t *dst)
{
    for (uint64_t r = blockIdx.y; r < rows; r += gridDim.y) {
        const float *m = mult + (r + row_phase) / BLOCK * mult_ld;
        for (uint64_t c = (uint64_t)blockIdx.x * blockDim.x + threadIdx.x;
             c < cols; c += (uint64_t)gridDim.x * blockDim.x)
            dst[r * cols + c] = (uint8_t)wex__e4m3_word_quantized(
                load(dtype, src, r * ld + c), m[(c + col_phase) / BLOCK]);
    }
}

static int dtype_ok(uint32_t dtype)
{
    return dtype == WEX_DTYPE_BF16 || dtype == WEX_DTYPE_F16 ||
           dtype == WEX_DTYPE_F32;
}

extern "C" int wex_cuda_kernels_abi(void)
{
    return WEX_CUDA_KERNELS_ABI;
}

extern "C" int wex_cuda_box_amax(const void *src, uint32_t dtype, uint64_t ld,
                                 uint64_t rows, uint64_t cols,
                                 uint32_t row_phase, uint32_t col_phase,
                                 float *amax, void *stream)
{
    uint64_t nbr = (row_phase + rows + BLOCK - 1) / BLOCK;
    uint64_t nbc = (col_phase + cols + BLOCK - 1) / BLOCK;

    if (!dtype_ok(dtype) || row_phase >= BLOCK || col_phase >= BLOCK ||
        nbr > 65535u || nbc > 0x7fffffffu)
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || cols == 0)
        return 0;
    box_amax<<<dim3((unsigned)nbc, (unsigned)nbr), THREADS, 0,
               (cudaStream_t)stream>>>((const unsigned char *)src, dtype, ld,
                                       rows, cols, row_phase, col_phase, amax);
    return (int)cudaGetLastError();
}

extern "C" int wex_cuda_box_quantize(const void *src, uint32_t dtype,
                                     uint64_t ld, uint64_t rows, uint64_t cols,
                                     uint32_t row_phase, uint32_t col_phase,
                                     const float *mult, uint64_t mult_ld,
                                     uint8_t *dst, void *stream)
{
    uint64_t gx = (cols + THREADS - 1) / THREADS;

    if (!dtype_ok(dtype) || row_phase >= BLOCK || col_phase >= BLOCK)
        return (int)cudaErrorInvalidValue;
    if (rows == 0 || cols == 0)
        return 0;
    box_quantize<<<dim3((unsigned)(gx < 64 ? gx : 64),
                        (unsigned)(rows < 65535 ? rows : 65535)),
                   THREADS, 0, (cudaStream_t)stream>>>(
        (const unsigned char *)src, dtype, ld, rows, cols, row_phase, col_phase,
        mult, mult_ld, dst);
    return (int)cudaGetLastError();
}
