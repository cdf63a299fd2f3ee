#include "quantize_once.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "error.h"

int wex__quantize_twins(const wex__op *a, const wex__op *b)
{
    return a->transform == WEX__OP_QUANTIZE &&
           b->transform == WEX__OP_QUANTIZE && a->src_rank == b->src_rank &&
           a->src_tensor == b->src_tensor && a->canonical == b->canonical &&
           a->ndim == b->ndim && a->src_ndim == b->src_ndim &&
           a->canon_off[0] == b->canon_off[0] &&
           a->canon_off[1] == b->canon_off[1] &&
           memcmp(a->src_off, b->src_off, a->src_ndim * sizeof(uint64_t)) ==
               0 &&
           memcmp(a->extent, b->extent, a->ndim * sizeof(uint64_t)) == 0;
}

/* What makes a cell: its weight, place and extent, and (per source)
 * where the source reads it. */
static uint64_t cell_hash(const wex__op *o, int per_source)
{
    uint64_t k[4 + 2 * WEX_MAX_DIMS];
    size_t n = 0;

    k[n++] = o->canonical;
    k[n++] = o->canon_off[0];
    k[n++] = o->canon_off[1];
    for (uint32_t d = 0; d < o->ndim; d++)
        k[n++] = o->extent[d];
    if (per_source) {
        k[n++] = o->src_rank;
        k[n++] = o->src_tensor;
        for (uint32_t d = 0; d < o->src_ndim; d++)
            k[n++] = o->src_off[d];
    }
    return XXH3_64bits(k, n * sizeof(*k));
}

/* A QUANTIZE operation's cell hash (with its source) and its index. */
typedef struct keyed {
    uint64_t hash;
    size_t op;
} keyed;

static int by_cell(const void *a, const void *b)
{
    const keyed *x = a, *y = b;

    if (x->hash != y->hash)
        return x->hash < y->hash ? -1 : 1;
    /* plan order within a hash: the first is the leader */
    return x->op < y->op ? -1 : x->op > y->op;
}

wex_status wex__quantize_leaders(const wex__op *ops, size_t count,
                                 size_t *leader)
{
    keyed *k = malloc((count ? count : 1) * sizeof(*k));
    size_t n = 0;

    if (k == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t i = 0; i < count; i++) {
        leader[i] = i;
        if (ops[i].transform == WEX__OP_QUANTIZE)
            k[n++] = (keyed){cell_hash(&ops[i], 1), i};
    }
    qsort(k, n, sizeof(*k), by_cell);
    /* within a run of one hash, each takes the first it is a twin of */
    for (size_t g = 0, end; g < n; g = end) {
        for (end = g + 1; end < n && k[end].hash == k[g].hash; end++)
            ;
        for (size_t x = g + 1; x < end; x++)
            for (size_t y = g; y < x; y++)
                if (leader[k[y].op] == k[y].op &&
                    wex__quantize_twins(&ops[k[y].op], &ops[k[x].op])) {
                    leader[k[x].op] = k[y].op;
                    break;
                }
    }
    free(k);
    return WEX_OK;
}

int wex__cell_set_add(wex__cell_set *s, const wex__op *o, int per_source)
{
    uint64_t key = cell_hash(o, per_source);
    size_t at;

    if (key == 0)
        key = 1;
    if (2 * (s->used + 1) > s->cap) { /* at most half full */
        size_t cap = s->cap ? 2 * s->cap : 1024;
        uint64_t *keys = calloc(cap, sizeof(*keys));
        if (keys == NULL)
            return -1;
        for (size_t i = 0; i < s->cap; i++) {
            if (s->keys[i] == 0)
                continue;
            for (at = s->keys[i] & (cap - 1); keys[at] != 0;
                 at = (at + 1) & (cap - 1))
                ;
            keys[at] = s->keys[i];
        }
        free(s->keys);
        s->keys = keys;
        s->cap = cap;
    }
    for (at = key & (s->cap - 1); s->keys[at] != 0;
         at = (at + 1) & (s->cap - 1))
        if (s->keys[at] == key)
            return 0;
    s->keys[at] = key;
    s->used++;
    return 1;
}

void wex__cell_set_free(wex__cell_set *s)
{
    free(s->keys);
    memset(s, 0, sizeof(*s));
}
