/* Cutting one destination piece into cells and choosing each cell's
 * source. */
#include <stdlib.h>
#include <string.h>

#include "balanced.h"
#include "plugin_fail.h"

wex_status pb_push(pb_ops *ops, const pb_op *op)
{
    if (ops->count == ops->cap) {
        size_t cap = ops->cap ? ops->cap * 2 : 256;
        pb_op *grown = realloc(ops->v, cap * sizeof(*grown));
        if (grown == NULL)
            return WEX_ERR_NOMEM;
        ops->v = grown;
        ops->cap = cap;
    }
    ops->v[ops->count++] = *op;
    return WEX_OK;
}

wex_status pb_pack_boxes(const wex_piece_view *views, uint64_t count,
                         uint32_t ndim, uint64_t **box, uint64_t *cap)
{
    uint64_t need = 2 * (uint64_t)ndim * count;

    if (need > *cap) {
        uint64_t *grown = realloc(*box, need * sizeof(*grown));
        if (grown == NULL)
            return WEX_ERR_NOMEM;
        *box = grown;
        *cap = need;
    }
    for (uint64_t i = 0; i < count; i++) {
        const wex_piece_view *v = WEX_PIECE_VIEW_AT(views, i);
        for (uint32_t d = 0; d < ndim; d++) {
            (*box)[2 * ndim * i + 2 * d] = v->offset[d];
            (*box)[2 * ndim * i + 2 * d + 1] = v->offset[d] + v->extent[d];
        }
    }
    return WEX_OK;
}

static int overlaps(const uint64_t *a, const uint64_t *b, uint32_t ndim)
{
    for (uint32_t d = 0; d < ndim; d++)
        if (a[2 * d] >= b[2 * d + 1] || b[2 * d] >= a[2 * d + 1])
            return 0;
    return 1;
}

static int holds(const uint64_t *box, const uint64_t *lo, uint32_t ndim)
{
    for (uint32_t d = 0; d < ndim; d++)
        if (lo[d] < box[2 * d] || lo[d] >= box[2 * d + 1])
            return 0;
    return 1;
}

static uint64_t mix(uint64_t h, uint64_t v)
{
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h * 0xff51afd7ed558ccdull;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static int is_dead(const pb_job *job, uint64_t rank)
{
    return job->dead_count > 0 && bsearch(&rank, job->dead, job->dead_count,
                                          sizeof(uint64_t), cmp_u64) != NULL;
}

/* Sorted distinct cut points of dimension `dim` inside piece d. */
static size_t cuts_of(const pb_job *job, const wex_piece_view *d,
                      const uint64_t *cand, size_t ncand, uint32_t dim,
                      uint64_t *cuts)
{
    uint64_t lo = d->offset[dim], hi = lo + d->extent[dim];
    size_t n = 0, k = 0;

    cuts[n++] = lo;
    cuts[n++] = hi;
    for (size_t i = 0; i < ncand; i++) {
        const uint64_t *box = PB_SBOX(job, cand[i]);
        uint64_t a = box[2 * dim], b = box[2 * dim + 1];
        if (a > lo && a < hi)
            cuts[n++] = a;
        if (b > lo && b < hi)
            cuts[n++] = b;
    }
    qsort(cuts, n, sizeof(*cuts), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || cuts[k - 1] != cuts[i])
            cuts[k++] = cuts[i];
    return k;
}

/* Where a canonical box starting at `lo` lands in a piece's local
 * tensor: the piece's `at`, moved on the trailing dims. */
static void local_offset(const wex_piece_view *p, const uint64_t *lo,
                         uint64_t *out)
{
    uint32_t lead = p->local_ndim - p->ndim;

    memcpy(out, p->at, p->local_ndim * sizeof(uint64_t));
    for (uint32_t d = 0; d < p->ndim; d++)
        out[lead + d] += lo[d] - p->offset[d];
}

static wex_status emit(pb_job *job, const wex_piece_view *s,
                       const wex_piece_view *d, const uint64_t *lo,
                       const uint64_t *ext, const uint64_t *key)
{
    pb_op op;

    if ((job->side == WEX_SIDE_SOURCE && s->rank != job->rank) ||
        (job->side == WEX_SIDE_DESTINATION && d->rank != job->rank))
        return WEX_OK;
    memset(&op, 0, sizeof(op));
    memcpy(op.key, key, sizeof(op.key));
    op.src_rank = s->rank;
    op.src_tensor = s->tensor;
    op.dst_rank = d->rank;
    op.dst_tensor = d->tensor;
    op.ndim = d->ndim;
    op.src_nd = s->local_ndim;
    op.dst_nd = d->local_ndim;
    local_offset(s, lo, op.src_off);
    local_offset(d, lo, op.dst_off);
    memcpy(op.ext, ext, d->ndim * sizeof(uint64_t));
    return pb_push(job->out, &op);
}

/* How many destination pieces need the cell at `lo`, and where piece j
 * stands among them. */
static void coverage(const pb_job *job, uint64_t ndst, uint64_t j,
                     const uint64_t *lo, uint32_t ndim, uint64_t *n_p,
                     uint64_t *ordinal_p)
{
    uint64_t n = 0, ordinal = 0;

    for (uint64_t i = 0; i < ndst; i++) {
        if (!holds(PB_DBOX(job, i), lo, ndim))
            continue;
        if (i == j)
            ordinal = n;
        n++;
    }
    *n_p = n;
    *ordinal_p = ordinal;
}

/* One cell [lo, lo+ext): choose its holder(s) and emit. */
static wex_status one_cell(pb_job *job, uint64_t c, uint64_t ndst, uint64_t j,
                           const uint64_t *cand, size_t ncand,
                           const uint64_t *lo, const uint64_t *ext,
                           uint64_t ordinal_cell, uint64_t elem)
{
    const wex_piece_view *d = PB_DST(job, j);
    uint64_t host = job->host->layout_host(job->req->destination, d->rank);
    uint64_t holders[64], *h = holders, nh = 0, n, ordinal, offset = 0;
    size_t local = 0;
    uint64_t bytes = elem, parts = 1, key[4] = {c, j, ordinal_cell, 0};
    uint32_t split = 0;
    wex_status st = WEX_OK;

    if (ncand > 64 && (h = malloc(ncand * sizeof(*h))) == NULL)
        return WEX_ERR_NOMEM;
    for (size_t i = 0; i < ncand; i++)
        if (holds(PB_SBOX(job, cand[i]), lo, d->ndim)) {
            int same = job->src_host[cand[i]] == host;
            if (job->cfg.prefer_local && same && local == 0)
                nh = 0; /* drop the remote holders seen so far */
            local += same;
            if (!job->cfg.prefer_local || same || local == 0)
                h[nh++] = cand[i];
        }
    if (nh == 0) {
        if (h != holders)
            free(h);
        return WP_FAIL(job->host, WEX_ERR_INVALID,
                       "no %ssource piece holds part of canonical tensor "
                       "%llu that destination rank %llu needs%s",
                       job->dead_count ? "live " : "", (unsigned long long)c,
                       (unsigned long long)d->rank,
                       job->dead_count ? " (its holders are dead)" : "");
    }
    /* Only a choice between holders needs the piece's place among the
     * destinations; one holder serves them all. */
    n = ordinal = 0;
    if (nh > 1)
        coverage(job, ndst, j, lo, d->ndim, &n, &ordinal);
    for (uint32_t k = 0; k < d->ndim; k++) {
        offset = mix(offset, lo[k]);
        bytes *= ext[k];
    }
    offset = mix(offset, c) % nh;
    /* Fewer destinations than holders: let several holders share a big
     * cell, along its first dimension long enough to cut. */
    if (nh > 1 && n < nh) {
        parts = nh / n;
        while (split < d->ndim && ext[split] < parts)
            split++;
        if (split == d->ndim)
            parts = 1;
        while (parts > 1 && bytes / parts < job->cfg.split_min_bytes)
            parts--;
    }
    for (uint64_t p = 0; st == WEX_OK && p < parts; p++) {
        uint64_t plo[WEX_MAX_DIMS], pext[WEX_MAX_DIMS];
        uint64_t pick = h[(ordinal * parts + p + offset) % nh];
        memcpy(plo, lo, d->ndim * sizeof(uint64_t));
        memcpy(pext, ext, d->ndim * sizeof(uint64_t));
        if (parts > 1) {
            uint64_t a = ext[split] * p / parts,
                     b = ext[split] * (p + 1) / parts;
            plo[split] = lo[split] + a;
            pext[split] = b - a;
        }
        key[3] = p;
        st = emit(job, PB_SRC(job, pick), d, plo, pext, key);
    }
    if (h != holders)
        free(h);
    return st;
}

wex_status pb_assign_piece(pb_job *job, uint64_t c, uint64_t nsrc,
                           uint64_t ndst, uint64_t j)
{
    const wex_piece_view *d = PB_DST(job, j);
    uint64_t *cuts[WEX_MAX_DIMS] = {NULL};
    size_t ncuts[WEX_MAX_DIMS], ncand = 0, idx[WEX_MAX_DIMS] = {0};
    wex_local_tensor_desc t = {sizeof(t), 0, 0, 0, NULL, NULL};
    wex_status st = WEX_OK;
    uint64_t cell = 0;

    if (nsrc > job->cand_cap) {
        uint64_t *grown = realloc(job->cand, nsrc * sizeof(*grown));
        if (grown == NULL)
            return WEX_ERR_NOMEM;
        job->cand = grown;
        job->cand_cap = nsrc;
    }
    /* Candidates: every overlapping source piece on a live rank; each
     * cell then keeps the ones on the destination's host when any holds
     * it. */
    for (uint64_t i = 0; i < nsrc; i++)
        if (overlaps(PB_SBOX(job, i), PB_DBOX(job, j), d->ndim) &&
            !is_dead(job, PB_SRC(job, i)->rank))
            job->cand[ncand++] = i;
    /* A rank planning as a source skips pieces it has no part in. */
    if (job->side == WEX_SIDE_SOURCE) {
        size_t mine = 0;
        for (size_t i = 0; i < ncand && !mine; i++)
            mine = PB_SRC(job, job->cand[i])->rank == job->rank;
        if (!mine)
            return WEX_OK;
    }
    job->host->layout_tensor(job->req->destination, d->rank, d->tensor, &t);
    if ((uint64_t)d->ndim * (2 * ncand + 2) > job->cut_cap) {
        uint64_t cap = (uint64_t)d->ndim * (2 * ncand + 2);
        uint64_t *grown = realloc(job->cuts, cap * sizeof(*grown));
        if (grown == NULL)
            return WEX_ERR_NOMEM;
        job->cuts = grown;
        job->cut_cap = cap;
    }
    for (uint32_t k = 0; k < d->ndim; k++) {
        cuts[k] = job->cuts + k * (2 * ncand + 2);
        ncuts[k] = cuts_of(job, d, job->cand, ncand, k, cuts[k]);
    }
    while (st == WEX_OK) {
        uint64_t lo[WEX_MAX_DIMS], ext[WEX_MAX_DIMS];
        uint32_t k;
        for (k = 0; k < d->ndim; k++) {
            lo[k] = cuts[k][idx[k]];
            ext[k] = cuts[k][idx[k] + 1] - lo[k];
        }
        st = one_cell(job, c, ndst, j, job->cand, ncand, lo, ext, cell++,
                      wex_dtype_size(t.dtype));
        for (k = d->ndim; k-- > 0;) {
            if (++idx[k] + 1 < ncuts[k])
                break;
            idx[k] = 0;
        }
        if (k == UINT32_MAX)
            break;
    }
    return st;
}
