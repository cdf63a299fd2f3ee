/* A delta payload's chunks from their headers alone (delta.h): cut into
 * pieces for threads, or indexed for the device (delta_chunks.h). */
#include "delta.h"
#include "delta_chunks.h"
#include "delta_format.h"

_Static_assert(WEX_DELTA_KIND_SPARSE == WEX__DELTA_SPARSE &&
                   WEX_DELTA_KIND_BITMAP == WEX__DELTA_BITMAP &&
                   WEX_DELTA_KIND_DENSE == WEX__DELTA_DENSE,
               "delta_chunks.h numbers the chunk forms as delta.h does");

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
