/*
 * A delta payload (delta.h) encoded by many threads at once: what the
 * CUDA kernels of libwex_cuda.so run over a CUDA source's device memory
 * (host/cuda/delta_kernels.cu), written once for the device compiler and
 * the host's (the fake kernels and test_delta_scan run the same code on
 * the CPU). It makes the bytes the CPU's encoder makes.
 *
 * Two passes over the stream, a group of T threads a chunk:
 *   count  each thread counts the elements of its range of the chunk that
 *          differ from the snapshot; the group sums them: the chunk's n;
 *   (host) from every chunk's n, the form each takes and where it goes
 *          (wex__delta_slots): a slot for each chunk that changed, with
 *          its header bytes (a SKIP of the unchanged chunks before it,
 *          its tag, n and l), and one for a trailing SKIP;
 *   write  each thread counts its range again, the group scans the counts,
 *          and each thread writes its range's values (the k-th changed
 *          element is the k-th value), sets its bits in the group's bit
 *          scratch (the bitmap, or the sparse low and high parts: shared
 *          memory on the device, where neighbours' bits share words) and
 *          brings its range of the snapshot up to date; after a barrier
 *          the threads copy the scratch into the payload, a range of
 *          bytes each, and the first writes the header.
 * The current bytes are read through the box's map (delta_chunks.h,
 * placed in the source tensor as a destination's box is in its own); the
 * snapshot is one contiguous stream.
 */
#ifndef WEX_HOST_DELTA_SCAN_CHUNKS_H
#define WEX_HOST_DELTA_SCAN_CHUNKS_H

#include <stdint.h>

#include "delta_chunks.h"

/* delta.h's WEX__DELTA_CHUNK (delta_slots.c checks they agree). */
#define WEX_DELTA_CHUNK_ELEMS 16384u
/* Bytes of bit scratch a chunk: a bitmap is (u + 7) / 8 of them, and a
 * sparse chunk is chosen only when its low and high parts take fewer. */
#define WEX_DELTA_SCAN_BITS (WEX_DELTA_CHUNK_ELEMS / 8)
/* The kind of a slot that is a header alone (the trailing SKIP). */
#define WEX_DELTA_KIND_HEAD 0u

/* Where one chunk goes in the payload, as the host laid it out. */
typedef struct wex_delta_slot {
    uint64_t base;    /* the stream element its first is */
    uint64_t head_at; /* payload offset of its header */
    uint64_t at;      /* ... of its body: the bits, then the values */
    uint32_t kind;    /* WEX_DELTA_KIND_* */
    uint32_t u;       /* its elements */
    uint32_t n;       /* changed */
    uint32_t l;       /* sparse: low bits a position */
    uint32_t head_len;
    uint8_t head[20];
} wex_delta_slot;

/* An element's bytes as a number, and back: typed loads on the device
 * (elements lie at multiples of their size), bytes on the host. */
WEX_DELTA_FN uint64_t wex_delta_load(const uint8_t *p, uint32_t elem)
{
#ifdef __CUDA_ARCH__
    switch (elem) {
    case 1: return *p;
    case 2: return *(const uint16_t *)p;
    case 4: return *(const uint32_t *)p;
    default: return *(const uint64_t *)p;
    }
#else
    uint64_t v = 0;

    for (uint32_t b = 0; b < elem; b++)
        v |= (uint64_t)p[b] << (8 * b);
    return v;
#endif
}

WEX_DELTA_FN void wex_delta_store(uint8_t *p, uint32_t elem, uint64_t v)
{
#ifdef __CUDA_ARCH__
    switch (elem) {
    case 1: *p = (uint8_t)v; break;
    case 2: *(uint16_t *)p = (uint16_t)v; break;
    case 4: *(uint32_t *)p = (uint32_t)v; break;
    default: *(uint64_t *)p = v; break;
    }
#else
    for (uint32_t b = 0; b < elem; b++)
        p[b] = (uint8_t)(v >> (8 * b));
#endif
}

/* A walk of the current bytes of stream elements from..: the place of
 * the first found once (wex_delta_place divides), the next ones a step
 * along their run. */
typedef struct wex_delta_reader {
    const wex_delta_map *m;
    uint64_t s, off, left; /* element, its byte offset, left in its run */
} wex_delta_reader;

WEX_DELTA_FN void wex_delta_reader_at(wex_delta_reader *r,
                                      const wex_delta_map *m, uint64_t s)
{
    r->m = m;
    r->s = s;
    r->off = wex_delta_place(m, s);
    r->left = m->run_elems - s % m->run_elems;
}

WEX_DELTA_FN uint64_t wex_delta_reader_next(wex_delta_reader *r,
                                            const uint8_t *cur)
{
    uint64_t v;

    if (r->left == 0)
        wex_delta_reader_at(r, r->m, r->s);
    v = wex_delta_load(cur + r->off, r->m->elem);
    r->s++;
    r->off += r->m->elem;
    r->left--;
    return v;
}

/* Thread t of T's elements of a chunk of u: [from, to). */
WEX_DELTA_FN void wex_delta_scan_range(uint32_t u, uint32_t t, uint32_t T,
                                       uint32_t *from, uint32_t *to)
{
    *from = (uint32_t)((uint64_t)u * t / T);
    *to = (uint32_t)((uint64_t)u * (t + 1) / T);
}

/* How many elements of thread t's range of the chunk of u elements from
 * stream element `base` differ from the snapshot. */
WEX_DELTA_FN uint32_t wex_delta_scan_count(const uint8_t *cur,
                                           const wex_delta_map *m,
                                           const uint8_t *snap, uint64_t base,
                                           uint32_t u, uint32_t t, uint32_t T)
{
    uint32_t from, to, n = 0;
    wex_delta_reader r;

    wex_delta_scan_range(u, t, T, &from, &to);
    if (from == to)
        return 0;
    wex_delta_reader_at(&r, m, base + from);
    for (uint64_t s = base + from; s < base + to; s++)
        n += wex_delta_reader_next(&r, cur) !=
             wex_delta_load(snap + s * m->elem, m->elem);
    return n;
}

WEX_DELTA_FN void wex_delta_scan_set(uint32_t *bits, uint64_t i)
{
#ifdef __CUDA_ARCH__
    atomicOr(&bits[i / 32], 1u << (i % 32));
#else
    bits[i / 32] |= 1u << (i % 32);
#endif
}

/* The bytes of the chunk's body its bits take: none dense. */
WEX_DELTA_FN uint64_t wex_delta_scan_bit_bytes(const wex_delta_slot *c)
{
    wex_delta_chunk k;

    if (c->kind != WEX_DELTA_KIND_SPARSE && c->kind != WEX_DELTA_KIND_BITMAP)
        return 0;
    k.kind = c->kind;
    k.u = c->u;
    k.n = c->n;
    k.l = c->l;
    k.at = 0;
    return wex_delta_bits_at(&k) + (wex_delta_bit_count(&k) + 7) / 8;
}

/* Thread t of T clears its words of the bit scratch. */
WEX_DELTA_FN void wex_delta_scan_clear(uint32_t *bits, uint32_t t, uint32_t T)
{
    for (uint32_t w = t; w < WEX_DELTA_SCAN_BITS / 4; w += T)
        bits[w] = 0;
}

/* Thread t of T writes its range: `before` changed elements lie in the
 * ranges before it. Without a payload (it outgrew its room) only the
 * snapshot is brought up to date. */
WEX_DELTA_FN void wex_delta_scan_write(const wex_delta_slot *c,
                                       const uint8_t *cur,
                                       const wex_delta_map *m, uint8_t *snap,
                                       uint32_t t, uint32_t T, uint32_t before,
                                       uint32_t *bits, uint8_t *payload)
{
    uint32_t from, to, elem = m->elem;
    uint64_t k = before, values = c->at + wex_delta_scan_bit_bytes(c);
    uint64_t low_bits = (uint64_t)c->n * c->l;
    wex_delta_reader r;

    if (c->kind == WEX_DELTA_KIND_HEAD)
        return;
    wex_delta_scan_range(c->u, t, T, &from, &to);
    if (from == to)
        return;
    wex_delta_reader_at(&r, m, c->base + from);
    for (uint32_t x = from; x < to; x++) {
        uint8_t *old = snap + (c->base + x) * elem;
        uint64_t v = wex_delta_reader_next(&r, cur);
        if (c->kind == WEX_DELTA_KIND_DENSE && payload != 0)
            wex_delta_store(payload + values + (uint64_t)x * elem, elem, v);
        if (v == wex_delta_load(old, elem))
            continue;
        wex_delta_store(old, elem, v);
        if (payload == 0 || c->kind == WEX_DELTA_KIND_DENSE)
            continue;
        wex_delta_store(payload + values + k * elem, elem, v);
        if (c->kind == WEX_DELTA_KIND_BITMAP) {
            wex_delta_scan_set(bits, x);
        } else {
            for (uint32_t b = 0; b < c->l; b++)
                if (x >> b & 1u)
                    wex_delta_scan_set(bits, k * c->l + b);
            /* the high part in unary, after the low parts' bytes */
            wex_delta_scan_set(bits, (low_bits + 7) / 8 * 8 + (x >> c->l) + k);
        }
        k++;
    }
}

/* After the group's writes: thread t of T copies its bytes of the bit
 * scratch into the payload, and the first thread writes the header. */
WEX_DELTA_FN void wex_delta_scan_flush(const wex_delta_slot *c,
                                       const uint32_t *bits, uint32_t t,
                                       uint32_t T, uint8_t *payload)
{
    uint64_t bytes = wex_delta_scan_bit_bytes(c);
    uint64_t from = bytes * t / T, to = bytes * (t + 1) / T;

    for (uint64_t j = from; j < to; j++)
        payload[c->at + j] = (uint8_t)(bits[j / 4] >> (8 * (j % 4)));
    if (t == 0)
        for (uint32_t j = 0; j < c->head_len; j++)
            payload[c->head_at + j] = c->head[j];
}

#ifndef __CUDACC__
/* The groups run on the CPU, their T threads (at most 256) one after
 * the other: the fake kernels' and the tests' device. */
#define WEX_DELTA_SCAN_SERIAL_MAX 256u

/* A chunk's changed elements, as the count pass sums them. */
static inline uint32_t wex_delta_scan_count_serial(const uint8_t *cur,
                                                   const wex_delta_map *m,
                                                   const uint8_t *snap,
                                                   uint64_t base, uint32_t u,
                                                   uint32_t T)
{
    uint32_t n = 0;

    for (uint32_t t = 0; t < T; t++)
        n += wex_delta_scan_count(cur, m, snap, base, u, t, T);
    return n;
}

/* A slot written, as the write pass writes it. */
static inline void wex_delta_scan_write_serial(const wex_delta_slot *c,
                                               const uint8_t *cur,
                                               const wex_delta_map *m,
                                               uint8_t *snap, uint32_t T,
                                               uint8_t *payload)
{
    uint32_t before[WEX_DELTA_SCAN_SERIAL_MAX], sum = 0;
    uint32_t bits[WEX_DELTA_SCAN_BITS / 4];

    for (uint32_t t = 0; t < T; t++) {
        wex_delta_scan_clear(bits, t, T);
        before[t] =
            c->kind == WEX_DELTA_KIND_HEAD
                ? 0
                : wex_delta_scan_count(cur, m, snap, c->base, c->u, t, T);
    }
    for (uint32_t t = 0; t < T; t++) {
        uint32_t v = before[t];
        before[t] = sum;
        sum += v;
    }
    for (uint32_t t = 0; t < T; t++)
        wex_delta_scan_write(c, cur, m, snap, t, T, before[t], bits, payload);
    for (uint32_t t = 0; payload != 0 && t < T; t++)
        wex_delta_scan_flush(c, bits, t, T, payload);
}
#endif

#endif /* WEX_HOST_DELTA_SCAN_CHUNKS_H */
