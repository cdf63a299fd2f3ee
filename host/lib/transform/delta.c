/* Delta encoding of an operation's bytes (delta.h): the writing and the
 * scans; delta_read.c reads payloads, delta_pieces.c cuts and indexes
 * them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "delta_format.h"

/* ---- writing ----------------------------------------------------------- */

static void set_bit(uint8_t *bits, uint64_t i)
{
    bits[i / 8] |= (uint8_t)(1u << (i % 8));
}

/* Room for `n` more bytes, or the payload overflows from here on. */
static uint8_t *room(wex__delta_enc *e, size_t n)
{
    if (e->overflow || e->cap - e->used < n) {
        e->overflow = 1;
        return NULL;
    }
    return e->out + e->used;
}

static void write_skip(wex__delta_enc *e)
{
    uint8_t *p;

    if (e->skip == 0)
        return;
    if ((p = room(e, 1 + varint_len(e->skip))) != NULL) {
        *p = WEX__DELTA_SKIP;
        e->used = (size_t)(put_varint(p + 1, e->skip) - e->out);
    }
    e->skip = 0;
}

/* The chunk just scanned: its u elements' current bytes are at snap
 * (the snapshot holds them now), n of them changed at pos[]. */
static void write_chunk(wex__delta_enc *e, const uint8_t *snap, uint32_t u)
{
    unsigned elem = e->elem, form;
    uint32_t n = e->n;
    size_t size;
    uint8_t *p;

    if (n == 0) {
        e->skip++;
        return;
    }
    form = delta_chunk_form(n, u, elem, &size);
    write_skip(e);
    if (form == WEX__DELTA_DENSE) {
        if ((p = room(e, size)) == NULL)
            return;
        *p = WEX__DELTA_DENSE;
        memcpy(p + 1, snap, (size_t)u * elem);
        e->used += size;
        return;
    }
    if (form == WEX__DELTA_BITMAP) {
        if ((p = room(e, size)) == NULL)
            return;
        *p++ = WEX__DELTA_BITMAP;
        memset(p, 0, (u + 7) / 8);
        for (uint32_t i = 0; i < n; i++)
            set_bit(p, e->pos[i]);
        p += (u + 7) / 8;
    } else {
        unsigned l = ef_low_bits(n, u);
        uint64_t low_bytes = ((uint64_t)n * l + 7) / 8;
        uint64_t high_bytes = (ef_high_bits(n, u, l) + 7) / 8;

        if ((p = room(e, size)) == NULL)
            return;
        *p++ = WEX__DELTA_SPARSE;
        p = put_varint(p, n);
        *p++ = (uint8_t)l;
        memset(p + low_bytes, 0, (size_t)high_bytes);
        {
            /* low parts 32 bits at a time (l < 16, so acc never holds
             * more than 47) */
            uint64_t acc = 0, mask = l ? (1ull << l) - 1 : 0;
            unsigned have = 0;
            uint8_t *q = p;
            for (uint32_t i = 0; i < n; i++) {
                uint32_t x = e->pos[i];
                acc |= (uint64_t)(x & mask) << have;
                have += l;
                if (have >= 32) {
                    q[0] = (uint8_t)acc;
                    q[1] = (uint8_t)(acc >> 8);
                    q[2] = (uint8_t)(acc >> 16);
                    q[3] = (uint8_t)(acc >> 24);
                    q += 4;
                    acc >>= 32;
                    have -= 32;
                }
                set_bit(p + low_bytes, (uint64_t)(x >> l) + i);
            }
            for (; have > 0; have = have > 8 ? have - 8 : 0, acc >>= 8)
                *q++ = (uint8_t)acc;
        }
        p += low_bytes + high_bytes;
    }
    memcpy(p, e->vals, (size_t)n * elem);
    e->used = (size_t)(p - e->out) + (size_t)n * elem;
}

/* ---- encoding ---------------------------------------------------------- */

/* The scans write a vector's worth past the last change: room for it. */
#define SLACK 64

int wex__delta_enc_alloc(wex__delta_enc *e)
{
    memset(e, 0, sizeof(*e));
    e->pos = malloc((WEX__DELTA_CHUNK + SLACK) * sizeof(*e->pos));
    e->vals = malloc(WEX__DELTA_CHUNK * 8 + SLACK);
    if (e->pos == NULL || e->vals == NULL) {
        wex__delta_enc_free(e);
        return -1;
    }
    return 0;
}

void wex__delta_enc_free(wex__delta_enc *e)
{
    free(e->pos);
    free(e->vals);
    e->pos = NULL;
    e->vals = NULL;
}

void wex__delta_enc_start(wex__delta_enc *e, unsigned elem, uint8_t *out,
                          size_t cap)
{
    e->elem = elem;
    e->out = out;
    e->cap = cap;
    e->used = 0;
    e->overflow = 0;
    e->fill = e->n = 0;
    e->skip = 0;
    e->elems = e->changed = 0;
    e->chunk_snap = NULL;
}

/* The elements of an 8-byte word that differ, as the top bit of each
 * element's lane set: for 2-byte elements, bit 15 of each 16-bit lane
 * that holds a difference, and so on. */
static uint64_t lanes_changed(uint64_t diff, unsigned elem)
{
    static const uint64_t low[9] = {0,
                                    0x7f7f7f7f7f7f7f7full,
                                    0x7fff7fff7fff7fffull,
                                    0,
                                    0x7fffffff7fffffffull,
                                    0,
                                    0,
                                    0,
                                    0x7fffffffffffffffull};
    uint64_t m = low[elem];

    return (((diff & m) + m) | diff) & ~m;
}

/* Records the changed elements of the 8-byte word at element `at` of
 * the chunk and brings the snapshot's word up to date. */
static inline void word_changed(wex__delta_enc *e, uint32_t at, uint64_t diff,
                                uint8_t *snap, const uint8_t *cur)
{
    unsigned elem = e->elem, sh = (unsigned)__builtin_ctz(8 * elem);
    uint64_t lanes = lanes_changed(diff, elem);

    while (lanes != 0) { /* elements are 1, 2, 4 or 8 bytes: shifts */
        unsigned bit = (unsigned)__builtin_ctzll(lanes);
        memcpy(e->vals + (size_t)e->n * elem, cur + (bit >> 3 & ~(elem - 1)),
               elem);
        e->pos[e->n++] = (uint16_t)(at + (bit >> sh));
        lanes &= lanes - 1;
    }
    memcpy(snap, cur, 8);
}

#if defined(__x86_64__) && defined(__GNUC__)

/* 64 bytes at a time with AVX2: equal elements found by a compare of the
 * element's width, the changed ones as a bit per byte; scan() takes the
 * rest. Returns how many bytes it scanned. */
__attribute__((target("avx2"))) static uint64_t
scan_avx2(wex__delta_enc *e, const uint8_t *cur, uint8_t *snap, uint32_t at,
          uint64_t bytes)
{
    unsigned elem = e->elem, sh = (unsigned)__builtin_ctz(elem);
    uint64_t lane = elem == 8 ? 0xffull : (1ull << elem) - 1, i = 0;

    for (; i + 64 <= bytes; i += 64) {
        __m256i a0 = _mm256_loadu_si256((const __m256i *)(cur + i));
        __m256i a1 = _mm256_loadu_si256((const __m256i *)(cur + i + 32));
        __m256i b0 = _mm256_loadu_si256((const __m256i *)(snap + i));
        __m256i b1 = _mm256_loadu_si256((const __m256i *)(snap + i + 32));
        __m256i e0, e1;
        uint64_t diff;

        switch (elem) {
        case 1:
            e0 = _mm256_cmpeq_epi8(a0, b0);
            e1 = _mm256_cmpeq_epi8(a1, b1);
            break;
        case 2:
            e0 = _mm256_cmpeq_epi16(a0, b0);
            e1 = _mm256_cmpeq_epi16(a1, b1);
            break;
        case 4:
            e0 = _mm256_cmpeq_epi32(a0, b0);
            e1 = _mm256_cmpeq_epi32(a1, b1);
            break;
        default:
            e0 = _mm256_cmpeq_epi64(a0, b0);
            e1 = _mm256_cmpeq_epi64(a1, b1);
            break;
        }
        diff = ~((uint64_t)(uint32_t)_mm256_movemask_epi8(e0) |
                 (uint64_t)(uint32_t)_mm256_movemask_epi8(e1) << 32);
        if (__builtin_expect(diff == 0, 1))
            continue;
        if (__builtin_popcountll(diff) > 16) { /* many: the whole block */
            _mm256_storeu_si256((__m256i *)(snap + i), a0);
            _mm256_storeu_si256((__m256i *)(snap + i + 32), a1);
        }
        while (diff != 0) { /* an element's first byte; shifts, as
                               * elements are 1, 2, 4 or 8 bytes */
            unsigned byte = (unsigned)__builtin_ctzll(diff) & ~(elem - 1);
            memcpy(e->vals + (size_t)e->n * elem, cur + i + byte, elem);
            e->pos[e->n++] = (uint16_t)(at + ((i + byte) >> sh));
            /* few: only the changed elements, so a block's other cache
             * line stays clean */
            if (elem == 2)
                memcpy(snap + i + byte, cur + i + byte, 2);
            else
                memcpy(snap + i + byte, cur + i + byte, elem);
            diff &= ~(lane << byte);
        }
    }
    return i;
}

/* 64 bytes at a time with AVX-512: a mask of the changed elements, and
 * no branch on it. The snapshot takes them by a masked store (a line
 * without a change stays clean), their positions and values are packed
 * by compress instructions and the count moves on by the mask's
 * popcount; a block without a change writes nothing that counts. A
 * branch on the mask, taken for a quarter of the blocks at 1 % of bf16
 * elements changed and waiting on the loads it tests, cost more than the
 * work it skipped (0.70 x memcpy with it, 0.93-0.99 x without). */

/* The chunk positions first + i of the set bits i of mask (lanes of
 * them), after the n recorded at pos; how many are recorded then. */
__attribute__((target(AVX512))) static inline uint32_t
pack_positions(uint16_t *pos, uint32_t n, uint32_t first, uint64_t mask,
               unsigned lanes)
{
    const __m512i iota = _mm512_set_epi16(
        31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
        13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);

    for (unsigned half = 0; half < lanes; half += 32) {
        uint32_t m = (uint32_t)(mask >> half);
        __m512i idx =
            _mm512_add_epi16(iota, _mm512_set1_epi16((short)(first + half)));
        _mm512_storeu_si512(pos + n,
                            _mm512_maskz_compress_epi16((__mmask32)m, idx));
        n += (uint32_t)__builtin_popcount(m);
    }
    return n;
}

/* How far ahead the scan asks for both streams. The hardware
 * prefetchers follow two read streams from one core less far than they
 * follow memcpy's one; asking 1 KiB ahead took the scan at 1 % of bf16
 * changed from 0.58 to 0.69 x memcpy on an Intel Xeon (Emerald Rapids),
 * where reading the two streams and doing nothing else gives 0.72-0.79 x.
 * Only inside the stream: rows of a 2-D box are often a few KiB, and a
 * line fetched past a row's end is bandwidth spent for nothing. */
#define PREFETCH_AHEAD 1024

/* One loop per element size, so that the size is a constant in it. The
 * mask is read into a general register once, by the instruction made
 * for it (to_int): GCC 12 has spilled a 16-bit mask register and
 * reloaded it 32 bits wide, garbage above, when one was widened in C. n
 * is kept in a register: the stores may alias the encoder's fields. */
#define SCAN_AVX512(name, bits, k_bits, to_int)                                \
    __attribute__((target(AVX512))) static uint64_t name(                      \
        wex__delta_enc *e, const uint8_t *cur, uint8_t *snap, uint32_t at,     \
        uint64_t bytes)                                                        \
    {                                                                          \
        uint16_t *pos = e->pos;                                                \
        uint8_t *vals = e->vals;                                               \
        uint32_t n = e->n;                                                     \
        uint64_t i = 0;                                                        \
                                                                               \
        for (; i + 64 <= bytes; i += 64) {                                     \
            if (i + PREFETCH_AHEAD < bytes) {                                  \
                _mm_prefetch((const char *)cur + i + PREFETCH_AHEAD,           \
                             _MM_HINT_T0);                                     \
                _mm_prefetch((const char *)snap + i + PREFETCH_AHEAD,          \
                             _MM_HINT_T0);                                     \
            }                                                                  \
            __m512i a = _mm512_loadu_si512(cur + i);                           \
            __m512i b = _mm512_loadu_si512(snap + i);                          \
            k_bits k = _mm512_cmpneq_epi##bits##_mask(a, b);                   \
            uint64_t m = (uint64_t)to_int(k);                                  \
            uint32_t first = at + (uint32_t)(i / (bits / 8));                  \
                                                                               \
            _mm512_mask_storeu_epi##bits(snap + i, k, a);                      \
            _mm512_storeu_si512(vals + (size_t)n * (bits / 8),                 \
                                _mm512_maskz_compress_epi##bits(k, a));        \
            n = pack_positions(pos, n, first, m, 512 / (bits));                \
        }                                                                      \
        e->n = n;                                                              \
        return i;                                                              \
    }

SCAN_AVX512(scan_avx512_8, 8, __mmask64, _cvtmask64_u64)
SCAN_AVX512(scan_avx512_16, 16, __mmask32, _cvtmask32_u32)
SCAN_AVX512(scan_avx512_32, 32, __mmask16, _cvtmask16_u32)
SCAN_AVX512(scan_avx512_64, 64, __mmask8, _cvtmask8_u32)

static uint64_t scan_avx512(wex__delta_enc *e, const uint8_t *cur,
                            uint8_t *snap, uint32_t at, uint64_t bytes)
{
    switch (e->elem) {
    case 1: return scan_avx512_8(e, cur, snap, at, bytes);
    case 2: return scan_avx512_16(e, cur, snap, at, bytes);
    case 4: return scan_avx512_32(e, cur, snap, at, bytes);
    default: return scan_avx512_64(e, cur, snap, at, bytes);
    }
}
#endif

static int isa_limit = WEX__DELTA_ISA_AVX512;

void wex__delta_limit_isa(int isa)
{
    isa_limit = isa;
}

int wex__delta_isa(void)
{
    return isa_limit;
}

/* Scans `take` elements (a multiple of 8 bytes, or the stream's tail)
 * of the current chunk from chunk element `at` on. */
static void scan(wex__delta_enc *e, const uint8_t *cur, uint8_t *snap,
                 uint32_t at, uint32_t take)
{
    unsigned elem = e->elem;
    uint64_t bytes = (uint64_t)take * elem, i = 0;

#if defined(__x86_64__) && defined(__GNUC__)
    if (isa_limit >= WEX__DELTA_ISA_AVX512 && has_avx512())
        i = scan_avx512(e, cur, snap, at, bytes);
    else if (isa_limit >= WEX__DELTA_ISA_AVX2 && __builtin_cpu_supports("avx2"))
        i = scan_avx2(e, cur, snap, at, bytes);
#endif

    /* 32 bytes at a time while nothing changed: two loads and a compare
     * a word, the common case */
    for (; i + 32 <= bytes; i += 32) {
        uint64_t a0, a1, a2, a3, b0, b1, b2, b3;
        memcpy(&a0, cur + i, 8);
        memcpy(&a1, cur + i + 8, 8);
        memcpy(&a2, cur + i + 16, 8);
        memcpy(&a3, cur + i + 24, 8);
        memcpy(&b0, snap + i, 8);
        memcpy(&b1, snap + i + 8, 8);
        memcpy(&b2, snap + i + 16, 8);
        memcpy(&b3, snap + i + 24, 8);
        a0 ^= b0;
        a1 ^= b1;
        a2 ^= b2;
        a3 ^= b3;
        if (__builtin_expect((a0 | a1 | a2 | a3) == 0, 1))
            continue;
        if (a0)
            word_changed(e, at + (uint32_t)(i / elem), a0, snap + i, cur + i);
        if (a1)
            word_changed(e, at + (uint32_t)((i + 8) / elem), a1, snap + i + 8,
                         cur + i + 8);
        if (a2)
            word_changed(e, at + (uint32_t)((i + 16) / elem), a2, snap + i + 16,
                         cur + i + 16);
        if (a3)
            word_changed(e, at + (uint32_t)((i + 24) / elem), a3, snap + i + 24,
                         cur + i + 24);
    }
    for (; i + 8 <= bytes; i += 8) {
        uint64_t x, y;
        memcpy(&x, cur + i, 8);
        memcpy(&y, snap + i, 8);
        if (x != y)
            word_changed(e, at + (uint32_t)(i / elem), x ^ y, snap + i,
                         cur + i);
    }
    for (; i < bytes; i += elem) /* a tail shorter than a word */
        if (memcmp(cur + i, snap + i, elem) != 0) {
            memcpy(snap + i, cur + i, elem);
            memcpy(e->vals + (size_t)e->n * elem, cur + i, elem);
            e->pos[e->n++] = (uint16_t)(at + i / elem);
        }
}

void wex__delta_enc_feed(wex__delta_enc *e, const uint8_t *cur, uint8_t *snap,
                         size_t bytes)
{
    unsigned elem = e->elem;
    uint64_t left = bytes / elem;

    while (left > 0) {
        uint32_t take = WEX__DELTA_CHUNK - e->fill;

        if (take > left)
            take = (uint32_t)left;
        if (e->fill == 0)
            e->chunk_snap = snap;
        scan(e, cur, snap, e->fill, take);
        e->fill += take;
        e->elems += take;
        cur += (size_t)take * elem;
        snap += (size_t)take * elem;
        left -= take;
        if (e->fill == WEX__DELTA_CHUNK) {
            e->changed += e->n;
            write_chunk(e, e->chunk_snap, e->fill);
            e->fill = e->n = 0;
        }
    }
}

int64_t wex__delta_enc_end(wex__delta_enc *e)
{
    if (e->fill > 0) {
        e->changed += e->n;
        write_chunk(e, e->chunk_snap, e->fill);
        e->fill = e->n = 0;
    }
    write_skip(e);
    return e->overflow ? -1 : (int64_t)e->used;
}

size_t wex__delta_chunk_bytes(uint32_t n, uint32_t u, unsigned elem)
{
    size_t size = 0;

    if (n > 0)
        (void)delta_chunk_form(n, u, elem, &size);
    return size;
}

uint64_t wex__delta_bound(uint64_t elems, unsigned elem)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;

    return chunks + elems * elem + 16;
}
