/*
 * The volume of a union of axis-aligned boxes, exactly: sweep the first
 * dimension over every box boundary, and for each slab take the union of
 * the boxes spanning it one dimension down. Consecutive slabs crossed by
 * the same boxes are measured once. Layouts and plans give a handful of
 * boxes per tensor, so the quadratic worst case never matters.
 */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

uint64_t conf_box_volume(const conf_box *b, uint32_t ndim)
{
    uint64_t v = 1;

    for (uint32_t d = 0; d < ndim; d++)
        v *= b->hi[d] > b->lo[d] ? b->hi[d] - b->lo[d] : 0;
    return v;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int union_from(const conf_box *const *boxes, size_t n, uint32_t d,
                      uint32_t ndim, uint64_t *volume_p)
{
    const conf_box **active = NULL, **prev = NULL;
    uint64_t *cuts = NULL, total = 0, width = 0, inner = 0;
    size_t ncuts = 0, nactive = 0, nprev = 0;
    int rc = -1;

    *volume_p = 0;
    if (n == 0)
        return 0;
    if (d == ndim) {
        *volume_p = 1;
        return 0;
    }
    cuts = malloc(2 * n * sizeof(*cuts));
    active = malloc(n * sizeof(*active));
    prev = malloc(n * sizeof(*prev));
    if (cuts == NULL || active == NULL || prev == NULL)
        goto out;
    for (size_t i = 0; i < n; i++) {
        cuts[ncuts++] = boxes[i]->lo[d];
        cuts[ncuts++] = boxes[i]->hi[d];
    }
    qsort(cuts, ncuts, sizeof(*cuts), cmp_u64);
    for (size_t c = 0; c + 1 < ncuts; c++) {
        uint64_t a = cuts[c], b = cuts[c + 1];
        if (a == b)
            continue;
        nactive = 0;
        for (size_t i = 0; i < n; i++)
            if (boxes[i]->lo[d] <= a && boxes[i]->hi[d] >= b)
                active[nactive++] = boxes[i];
        if (nactive == nprev &&
            memcmp(active, prev, nactive * sizeof(*active)) == 0) {
            width += b - a; /* the same boxes: one wider slab */
            continue;
        }
        total += width * inner;
        width = b - a;
        if (union_from(active, nactive, d + 1, ndim, &inner) != 0)
            goto out;
        memcpy(prev, active, nactive * sizeof(*active));
        nprev = nactive;
    }
    total += width * inner;
    *volume_p = total;
    rc = 0;
out:
    free(cuts);
    free(active);
    free(prev);
    return rc;
}

static int cmp_box(const void *a, const void *b, void *ndim_p)
{
    const conf_box *x = a, *y = b;
    uint32_t ndim = *(const uint32_t *)ndim_p;

    for (uint32_t d = 0; d < ndim; d++) {
        if (x->lo[d] != y->lo[d])
            return x->lo[d] < y->lo[d] ? -1 : 1;
        if (x->hi[d] != y->hi[d])
            return x->hi[d] < y->hi[d] ? -1 : 1;
    }
    return 0;
}

int conf_union_volume(conf_box *boxes, size_t count, uint32_t ndim,
                      uint64_t *volume_p)
{
    const conf_box **refs;
    size_t n = 0;
    int rc;

    *volume_p = 0;
    if (count == 0)
        return 0;
    /* replicas hold identical boxes: keep one of each */
    qsort_r(boxes, count, sizeof(*boxes), cmp_box, &ndim);
    refs = malloc(count * sizeof(*refs));
    if (refs == NULL)
        return -1;
    for (size_t i = 0; i < count; i++) {
        if (conf_box_volume(&boxes[i], ndim) == 0)
            continue;
        if (n > 0 && cmp_box(refs[n - 1], &boxes[i], &ndim) == 0)
            continue;
        refs[n++] = &boxes[i];
    }
    rc = union_from(refs, n, 0, ndim, volume_p);
    free(refs);
    return rc;
}
