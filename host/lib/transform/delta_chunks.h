/*
 * A delta payload (delta.h) applied by many threads at once: what the
 * CUDA kernel of libwex_cuda.so runs on the device (host/cuda/
 * delta_kernels.cu), written once for the device compiler and the host's
 * (the fake kernels and test_delta_chunks run the same code on the
 * CPU).
 *
 * The host reads the payload's chunk headers into an index
 * (wex__delta_chunks, delta.c): one entry per chunk that changes
 * anything. A group of T threads then applies one chunk:
 *
 *   dense   thread t writes elements t, t + T, ...;
 *   bitmap, sparse
 *           the chunk's bitmap (the bitmap itself, or the sparse
 *           Elias-Fano high parts) is cut into T ranges of bytes; each
 *           thread counts the set bits of its range (count), the group
 *           sums the counts before each range (an exclusive scan), and
 *           each thread writes the elements of its range's set bits
 *           (emit): the k-th set bit is the k-th value, and, sparse, the
 *           k-th position's high part (its low part read at bit k * l).
 *
 * An operation's elements land in its destination box, walked as in
 * box_runs.h: a run of run_elems elements is contiguous; run r sits at
 * base + sum over the outer dims of index_d * stride_d, r's digits
 * (last dim fastest) being the indices.
 */
#ifndef WEX_HOST_DELTA_CHUNKS_H
#define WEX_HOST_DELTA_CHUNKS_H

#include <stdint.h>

#ifdef __CUDACC__
#define WEX_DELTA_FN __host__ __device__ static inline
#else
#define WEX_DELTA_FN static inline
#endif

#define WEX_DELTA_MAP_DIMS 8
/* The chunk forms, as delta.h numbers them (delta.c checks they agree). */
#define WEX_DELTA_KIND_SPARSE 1u
#define WEX_DELTA_KIND_BITMAP 2u
#define WEX_DELTA_KIND_DENSE 3u

/* One chunk that changes something, as the host found it. */
typedef struct wex_delta_chunk {
    uint64_t base; /* the stream element its first is */
    uint64_t at;   /* payload offset of its body: sparse, the low parts;
                      bitmap, the bitmap; dense, the values */
    uint32_t kind; /* WEX_DELTA_KIND_* */
    uint32_t u;    /* its elements */
    uint32_t n;    /* changed (u when dense) */
    uint32_t l;    /* sparse: low bits a position */
} wex_delta_chunk;

/* Where an operation's stream lands in its destination tensor. */
typedef struct wex_delta_map {
    uint64_t base;      /* bytes from the tensor's start to element 0 */
    uint64_t run_elems; /* elements a contiguous run */
    uint32_t elem;      /* bytes an element: 1, 2, 4 or 8 */
    uint32_t outer;     /* dims walked run by run (<= WEX_DELTA_MAP_DIMS) */
    uint64_t extent[WEX_DELTA_MAP_DIMS], stride[WEX_DELTA_MAP_DIMS];
} wex_delta_map;

WEX_DELTA_FN uint32_t wex_delta_ctz(uint32_t b)
{
#ifdef __CUDA_ARCH__
    return (uint32_t)__ffs((int)b) - 1;
#else
    return (uint32_t)__builtin_ctz(b);
#endif
}

/* Byte offset of stream element s in the destination tensor. */
WEX_DELTA_FN uint64_t wex_delta_place(const wex_delta_map *m, uint64_t s)
{
    uint64_t r = s / m->run_elems, off = m->base;

    for (uint32_t d = m->outer; d-- > 0;) {
        off += r % m->extent[d] * m->stride[d];
        r /= m->extent[d];
    }
    return off + s % m->run_elems * m->elem;
}

WEX_DELTA_FN void wex_delta_put(uint8_t *dst, const wex_delta_map *m,
                                uint64_t s, const uint8_t *value)
{
    uint8_t *to = dst + wex_delta_place(m, s);

    for (uint32_t b = 0; b < m->elem; b++)
        to[b] = value[b];
}

/* The chunk's bitmap: where it starts in the payload, its bytes, and
 * how many of its bits count (a bitmap's past u, and a sparse chunk's
 * high parts past n + (u >> l) + 1, are none). */
WEX_DELTA_FN uint64_t wex_delta_low_bytes(const wex_delta_chunk *c)
{
    return ((uint64_t)c->n * c->l + 7) / 8;
}

WEX_DELTA_FN uint64_t wex_delta_bits_at(const wex_delta_chunk *c)
{
    return c->kind == WEX_DELTA_KIND_BITMAP ? c->at
                                            : c->at + wex_delta_low_bytes(c);
}

WEX_DELTA_FN uint64_t wex_delta_bit_count(const wex_delta_chunk *c)
{
    return c->kind == WEX_DELTA_KIND_BITMAP
               ? c->u
               : (uint64_t)c->n + (c->u >> c->l) + 1;
}

/* Thread t of T's bytes of the chunk's bitmap: [from, to). */
WEX_DELTA_FN void wex_delta_range(const wex_delta_chunk *c, uint32_t t,
                                  uint32_t T, uint64_t *from, uint64_t *to)
{
    uint64_t bytes = (wex_delta_bit_count(c) + 7) / 8;

    *from = bytes * t / T;
    *to = bytes * (t + 1) / T;
}

/* Byte i of the bitmap, its bits past the count cleared. */
WEX_DELTA_FN uint32_t wex_delta_bits(const wex_delta_chunk *c,
                                     const uint8_t *payload, uint64_t i)
{
    uint64_t count = wex_delta_bit_count(c);
    uint32_t b = payload[wex_delta_bits_at(c) + i];

    if (i * 8 + 8 > count)
        b &= (1u << (count - i * 8)) - 1;
    return b;
}

/* How many bits are set in thread t's range. */
WEX_DELTA_FN uint32_t wex_delta_count(const wex_delta_chunk *c,
                                      const uint8_t *payload, uint32_t t,
                                      uint32_t T)
{
    uint64_t from, to;
    uint32_t n = 0;

    if (c->kind == WEX_DELTA_KIND_DENSE)
        return 0;
    wex_delta_range(c, t, T, &from, &to);
    for (uint64_t i = from; i < to; i++) {
        uint32_t b = wex_delta_bits(c, payload, i);
        while (b != 0) {
            n++;
            b &= b - 1;
        }
    }
    return n;
}

/* Sparse position k's low part: l bits from bit k * l of the low parts. */
WEX_DELTA_FN uint32_t wex_delta_low(const wex_delta_chunk *c,
                                    const uint8_t *payload, uint64_t k)
{
    uint64_t bit = k * c->l;
    uint32_t v = 0;

    for (uint32_t b = 0; b < c->l; b++, bit++)
        v |= (uint32_t)(payload[c->at + bit / 8] >> (bit % 8) & 1u) << b;
    return v;
}

/* Thread t of T writes its elements of the chunk into dst; `before` is
 * how many bits the ranges before its own hold (dense: unused). */
WEX_DELTA_FN void wex_delta_emit(const wex_delta_chunk *c,
                                 const uint8_t *payload, uint32_t t, uint32_t T,
                                 uint32_t before, const wex_delta_map *m,
                                 uint8_t *dst)
{
    uint64_t from, to, k = before;
    const uint8_t *values;

    if (c->kind == WEX_DELTA_KIND_DENSE) {
        for (uint64_t i = t; i < c->u; i += T)
            wex_delta_put(dst, m, c->base + i, payload + c->at + i * m->elem);
        return;
    }
    values = payload + wex_delta_bits_at(c) + (wex_delta_bit_count(c) + 7) / 8;
    wex_delta_range(c, t, T, &from, &to);
    for (uint64_t i = from; i < to; i++) {
        uint32_t b = wex_delta_bits(c, payload, i);
        while (b != 0) {
            uint64_t j = i * 8 + wex_delta_ctz(b);
            uint64_t x = j;
            b &= b - 1;
            if (k >= c->n)
                return; /* high parts past the positions: none */
            if (c->kind == WEX_DELTA_KIND_SPARSE) /* j: its high part + k */
                x = (uint64_t)wex_delta_low(c, payload, k) | (j - k) << c->l;
            if (x < c->u)
                wex_delta_put(dst, m, c->base + x, values + k * m->elem);
            k++;
        }
    }
}

#endif /* WEX_HOST_DELTA_CHUNKS_H */
