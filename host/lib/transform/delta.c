/* Delta encoding of an operation's bytes (delta.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "delta_chunks.h"

_Static_assert(WEX_DELTA_KIND_SPARSE == WEX__DELTA_SPARSE &&
                   WEX_DELTA_KIND_BITMAP == WEX__DELTA_BITMAP &&
                   WEX_DELTA_KIND_DENSE == WEX__DELTA_DENSE,
               "delta_chunks.h numbers the chunk forms as delta.h does");

/* ---- writing ----------------------------------------------------------- */

static unsigned varint_len(uint64_t v)
{
    unsigned n = 1;

    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Elias-Fano's split: the largest l with n * 2^l <= u (n > 0). */
static unsigned ef_low_bits(uint32_t n, uint32_t u)
{
    unsigned l = 0;

    while (((uint64_t)n << (l + 1)) <= u)
        l++;
    return l;
}

static uint64_t ef_high_bits(uint32_t n, uint32_t u, unsigned l)
{
    return (uint64_t)n + (u >> l) + 1;
}

static size_t sparse_size(uint32_t n, uint32_t u, unsigned elem)
{
    unsigned l = ef_low_bits(n, u);

    return 2 + varint_len(n) + ((uint64_t)n * l + 7) / 8 +
           (ef_high_bits(n, u, l) + 7) / 8 + (size_t)n * elem;
}

static size_t bitmap_size(uint32_t n, uint32_t u, unsigned elem)
{
    return 1 + (u + 7) / 8 + (size_t)n * elem;
}

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
    unsigned elem = e->elem;
    uint32_t n = e->n;
    size_t sparse, bitmap, dense = 1 + (size_t)u * elem;
    uint8_t *p;

    if (n == 0) {
        e->skip++;
        return;
    }
    sparse = sparse_size(n, u, elem);
    bitmap = bitmap_size(n, u, elem);
    write_skip(e);
    /* the same choice as wex__delta_chunk_bytes */
    if (dense <= sparse && dense <= bitmap) {
        if ((p = room(e, dense)) == NULL)
            return;
        *p = WEX__DELTA_DENSE;
        memcpy(p + 1, snap, (size_t)u * elem);
        e->used += dense;
        return;
    }
    if (bitmap < sparse) {
        if ((p = room(e, bitmap)) == NULL)
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

        if ((p = room(e, sparse)) == NULL)
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
#include <immintrin.h>

/* __builtin_cpu_supports reads what the loader found: cheap, and the
 * same on every thread. */
static int has_avx512(void)
{
    return __builtin_cpu_supports("avx512f") &&
           __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512vbmi2");
}

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
#define AVX512 "avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi2,popcnt"

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
    size_t sparse, bitmap, dense = 1 + (size_t)u * elem;

    if (n == 0)
        return 0;
    sparse = sparse_size(n, u, elem);
    bitmap = bitmap_size(n, u, elem);
    if (dense <= sparse && dense <= bitmap)
        return dense;
    return bitmap < sparse ? bitmap : sparse;
}

uint64_t wex__delta_bound(uint64_t elems, unsigned elem)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;

    return chunks + elems * elem + 16;
}

/* ---- reading ----------------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
    char *why;
    size_t cap;
} reader;

static int fail(reader *r, const char *what, uint64_t chunk)
{
    snprintf(r->why, r->cap, "delta payload, chunk %llu: %s",
             (unsigned long long)chunk, what);
    return -1;
}

static int get_varint(reader *r, uint64_t *v)
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

static uint64_t le64(uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    return __builtin_bswap64(v);
#else
    return v;
#endif
}

/* Up to 8 bytes from p, as many as there are before end, little-endian. */
static uint64_t tail_bytes(const uint8_t *p, const uint8_t *end)
{
    uint64_t v = 0;

    for (unsigned b = 0; b < 8 && p + b < end; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
}

/* 64-bit word w of a bitmap of `bytes` bytes. */
static uint64_t high_word(const uint8_t *bits, uint64_t bytes, uint64_t w)
{
    uint64_t v;

    if (w * 8 + 8 <= bytes) {
        memcpy(&v, bits + w * 8, 8);
        return le64(v);
    }
    return tail_bytes(bits + w * 8, bits + bytes);
}

#if defined(__x86_64__) && defined(__GNUC__)
static int has_vbmi(void)
{
    return has_avx512() && __builtin_cpu_supports("avx512vbmi");
}

/* A sparse chunk's n positions into pos[] (room for n + 16, and j for
 * WEX__DELTA_CHUNK + 48 high parts) with AVX-512, 16 at a time: the high parts' set bits packed by compress
 * instructions 32 bits of the bitmap at a time, the low parts cut out of
 * 16 * l bits (2l bytes: each group of 16 starts on a byte) by a byte
 * permutation and a shift a lane. 0, or -1 when the positions are not
 * ascending, past the chunk, or the high parts too few; `avail` is how
 * many bytes from `low` on may be read. */
__attribute__((target(AVX512 ",avx512vbmi"))) static int
decode_sparse_avx512(const uint8_t *low, uint64_t avail, const uint8_t *high,
                     uint64_t high_bytes, uint64_t hb, unsigned l, uint32_t n,
                     uint32_t u, uint32_t *pos, uint16_t *j)
{
    const __m512i iota = _mm512_set_epi16(
        31, 30, 29, 28, 27, 26, 25, 24, 23, 22, 21, 20, 19, 18, 17, 16, 15, 14,
        13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    const __m512i lanes =
        _mm512_set_epi32(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
    __m512i bits = _mm512_mullo_epi32(lanes, _mm512_set1_epi32((int)l));
    __m512i first = _mm512_srli_epi32(bits, 3), idx;
    __m512i shift = _mm512_and_si512(bits, _mm512_set1_epi32(7));
    __m512i lowmask = _mm512_set1_epi32((int)((1u << l) - 1));
    __m512i prev = _mm512_set1_epi32(-1);
    uint32_t m = 0;

    /* byte k of lane i is byte first_i + k of the group's window */
    idx = _mm512_add_epi8(
        _mm512_shuffle_epi8(first, _mm512_set4_epi32(0x0c0c0c0c, 0x08080808,
                                                     0x04040404, 0x00000000)),
        _mm512_set1_epi32(0x03020100));
    for (uint64_t w = 0; m < n && w * 4 < high_bytes; w++) {
        uint32_t word = 0;
        if (w * 4 + 4 <= high_bytes)
            memcpy(&word, high + w * 4, 4);
        else
            for (uint64_t b = 0; w * 4 + b < high_bytes; b++)
                word |= (uint32_t)high[w * 4 + b] << (8 * b);
        _mm512_storeu_si512(
            j + m, _mm512_maskz_compress_epi16(
                       word, _mm512_add_epi16(
                                 iota, _mm512_set1_epi16((short)(w * 32)))));
        m += (uint32_t)__builtin_popcount(word);
    }
    if (m < n || j[n - 1] >= hb)
        return -1;
    /* the last group's lanes past n read these, and mask them off */
    _mm512_storeu_si512(j + m, _mm512_setzero_si512());
    for (uint32_t g = 0; g < n; g += 16) {
        uint64_t at = (uint64_t)g * l / 8; /* 16 * l bits = 2l bytes */
        __mmask64 have = avail - at >= 64 ? ~0ull : (1ull << (avail - at)) - 1;
        __m512i window = _mm512_maskz_loadu_epi8(have, low + at);
        __m512i v = _mm512_permutexvar_epi8(idx, window);
        __m512i hi = _mm512_sub_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(j + g))),
            _mm512_add_epi32(lanes, _mm512_set1_epi32((int)g)));
        __m512i x = _mm512_or_si512(
            _mm512_and_si512(_mm512_srlv_epi32(v, shift), lowmask),
            _mm512_sll_epi32(hi, _mm_cvtsi32_si128((int)l)));
        __mmask16 live =
            (__mmask16)(n - g >= 16 ? 0xffffu : (1u << (n - g)) - 1);
        /* each position past the one before it (the first past the last
         * group's, or -1), and inside the chunk */
        __m512i before = _mm512_alignr_epi32(x, prev, 15);
        if ((_cvtmask16_u32(_mm512_mask_cmple_epi32_mask(live, x, before)) |
             _cvtmask16_u32(_mm512_mask_cmpge_epu32_mask(
                 live, x, _mm512_set1_epi32((int)u)))) != 0)
            return -1;
        _mm512_storeu_si512(pos + g, x);
        prev = x;
    }
    return 0;
}
#endif

/* A sparse chunk's positions into pos[], or, when `to` is not NULL, its
 * values straight to those elements of `to` as each position is decoded
 * (the decoding then runs while the scattered writes wait on memory).
 * Inlined with elem a constant, so that a value's write is one store. */
static inline __attribute__((always_inline)) int
read_sparse(reader *r, uint32_t u, unsigned elem, uint32_t *pos, uint8_t *to,
            uint64_t chunk, uint32_t *n_p)
{
    uint64_t n, low_bytes, high_bytes, hb;
    const uint8_t *low, *high, *values;
    unsigned l;
    uint64_t j;

    if (get_varint(r, &n) != 0 || n == 0 || n > u)
        return fail(r, "a sparse count out of range", chunk);
    if (r->p >= r->end || *r->p != ef_low_bits((uint32_t)n, u))
        return fail(r, "a sparse split that is not n's", chunk);
    l = *r->p++;
    low_bytes = (n * l + 7) / 8;
    hb = ef_high_bits((uint32_t)n, u, l);
    high_bytes = (hb + 7) / 8;
    if ((uint64_t)(r->end - r->p) < low_bytes + high_bytes + n * elem)
        return fail(r, "sparse positions or values past the end", chunk);
    low = r->p;
    high = r->p + low_bytes;
    values = high + high_bytes;
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa_limit >= WEX__DELTA_ISA_AVX512 && has_vbmi()) {
        if (decode_sparse_avx512(low, (uint64_t)(r->end - low), high,
                                 high_bytes, hb, l, (uint32_t)n, u, pos,
                                 (uint16_t *)(pos + WEX__DELTA_CHUNK + 16)) !=
            0)
            return fail(r, "sparse positions out of order or range", chunk);
        if (to != NULL)
            for (uint64_t i = 0; i < n; i++)
                memcpy(to + (size_t)pos[i] * elem, values + i * elem, elem);
        r->p += low_bytes + high_bytes;
        *n_p = (uint32_t)n;
        return 0;
    }
#endif
    {
        /* the low parts read 8 bytes at a time at each part's bit
         * offset, without a branch, while 8 bytes are left before the
         * payload's end (they are until the last few: the high parts and
         * values follow); the high parts' set bits a 64-bit word at a
         * time */
        uint64_t mask = l ? (1ull << l) - 1 : 0, word = 0, w = 0;
        uint64_t avail = (uint64_t)(r->end - low);
        uint64_t words = (high_bytes + 7) / 8;
        uint32_t prev = 0;

        for (uint64_t i = 0; i < n; i++) {
            uint64_t bit = i * l, v;
            uint32_t x;
            if ((bit >> 3) + 8 <= avail) {
                memcpy(&v, low + (bit >> 3), 8);
                v = le64(v);
            } else
                v = tail_bytes(low + (bit >> 3), high + high_bytes);
            x = (uint32_t)((v >> (bit & 7)) & mask);
            while (word == 0 && w < words)
                word = high_word(high, high_bytes, w++);
            if (word == 0)
                return fail(r, "fewer high parts than positions", chunk);
            j = (w - 1) * 64 + (unsigned)__builtin_ctzll(word);
            word &= word - 1;
            if (j >= hb)
                return fail(r, "fewer high parts than positions", chunk);
            x |= (uint32_t)(j - i) << l;
            if (x >= u || (i > 0 && x <= prev))
                return fail(r, "sparse positions out of order or range", chunk);
            prev = x;
            if (to != NULL)
                memcpy(to + (size_t)x * elem, values + i * elem, elem);
            else
                pos[i] = x;
        }
    }
    r->p += low_bytes + high_bytes;
    *n_p = (uint32_t)n;
    return 0;
}

/* read_sparse with the element size a constant. */
static int read_sparse_any(reader *r, uint32_t u, unsigned elem, uint32_t *pos,
                           uint8_t *to, uint64_t chunk, uint32_t *n_p)
{
    switch (elem) {
    case 1: return read_sparse(r, u, 1, pos, to, chunk, n_p);
    case 2: return read_sparse(r, u, 2, pos, to, chunk, n_p);
    case 4: return read_sparse(r, u, 4, pos, to, chunk, n_p);
    default: return read_sparse(r, u, 8, pos, to, chunk, n_p);
    }
}

/* A bitmap chunk's u bits and its values, written into `to`; the values'
 * bytes. Bits past u are none. */
static uint64_t put_bitmap_scalar(uint8_t *to, const uint8_t *bits, uint32_t u,
                                  const uint8_t *values, unsigned elem)
{
    const uint8_t *v = values;

    for (uint32_t i = 0; i < u; i += 8) {
        unsigned b = bits[i / 8];
        if (i + 8 > u)
            b &= (1u << (u - i)) - 1;
        while (b != 0) {
            memcpy(to + (size_t)(i + (unsigned)__builtin_ctz(b)) * elem, v,
                   elem);
            v += elem;
            b &= b - 1;
        }
    }
    return (uint64_t)(v - values);
}

#if defined(__x86_64__) && defined(__GNUC__)
/* The same with AVX-512: 64 bytes of elements a time, the values spread
 * to their places by an expanding load and written by a masked store. */
#define PUT_BITMAP_AVX512(name, bits_, k_bits)                                 \
    __attribute__((target(AVX512))) static uint64_t name(                      \
        uint8_t *to, const uint8_t *bits, uint32_t u, const uint8_t *values)   \
    {                                                                          \
        const unsigned per = 512 / bits_; /* elements a vector */              \
        const uint8_t *v = values;                                             \
                                                                               \
        for (uint32_t i = 0; i < u; i += per) {                                \
            uint64_t m = 0; /* built and counted in a general register */      \
            __m512i x;                                                         \
            for (unsigned b = 0; b < per / 8 && i + 8 * b < u; b++)            \
                m |= (uint64_t)bits[i / 8 + b] << (8 * b);                     \
            if (u - i < per)                                                   \
                m &= (1ull << (u - i)) - 1;                                    \
            x = _mm512_maskz_expandloadu_epi##bits_((k_bits)m, v);             \
            _mm512_mask_storeu_epi##bits_(to + (size_t)i * (bits_ / 8),        \
                                          (k_bits)m, x);                       \
            v += (size_t)__builtin_popcountll(m) * (bits_ / 8);                \
        }                                                                      \
        return (uint64_t)(v - values);                                         \
    }

PUT_BITMAP_AVX512(put_bitmap_avx512_8, 8, __mmask64)
PUT_BITMAP_AVX512(put_bitmap_avx512_16, 16, __mmask32)
PUT_BITMAP_AVX512(put_bitmap_avx512_32, 32, __mmask16)
PUT_BITMAP_AVX512(put_bitmap_avx512_64, 64, __mmask8)
#endif

static uint64_t put_bitmap(uint8_t *to, const uint8_t *bits, uint32_t u,
                           const uint8_t *values, unsigned elem)
{
#if defined(__x86_64__) && defined(__GNUC__)
    if (isa_limit >= WEX__DELTA_ISA_AVX512 && has_avx512())
        switch (elem) {
        case 1: return put_bitmap_avx512_8(to, bits, u, values);
        case 2: return put_bitmap_avx512_16(to, bits, u, values);
        case 4: return put_bitmap_avx512_32(to, bits, u, values);
        default: return put_bitmap_avx512_64(to, bits, u, values);
        }
#endif
    switch (elem) {
    case 1: return put_bitmap_scalar(to, bits, u, values, 1);
    case 2: return put_bitmap_scalar(to, bits, u, values, 2);
    case 4: return put_bitmap_scalar(to, bits, u, values, 4);
    default: return put_bitmap_scalar(to, bits, u, values, 8);
    }
}

static uint64_t bitmap_count(const uint8_t *bits, uint32_t u)
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

void wex__delta_scatter(uint8_t *to, const uint32_t *pos, uint32_t n,
                        const uint8_t *values, unsigned elem)
{
    /* fixed sizes, so each write is one store (prefetching the lines
     * ahead, tried, gained nothing: the writes are bound by memory) */
    switch (elem) {
    case 1:
        for (uint32_t i = 0; i < n; i++)
            to[pos[i]] = values[i];
        return;
    case 2:
        for (uint32_t i = 0; i < n; i++)
            memcpy(to + (size_t)pos[i] * 2, values + (size_t)i * 2, 2);
        return;
    case 4:
        for (uint32_t i = 0; i < n; i++)
            memcpy(to + (size_t)pos[i] * 4, values + (size_t)i * 4, 4);
        return;
    default:
        for (uint32_t i = 0; i < n; i++)
            memcpy(to + (size_t)pos[i] * elem, values + (size_t)i * elem, elem);
    }
}

/* Walks the payload bytes of chunks [c, chunks) of a stream. */
/* Walks the payload bytes of chunks [c, chunks) of a stream into the
 * sink, or, when `to` is not NULL, writes them into the stream held
 * there. */
static int walk_range(const uint8_t *payload, size_t len, unsigned elem,
                      uint64_t elems, uint64_t c, uint64_t chunks,
                      wex__delta_sink sink, void *arg, uint8_t *to, char *why,
                      size_t why_cap)
{
    /* room for the vector decoder's last 16, and its high parts after */
    uint32_t *pos = malloc((WEX__DELTA_CHUNK + 16) * sizeof(*pos) +
                           (WEX__DELTA_CHUNK + 48) * sizeof(uint16_t));
    reader r = {payload, payload + len, why, why_cap};
    int rc = 0;

    if (pos == NULL)
        return fail(&r, "out of memory", 0);
    while (rc == 0 && r.p < r.end) {
        uint64_t base = c * WEX__DELTA_CHUNK, k;
        uint32_t u =
            (uint32_t)(elems - base < WEX__DELTA_CHUNK ? elems - base
                                                       : WEX__DELTA_CHUNK);
        uint8_t tag = *r.p++;
        uint32_t n = 0;

        if (c >= chunks) {
            rc = fail(&r, "more chunks than the stream has", c);
            break;
        }
        switch (tag) {
        case WEX__DELTA_SKIP:
            if (get_varint(&r, &k) != 0 || k == 0 || k > chunks - c)
                rc = fail(&r, "a skip out of range", c);
            else
                c += k;
            continue;
        case WEX__DELTA_SPARSE:
            rc = read_sparse_any(&r, u, elem, pos,
                                 to != NULL ? to + base * elem : NULL, c, &n);
            if (rc == 0 && to != NULL) {
                r.p += (size_t)n * elem;
                c++;
                continue;
            }
            break;
        case WEX__DELTA_BITMAP:
            if ((uint64_t)(r.end - r.p) < (u + 7) / 8) {
                rc = fail(&r, "a bitmap past the end", c);
                break;
            }
            if (to != NULL) {
                const uint8_t *bits = r.p;
                r.p += (u + 7) / 8;
                if ((uint64_t)(r.end - r.p) < bitmap_count(bits, u) * elem)
                    rc = fail(&r, "bitmap values past the end", c);
                else
                    r.p += put_bitmap(to + base * elem, bits, u, r.p, elem);
                c++;
                continue;
            }
            for (uint32_t i = 0; i < u; i += 8) {
                unsigned bits = r.p[i / 8];
                if (i + 8 > u)
                    bits &= (1u << (u - i)) - 1; /* past the chunk: none */
                while (bits != 0) {
                    pos[n++] = i + (unsigned)__builtin_ctz(bits);
                    bits &= bits - 1;
                }
            }
            r.p += (u + 7) / 8;
            if ((uint64_t)(r.end - r.p) < (uint64_t)n * elem)
                rc = fail(&r, "bitmap values past the end", c);
            break;
        case WEX__DELTA_DENSE:
            if ((uint64_t)(r.end - r.p) < (uint64_t)u * elem)
                rc = fail(&r, "dense values past the end", c);
            else if (to != NULL)
                memcpy(to + base * elem, r.p, (size_t)u * elem);
            else if (sink(arg, base, NULL, u, r.p) != 0)
                rc = fail(&r, "the sink stopped", c);
            r.p += rc == 0 ? (size_t)u * elem : 0;
            c++;
            continue;
        default: rc = fail(&r, "an unknown tag", c); continue;
        }
        if (rc == 0 && n > 0 && sink(arg, base, pos, n, r.p) != 0)
            rc = fail(&r, "the sink stopped", c);
        r.p += rc == 0 ? (size_t)n * elem : 0;
        c++;
    }
    if (rc == 0 && c != chunks)
        rc = fail(&r, "the payload ends before the stream", c);
    free(pos);
    return rc;
}

int wex__delta_walk(const uint8_t *payload, size_t len, unsigned elem,
                    uint64_t elems, wex__delta_sink sink, void *arg, char *why,
                    size_t why_cap)
{
    return walk_range(payload, len, elem, elems, 0,
                      (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK, sink,
                      arg, NULL, why, why_cap);
}

int wex__delta_walk_piece(const uint8_t *payload, const wex__delta_piece *piece,
                          unsigned elem, uint64_t elems, wex__delta_sink sink,
                          void *arg, char *why, size_t why_cap)
{
    return walk_range(payload + piece->offset, piece->len, elem, elems,
                      piece->first, piece->end, sink, arg, NULL, why, why_cap);
}

int wex__delta_apply_piece(const uint8_t *payload,
                           const wex__delta_piece *piece, unsigned elem,
                           uint64_t elems, uint8_t *to, char *why,
                           size_t why_cap)
{
    return walk_range(payload + piece->offset, piece->len, elem, elems,
                      piece->first, piece->end, NULL, NULL, to, why, why_cap);
}

/* The payload bytes of the chunk at p (its tag included) and how many
 * chunks it stands for, from its header alone; 0 when malformed. */
static size_t chunk_span(const uint8_t *p, const uint8_t *end, unsigned elem,
                         uint32_t u, uint64_t *chunks)
{
    reader r = {p + 1, end, NULL, 0};
    uint64_t n, k, size;

    *chunks = 1;
    switch (*p) {
    case WEX__DELTA_SKIP:
        if (get_varint(&r, &k) != 0 || k == 0)
            return 0;
        *chunks = k;
        size = 0;
        break;
    case WEX__DELTA_SPARSE:
        if (get_varint(&r, &n) != 0 || n == 0 || n > u || r.p >= end ||
            *r.p > 16)
            return 0;
        size = 1 + ((uint64_t)n * *r.p + 7) / 8 +
               (ef_high_bits((uint32_t)n, u, *r.p) + 7) / 8 + n * elem;
        break;
    case WEX__DELTA_BITMAP:
        if ((uint64_t)(end - r.p) < (u + 7) / 8)
            return 0;
        size = (u + 7) / 8 + bitmap_count(r.p, u) * elem;
        break;
    case WEX__DELTA_DENSE: size = (uint64_t)u * elem; break;
    default: return 0;
    }
    if (size > (uint64_t)(end - r.p))
        return 0;
    return (size_t)(r.p - p) + (size_t)size;
}

int64_t wex__delta_chunks(const uint8_t *payload, size_t len, unsigned elem,
                          uint64_t elems, wex_delta_chunk *out, size_t cap)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint64_t c = 0;
    size_t at = 0, count = 0;

    while (at < len) {
        uint64_t base = c * WEX__DELTA_CHUNK, k;
        uint32_t u;
        size_t span;
        wex_delta_chunk *e = &out[count];

        if (c >= chunks)
            return -1;
        u = (uint32_t)(elems - base < WEX__DELTA_CHUNK ? elems - base
                                                       : WEX__DELTA_CHUNK);
        span = chunk_span(payload + at, payload + len, elem, u, &k);
        if (span == 0 || k > chunks - c)
            return -1;
        if (payload[at] != WEX__DELTA_SKIP) {
            reader r = {payload + at + 1, payload + len, NULL, 0};
            uint64_t n = u;
            if (count == cap)
                return -1;
            e->base = base;
            e->kind = payload[at];
            e->u = u;
            e->l = 0;
            if (e->kind == WEX__DELTA_SPARSE) {
                (void)get_varint(&r, &n); /* chunk_span read it */
                e->l = *r.p++;
                if (e->l != ef_low_bits((uint32_t)n, u))
                    return -1;
            } else if (e->kind == WEX__DELTA_BITMAP) {
                n = bitmap_count(r.p, u);
            }
            e->n = (uint32_t)n;
            e->at = (uint64_t)(r.p - payload);
            count++;
        }
        at += span;
        c += k;
    }
    return c == chunks ? (int64_t)count : -1;
}

size_t wex__delta_cut(const uint8_t *payload, size_t len, unsigned elem,
                      uint64_t elems, size_t max, wex__delta_piece *out)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint64_t c = 0;
    size_t at = 0, count = 0;

    if (max == 0)
        return 0;
    out[0] = (wex__delta_piece){0, len, 0, chunks};
    while (at < len && c < chunks && count + 1 < max) {
        uint64_t base = c * WEX__DELTA_CHUNK, k;
        uint32_t u =
            (uint32_t)(elems - base < WEX__DELTA_CHUNK ? elems - base
                                                       : WEX__DELTA_CHUNK);
        size_t span = chunk_span(payload + at, payload + len, elem, u, &k);

        if (span == 0 || k > chunks - c)
            break; /* malformed: the walk of the last piece will say so */
        at += span;
        c += k;
        /* the piece ends once it holds its share of the bytes */
        if (at - out[count].offset >= len / max && at < len && c < chunks) {
            out[count].len = at - out[count].offset;
            out[count].end = c;
            count++;
            out[count] = (wex__delta_piece){at, len - at, c, chunks};
        }
    }
    return count + 1;
}
