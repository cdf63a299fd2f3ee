/*
 * The delta encoder of libwex_cuda.so on a GPU (wex_cuda_delta_count,
 * wex_cuda_delta_encode, laid out by wex__delta_slots): for 256 MiB of
 * bf16 at 0 %, 0.1 %, 1 % and 10 % changed, and fp8 bytes at 1 %, read in
 * place from a contiguous tensor and from the rows of a column split (a
 * 2-D box), the payload is byte for byte the CPU encoder's and the
 * device snapshot ends equal to the current bytes, and its digest taken
 * on the device (wex_cuda_digest_blocks) is the host's digest of them;
 * then, at 1 %, the
 * time of a group's encoding (both kernels, the counts and slots across
 * the bus, the payload back) against what a CUDA source did before the
 * kernel (the whole tensor copied to the host to be scanned there) and
 * against a device-to-device copy of the tensor (the same memory
 * traffic: the encoder reads current and snapshot), in the same run:
 *
 *   delta encode on the device, 1 %: X ms (payload Y MB)
 *   digest on the device:             D ms
 *   whole tensor device to host:      Z ms
 *   tensor copied on the device:      W ms
 *   ratio to the bus copy:            Z/X
 *   ratio to the device copy:         W/X (digest: W/D)
 *
 * Exit 77 without a CUDA device.
 */
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "delta.h"
#include "delta_chunks.h"
#include "delta_scan_chunks.h"
#include "digest_blocks.h"
#include "digest_update.h"
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

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The device's encoding of the stream at `cur` (placed as *m says)
 * against `snap`, as libwex drives it: into `out`, its length. */
static int64_t device_encode(const uint8_t *cur, const wex_delta_map *m,
                             uint8_t *snap, uint64_t n, uint8_t *scratch,
                             uint32_t *counts, wex_delta_slot *slots,
                             uint8_t *out, double *seconds)
{
    uint64_t chunks = (n + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint64_t slots_at = (chunks * 4 + 63) & ~63ull;
    uint64_t payload_at = slots_at + (chunks + 1) * sizeof(wex_delta_slot);
    double t0 = now();
    size_t count = 0;
    int64_t len;

    CUDA_OK((cudaError_t)wex_cuda_delta_count(cur, m, snap, n,
                                              (uint32_t *)scratch, 0));
    CUDA_OK(cudaMemcpy(counts, scratch, chunks * 4, cudaMemcpyDeviceToHost));
    len = wex__delta_slots(counts, n, m->elem, slots, &count);
    if (len < 0)
        return -1;
    CUDA_OK(cudaMemcpy(scratch + slots_at, slots, count * sizeof(*slots),
                       cudaMemcpyHostToDevice));
    CUDA_OK((cudaError_t)wex_cuda_delta_encode(
        cur, m, snap, (const wex_delta_slot *)(scratch + slots_at),
        (uint32_t)count, scratch + payload_at, 0));
    CUDA_OK(cudaMemcpy(out, scratch + payload_at, (size_t)len,
                       cudaMemcpyDeviceToHost));
    *seconds = now() - t0;
    return len;
}

/* The digest of the `len` bytes at `dev` taken on the device, as libwex
 * takes it (device_kernels.c, wex__device_digest). */
static uint64_t device_digest(const uint8_t *dev, uint64_t len, double *seconds)
{
    uint64_t count = wex_digest_block_count(len), *blocks, last, d;
    uint8_t tail[WEX_XXH3_MIDSIZE_MAX], *scratch;
    double t0;

    blocks = malloc(count * sizeof(*blocks));
    CUDA_OK(cudaMalloc((void **)&scratch, count * 8 + sizeof(tail)));
    t0 = now();
    CUDA_OK((cudaError_t)wex_cuda_digest_blocks(dev, len, (uint64_t *)scratch,
                                                scratch + count * 8, 0));
    CUDA_OK(cudaMemcpy(blocks, scratch, count * 8, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(tail, scratch + count * 8, sizeof(tail),
                       cudaMemcpyDeviceToHost));
    last = wex_digest_block_len(len, count - 1);
    if (last <= WEX_XXH3_MIDSIZE_MAX)
        blocks[count - 1] = XXH3_64bits(tail, last);
    d = wex__digest_of_blocks(blocks, count);
    *seconds = now() - t0;
    cudaFree(scratch);
    free(blocks);
    return d;
}

static double digest_best = 1e30;

static int one_case(unsigned elem, uint64_t rows, uint64_t cols, uint64_t c0,
                    uint64_t width, double fraction, double *seconds,
                    int64_t *payload_len)
{
    uint64_t bytes = rows * cols * elem, n = rows * width;
    uint64_t chunks = (n + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    size_t cap = wex__delta_bound(n, elem);
    uint8_t *tensor = malloc(bytes), *snap = malloc(n * elem);
    uint8_t *cur = malloc(n * elem), *want = malloc(cap), *got = malloc(cap);
    uint32_t *counts = malloc((chunks + 1) * 4);
    wex_delta_slot *slots = malloc((chunks + 1) * sizeof(*slots));
    uint8_t *dev, *dev_snap, *scratch;
    wex_delta_map m = {0};
    wex__delta_enc e;
    int64_t len, got_len;

    if (!tensor || !snap || !cur || !want || !got || !counts || !slots ||
        wex__delta_enc_alloc(&e) != 0)
        return 1;
    for (uint64_t i = 0; i < bytes; i++)
        tensor[i] = (uint8_t)next();
    for (uint64_t r = 0; r < rows; r++)
        memcpy(snap + r * width * elem, tensor + (r * cols + c0) * elem,
               width * elem);
    CUDA_OK(cudaMalloc((void **)&dev, bytes));
    CUDA_OK(cudaMalloc((void **)&dev_snap, n * elem));
    CUDA_OK(cudaMalloc((void **)&scratch,
                       chunks * 4 + 64 + (chunks + 1) * sizeof(*slots) + cap));
    CUDA_OK(cudaMemcpy(dev_snap, snap, n * elem, cudaMemcpyHostToDevice));
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = c0; c < c0 + width; c++)
            if ((double)(next() % 1000000) < fraction * 1e6)
                tensor[(r * cols + c) * elem + next() % elem] ^=
                    (uint8_t)(1 + next() % 255);
    for (uint64_t r = 0; r < rows; r++)
        memcpy(cur + r * width * elem, tensor + (r * cols + c0) * elem,
               width * elem);
    CUDA_OK(cudaMemcpy(dev, tensor, bytes, cudaMemcpyHostToDevice));
    wex__delta_enc_start(&e, elem, want, cap);
    wex__delta_enc_feed(&e, cur, snap, n * elem);
    len = wex__delta_enc_end(&e);
    m.base = c0 * elem;
    m.elem = elem;
    m.run_elems = width == cols ? n : width;
    m.outer = width == cols ? 0 : 1;
    m.extent[0] = rows;
    m.stride[0] = cols * elem;
    got_len = device_encode(dev, &m, dev_snap, n, scratch, counts, slots, got,
                            seconds);
    {
        wex__digest *h = wex__digest_create();
        double t = 0;
        uint64_t want;
        wex__digest_add(h, cur, n * elem);
        want = wex__digest_final(h);
        wex__digest_free(h);
        if (device_digest(dev_snap, n * elem, &t) != want) {
            fprintf(stderr,
                    "elem %u, %.3f changed: the device's digest of "
                    "the snapshot is not the host's\n",
                    elem, fraction);
            return 1;
        }
        if (t < digest_best)
            digest_best = t;
    }
    CUDA_OK(cudaMemcpy(snap, dev_snap, n * elem, cudaMemcpyDeviceToHost));
    if (len < 0 || got_len != len || memcmp(got, want, (size_t)len) != 0 ||
        memcmp(snap, cur, n * elem) != 0) {
        fprintf(stderr,
                "elem %u, %.3f changed, %s: the device encoded %lld bytes, "
                "the CPU %lld, %s; the snapshot %s the current bytes\n",
                elem, fraction, width == cols ? "contiguous" : "column split",
                (long long)got_len, (long long)len,
                got_len == len && memcmp(got, want, (size_t)len) == 0
                    ? "the same"
                    : "others",
                memcmp(snap, cur, n * elem) == 0 ? "equals" : "differs from");
        return 1;
    }
    *payload_len = len;
    cudaFree(dev);
    cudaFree(dev_snap);
    cudaFree(scratch);
    wex__delta_enc_free(&e);
    free(tensor);
    free(snap);
    free(cur);
    free(want);
    free(got);
    free(counts);
    free(slots);
    return 0;
}

/* The best of five of a copy of `bytes` from `src` to `dst`. */
static double copy_seconds(void *dst, const void *src, uint64_t bytes,
                           enum cudaMemcpyKind kind)
{
    double best = 1e30;
    cudaEvent_t a, b;

    CUDA_OK(cudaEventCreate(&a));
    CUDA_OK(cudaEventCreate(&b));
    for (int p = 0; p < 5; p++) {
        float ms = 0;
        CUDA_OK(cudaEventRecord(a, 0));
        CUDA_OK(cudaMemcpyAsync(dst, src, bytes, kind, 0));
        CUDA_OK(cudaEventRecord(b, 0));
        CUDA_OK(cudaEventSynchronize(b));
        cudaEventElapsedTime(&ms, a, b);
        if (ms / 1000.0 < best)
            best = ms / 1000.0;
    }
    return best;
}

int main(void)
{
    static const double fractions[] = {0, 0.001, 0.01, 0.1};
    uint64_t cols = 8192, rows = ((uint64_t)MIB << 20) / 2 / cols;
    uint64_t bytes = rows * cols * 2;
    double s = 0, best = 1e30, bus, device;
    int devices = 0;
    int64_t len = 0;
    uint8_t *host, *dev, *dev2;

    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
        printf("no CUDA device: skipped\n");
        return 77;
    }
    for (int f = 0; f < 4; f++) {
        if (one_case(2, rows, cols, 0, cols, fractions[f], &s, &len) != 0 ||
            one_case(2, rows, cols, cols / 4, cols / 2, fractions[f], &s,
                     &len) != 0)
            return 1;
        printf("bf16, %.1f %% changed: contiguous and column split, the "
               "CPU encoder's payload byte for byte, the host's digest\n",
               fractions[f] * 100);
    }
    if (one_case(1, rows, cols, cols / 4, cols / 2, 0.01, &s, &len) != 0)
        return 1;
    printf("fp8 bytes, 1 %% changed, column split: the CPU encoder's "
           "payload byte for byte\n");
    for (int p = 0; p < 5; p++) {
        if (one_case(2, rows, cols, 0, cols, 0.01, &s, &len) != 0)
            return 1;
        if (s < best)
            best = s;
    }
    CUDA_OK(cudaMallocHost((void **)&host, bytes));
    CUDA_OK(cudaMalloc((void **)&dev, bytes));
    CUDA_OK(cudaMalloc((void **)&dev2, bytes));
    bus = copy_seconds(host, dev, bytes, cudaMemcpyDeviceToHost);
    device = copy_seconds(dev2, dev, bytes, cudaMemcpyDeviceToDevice);
    printf("delta encode on the device, 1 %%: %.3f ms (payload %.1f MB)\n",
           best * 1e3, (double)len / 1e6);
    printf("digest on the device:             %.3f ms\n", digest_best * 1e3);
    printf("whole tensor device to host:      %.3f ms (%u MiB, pinned)\n",
           bus * 1e3, MIB);
    printf("tensor copied on the device:      %.3f ms\n", device * 1e3);
    printf("ratio to the bus copy:            %.1f x\n", bus / best);
    printf("ratio to the device copy:         %.2f x (digest: %.2f x)\n",
           device / best, device / digest_best);
    return 0;
}
