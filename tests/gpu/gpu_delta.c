/*
 * The delta kernel of libwex_cuda.so on a GPU (wex_cuda_delta_apply):
 * payloads the encoder makes for 256 MiB of bf16 at 0.1 %, 1 % and 10 %
 * changed, and for fp8 bytes at 1 %, applied on the device into a
 * contiguous tensor and into the rows of a column split (a 2-D box),
 * every byte checked against the CPU's apply; then, at 1 %, the time of
 * the step's device work (the payload and its index copied over, the
 * kernel) against copying the whole tensor to the device (what a CUDA
 * destination did at commit before the kernel), in the same run:
 *
 *   delta apply on the device, 1 %: X ms (payload Y MB)
 *   whole tensor host to device:    Z ms
 *   ratio:                          Z/X
 *
 * Exit 77 without a CUDA device.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "delta_chunks.h"
#include "quantize_kernels.h"

#include "cuda_ok.h"

#define MIB 256u

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Applies `payload` into the device tensor `dev` (the stream placed as
 * `m` says) and returns the seconds the copies and the kernel took. */
static int device_apply(const uint8_t *payload, int64_t len, unsigned elem,
                        uint64_t n, const wex_delta_map *m, uint8_t *dev,
                        uint8_t *scratch, double *seconds)
{
    uint64_t chunks = (n + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    wex_delta_chunk *index = malloc(chunks * sizeof(*index));
    uint64_t at = ((uint64_t)len + 15) & ~15ull;
    cudaEvent_t a, b;
    float ms = 0;
    int64_t count;

    if (index == NULL)
        return 1;
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    CUDA_OK(cudaEventRecord(a, 0));
    count = wex__delta_chunks(payload, (size_t)len, elem, n, index, chunks);
    if (count < 0) {
        fprintf(stderr, "the payload does not index\n");
        return 1;
    }
    CUDA_OK(cudaMemcpyAsync(scratch, payload, (size_t)len,
                            cudaMemcpyHostToDevice, 0));
    CUDA_OK(cudaMemcpyAsync(scratch + at, index, (size_t)count * sizeof(*index),
                            cudaMemcpyHostToDevice, 0));
    CUDA_OK((cudaError_t)wex_cuda_delta_apply(
        scratch, (const wex_delta_chunk *)(scratch + at), (uint32_t)count, m,
        dev, 0));
    CUDA_OK(cudaEventRecord(b, 0));
    CUDA_OK(cudaEventSynchronize(b));
    cudaEventElapsedTime(&ms, a, b);
    *seconds = ms / 1000.0;
    free(index);
    return 0;
}

/* One case: a tensor of `rows` x `cols` elements, the box its columns
 * [c0, c0 + width); `fraction` of the box's elements changed. */
static int one_case(unsigned elem, uint64_t rows, uint64_t cols, uint64_t c0,
                    uint64_t width, double fraction, double *seconds,
                    int64_t *payload_len)
{
    uint64_t bytes = rows * cols * elem, n = rows * width;
    uint8_t *old = malloc(bytes), *want = malloc(bytes), *got = malloc(bytes);
    uint8_t *snap = malloc(n * elem), *cur = malloc(n * elem);
    size_t cap = wex__delta_bound(n, elem);
    uint8_t *payload = malloc(cap), *dev, *scratch;
    wex_delta_map m = {0};
    wex__delta_enc e;
    int64_t len;

    if (!old || !want || !got || !snap || !cur || !payload ||
        wex__delta_enc_alloc(&e) != 0)
        return 1;
    for (uint64_t i = 0; i < bytes; i++)
        old[i] = (uint8_t)next();
    for (uint64_t r = 0; r < rows; r++)
        memcpy(snap + r * width * elem, old + (r * cols + c0) * elem,
               width * elem);
    memcpy(cur, snap, n * elem);
    for (uint64_t i = 0; i < n; i++)
        if ((double)(next() % 1000000) < fraction * 1e6)
            cur[i * elem] ^= (uint8_t)(1 + next() % 255);
    memcpy(want, old, bytes);
    for (uint64_t r = 0; r < rows; r++)
        memcpy(want + (r * cols + c0) * elem, cur + r * width * elem,
               width * elem);
    wex__delta_enc_start(&e, elem, payload, cap);
    wex__delta_enc_feed(&e, cur, snap, n * elem);
    len = wex__delta_enc_end(&e);
    m.base = c0 * elem;
    m.elem = elem;
    m.run_elems = width;
    m.outer = width == cols ? 0 : 1;
    m.extent[0] = rows;
    m.stride[0] = cols * elem;
    if (width == cols)
        m.run_elems = n;
    CUDA_OK(cudaMalloc((void **)&dev, bytes));
    /* the payload, then its index on a 16-byte boundary */
    CUDA_OK(cudaMalloc((void **)&scratch, cap + 16 +
                                              (n + WEX__DELTA_CHUNK - 1) /
                                                  WEX__DELTA_CHUNK *
                                                  sizeof(wex_delta_chunk)));
    CUDA_OK(cudaMemcpy(dev, old, bytes, cudaMemcpyHostToDevice));
    if (len < 0 ||
        device_apply(payload, len, elem, n, &m, dev, scratch, seconds) != 0)
        return 1;
    CUDA_OK(cudaMemcpy(got, dev, bytes, cudaMemcpyDeviceToHost));
    if (memcmp(got, want, bytes) != 0) {
        fprintf(stderr,
                "elem %u, %.3f changed, %s: the device holds other bytes "
                "than the CPU's apply\n",
                elem, fraction, width == cols ? "contiguous" : "column split");
        return 1;
    }
    *payload_len = len;
    cudaFree(dev);
    cudaFree(scratch);
    wex__delta_enc_free(&e);
    free(old);
    free(want);
    free(got);
    free(snap);
    free(cur);
    free(payload);
    return 0;
}

int main(void)
{
    static const double fractions[] = {0.001, 0.01, 0.1};
    uint64_t cols = 8192, rows = ((uint64_t)MIB << 20) / 2 / cols;
    double s = 0, best = 1e30, whole = 1e30;
    int devices = 0;
    int64_t len = 0;
    uint8_t *host, *dev;
    cudaEvent_t a, b;

    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    for (int f = 0; f < 3; f++) {
        if (one_case(2, rows, cols, 0, cols, fractions[f], &s, &len) != 0 ||
            one_case(2, rows, cols, cols / 4, cols / 2, fractions[f], &s,
                     &len) != 0)
            return 1;
        printf("bf16, %.1f %% changed: contiguous and column split, every "
               "byte as the CPU applies it\n",
               fractions[f] * 100);
    }
    if (one_case(1, rows, cols, cols / 4, cols / 2, 0.01, &s, &len) != 0)
        return 1;
    printf("fp8 bytes, 1 %% changed, column split: every byte as the CPU "
           "applies it\n");
    for (int p = 0; p < 5; p++) {
        if (one_case(2, rows, cols, 0, cols, 0.01, &s, &len) != 0)
            return 1;
        if (s < best)
            best = s;
    }
    CUDA_OK(cudaMallocHost((void **)&host, rows * cols * 2));
    CUDA_OK(cudaMalloc((void **)&dev, rows * cols * 2));
    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (int p = 0; p < 5; p++) {
        float ms = 0;
        CUDA_OK(cudaEventRecord(a, 0));
        CUDA_OK(cudaMemcpyAsync(dev, host, rows * cols * 2,
                                cudaMemcpyHostToDevice, 0));
        CUDA_OK(cudaEventRecord(b, 0));
        CUDA_OK(cudaEventSynchronize(b));
        cudaEventElapsedTime(&ms, a, b);
        if (ms / 1000.0 < whole)
            whole = ms / 1000.0;
    }
    printf("delta apply on the device, 1 %%: %.3f ms (payload %.1f MB)\n",
           best * 1e3, (double)len / 1e6);
    printf("whole tensor host to device:    %.3f ms (%u MiB, pinned)\n",
           whole * 1e3, MIB);
    printf("ratio:                          %.1f x\n", whole / best);
    return 0;
}
