/*
 * The CPU quantizer's speed beside its limit, from one run: fp8-block-128
 * over a bf16 matrix (bytes of bf16 read per second) against
 * single-thread memcpy of the same bytes, best of several passes each.
 * Not a test: tools/bench-quantize.sh builds it optimized and runs it.
 *
 *   bench_quantize [ROWS COLS]     (default 8192 x 8192: 128 MiB of bf16)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "numbers.h"
#include "quantize.h"

#define PASSES 5

int main(int argc, char **argv)
{
    uint64_t rows = argc > 2 ? strtoull(argv[1], NULL, 10) : 8192;
    uint64_t cols = argc > 2 ? strtoull(argv[2], NULL, 10) : 8192;
    uint64_t n = rows * cols, bytes = n * 2;
    uint64_t nbr = (rows + 127) / 128, nbc = (cols + 127) / 128;
    uint16_t *x = malloc(bytes), *copy = malloc(bytes);
    uint8_t *q = malloc(n);
    float *scales = malloc(nbr * nbc * sizeof(float));
    double best_copy = 1e30, best_quant = 1e30;
    uint64_t seed = 0x9e3779b97f4a7c15ull;

    if (x == NULL || copy == NULL || q == NULL || scales == NULL || rows == 0 ||
        cols == 0) {
        fprintf(stderr, "bench_quantize: bad size or out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < n; i++) { /* normal-ish values, many scales */
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = wex__bf16_from_f32((float)((int64_t)(seed >> 33) - (1ll << 30)) *
                                  0x1p-30f * (float)(1u << ((seed >> 8) & 7)));
    }
    memcpy(copy, x, bytes);
    memset(q, 1, n);
    for (int p = 0; p < PASSES; p++) {
        double t0 = wex__now(), t1;
        memcpy(copy, x, bytes);
        t1 = wex__now();
        if (t1 - t0 < best_copy)
            best_copy = t1 - t0;
        t0 = wex__now();
        wex__quantize_blocks(WEX_DTYPE_BF16, x, cols, rows, cols, q, cols,
                             scales, nbc);
        t1 = wex__now();
        if (t1 - t0 < best_quant)
            best_quant = t1 - t0;
    }
    printf("quantize fp8-block-128: %llu x %llu bf16 (%.0f MiB), best of %d\n",
           (unsigned long long)rows, (unsigned long long)cols,
           bytes / 1048576.0, PASSES);
    printf("memcpy, one thread   %8.2f GB/s\n", bytes / best_copy / 1e9);
    printf("quantizer, one thread %7.2f GB/s of bf16 read (%.2f x memcpy; "
           "target >= 0.50)\n",
           bytes / best_quant / 1e9, best_copy / best_quant);
    printf("check: scale[0] %g, q[0] 0x%02x, copy %s\n", scales[0], q[0],
           memcmp(copy, x, bytes) == 0 ? "equal" : "DIFFERS");
    free(x);
    free(copy);
    free(q);
    free(scales);
    return 0;
}
