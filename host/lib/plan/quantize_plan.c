#include "quantize_plan.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "quantize.h"

/* ---- which weights ------------------------------------------------------ */

/* The checkpoint's block size must be the rule's: 128 x 128, both as its
 * config says (weight_block_size) and as its scale tensor's shape is. */
static wex_status check_blocks(const wex_model *m, uint64_t w, uint64_t s)
{
    const wex__tensor *wt = &m->tensors[w], *st = &m->tensors[s];
    const cJSON *q =
        cJSON_GetObjectItemCaseSensitive(m->config, "quantization_config");
    const cJSON *size =
        cJSON_GetObjectItemCaseSensitive(q, "weight_block_size");
    int config_ok =
        size == NULL ||
        (cJSON_GetArraySize(size) == 2 &&
         cJSON_GetArrayItem(size, 0)->valuedouble == WEX__QUANT_BLOCK &&
         cJSON_GetArrayItem(size, 1)->valuedouble == WEX__QUANT_BLOCK);

    if (config_ok && st->ndim == 2 &&
        st->shape[0] ==
            (wt->shape[0] + WEX__QUANT_BLOCK - 1) / WEX__QUANT_BLOCK &&
        st->shape[1] ==
            (wt->shape[1] + WEX__QUANT_BLOCK - 1) / WEX__QUANT_BLOCK)
        return WEX_OK;
    return wex__error(WEX_ERR_UNSUPPORTED,
                      "model: %s: its block scales %s are [%llu, %llu] "
                      "(quantization_config.weight_block_size): wex converts "
                      "fp8 with the rule %s, blocks of 128 x 128, only",
                      wt->name, st->name, (unsigned long long)st->shape[0],
                      (unsigned long long)(st->ndim > 1 ? st->shape[1] : 0),
                      WEX__QUANT_RULE);
}

/* How one side holds canonical tensor `c`: bit 1 as the checkpoint,
 * bit 2 as converted values. */
static unsigned forms(const wex__side *s, uint64_t c)
{
    unsigned f = 0;

    for (uint64_t k = s->canon_start[c]; k < s->canon_start[c + 1]; k++) {
        const wex__piece_ref *r = &s->canon_refs[k];
        const wex__piece *p = &s->layouts[r->rank].pieces[r->piece];
        f |= p->transform == WEX_TRANSFORM_CONVERT ? 2u : 1u;
    }
    return f;
}

typedef struct hide_arg {
    const wex_model *model;
    const unsigned char *quantized;
    const int64_t *weight_of; /* per canonical: the weight it scales, or -1 */
} hide_arg;

static int hidden(const wex__side *s, uint64_t rank, size_t piece, void *arg)
{
    const hide_arg *h = arg;
    const wex__piece *p = &s->layouts[rank].pieces[piece];

    if (h->quantized[p->canonical])
        return p->transform == WEX_TRANSFORM_NONE; /* its fp8 pieces */
    return h->weight_of[p->canonical] >= 0 &&
           h->quantized[h->weight_of[p->canonical]];
}

wex_status wex__quantize_classify(wex__planner *p)
{
    const wex_model *m = p->dst.model;
    int64_t *weight_of = NULL;
    unsigned char *quantized = NULL;
    int any = 0;
    wex_status st = WEX_OK;

    weight_of = malloc((m->count ? m->count : 1) * sizeof(*weight_of));
    quantized = calloc(m->count ? m->count : 1, 1);
    if (weight_of == NULL || quantized == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    for (uint64_t c = 0; c < m->count; c++)
        weight_of[c] = -1;
    for (uint64_t w = 0; st == WEX_OK && w < m->count; w++) {
        int64_t s = wex__scale_of(m, w);
        unsigned from, to;
        if (s < 0)
            continue;
        weight_of[s] = (int64_t)w;
        from = forms(&p->src, w);
        to = forms(&p->dst, w);
        if (from == 3u)
            st = wex__error(WEX_ERR_UNSUPPORTED,
                            "source: %s is held both as fp8 and as values "
                            "on different ranks; wex converts a weight held "
                            "one way",
                            m->tensors[w].name);
        else if ((from | to) == 3u)
            st = check_blocks(m, w, (uint64_t)s);
        if (st == WEX_OK && from == 2u && (to & 1u)) {
            quantized[w] = 1;
            any = 1;
        }
    }
    if (st == WEX_OK && any) {
        hide_arg h = {m, quantized, weight_of};
        st = wex__side_hide(&p->dst, hidden, &h);
        if (p->topology.quantize_bytes_per_s <= 0)
            p->topology.quantize_bytes_per_s = wex__quantize_rate();
    }
out:
    free(weight_of);
    if (st == WEX_OK && any)
        p->quantized = quantized;
    else
        free(quantized);
    return st;
}

/* ---- cells -------------------------------------------------------------- */

static int dead_rank(const uint64_t *dead, uint64_t n, uint64_t r)
{
    for (uint64_t i = 0; i < n; i++)
        if (dead[i] == r)
            return 1;
    return 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The sorted, distinct cuts in [lo, hi) of dimension d: lo, hi and every
 * live source piece's edges between them. */
static size_t cuts(const wex__planner *p, uint64_t w, uint32_t d, uint64_t lo,
                   uint64_t hi, const uint64_t *dead, uint64_t ndead,
                   uint64_t *out)
{
    const wex__side *s = &p->src;
    size_t n = 0, k = 0;

    out[n++] = lo;
    out[n++] = hi;
    for (uint64_t i = s->canon_start[w]; i < s->canon_start[w + 1]; i++) {
        const wex__piece_ref *r = &s->canon_refs[i];
        const wex__piece *q = &s->layouts[r->rank].pieces[r->piece];
        uint64_t a = q->offset[d], b = a + q->extent[d];
        if (dead_rank(dead, ndead, r->rank))
            continue;
        if (a > lo && a < hi)
            out[n++] = a;
        if (b > lo && b < hi)
            out[n++] = b;
    }
    qsort(out, n, sizeof(*out), cmp_u64);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || out[i] != out[k - 1])
            out[k++] = out[i];
    return k;
}

static uint64_t mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The live source piece a cell comes from: one on the destination's host
 * if any holds it, else one chosen by a hash of the cell. */
static wex_status holder(const wex__planner *p, uint64_t w, uint64_t dst_rank,
                         wex__qcell *c, const uint64_t *dead, uint64_t ndead)
{
    const wex__side *s = &p->src;
    uint64_t local = 0, all = 0, pick;
    int pass;

    for (pass = 0; pass < 2; pass++) {
        uint64_t seen = 0;
        pick =
            pass == 0
                ? 0
                : mix(w * 0x9e3779b97f4a7c15ull ^ c->lo[0] << 20 ^ c->lo[1]) %
                      (local ? local : all);
        for (uint64_t i = s->canon_start[w]; i < s->canon_start[w + 1]; i++) {
            const wex__piece_ref *r = &s->canon_refs[i];
            const wex__piece *q = &s->layouts[r->rank].pieces[r->piece];
            int on_host = s->hosts[r->rank] == p->dst.hosts[dst_rank];
            if (dead_rank(dead, ndead, r->rank) || q->offset[0] > c->lo[0] ||
                q->offset[0] + q->extent[0] < c->hi[0] ||
                q->offset[1] > c->lo[1] ||
                q->offset[1] + q->extent[1] < c->hi[1])
                continue;
            if (pass == 0) {
                all++;
                local += on_host;
                continue;
            }
            if (local && !on_host)
                continue;
            if (seen++ == pick) {
                c->src_rank = r->rank;
                c->src_piece = q;
                return WEX_OK;
            }
        }
        if (pass == 0 && all == 0)
            return wex__error(
                WEX_ERR_INVALID,
                "plan: no live source holds %s rows [%llu, "
                "%llu) columns [%llu, %llu), which destination "
                "rank %llu holds in fp8",
                s->model->tensors[w].name, (unsigned long long)c->lo[0],
                (unsigned long long)c->hi[0], (unsigned long long)c->lo[1],
                (unsigned long long)c->hi[1], (unsigned long long)dst_rank);
    }
    return wex__error(WEX_ERR_INTERNAL, "plan: lost a cell's holder");
}

void wex__kept_cells_free(wex__kept_cells *kept)
{
    if (kept == NULL)
        return;
    free(kept->groups);
    free(kept->cells);
    free(kept);
}

/* A planner opened from a share holds the cells its rank's operations
 * quantize into, cut with every source live; any other set of dead
 * sources needs the whole plan (wex__planner_complete). */
static wex_status share_cells(const wex__planner *p, uint64_t dst_rank,
                              uint64_t piece, uint64_t ndead,
                              wex__qcell **cells_p, size_t *count_p)
{
    const wex__kept_cells *k = p->kept_cells;
    const wex__qcell *kept = NULL;
    size_t lo = 0, hi = k ? k->group_count : 0, n = 0;

    while (ndead == 0 && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const wex__kept_group *g = &k->groups[mid];
        if (g->dst_rank == dst_rank && g->piece == piece) {
            kept = k->cells + g->first;
            n = g->count;
            break;
        }
        if (g->dst_rank < dst_rank ||
            (g->dst_rank == dst_rank && g->piece < piece))
            lo = mid + 1;
        else
            hi = mid;
    }
    if (kept == NULL)
        return wex__error(WEX_ERR_INTERNAL,
                          "plan: the plan share holds no "
                          "fp8 cells of destination rank %llu's piece %llu "
                          "with %llu sources dead",
                          (unsigned long long)dst_rank,
                          (unsigned long long)piece, (unsigned long long)ndead);
    *cells_p = malloc((n ? n : 1) * sizeof(**cells_p));
    if (*cells_p == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
    if (n)
        memcpy(*cells_p, kept, n * sizeof(**cells_p));
    *count_p = n;
    return WEX_OK;
}

wex_status wex__quantize_cells(const wex__planner *p, uint64_t dst_rank,
                               uint64_t piece, const uint64_t *dead,
                               uint64_t ndead, wex__qcell **cells_p,
                               size_t *count_p)
{
    const wex__piece *d;
    uint64_t w, n, *rc, *cc;
    wex__qcell *cells = NULL;
    size_t nr, nc, k = 0;
    wex_status st = WEX_OK;

    *cells_p = NULL;
    *count_p = 0;
    if (p->from_share)
        return share_cells(p, dst_rank, piece, ndead, cells_p, count_p);
    d = &p->dst.layouts[dst_rank].pieces[piece];
    w = d->canonical;
    n = p->src.canon_start[w + 1] - p->src.canon_start[w];
    rc = malloc((2 * n + 2) * sizeof(*rc));
    cc = malloc((2 * n + 2) * sizeof(*cc));
    if (rc == NULL || cc == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    nr = cuts(p, w, 0, d->offset[0], d->offset[0] + d->extent[0], dead, ndead,
              rc);
    nc = cuts(p, w, 1, d->offset[1], d->offset[1] + d->extent[1], dead, ndead,
              cc);
    k = (nr - 1) * (nc - 1);
    cells = malloc((k ? k : 1) * sizeof(*cells));
    k = 0;
    if (cells == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "plan: out of memory");
        goto out;
    }
    for (size_t i = 0; st == WEX_OK && i + 1 < nr; i++)
        for (size_t j = 0; st == WEX_OK && j + 1 < nc; j++) {
            wex__qcell *c = &cells[k++];
            c->lo[0] = rc[i];
            c->hi[0] = rc[i + 1];
            c->lo[1] = cc[j];
            c->hi[1] = cc[j + 1];
            st = holder(p, w, dst_rank, c, dead, ndead);
        }
    if (st == WEX_OK) {
        *cells_p = cells;
        *count_p = k;
        cells = NULL;
    }
out:
    free(rc);
    free(cc);
    free(cells);
    return st;
}

/* ---- operations ----------------------------------------------------------- */

static wex_status push(wex_plan_builder *b, const wex__op *o)
{
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        wex__op *grown = realloc(b->ops, cap * sizeof(*grown));
        if (grown == NULL)
            return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
        b->ops = grown;
        b->cap = cap;
    }
    b->ops[b->count++] = *o;
    return WEX_OK;
}

/* The operation's common part: cell c of destination piece `piece`. */
static void cell_op(const wex__planner *p, uint64_t dst_rank, uint64_t piece,
                    const wex__qcell *c, wex__op *o)
{
    const wex__rank_layout *dl = &p->dst.layouts[dst_rank];
    const wex__piece *d = &dl->pieces[piece];
    const wex__rank_layout *sl = &p->src.layouts[c->src_rank];
    const wex__piece *s = c->src_piece;

    memset(o, 0, sizeof(*o));
    o->src_rank = c->src_rank;
    o->src_tensor = s->tensor;
    o->dst_rank = dst_rank;
    o->src_ndim = sl->tensors[s->tensor].ndim;
    o->dst_ndim = dl->tensors[d->tensor].ndim;
    o->ndim = 2;
    o->canonical = d->canonical;
    o->dst_piece = piece;
    memcpy(o->src_off, s->at, sizeof(o->src_off));
    for (uint32_t k = 0; k < 2; k++)
        o->src_off[o->src_ndim - 2 + k] += c->lo[k] - s->offset[k];
}

static wex_status quantize_ops(const wex__planner *p, uint64_t dst_rank,
                               uint64_t piece, const wex__qcell *cells,
                               size_t n, int only_src, uint64_t src_rank,
                               wex_plan_builder *b)
{
    const wex__rank_layout *dl = &p->dst.layouts[dst_rank];
    const wex__piece *d = &dl->pieces[piece];
    wex_status st = WEX_OK;

    for (size_t i = 0; st == WEX_OK && i < n; i++) {
        const wex__qcell *c = &cells[i];
        wex__op o;
        if (only_src && c->src_rank != src_rank)
            continue;
        cell_op(p, dst_rank, piece, c, &o);
        o.transform = WEX__OP_QUANTIZE;
        o.dst_tensor = d->tensor;
        memcpy(o.dst_off, d->at, sizeof(o.dst_off));
        for (uint32_t k = 0; k < 2; k++) {
            o.dst_off[o.dst_ndim - 2 + k] += c->lo[k] - d->offset[k];
            o.extent[k] = c->hi[k] - c->lo[k];
            o.canon_off[k] = c->lo[k];
        }
        o.dtype_size = 1;
        o.src_dtype_size = wex_dtype_size(
            p->src.layouts[c->src_rank].tensors[o.src_tensor].dtype);
        o.bytes = o.extent[0] * o.extent[1];
        o.src_bytes = o.bytes * o.src_dtype_size;
        st = push(b, &o);
    }
    return st;
}

static uint64_t first_block_at_or_after(uint64_t x)
{
    return (x + WEX__QUANT_BLOCK - 1) / WEX__QUANT_BLOCK;
}

/* Each cell sends the scale_inv of the blocks whose first element it
 * holds, into every scale piece of the destination rank that has them.
 * The side's index lists a canonical tensor's pieces rank by rank. */
static wex_status scale_ops(const wex__planner *p, uint64_t dst_rank,
                            uint64_t piece, int64_t scale,
                            const wex__qcell *cells, size_t n, int only_src,
                            uint64_t src_rank, wex_plan_builder *b)
{
    const wex__side *ds = &p->dst;
    const wex__rank_layout *dl = &ds->layouts[dst_rank];
    wex_status st = WEX_OK;

    if (scale < 0)
        return WEX_OK;
    for (uint64_t ref = ds->canon_start[scale];
         st == WEX_OK && ref < ds->canon_start[scale + 1]; ref++) {
        const wex__piece *sp;
        if (ds->canon_refs[ref].rank != dst_rank)
            continue;
        sp = &dl->pieces[ds->canon_refs[ref].piece];
        for (size_t i = 0; st == WEX_OK && i < n; i++) {
            const wex__qcell *c = &cells[i];
            uint64_t lo[2], hi[2];
            wex__op o;
            int empty = 0;
            if (only_src && c->src_rank != src_rank)
                continue;
            for (uint32_t k = 0; k < 2; k++) {
                lo[k] = first_block_at_or_after(c->lo[k]);
                hi[k] = first_block_at_or_after(c->hi[k]);
                if (lo[k] < sp->offset[k])
                    lo[k] = sp->offset[k];
                if (hi[k] > sp->offset[k] + sp->extent[k])
                    hi[k] = sp->offset[k] + sp->extent[k];
                empty |= hi[k] <= lo[k];
            }
            if (empty)
                continue;
            cell_op(p, dst_rank, piece, c, &o);
            o.transform = WEX__OP_SCALE;
            o.dst_tensor = sp->tensor;
            o.dst_ndim = dl->tensors[sp->tensor].ndim;
            memcpy(o.dst_off, sp->at, sizeof(o.dst_off));
            for (uint32_t k = 0; k < 2; k++) {
                o.dst_off[o.dst_ndim - 2 + k] += lo[k] - sp->offset[k];
                o.extent[k] = hi[k] - lo[k];
                o.canon_off[k] = lo[k];
            }
            o.dtype_size = 4;
            o.bytes = o.extent[0] * o.extent[1] * 4;
            st = push(b, &o);
        }
    }
    return st;
}

/* The operations of fp8 piece `piece` of destination rank `dst_rank`:
 * all of them, or (only_src) those source rank src_rank runs. */
static wex_status plan_piece(const wex__planner *p, uint64_t dst_rank,
                             uint64_t piece, int only_src, uint64_t src_rank,
                             const uint64_t *dead, uint64_t ndead,
                             wex_plan_builder *b)
{
    const wex__piece *d = &p->dst.layouts[dst_rank].pieces[piece];
    wex__qcell *cells = NULL;
    size_t n = 0;
    wex_status st;

    st = wex__quantize_cells(p, dst_rank, piece, dead, ndead, &cells, &n);
    if (st == WEX_OK)
        st = quantize_ops(p, dst_rank, piece, cells, n, only_src, src_rank, b);
    if (st == WEX_OK)
        st = scale_ops(p, dst_rank, piece,
                       wex__scale_of(p->dst.model, d->canonical), cells, n,
                       only_src, src_rank, b);
    free(cells);
    return st;
}

static int fp8_piece(const wex__planner *p, const wex__piece *d)
{
    return p->quantized[d->canonical] && d->transform == WEX_TRANSFORM_NONE;
}

static int boxes_meet(const wex__piece *a, const wex__piece *b)
{
    for (uint32_t k = 0; k < 2; k++)
        if (a->offset[k] >= b->offset[k] + b->extent[k] ||
            b->offset[k] >= a->offset[k] + a->extent[k])
            return 0;
    return 1;
}

static int cmp_ref(const void *a, const void *b)
{
    const wex__piece_ref *x = a, *y = b;

    if (x->rank != y->rank)
        return x->rank < y->rank ? -1 : 1;
    return x->piece < y->piece ? -1 : x->piece > y->piece;
}

/* The destination fp8 pieces source rank `src` may feed: those meeting a
 * piece it holds of the same weight, in (rank, piece) order, once each.
 * Only these can have a cell whose holder is `src`. */
static wex_status fed_pieces(const wex__planner *p, uint64_t src,
                             wex__piece_ref **refs_p, size_t *count_p)
{
    const wex__rank_layout *sl = &p->src.layouts[src];
    const wex__side *ds = &p->dst;
    wex__piece_ref *refs = NULL;
    size_t n = 0, cap = 0, k = 0;

    for (size_t i = 0; i < sl->piece_count; i++) {
        const wex__piece *s = &sl->pieces[i];
        uint64_t w = s->canonical;
        if (!p->quantized[w])
            continue;
        for (uint64_t ref = ds->canon_start[w]; ref < ds->canon_start[w + 1];
             ref++) {
            const wex__piece_ref *r = &ds->canon_refs[ref];
            const wex__piece *d = &ds->layouts[r->rank].pieces[r->piece];
            if (!fp8_piece(p, d) || !boxes_meet(s, d))
                continue;
            if (n == cap) {
                size_t grown_cap = cap ? 2 * cap : 64;
                wex__piece_ref *grown =
                    realloc(refs, grown_cap * sizeof(*grown));
                if (grown == NULL) {
                    free(refs);
                    return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
                }
                refs = grown;
                cap = grown_cap;
            }
            refs[n++] = *r;
        }
    }
    if (n > 0)
        qsort(refs, n, sizeof(*refs), cmp_ref);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || cmp_ref(&refs[i], &refs[k - 1]) != 0)
            refs[k++] = refs[i];
    *refs_p = refs;
    *count_p = k;
    return WEX_OK;
}

wex_status wex__quantize_plan_rank(const wex__planner *p, uint32_t side,
                                   uint64_t rank, const uint64_t *dead,
                                   uint64_t ndead, wex_plan_builder *b)
{
    const wex__rank_layout *dl;
    wex__piece_ref *refs = NULL;
    size_t n = 0;
    wex_status st = WEX_OK;

    if (p->quantized == NULL)
        return WEX_OK;
    if (side == WEX_SIDE_DESTINATION) {
        dl = &p->dst.layouts[rank];
        for (size_t i = 0; st == WEX_OK && i < dl->piece_count; i++)
            if (fp8_piece(p, &dl->pieces[i]))
                st = plan_piece(p, rank, i, 0, 0, dead, ndead, b);
        return st;
    }
    st = fed_pieces(p, rank, &refs, &n);
    for (size_t i = 0; st == WEX_OK && i < n; i++)
        st =
            plan_piece(p, refs[i].rank, refs[i].piece, 1, rank, dead, ndead, b);
    free(refs);
    return st;
}
