/*
 * The fp8 kernels of libwex_cuda.so on a GPU: a 8192 x 8192 bf16 weight
 * (128 MiB, values over many magnitudes) quantized by the kernels, every
 * byte and every scale checked against the CPU quantizer
 * (wex__quantize_blocks), then the kernels' speed against a device-to-
 * device cudaMemcpy of the same bytes, in the same run:
 *
 *   fp8 kernels (amax + quantize): X GB/s of bf16 read
 *   cudaMemcpy D2D:                Y GB/s
 *   ratio kernels / cudaMemcpy:    X/Y
 *
 * Exit 77 without a CUDA device.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/abi.h>

#include "quantize.h"
#include "quantize_kernels.h"

#include "cuda_ok.h"

#define N 8192u
#define NB (N / 128u)
#define PASSES 10

static float seconds(cudaEvent_t a, cudaEvent_t b)
{
    float ms = 0;

    cudaEventElapsedTime(&ms, a, b);
    return ms / 1000.0f;
}

int main(void)
{
    size_t elems = (size_t)N * N, bytes = elems * 2;
    uint16_t *x;
    uint8_t *want, *got;
    static float scales[NB * NB], amax[NB * NB], mult[NB * NB];
    void *dx, *dcopy;
    float *damax, *dmult;
    uint8_t *dq;
    cudaEvent_t t0, t1;
    uint64_t s = 0x243f6a8885a308d3ull;
    float best = 0, best_copy = 0;
    int count = 0;

    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    /* allocated only now: a skip leaks nothing (LeakSanitizer) */
    x = malloc(bytes);
    want = malloc(elems);
    got = malloc(elems);
    if (x == NULL || want == NULL || got == NULL)
        return 1;
    for (size_t i = 0; i < elems; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] =
            (uint16_t)(((s >> 8) & 0x80ffu) | ((0x70u + (s >> 40) % 24u) << 7));
    }
    x[12345] = 0x7fc1; /* a NaN block */
    wex__quantize_blocks(WEX_DTYPE_BF16, x, N, N, N, want, N, scales, NB);
    CUDA_OK(cudaMalloc(&dx, bytes));
    CUDA_OK(cudaMalloc(&dcopy, bytes));
    CUDA_OK(cudaMalloc((void **)&dq, elems));
    CUDA_OK(cudaMalloc((void **)&damax, sizeof(amax)));
    CUDA_OK(cudaMalloc((void **)&dmult, sizeof(mult)));
    CUDA_OK(cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice));
    CUDA_OK((cudaError_t)wex_cuda_box_amax(dx, WEX_DTYPE_BF16, N, N, N, 0, 0,
                                           damax, NULL));
    CUDA_OK(cudaMemcpy(amax, damax, sizeof(amax), cudaMemcpyDeviceToHost));
    for (unsigned c = 0; c < NB * NB; c++) {
        if (wex__quant_scale_inv(amax[c]) != scales[c] &&
            !(scales[c] != scales[c] && amax[c] != amax[c])) {
            fprintf(stderr, "block %u: amax %a, the CPU's scale_inv %a\n", c,
                    amax[c], scales[c]);
            return 1;
        }
        mult[c] = wex__quant_mult(amax[c]);
    }
    CUDA_OK(cudaMemcpy(dmult, mult, sizeof(mult), cudaMemcpyHostToDevice));
    CUDA_OK((cudaError_t)wex_cuda_box_quantize(dx, WEX_DTYPE_BF16, N, N, N, 0,
                                               0, dmult, NB, dq, NULL));
    CUDA_OK(cudaMemcpy(got, dq, elems, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < elems; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "element %zu: 0x%02x, the CPU's 0x%02x\n", i,
                    got[i], want[i]);
            return 1;
        }
    printf("fp8 kernels: %u x %u bf16, every byte and scale as the CPU "
           "quantizer's\n",
           N, N);
    CUDA_OK(cudaEventCreate(&t0));
    CUDA_OK(cudaEventCreate(&t1));
    for (int p = 0; p < PASSES; p++) {
        float dt;
        cudaEventRecord(t0, NULL);
        wex_cuda_box_amax(dx, WEX_DTYPE_BF16, N, N, N, 0, 0, damax, NULL);
        wex_cuda_box_quantize(dx, WEX_DTYPE_BF16, N, N, N, 0, 0, dmult, NB, dq,
                              NULL);
        cudaEventRecord(t1, NULL);
        CUDA_OK(cudaEventSynchronize(t1));
        dt = seconds(t0, t1);
        best = best == 0 || bytes / dt > best ? bytes / dt : best;
        cudaEventRecord(t0, NULL);
        cudaMemcpyAsync(dcopy, dx, bytes, cudaMemcpyDeviceToDevice, NULL);
        cudaEventRecord(t1, NULL);
        CUDA_OK(cudaEventSynchronize(t1));
        dt = seconds(t0, t1);
        best_copy =
            best_copy == 0 || bytes / dt > best_copy ? bytes / dt : best_copy;
    }
    printf(
        "fp8 kernels (amax + quantize): %.1f GB/s of bf16 read (best of %d)\n"
        "cudaMemcpy D2D:                %.1f GB/s (the same bytes)\n"
        "ratio kernels / cudaMemcpy:    %.2f\n",
        best / 1e9, PASSES, best_copy / 1e9, best / best_copy);
    cudaFree(dx);
    cudaFree(dcopy);
    cudaFree(dq);
    cudaFree(damax);
    cudaFree(dmult);
    free(x);
    free(want);
    free(got);
    return 0;
}
