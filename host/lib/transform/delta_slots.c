/* The device's encoder laid out (delta_scan_chunks.h): from every
 * chunk's count of changed elements, the form each takes and where its
 * header and body go, as the CPU's encoder writes them (delta.c). */
#include <string.h>

#include "delta.h"
#include "delta_format.h"
#include "delta_scan_chunks.h"

_Static_assert(WEX_DELTA_CHUNK_ELEMS == WEX__DELTA_CHUNK &&
                   WEX_DELTA_KIND_HEAD == WEX__DELTA_SKIP,
               "delta_scan_chunks.h numbers chunks as delta.h does");

/* The header starts with a SKIP of the `skip` unchanged chunks before. */
static void put_skip(wex_delta_slot *s, uint64_t skip)
{
    if (skip == 0)
        return;
    s->head[s->head_len++] = WEX__DELTA_SKIP;
    s->head_len = (uint32_t)(put_varint(s->head + s->head_len, skip) - s->head);
}

int64_t wex__delta_slots(const uint32_t *counts, uint64_t elems, unsigned elem,
                         struct wex_delta_slot *out, size_t *count_p)
{
    uint64_t chunks = (elems + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint64_t skip = 0, at = 0;
    size_t k = 0;

    for (uint64_t c = 0; c < chunks; c++) {
        uint64_t first = c * WEX__DELTA_CHUNK;
        uint32_t u =
            (uint32_t)(elems - first < WEX__DELTA_CHUNK ? elems - first
                                                        : WEX__DELTA_CHUNK);
        uint32_t n = counts[c];
        wex_delta_slot *s;
        size_t size, tags = 1;
        if (n > u)
            return -1;
        if (n == 0) {
            skip++;
            continue;
        }
        s = &out[k++];
        memset(s, 0, sizeof(*s));
        s->base = first;
        s->u = u;
        s->n = n;
        s->head_at = at;
        put_skip(s, skip);
        skip = 0;
        s->kind = delta_chunk_form(n, u, elem, &size);
        s->head[s->head_len++] = (uint8_t)s->kind;
        if (s->kind == WEX__DELTA_SPARSE) {
            s->l = ef_low_bits(n, u);
            s->head_len =
                (uint32_t)(put_varint(s->head + s->head_len, n) - s->head);
            s->head[s->head_len++] = (uint8_t)s->l;
            tags = 2 + varint_len(n);
        }
        s->at = at + s->head_len;
        at = s->at + (size - tags);
    }
    if (skip > 0) {
        wex_delta_slot *s = &out[k++];
        memset(s, 0, sizeof(*s));
        s->kind = WEX_DELTA_KIND_HEAD;
        s->head_at = at;
        put_skip(s, skip);
        at += s->head_len;
    }
    *count_p = k;
    return (int64_t)at;
}
