/*
 * The delta encoding's speed and size beside their limits, from one run:
 * encoding a region of bf16 (the pass that reads the current bytes and
 * the snapshot, and brings the snapshot up to date) against
 * single-thread memcpy of the region's bytes, and against reading both
 * streams and doing nothing else (the most one core can scan at: on some
 * CPUs less than memcpy); applying the payload (its
 * changed elements written into a copy of the old bytes) against copying
 * the whole region, on one thread and on the threads a destination
 * applies with by default; and the payload's size against the region's and
 * against an int32 index and a value per changed element. Best of
 * several passes each. Not a test: tools/bench-delta.sh runs it.
 *
 *   bench_delta [MIB [PERCENT...]]   (default 256 MiB; 0 1 10 50)
 *
 * WEX_DELTA_ISA=avx2 or scalar holds the encoder's scan to those
 * instructions (the payload is the same; test_delta checks it), to compare
 * the scans on one CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "clock.h"
#include "delta.h"
#include "parallel.h"

#define PASSES 5

static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The payload's pieces, applied by the destination's threads. */
typedef struct applier {
    const uint8_t *payload;
    wex__delta_piece pieces[64];
    uint64_t elems;
    uint8_t *to;
} applier;

static int apply_piece(void *arg, size_t k, unsigned worker, char *why,
                       size_t cap)
{
    applier *a = arg;

    (void)worker;
    return wex__delta_apply_piece(a->payload, &a->pieces[k], 2, a->elems, a->to,
                                  why, cap) != 0;
}

/* Applies the payload into copy on `threads` threads, as a destination
 * does at commit (cut in two pieces a thread); seconds, or -1. */
static double apply_on(unsigned threads, const uint8_t *payload, size_t len,
                       uint64_t n, uint8_t *copy)
{
    applier a = {payload, {{0}}, n, copy};
    double t0 = wex__now();
    size_t count = wex__delta_cut(payload, len, 2, n,
                                  threads > 1 ? 2 * threads : 1, a.pieces);
    char why[200];

    if (wex__parallel(count, threads, apply_piece, &a, why, sizeof(why)) != 0) {
        fprintf(stderr, "bench_delta: %s\n", why);
        return -1;
    }
    return wex__now() - t0;
}

/* Reads a and b as the encoder's scan does (prefetching as it does) and
 * does nothing else: the most a pass over the current bytes and the
 * snapshot can go at on one core. With 64-byte loads where the CPU has
 * them: on an Intel Xeon, reading 8 or 16 bytes at a time went a fifth
 * slower than 64. */
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target("avx512f"))) static uint64_t
read_both_avx512(const uint8_t *a, const uint8_t *b, size_t bytes)
{
    __m512i acc = _mm512_setzero_si512();

    for (size_t i = 0; i + 64 <= bytes; i += 64) {
        if (i + 1024 < bytes) {
            _mm_prefetch((const char *)a + i + 1024, _MM_HINT_T0);
            _mm_prefetch((const char *)b + i + 1024, _MM_HINT_T0);
        }
        acc = _mm512_or_si512(acc, _mm512_xor_si512(_mm512_loadu_si512(a + i),
                                                    _mm512_loadu_si512(b + i)));
    }
    return (uint64_t)_mm512_reduce_or_epi64(acc);
}
#endif

static uint64_t read_both(const uint8_t *a, const uint8_t *b, size_t bytes)
{
    uint64_t acc[4] = {0, 0, 0, 0};

#if defined(__x86_64__) && defined(__GNUC__)
    if (__builtin_cpu_supports("avx512f"))
        return read_both_avx512(a, b, bytes);
#endif
    for (size_t i = 0; i + 32 <= bytes; i += 32) {
        if (i % 64 == 0 && i + 1024 < bytes) {
            __builtin_prefetch(a + i + 1024);
            __builtin_prefetch(b + i + 1024);
        }
        for (int w = 0; w < 4; w++) {
            uint64_t x, y;
            memcpy(&x, a + i + 8 * w, 8);
            memcpy(&y, b + i + 8 * w, 8);
            acc[w] |= x ^ y;
        }
    }
    return acc[0] | acc[1] | acc[2] | acc[3];
}

/* A source's regions, encoded on its threads: the region cut into
 * REGIONS of them. */
#define REGIONS 16

int main(int argc, char **argv)
{
    uint64_t mib = argc > 1 ? strtoull(argv[1], NULL, 10) : 256;
    uint64_t bytes = mib << 20, n = bytes / 2;
    double percents[8] = {0, 1, 10, 50};
    int count = argc > 2 ? argc - 2 : 4;
    uint8_t *old = malloc(bytes), *cur = malloc(bytes), *snap = malloc(bytes);
    uint8_t *copy = malloc(bytes);
    size_t cap = wex__delta_bound(n, 2);
    uint8_t *payload = malloc(cap + REGIONS * 64);
    double best_copy = 1e30, best_read = 1e30;
    uint64_t sink = 0;
    wex__delta_enc e;
    unsigned threads = wex__parallel_default(WEX__DELTA_THREADS);

    const char *isa = getenv("WEX_DELTA_ISA");

    if (isa != NULL && strcmp(isa, "avx2") == 0)
        wex__delta_limit_isa(WEX__DELTA_ISA_AVX2);
    else if (isa != NULL && strcmp(isa, "scalar") == 0)
        wex__delta_limit_isa(WEX__DELTA_ISA_SCALAR);
    else if (isa != NULL && isa[0] != '\0' && strcmp(isa, "avx512") != 0) {
        fprintf(stderr,
                "bench_delta: WEX_DELTA_ISA=%s: expected avx512, avx2 "
                "or scalar\n",
                isa);
        return 2;
    }
    if (count > 8)
        count = 8;
    for (int k = 0; k < count && argc > 2; k++)
        percents[k] = strtod(argv[2 + k], NULL);
    if (old == NULL || cur == NULL || snap == NULL || copy == NULL ||
        payload == NULL || mib == 0 || wex__delta_enc_alloc(&e) != 0 ||
        bytes % (REGIONS * 64) != 0) {
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
        t0 = wex__now();
        sink |= read_both(old, copy, bytes);
        t1 = wex__now();
        if (t1 - t0 < best_read)
            best_read = t1 - t0;
    }
    printf("delta encoding of %llu MiB of bf16 (best of %d)\n",
           (unsigned long long)mib, PASSES);
    printf("memcpy, one thread %9.2f GB/s\n", bytes / best_copy / 1e9);
    /* the encoder reads two streams where memcpy reads one: on a core
     * that reads slower than it copies, this bounds the encode's ratio */
    printf("reading the region and its snapshot, no work, one thread "
           "%.2f GB/s, %.2f x memcpy (the encode's ceiling)%s\n",
           bytes / best_read / 1e9, best_copy / best_read, sink ? "?" : "");
    for (int k = 0; k < count; k++) {
        double best_enc = 1e30, best_enc_n = 1e30, best_apply = 1e30,
               best_apply_n = 1e30;
        uint64_t changed = 0;
        int64_t len = 0;
        memcpy(cur, old, bytes);
        for (uint64_t i = 0; i < n; i++)
            if ((double)(next() % 1000000) < percents[k] * 10000.0) {
                cur[i * 2] ^= (uint8_t)(1 + next() % 255);
                changed++;
            }
        for (int p = 0; p < PASSES; p++) {
            double t0, t1, took;
            memcpy(snap, old, bytes);
            t0 = wex__now();
            wex__delta_enc_start(&e, 2, payload, cap);
            wex__delta_enc_feed(&e, cur, snap, bytes);
            len = wex__delta_enc_end(&e);
            t1 = wex__now();
            if (t1 - t0 < best_enc)
                best_enc = t1 - t0;
            for (int on = 0; on < 2; on++) {
                memcpy(copy, old, bytes);
                took =
                    apply_on(on ? threads : 1, payload, (size_t)len, n, copy);
                if (took < 0)
                    return 1;
                if (memcmp(copy, cur, bytes) != 0) {
                    fprintf(stderr,
                            "bench_delta: the applied payload differs\n");
                    return 1;
                }
                if (on && took < best_apply_n)
                    best_apply_n = took;
                if (!on && took < best_apply)
                    best_apply = took;
            }
            /* the same bytes as REGIONS regions on the source's threads
             * (after the apply: this overwrites the payload) */
            memcpy(snap, old, bytes);
            t0 = wex__now();
            if (wex__delta_encode_regions(cur, snap, bytes / REGIONS, REGIONS,
                                          threads, payload) != 0)
                return 1;
            t1 = wex__now();
            if (t1 - t0 < best_enc_n)
                best_enc_n = t1 - t0;
        }
        printf("%5.1f %% changed: payload %.3f %% of the bytes (int32 "
               "index + value: %.3f %%); encode %.2f GB/s, %.2f x memcpy "
               "(target >= 0.8; %.2f x the ceiling), %.2f x as %d regions "
               "on %u threads; apply "
               "%.2f x copying the region on one thread, %.2f x on %u "
               "(target >= 3 at 1 %%)\n",
               percents[k], 100.0 * (double)len / (double)bytes,
               100.0 * (double)changed * 6 / (double)bytes,
               bytes / best_enc / 1e9, best_copy / best_enc,
               best_read / best_enc, best_copy / best_enc_n, REGIONS, threads,
               best_copy / best_apply, best_copy / best_apply_n, threads);
    }
    free(old);
    free(cur);
    free(snap);
    free(copy);
    free(payload);
    wex__delta_enc_free(&e);
    return 0;
}
