#include "box_runs.h"

#include <string.h>

/* Byte strides of a tensor's last `n` dims, aligned on the box's dims,
 * and the byte offset of the box's first element. */
static uint64_t strides(const wex__box_side *t, uint32_t n, uint64_t elem,
                        uint64_t *stride)
{
    uint64_t s = elem, base = 0;

    for (uint32_t d = t->ndim; d-- > 0;) {
        uint32_t from_end = t->ndim - 1 - d;
        if (from_end < n)
            stride[n - 1 - from_end] = s;
        base += t->offset[d] * s;
        s *= t->shape[d];
    }
    return base;
}

/* Box dims (from the last) that are whole on both sides merge into one
 * run, together with the first dim that is not. */
static uint32_t contiguous_dims(uint32_t n, const uint64_t *extent,
                                const wex__box_side *a, const wex__box_side *b)
{
    uint32_t k = 1;

    while (k < n) {
        uint32_t d = n - k; /* box dim d is whole on both sides? */
        if (extent[d] != a->shape[a->ndim - k] ||
            (b != NULL && extent[d] != b->shape[b->ndim - k]))
            break;
        k++;
    }
    return k;
}

static void init(wex__box_runs *w, uint32_t n, const uint64_t *extent,
                 uint64_t elem, const wex__box_side *a, const wex__box_side *b)
{
    uint32_t k;

    memset(w, 0, sizeof(*w));
    w->box_ndim = n;
    w->elem = elem;
    memcpy(w->extent, extent, n * sizeof(uint64_t));
    w->a_base = strides(a, n, elem, w->a_stride);
    if (b != NULL)
        w->b_base = strides(b, n, elem, w->b_stride);
    k = contiguous_dims(n, extent, a, b);
    w->run_bytes = elem;
    for (uint32_t d = n - k; d < n; d++)
        w->run_bytes *= extent[d];
    w->outer = n - k;
    w->remaining = 1;
    for (uint32_t d = 0; d < w->outer; d++)
        w->remaining *= extent[d];
}

void wex__box_runs_init(wex__box_runs *w, uint32_t box_ndim,
                        const uint64_t *extent, uint64_t elem_bytes,
                        const wex__box_side *a, const wex__box_side *b)
{
    init(w, box_ndim, extent, elem_bytes, a, b);
}

void wex__box_runs_init1(wex__box_runs *w, uint32_t box_ndim,
                         const uint64_t *extent, uint64_t elem_bytes,
                         const wex__box_side *a)
{
    init(w, box_ndim, extent, elem_bytes, a, NULL);
}

int wex__box_runs_next(wex__box_runs *w, uint64_t *a_off, uint64_t *b_off)
{
    uint64_t a = w->a_base, b = w->b_base;

    if (w->remaining == 0)
        return 0;
    for (uint32_t d = 0; d < w->outer; d++) {
        a += w->idx[d] * w->a_stride[d];
        b += w->idx[d] * w->b_stride[d];
    }
    *a_off = a;
    if (b_off != NULL)
        *b_off = b;
    w->remaining--;
    for (uint32_t d = w->outer; d-- > 0;) {
        if (++w->idx[d] < w->extent[d])
            break;
        w->idx[d] = 0;
    }
    return 1;
}
