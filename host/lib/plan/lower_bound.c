/*
 * The lower bound on a step's time, computed from the layouts alone.
 *
 * The canonical tensor is cut into cells along every piece boundary of
 * both sides, so each cell has one set of source holders H and one set
 * of destination pieces that need it. Two kinds of link must then carry
 * at least:
 *  - a destination rank: every byte it needs, over NIC + intra-host
 *    links together; the bytes no holder on its own host has, over its
 *    NIC alone; the bytes only holders on its own host have, over the
 *    intra-host link alone;
 *  - the holders H of a class of cells: every byte needed from that
 *    class, spread at best evenly over |H| senders (and the part no
 *    holder shares a host with, over their NICs alone).
 *  - the holders H of a class of cells of an fp8 weight they hold as
 *    floats and a destination as e4m3: every element quantized once, at
 *    best spread evenly over |H| (topology.quantize_gb_per_s each).
 * The bound is the largest of these times; no plan can beat it.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "plan.h"
#include "quantize.h"

typedef struct holder_class {
    uint64_t key;     /* hash of the sorted holder ranks; 0 = empty slot */
    uint64_t holders; /* |H| */
    double total, remote;
    double quant; /* floats the class must read to quantize, once each */
} holder_class;

typedef struct bound_state {
    const wex__side *src, *dst;
    double *need, *remote_only, *local_only; /* per destination rank */
    holder_class *classes;
    size_t class_cap, class_count;
    uint64_t *cuts[WEX_MAX_DIMS];
    size_t ncuts[WEX_MAX_DIMS], cut_cap;
    uint32_t *holders, *needers;
} bound_state;

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static holder_class *class_of(bound_state *b, uint64_t key, uint64_t holders)
{
    size_t i;

    if (key == 0)
        key = 1;
    if (2 * (b->class_count + 1) > b->class_cap) {
        size_t cap = b->class_cap ? b->class_cap * 2 : 1024;
        holder_class *grown = calloc(cap, sizeof(*grown));
        if (grown == NULL)
            return NULL;
        for (size_t j = 0; j < b->class_cap; j++) {
            if (b->classes[j].key == 0)
                continue;
            i = b->classes[j].key & (cap - 1);
            while (grown[i].key != 0)
                i = (i + 1) & (cap - 1);
            grown[i] = b->classes[j];
        }
        free(b->classes);
        b->classes = grown;
        b->class_cap = cap;
    }
    i = key & (b->class_cap - 1);
    while (b->classes[i].key != 0 && b->classes[i].key != key)
        i = (i + 1) & (b->class_cap - 1);
    if (b->classes[i].key == 0) {
        b->classes[i].key = key;
        b->classes[i].holders = holders;
        b->class_count++;
    }
    return &b->classes[i];
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static size_t unique(uint64_t *v, size_t n)
{
    size_t k = 0;

    qsort(v, n, sizeof(*v), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || v[k - 1] != v[i])
            v[k++] = v[i];
    return k;
}

static const wex__piece *piece_at(const wex__side *s, uint64_t ref)
{
    const wex__piece_ref *r = &s->canon_refs[ref];

    return &s->layouts[r->rank].pieces[r->piece];
}

static int contains(const wex__piece *p, const uint64_t *lo, uint32_t ndim)
{
    for (uint32_t d = 0; d < ndim; d++)
        if (lo[d] < p->offset[d] || lo[d] >= p->offset[d] + p->extent[d])
            return 0;
    return 1;
}

static wex_status cut_tensor(bound_state *b, uint64_t c, uint32_t ndim)
{
    uint64_t s0 = b->src->canon_start[c], s1 = b->src->canon_start[c + 1];
    uint64_t d0 = b->dst->canon_start[c], d1 = b->dst->canon_start[c + 1];
    size_t need = 2 * (size_t)((s1 - s0) + (d1 - d0)) + 2;

    if (need > b->cut_cap) {
        for (uint32_t d = 0; d < WEX_MAX_DIMS; d++) {
            uint64_t *grown = realloc(b->cuts[d], need * sizeof(uint64_t));
            if (grown == NULL)
                return wex__error(WEX_ERR_NOMEM, "lower bound: out of memory");
            b->cuts[d] = grown;
        }
        b->cut_cap = need;
    }
    for (uint32_t d = 0; d < ndim; d++) {
        size_t n = 0;
        for (uint64_t i = s0; i < s1; i++) {
            const wex__piece *p = piece_at(b->src, i);
            b->cuts[d][n++] = p->offset[d];
            b->cuts[d][n++] = p->offset[d] + p->extent[d];
        }
        for (uint64_t i = d0; i < d1; i++) {
            const wex__piece *p = &b->dst->layouts[b->dst->canon_refs[i].rank]
                                       .pieces[b->dst->canon_refs[i].piece];
            b->cuts[d][n++] = p->offset[d];
            b->cuts[d][n++] = p->offset[d] + p->extent[d];
        }
        b->ncuts[d] = unique(b->cuts[d], n);
    }
    return WEX_OK;
}

/* Bytes its sources read per byte of a cell of canonical tensor c when
 * they hold the fp8 weight c as floats and the destination as e4m3: each
 * element must be quantized, once at least, by some holder. Else 0. */
static double quantized_from(const bound_state *b, uint64_t c)
{
    const wex__piece_ref *s = &b->src->canon_refs[b->src->canon_start[c]];
    const wex__piece_ref *d = &b->dst->canon_refs[b->dst->canon_start[c]];
    const wex__rank_layout *sl = &b->src->layouts[s->rank];
    const wex__rank_layout *dl = &b->dst->layouts[d->rank];
    uint32_t held = sl->tensors[sl->pieces[s->piece].tensor].dtype;

    if (b->src->model->tensors[c].dtype != WEX_DTYPE_F8_E4M3 ||
        !wex__is_float_dtype(held) ||
        dl->tensors[dl->pieces[d->piece].tensor].dtype != WEX_DTYPE_F8_E4M3)
        return 0;
    return (double)wex_dtype_size(held);
}

static wex_status one_cell(bound_state *b, uint64_t c, const uint64_t *lo,
                           double bytes, uint32_t ndim)
{
    uint64_t s0 = b->src->canon_start[c], s1 = b->src->canon_start[c + 1];
    uint64_t d0 = b->dst->canon_start[c], d1 = b->dst->canon_start[c + 1];
    size_t nh = 0, nn = 0, remote_needers = 0;
    uint64_t key = 0;
    holder_class *cls;

    for (uint64_t i = s0; i < s1; i++)
        if (contains(piece_at(b->src, i), lo, ndim)) {
            b->holders[nh++] = b->src->canon_refs[i].rank;
            key = mix(key, b->src->canon_refs[i].rank);
        }
    for (uint64_t i = d0; i < d1; i++) {
        const wex__piece_ref *r = &b->dst->canon_refs[i];
        if (contains(&b->dst->layouts[r->rank].pieces[r->piece], lo, ndim))
            b->needers[nn++] = r->rank;
    }
    if (nn == 0)
        return WEX_OK;
    /* The block scales of an fp8 weight the sources hold as values are
     * made from it on the way (quantize_plan.h): a 1/4096th of its bytes,
     * left out of the bound, which stays one. */
    if (nh == 0 && wex__weight_of_scale(b->src->model, c) >= 0 &&
        b->src->canon_start[wex__weight_of_scale(b->src->model, c) + 1] >
            b->src->canon_start[wex__weight_of_scale(b->src->model, c)])
        return WEX_OK;
    if (nh == 0)
        return wex__error(WEX_ERR_INVALID,
                          "plan: no source rank holds part of %s that the "
                          "destination needs",
                          b->src->model->tensors[c].name);
    for (size_t j = 0; j < nn; j++) {
        uint64_t host = b->dst->hosts[b->needers[j]];
        size_t local = 0;
        for (size_t h = 0; h < nh; h++)
            local += b->src->hosts[b->holders[h]] == host;
        b->need[b->needers[j]] += bytes;
        if (local == 0) {
            b->remote_only[b->needers[j]] += bytes;
            remote_needers++;
        } else if (local == nh) {
            b->local_only[b->needers[j]] += bytes;
        }
    }
    cls = class_of(b, key, nh);
    if (cls == NULL)
        return wex__error(WEX_ERR_NOMEM, "lower bound: out of memory");
    cls->total += bytes * (double)nn;
    cls->remote += bytes * (double)remote_needers;
    cls->quant += bytes * quantized_from(b, c);
    return WEX_OK;
}

/* Walks every cell of the grid of canonical tensor c. */
static wex_status walk_cells(bound_state *b, uint64_t c)
{
    const wex__tensor *t = &b->src->model->tensors[c];
    uint32_t ndim = t->ndim;
    size_t idx[WEX_MAX_DIMS] = {0};
    uint64_t lo[WEX_MAX_DIMS];
    double elem = (double)wex_dtype_size(t->dtype);
    wex_status st = cut_tensor(b, c, ndim);

    for (uint32_t d = 0; d < ndim && st == WEX_OK; d++)
        if (b->ncuts[d] < 2)
            return WEX_OK; /* nobody holds or needs it */
    while (st == WEX_OK) {
        double bytes = elem;
        uint32_t d;
        for (d = 0; d < ndim; d++) {
            lo[d] = b->cuts[d][idx[d]];
            bytes *= (double)(b->cuts[d][idx[d] + 1] - lo[d]);
        }
        st = one_cell(b, c, lo, bytes, ndim);
        for (d = ndim; d-- > 0;) {
            if (++idx[d] + 1 < b->ncuts[d])
                break;
            idx[d] = 0;
        }
        if (d == UINT32_MAX)
            break;
    }
    return st;
}

wex_status wex__plan_lower_bound(const wex__side *src, const wex__side *dst,
                                 const wex__topology *t, double *seconds_p)
{
    bound_state b;
    uint64_t max_pieces = 1;
    double nic = t->nic_bytes_per_s, both = nic + t->intra_bytes_per_s;
    double worst = 0;
    wex_status st = WEX_OK;

    memset(&b, 0, sizeof(b));
    b.src = src;
    b.dst = dst;
    for (uint64_t c = 0; c < src->model->count; c++) {
        uint64_t n = (src->canon_start[c + 1] - src->canon_start[c]) +
                     (dst->canon_start[c + 1] - dst->canon_start[c]);
        if (n > max_pieces)
            max_pieces = n;
    }
    b.need = calloc(dst->ranks, sizeof(double));
    b.remote_only = calloc(dst->ranks, sizeof(double));
    b.local_only = calloc(dst->ranks, sizeof(double));
    b.holders = malloc(max_pieces * sizeof(uint32_t));
    b.needers = malloc(max_pieces * sizeof(uint32_t));
    if (b.need == NULL || b.remote_only == NULL || b.local_only == NULL ||
        b.holders == NULL || b.needers == NULL)
        st = wex__error(WEX_ERR_NOMEM, "lower bound: out of memory");
    for (uint64_t c = 0; st == WEX_OK && c < src->model->count; c++)
        st = walk_cells(&b, c);
    for (uint64_t r = 0; st == WEX_OK && r < dst->ranks; r++) {
        worst = fmax(worst, fmax(b.remote_only[r] / nic, b.need[r] / both));
        worst = fmax(worst, b.local_only[r] / t->intra_bytes_per_s);
    }
    for (size_t i = 0; st == WEX_OK && i < b.class_cap; i++) {
        const holder_class *k = &b.classes[i];
        if (k->key == 0)
            continue;
        worst = fmax(worst, k->remote / ((double)k->holders * nic));
        worst = fmax(worst, k->total / ((double)k->holders * both));
        if (t->quantize_bytes_per_s > 0)
            worst = fmax(worst, k->quant / ((double)k->holders *
                                            t->quantize_bytes_per_s));
    }
    for (uint32_t d = 0; d < WEX_MAX_DIMS; d++)
        free(b.cuts[d]);
    free(b.need);
    free(b.remote_only);
    free(b.local_only);
    free(b.holders);
    free(b.needers);
    free(b.classes);
    *seconds_p = worst;
    return st;
}
