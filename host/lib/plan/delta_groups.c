/* Delta steps as a plan sees them (delta_groups.h). */
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "delta_groups.h"
#include "error.h"

int wex__delta_eligible(const wex__op *o)
{
    if (o->transform == WEX__OP_QUANTIZE)
        return o->dtype_size == 1 && o->bytes <= WEX__DELTA_MADE_MAX;
    return o->transform == WEX__OP_COPY && o->dtype_size > 0 &&
           o->dtype_size <= 8 && 32 % o->dtype_size == 0;
}

int wex__delta_same_read(const wex__op *a, const wex__op *b)
{
    return a->src_tensor == b->src_tensor && a->ndim == b->ndim &&
           a->dtype_size == b->dtype_size && a->transform == b->transform &&
           memcmp(a->src_off, b->src_off, sizeof(a->src_off)) == 0 &&
           memcmp(a->extent, b->extent, sizeof(a->extent)) == 0;
}

int wex__delta_read_cmp(const wex__op *a, const wex__op *b)
{
    int c;

    if (a->src_tensor != b->src_tensor)
        return a->src_tensor < b->src_tensor ? -1 : 1;
    if (a->ndim != b->ndim)
        return a->ndim < b->ndim ? -1 : 1;
    if (a->dtype_size != b->dtype_size)
        return a->dtype_size < b->dtype_size ? -1 : 1;
    if (a->transform != b->transform)
        return a->transform < b->transform ? -1 : 1;
    if ((c = memcmp(a->src_off, b->src_off, sizeof(a->src_off))) != 0)
        return c;
    return memcmp(a->extent, b->extent, sizeof(a->extent));
}

static int cmp_read(const void *pa, const void *pb)
{
    const wex__op *a = *(const wex__op *const *)pa;
    const wex__op *b = *(const wex__op *const *)pb;
    int c = wex__delta_read_cmp(a, b);

    return c ? c : (a < b ? -1 : a > b);
}

void wex__delta_sort(const wex__op **ops, size_t count)
{
    qsort(ops, count, sizeof(*ops), cmp_read);
}

uint64_t wex__delta_outbox_cap(const wex__op *o, double max_fraction)
{
    uint64_t elems = o->bytes / o->dtype_size;
    uint64_t cap =
        (uint64_t)((double)o->bytes * max_fraction) + (elems + 7) / 8 + 64;

    if (cap > wex__delta_bound(elems, o->dtype_size))
        cap = wex__delta_bound(elems, o->dtype_size);
    return (cap + 7) & ~(uint64_t)7;
}

wex_status wex__delta_memory(const wex__op *ops, size_t count,
                             double max_fraction, uint64_t *snapshot_p,
                             uint64_t *outbox_p)
{
    const wex__op **order = malloc((count + 1) * sizeof(*order));
    size_t n = 0;

    *snapshot_p = *outbox_p = 0;
    if (order == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
    for (size_t i = 0; i < count; i++)
        if (wex__delta_eligible(&ops[i]))
            order[n++] = &ops[i];
    wex__delta_sort(order, n);
    for (size_t k = 0; k < n; k++)
        if (k == 0 || !wex__delta_same_read(order[k], order[k - 1])) {
            *snapshot_p += (order[k]->bytes + 63) & ~(uint64_t)63;
            *outbox_p += wex__delta_outbox_cap(order[k], max_fraction);
        }
    free(order);
    return WEX_OK;
}

uint64_t wex__delta_inbox_share(uint64_t inbox_bytes, uint64_t pair,
                                uint64_t received)
{
    const uint64_t least = 1ull << 20, share_least = 64ull << 10;
    uint64_t room = inbox_bytes, share;

    if (room == 0)
        room = received / 20 > least ? received / 20 : least;
    share = received
                ? (uint64_t)((double)room * (double)pair / (double)received)
                : 0;
    share = share < share_least ? share_least : share;
    return (share + 4095) & ~(uint64_t)4095;
}

static int by_source(const void *a, const void *b)
{
    uint64_t x = ((const uint64_t *)a)[0], y = ((const uint64_t *)b)[0];

    return x < y ? -1 : x > y;
}

wex_status wex__delta_inboxes(const wex__op *ops, size_t count,
                              uint64_t inbox_bytes, uint64_t *bytes_p)
{
    uint64_t(*pairs)[2] = malloc((count + 1) * sizeof(*pairs));
    uint64_t received = 0;

    *bytes_p = 0;
    if (pairs == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
    for (size_t i = 0; i < count; i++) {
        pairs[i][0] = ops[i].src_rank;
        pairs[i][1] = ops[i].bytes;
        received += ops[i].bytes;
    }
    qsort(pairs, count, sizeof(*pairs), by_source);
    for (size_t i = 0, end; i < count; i = end) {
        uint64_t pair = 0;
        for (end = i; end < count && pairs[end][0] == pairs[i][0]; end++)
            pair += pairs[end][1];
        *bytes_p += wex__delta_inbox_share(inbox_bytes, pair, received);
    }
    free(pairs);
    return WEX_OK;
}
