/* Merging adjacent operations between the same two local tensors, and
 * putting a rank's operations in their execution order. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* qsort_r */
#endif
#include <stdlib.h>
#include <string.h>

#include "balanced.h"

/* Coordinates aligned on the trailing dimensions: relative dim i is the
 * (i+1)-th from the end on both sides. */
static uint64_t ext_at(const pb_op *o, uint32_t i)
{
    return i < o->ndim ? o->ext[o->ndim - 1 - i] : 1;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
    return a < b ? -1 : a > b;
}

static int same_pair(const pb_op *a, const pb_op *b)
{
    return a->src_rank == b->src_rank && a->src_tensor == b->src_tensor &&
           a->dst_rank == b->dst_rank && a->dst_tensor == b->dst_tensor;
}

/* Orders by tensor pair, then by destination coordinates with relative
 * dim `*along` least significant, so neighbours along it sit together. */
static int by_pair_along(const void *pa, const void *pb, void *arg)
{
    const pb_op *a = pa, *b = pb;
    uint32_t along = *(const uint32_t *)arg;
    int c;

    if ((c = cmp_u64(a->src_rank, b->src_rank)) ||
        (c = cmp_u64(a->src_tensor, b->src_tensor)) ||
        (c = cmp_u64(a->dst_rank, b->dst_rank)) ||
        (c = cmp_u64(a->dst_tensor, b->dst_tensor)))
        return c;
    /* Same pair: same destination tensor, same rank. */
    uint32_t last = along < a->dst_nd ? a->dst_nd - 1 - along : a->dst_nd;
    for (uint32_t d = 0; d < a->dst_nd; d++) {
        if (d == last)
            continue;
        if ((c = cmp_u64(a->dst_off[d], b->dst_off[d])))
            return c;
    }
    return last < a->dst_nd ? cmp_u64(a->dst_off[last], b->dst_off[last]) : 0;
}

/* b continues a along relative dim i, on both sides, with everything
 * else equal. */
static int adjacent(const pb_op *a, const pb_op *b, uint32_t i)
{
    uint32_t k = a->src_nd < a->dst_nd ? a->src_nd : a->dst_nd;

    if (!same_pair(a, b) || i >= k)
        return 0;
    for (uint32_t d = 0; d < a->src_nd; d++) {
        uint32_t rel = a->src_nd - 1 - d;
        if (rel == i) {
            if (a->src_off[d] + ext_at(a, i) != b->src_off[d])
                return 0;
        } else if (a->src_off[d] != b->src_off[d]) {
            return 0;
        }
    }
    for (uint32_t d = 0; d < a->dst_nd; d++) {
        uint32_t rel = a->dst_nd - 1 - d;
        if (rel == i) {
            if (a->dst_off[d] + ext_at(a, i) != b->dst_off[d])
                return 0;
        } else if (a->dst_off[d] != b->dst_off[d]) {
            return 0;
        }
    }
    for (uint32_t r = 0; r < k; r++)
        if (r != i && ext_at(a, r) != ext_at(b, r))
            return 0;
    return 1;
}

static int key_less(const uint64_t *a, const uint64_t *b)
{
    for (int i = 0; i < 4; i++)
        if (a[i] != b[i])
            return a[i] < b[i];
    return 0;
}

/* a absorbs b (adjacent along relative dim i). */
static void absorb(pb_op *a, const pb_op *b, uint32_t i)
{
    uint64_t ext[WEX_MAX_DIMS];
    uint32_t nd = a->ndim > i + 1 ? a->ndim : i + 1;

    for (uint32_t r = 0; r < nd; r++)
        ext[nd - 1 - r] = ext_at(a, r) + (r == i ? ext_at(b, r) : 0);
    memcpy(a->ext, ext, nd * sizeof(uint64_t));
    a->ndim = nd;
    if (key_less(b->key, a->key))
        memcpy(a->key, b->key, sizeof(a->key));
}

static int by_key(const void *pa, const void *pb)
{
    const pb_op *a = pa, *b = pb;

    for (int i = 0; i < 4; i++)
        if (a->key[i] != b->key[i])
            return cmp_u64(a->key[i], b->key[i]);
    return cmp_u64(a->src_rank, b->src_rank);
}

wex_status pb_coalesce(pb_ops *ops, int merge)
{
    uint32_t max_nd = 0;

    if (ops->count == 0)
        return WEX_OK; /* (qsort of a NULL array is undefined) */

    for (size_t i = 0; merge && i < ops->count; i++) {
        uint32_t k = ops->v[i].src_nd < ops->v[i].dst_nd ? ops->v[i].src_nd
                                                         : ops->v[i].dst_nd;
        if (k > max_nd)
            max_nd = k;
    }
    for (uint32_t along = 0; merge && along < max_nd; along++) {
        size_t out = 0;
        qsort_r(ops->v, ops->count, sizeof(pb_op), by_pair_along, &along);
        for (size_t i = 0; i < ops->count; i++) {
            if (out > 0 && adjacent(&ops->v[out - 1], &ops->v[i], along))
                absorb(&ops->v[out - 1], &ops->v[i], along);
            else
                ops->v[out++] = ops->v[i];
        }
        ops->count = out;
    }
    qsort(ops->v, ops->count, sizeof(pb_op), by_key);
    return WEX_OK;
}
