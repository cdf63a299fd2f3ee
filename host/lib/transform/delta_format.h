/*
 * What the delta encoder (delta.c), reader (delta_read.c) and index
 * (delta_pieces.c) share: the payload format's small parts (delta.h
 * describes the format) and the vector instructions this CPU offers.
 * Private to host/lib/transform.
 */
#ifndef WEX_HOST_DELTA_FORMAT_H
#define WEX_HOST_DELTA_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "delta.h"

static inline unsigned varint_len(uint64_t v)
{
    unsigned n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Elias-Fano's split: the largest l with n * 2^l <= u (n > 0). */
static inline unsigned ef_low_bits(uint32_t n, uint32_t u)
{
    unsigned l = 0;

    while (((uint64_t)n << (l + 1)) <= u)
        l++;
    return l;
}

static inline uint64_t ef_high_bits(uint32_t n, uint32_t u, unsigned l)
{
    return (uint64_t)n + (u >> l) + 1;
}

static inline size_t delta_sparse_size(uint32_t n, uint32_t u, unsigned elem)
{
    unsigned l = ef_low_bits(n, u);

    return 2 + varint_len(n) + ((uint64_t)n * l + 7) / 8 +
           (ef_high_bits(n, u, l) + 7) / 8 + (size_t)n * elem;
}

static inline size_t delta_bitmap_size(uint32_t n, uint32_t u, unsigned elem)
{
    return 1 + (u + 7) / 8 + (size_t)n * elem;
}

/* The form a chunk of u elements, n > 0 of them changed, is written in
 * (the smallest; dense on a tie, then the bitmap), and its bytes: the
 * one choice of the CPU's encoder and the device's (delta_slots.c). */
static inline unsigned delta_chunk_form(uint32_t n, uint32_t u, unsigned elem,
                                        size_t *bytes)
{
    size_t sparse = delta_sparse_size(n, u, elem);
    size_t bitmap = delta_bitmap_size(n, u, elem);
    size_t dense = 1 + (size_t)u * elem;

    if (dense <= sparse && dense <= bitmap) {
        *bytes = dense;
        return WEX__DELTA_DENSE;
    }
    *bytes = bitmap < sparse ? bitmap : sparse;
    return bitmap < sparse ? WEX__DELTA_BITMAP : WEX__DELTA_SPARSE;
}

/* A payload being read: where, its end, and where to say what is wrong. */
typedef struct reader {
    const uint8_t *p, *end;
    char *why;
    size_t cap;
} reader;

static inline int fail(reader *r, const char *what, uint64_t chunk)
{
    snprintf(r->why, r->cap, "delta payload, chunk %llu: %s",
             (unsigned long long)chunk, what);
    return -1;
}

static inline int get_varint(reader *r, uint64_t *v)
{
    unsigned shift = 0;

    *v = 0;
    while (r->p < r->end && shift < 64) {
        uint8_t b = *r->p++;
        *v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return 0;
        shift += 7;
    }
    return -1;
}

/* The changed elements of a bitmap chunk of u elements. */
static inline uint64_t bitmap_count(const uint8_t *bits, uint32_t u)
{
    uint64_t n = 0;

    for (uint32_t i = 0; i < u; i += 8) {
        unsigned b = bits[i / 8];
        if (i + 8 > u)
            b &= (1u << (u - i)) - 1;
        n += (unsigned)__builtin_popcount(b);
    }
    return n;
}

/* The vector instructions the codec may use: the best this CPU has,
 * unless a test lowered the limit (wex__delta_limit_isa). */
int wex__delta_isa(void);

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

/* __builtin_cpu_supports reads what the loader found: cheap, and the
 * same on every thread. */
static inline int has_avx512(void)
{
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vbmi2");
}

/* What the AVX-512 paths are compiled for (has_avx512 checks it). */
#define AVX512 "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi2,popcnt"
#endif

#endif /* WEX_HOST_DELTA_FORMAT_H */
