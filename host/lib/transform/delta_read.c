/* Reading delta payloads (delta.h): the walk, the scalar and AVX-512
 * decoders, and the apply into a contiguous stream. */
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "delta_format.h"

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

/* Writes value i to element pos[i] of `to`, asking for the line of the
 * write SCATTER_AHEAD positions on before each. The lines a sparse delta
 * writes are scattered (a quarter of them at 1 % of bf16 changed), so the
 * hardware prefetchers do not see them coming and each store waits on
 * memory; asked for ahead, they overlap. On an Intel Xeon (Emerald
 * Rapids) this took the writes of a 1 % delta from 1.5 to 3.0 x copying
 * the region on one thread; on an AMD EPYC it changed nothing. Inlined
 * with elem a constant, so that a write is one store. */
#define SCATTER_AHEAD 32

static inline __attribute__((always_inline)) void
scatter(uint8_t *to, const uint32_t *pos, uint32_t n, const uint8_t *values,
        unsigned elem)
{
    uint32_t i = 0;

    for (uint32_t k = 0; k < n && k < SCATTER_AHEAD; k++)
        __builtin_prefetch(to + (size_t)pos[k] * elem);
    for (; i + SCATTER_AHEAD < n; i++) {
        __builtin_prefetch(to + (size_t)pos[i + SCATTER_AHEAD] * elem);
        memcpy(to + (size_t)pos[i] * elem, values + (size_t)i * elem, elem);
    }
    for (; i < n; i++)
        memcpy(to + (size_t)pos[i] * elem, values + (size_t)i * elem, elem);
}

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
    if (wex__delta_isa() >= WEX__DELTA_ISA_AVX512 && has_vbmi()) {
        if (decode_sparse_avx512(low, (uint64_t)(r->end - low), high,
                                 high_bytes, hb, l, (uint32_t)n, u, pos,
                                 (uint16_t *)(pos + WEX__DELTA_CHUNK + 16)) !=
            0)
            return fail(r, "sparse positions out of order or range", chunk);
        if (to != NULL)
            scatter(to, pos, (uint32_t)n, values, elem);
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
    if (wex__delta_isa() >= WEX__DELTA_ISA_AVX512 && has_avx512())
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

void wex__delta_scatter(uint8_t *to, const uint32_t *pos, uint32_t n,
                        const uint8_t *values, unsigned elem)
{
    /* fixed sizes, so each write is one store */
    switch (elem) {
    case 1: scatter(to, pos, n, values, 1); return;
    case 2: scatter(to, pos, n, values, 2); return;
    case 4: scatter(to, pos, n, values, 4); return;
    default: scatter(to, pos, n, values, 8);
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
