/*
 * The delta encoding's speed and size beside their limits, from one run:
 * encoding a region of bf16 (the pass that reads the current bytes and
 * the snapshot, and brings the snapshot up to date) against
 * single-thread memcpy of the region's bytes; applying the payload (its
 * changed elements written into a copy of the old bytes) against copying
 * the whole region; and the payload's size against the region's and
 * against an int32 index and a value per changed element. Best of
 * several passes each. Not a test: tools/bench-delta.sh runs it.
 *
 *   bench_delta [MIB [PERCENT...]]   (default 256 MiB; 0 1 10 50)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "delta.h"

#define PASSES 5

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct target {
    uint8_t *buf;
} target;

static int apply(void *arg, uint64_t base, const uint32_t *pos, uint32_t n,
                 const uint8_t *values)
{
    uint8_t *to = ((target *)arg)->buf + base * 2;

    /* what a destination's apply does with a contiguous run */
    if (pos == NULL)
        memcpy(to, values, (size_t)n * 2);
    else
        wex__delta_scatter(to, pos, n, values, 2);
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 256;
    uint64_t bytes = mib << 20, n = bytes / 2;
    double percents[8] = {0, 1, 10, 50};
    int count = argc > 2 ? argc - 2 : 4;
    uint8_t *old = malloc(bytes), *cur = malloc(bytes), *snap = malloc(bytes);
    uint8_t *copy = malloc(bytes);
    size_t cap = wex__delta_bound(n, 2);
    uint8_t *payload = malloc(cap);
    double best_copy = 1e30;
    wex__delta_enc e;
    char why[200];

    if (count > 8)
        count = 8;
    for (int k = 0; k < count && argc > 2; k++)
        percents[k] = strtod(argv[2 + k], NULL);
    if (old == NULL || cur == NULL || snap == NULL || copy == NULL ||
        payload == NULL || mib == 0 || wex__delta_enc_alloc(&e) != 0) {
        fprintf(stderr, "bench_delta: bad size or out of memory\n");
        return 1;
    }
    for (uint64_t i = 0; i < bytes; i++)
        old[i] = (uint8_t)next();
    memcpy(copy, old, bytes);
    for (int p = 0; p < PASSES; p++) {
        double t0 = wex__now(), t1;
        memcpy(copy, old, bytes);
        t1 = wex__now();
        if (t1 - t0 < best_copy)
            best_copy = t1 - t0;
    }
    printf("delta encoding of %llu MiB of bf16 (best of %d)\n",
           (unsigned long long)mib, PASSES);
    printf("memcpy, one thread %9.2f GB/s\n", bytes / best_copy / 1e9);
    for (int k = 0; k < count; k++) {
        double best_enc = 1e30, best_apply = 1e30;
        uint64_t changed = 0;
        int64_t len = 0;
        memcpy(cur, old, bytes);
        for (uint64_t i = 0; i < n; i++)
            if ((double)(next() % 1000000) < percents[k] * 10000.0) {
                cur[i * 2] ^= (uint8_t)(1 + next() % 255);
                changed++;
            }
        for (int p = 0; p < PASSES; p++) {
            target t = {copy};
            double t0, t1;
            memcpy(snap, old, bytes);
            t0 = wex__now();
            wex__delta_enc_start(&e, 2, payload, cap);
            wex__delta_enc_feed(&e, cur, snap, bytes);
            len = wex__delta_enc_end(&e);
            t1 = wex__now();
            if (t1 - t0 < best_enc)
                best_enc = t1 - t0;
            memcpy(copy, old, bytes);
            t0 = wex__now();
            if (wex__delta_walk(payload, (size_t)len, 2, n, apply, &t, why,
                                sizeof(why)) != 0) {
                fprintf(stderr, "bench_delta: %s\n", why);
                return 1;
            }
            t1 = wex__now();
            if (t1 - t0 < best_apply)
                best_apply = t1 - t0;
        }
        if (memcmp(copy, cur, bytes) != 0) {
            fprintf(stderr, "bench_delta: the applied payload differs\n");
            return 1;
        }
        printf("%5.1f %% changed: payload %.3f %% of the bytes (int32 "
               "index + value: %.3f %%); encode %.2f GB/s, %.2f x memcpy "
               "(target >= 0.8); apply %.2f x copying the region (target "
               ">= 3 at 1 %%)\n",
               percents[k], 100.0 * (double)len / (double)bytes,
               100.0 * (double)changed * 6 / (double)bytes,
               bytes / best_enc / 1e9, best_copy / best_enc,
               best_copy / best_apply);
    }
    free(old);
    free(cur);
    free(snap);
    free(copy);
    free(payload);
    wex__delta_enc_free(&e);
    return 0;
}
