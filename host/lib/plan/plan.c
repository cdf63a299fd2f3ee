#include "plan.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "abi_copy.h"
#include "error.h"
#include "op_transform.h"
#include "quantize.h"
#include "quantize_once.h"

void wex__plan_builder_init(wex_plan_builder *b, const wex__side *src,
                            const wex__side *dst)
{
    memset(b, 0, sizeof(*b));
    b->src = src;
    b->dst = dst;
}

void wex__plan_builder_fini(wex_plan_builder *b)
{
    free(b->ops);
    memset(b, 0, sizeof(*b));
}

/* The op's box, mapped onto the trailing dims of a local tensor, must lie
 * inside it; `off` has one entry per local dim. */
static int inside(const wex__local_tensor *t, const uint64_t *off,
                  const uint64_t *extent, uint32_t ndim)
{
    uint32_t lead = t->ndim - ndim;

    for (uint32_t d = 0; d < t->ndim; d++) {
        uint64_t ext = d < lead ? 1 : extent[d - lead];
        if (ext == 0 || off[d] > t->shape[d] || ext > t->shape[d] - off[d])
            return 0;
    }
    return 1;
}

static wex_status refuse_op(const wex_plan_op *op, const char *why)
{
    return wex__error(WEX_ERR_INVALID,
                      "plan: operation source rank %" PRIu64 " tensor %" PRIu64
                      " -> destination rank %" PRIu64 " tensor %" PRIu64 ": %s",
                      op->src_rank, op->src_tensor, op->dst_rank,
                      op->dst_tensor, why);
}

/* A box of an fp8 weight that a float destination wants spans pieces (a
 * policy merged neighbouring operations, across stacked experts or fused
 * projections): each piece's part is dequantized by that piece's own
 * block scales, so each becomes an operation of its own. */
static wex_status add_per_piece(wex_plan_builder *b, const wex_plan_op *op)
{
    const wex__rank_layout *l = &b->src->layouts[op->src_rank];
    const wex__local_tensor *t = &l->tensors[op->src_tensor];
    const wex__local_tensor *dt =
        &b->dst->layouts[op->dst_rank].tensors[op->dst_tensor];
    uint32_t lead = t->ndim - op->ndim, dlead = dt->ndim - op->ndim;
    uint64_t total = 1, covered = 0;

    for (uint32_t d = 0; d < op->ndim; d++)
        total *= op->extent[d];
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        uint64_t so[WEX_MAX_DIMS], dof[WEX_MAX_DIMS], ext[WEX_MAX_DIMS];
        uint32_t plead = t->ndim - p->ndim, ndim = op->ndim;
        uint64_t n = 1, skip = 0;
        wex_plan_op sub = *op;
        int meets = p->tensor == op->src_tensor && p->ndim <= t->ndim;
        wex_status st;

        memcpy(dof, op->dst_offset, dt->ndim * sizeof(uint64_t));
        for (uint32_t d = 0; meets && d < t->ndim; d++) {
            uint64_t lo = p->at[d];
            uint64_t hi = lo + (d < plead ? 1 : p->extent[d - plead]);
            uint64_t olo = op->src_offset[d];
            uint64_t ohi = olo + (d < lead ? 1 : op->extent[d - lead]);
            uint64_t a = lo > olo ? lo : olo, z = hi < ohi ? hi : ohi;
            meets = a < z;
            so[d] = a;
            if (meets && d >= lead) {
                ext[d - lead] = z - a;
                dof[dlead + d - lead] += a - olo;
            }
        }
        if (!meets)
            continue;
        /* leading dims of one element go: a piece of a 2-d weight is 2-d */
        while (ndim - skip > 2 && ext[skip] == 1)
            skip++;
        ndim -= (uint32_t)skip;
        for (uint32_t d = 0; d < ndim; d++)
            n *= ext[skip + d];
        sub.ndim = ndim;
        sub.src_offset = so;
        sub.dst_offset = dof;
        sub.extent = ext + skip;
        if (ndim == op->ndim && n == total) /* no smaller: not a weight */
            break;
        covered += n;
        if ((st = wex__plan_add_op(b, &sub)) != WEX_OK)
            return st;
    }
    if (covered != total)
        return refuse_op(op, "an fp8 source box must lie in pieces of fp8 "
                             "weights");
    return WEX_OK;
}

wex_status wex__plan_add_op(wex_plan_builder *b, const wex_plan_op *given)
{
    const wex__local_tensor *st, *dt;
    wex_plan_op full, *op = &full;
    wex__op *o;

    if (given == NULL || given->struct_size < WEX_PLAN_OP_SIZE_1_0)
        return wex__error(WEX_ERR_INVALID,
                          "plan_add_op: struct_size too small");
    wex__abi_in(&full, sizeof(full), given);
    if (op->src_rank >= b->src->ranks || op->dst_rank >= b->dst->ranks)
        return refuse_op(op, "no such rank");
    if (op->src_tensor >= b->src->layouts[op->src_rank].tensor_count ||
        op->dst_tensor >= b->dst->layouts[op->dst_rank].tensor_count)
        return refuse_op(op, "no such local tensor");
    st = &b->src->layouts[op->src_rank].tensors[op->src_tensor];
    dt = &b->dst->layouts[op->dst_rank].tensors[op->dst_tensor];
    if (op->ndim == 0 || op->ndim > st->ndim || op->ndim > dt->ndim)
        return refuse_op(op, "the box has more dimensions than a tensor");
    if (!inside(st, op->src_offset, op->extent, op->ndim) ||
        !inside(dt, op->dst_offset, op->extent, op->ndim))
        return refuse_op(op, "the box does not fit inside both tensors");
    if (st->dtype == WEX_DTYPE_F8_E4M3 && wex__is_float_dtype(dt->dtype) &&
        (op->ndim != 2 ||
         wex__piece_holding(b->src, op->src_rank, op->src_tensor,
                            op->src_offset, op->ndim, op->extent) == NULL))
        return add_per_piece(b, op);
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        wex__op *grown = realloc(b->ops, cap * sizeof(*grown));
        if (grown == NULL)
            return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
        b->ops = grown;
        b->cap = cap;
    }
    o = &b->ops[b->count++];
    /* Every field set, the unused ones 0: an operation is the same bytes
     * however it was made (plan shares compare and store them). */
    memset(o, 0, sizeof(*o));
    o->src_rank = op->src_rank;
    o->src_tensor = op->src_tensor;
    o->dst_rank = op->dst_rank;
    o->dst_tensor = op->dst_tensor;
    o->ndim = op->ndim;
    o->src_ndim = st->ndim;
    o->dst_ndim = dt->ndim;
    o->dtype_size = wex_dtype_size(dt->dtype);
    o->src_dtype_size = wex_dtype_size(st->dtype);
    o->transform = WEX__OP_COPY;
    memcpy(o->src_off, op->src_offset, st->ndim * sizeof(uint64_t));
    memcpy(o->dst_off, op->dst_offset, dt->ndim * sizeof(uint64_t));
    memcpy(o->extent, op->extent, op->ndim * sizeof(uint64_t));
    o->bytes = o->dtype_size;
    o->src_bytes = o->src_dtype_size;
    for (uint32_t d = 0; d < op->ndim; d++) {
        o->bytes *= op->extent[d];
        o->src_bytes *= op->extent[d];
    }
    if (st->dtype != dt->dtype) {
        const char *why = NULL;
        if (wex__op_derive(b->src, b->dst, o, &why) != WEX_OK) {
            b->count--;
            return refuse_op(op, why);
        }
    }
    return WEX_OK;
}

/* ---- statistics ------------------------------------------------------ */

wex_status wex__plan_stats_init(wex__plan_stats *s, const wex__side *src,
                                const wex__side *dst)
{
    memset(s, 0, sizeof(*s));
    s->src_ranks = src->ranks;
    s->dst_ranks = dst->ranks;
    s->send = calloc(src->ranks, sizeof(*s->send));
    s->recv = calloc(dst->ranks, sizeof(*s->recv));
    s->quant = calloc(src->ranks ? src->ranks : 1, sizeof(*s->quant));
    s->cells_made = calloc(1, sizeof(*s->cells_made));
    s->cells_needed = calloc(1, sizeof(*s->cells_needed));
    if (s->send == NULL || s->recv == NULL || s->quant == NULL ||
        s->cells_made == NULL || s->cells_needed == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
    for (uint64_t r = 0; r < dst->ranks; r++)
        s->bytes_needed += wex__side_piece_bytes(dst, r);
    return WEX_OK;
}

void wex__plan_stats_fini(wex__plan_stats *s)
{
    free(s->send);
    free(s->recv);
    free(s->quant);
    if (s->cells_made != NULL)
        wex__cell_set_free(s->cells_made);
    if (s->cells_needed != NULL)
        wex__cell_set_free(s->cells_needed);
    free(s->cells_made);
    free(s->cells_needed);
    memset(s, 0, sizeof(*s));
}

/* Destination box of an op in its tensor's own coordinates. */
static void dst_box(const wex__op *o, uint64_t *lo, uint64_t *hi)
{
    uint32_t lead = o->dst_ndim - o->ndim;

    for (uint32_t d = 0; d < o->dst_ndim; d++) {
        lo[d] = o->dst_off[d];
        hi[d] = lo[d] + (d < lead ? 1 : o->extent[d - lead]);
    }
}

static int by_dst(const void *a, const void *b)
{
    const wex__op *x = *(const wex__op *const *)a,
                  *y = *(const wex__op *const *)b;

    if (x->dst_tensor != y->dst_tensor)
        return x->dst_tensor < y->dst_tensor ? -1 : 1;
    for (uint32_t d = 0; d < x->dst_ndim; d++)
        if (x->dst_off[d] != y->dst_off[d])
            return x->dst_off[d] < y->dst_off[d] ? -1 : 1;
    return 0;
}

/* Bytes written twice: overlaps between pairs of ops landing in the same
 * destination tensor, found by a sweep along the first dimension. */
static uint64_t overlap_bytes(const wex__op *ops, size_t count)
{
    const wex__op **sorted = malloc((count ? count : 1) * sizeof(*sorted));
    uint64_t total = 0;

    if (sorted == NULL)
        return 0;
    for (size_t i = 0; i < count; i++)
        sorted[i] = &ops[i];
    qsort(sorted, count, sizeof(*sorted), by_dst);
    for (size_t i = 0; i < count; i++) {
        uint64_t alo[WEX_MAX_DIMS], ahi[WEX_MAX_DIMS];
        dst_box(sorted[i], alo, ahi);
        for (size_t j = i + 1; j < count; j++) {
            uint64_t blo[WEX_MAX_DIMS], bhi[WEX_MAX_DIMS], v;
            if (sorted[j]->dst_tensor != sorted[i]->dst_tensor)
                break;
            dst_box(sorted[j], blo, bhi);
            if (blo[0] >= ahi[0])
                break;
            v = sorted[i]->dtype_size;
            for (uint32_t d = 0; d < sorted[i]->dst_ndim && v; d++) {
                uint64_t lo = alo[d] > blo[d] ? alo[d] : blo[d];
                uint64_t hi = ahi[d] < bhi[d] ? ahi[d] : bhi[d];
                v = hi > lo ? v * (hi - lo) : 0;
            }
            total += v;
        }
    }
    free(sorted);
    return total;
}

wex_status wex__plan_stats_add(wex__plan_stats *s, const wex__side *src,
                               const wex__side *dst, const wex__op *ops,
                               size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const wex__op *o = &ops[i];
        int intra = src->hosts[o->src_rank] == dst->hosts[o->dst_rank];
        s->operations++;
        s->bytes += o->bytes;
        s->source_bytes += o->src_bytes;
        if (o->transform == WEX__OP_QUANTIZE) {
            /* a source quantizes a cell once for all its replicas */
            int made = wex__cell_set_add(s->cells_made, o, 1);
            int needed = wex__cell_set_add(s->cells_needed, o, 0);
            if (made < 0 || needed < 0)
                return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
            if (made) {
                s->quantized_bytes += o->src_bytes;
                s->quant[o->src_rank] += o->src_bytes;
            }
            if (needed)
                s->quantize_work_bytes += o->src_bytes;
        }
        s->send[o->src_rank][intra] += o->bytes;
        s->recv[o->dst_rank][intra] += o->bytes;
        if (intra)
            s->intra_host_bytes += o->bytes;
    }
    s->redundant_bytes += overlap_bytes(ops, count);
    return WEX_OK;
}

static uint64_t max_link(const uint64_t (*links)[2], uint64_t ranks)
{
    uint64_t best = 0;

    for (uint64_t r = 0; r < ranks; r++)
        if (links[r][0] + links[r][1] > best)
            best = links[r][0] + links[r][1];
    return best;
}

uint64_t wex__plan_max_send(const wex__plan_stats *s)
{
    return max_link((const uint64_t(*)[2])s->send, s->src_ranks);
}

uint64_t wex__plan_max_recv(const wex__plan_stats *s)
{
    return max_link((const uint64_t(*)[2])s->recv, s->dst_ranks);
}

double wex__plan_link_seconds(const uint64_t link[2], const wex__topology *t)
{
    double nic = (double)link[0] / t->nic_bytes_per_s;
    double intra = (double)link[1] / t->intra_bytes_per_s;

    return nic > intra ? nic : intra;
}

/* A source quantizes before it sends what it quantized: the two add up
 * (a pipelined sender would overlap them; this one does not yet). */
double wex__plan_source_seconds(const wex__plan_stats *s, uint64_t rank,
                                const wex__topology *t)
{
    return wex__plan_link_seconds(s->send[rank], t) +
           (s->quant[rank] && t->quantize_bytes_per_s > 0
                ? (double)s->quant[rank] / t->quantize_bytes_per_s
                : 0);
}

double wex__plan_predicted_seconds(const wex__plan_stats *s,
                                   const wex__topology *t)
{
    double worst = 0;

    for (uint64_t r = 0; r < s->src_ranks; r++)
        if (wex__plan_source_seconds(s, r, t) > worst)
            worst = wex__plan_source_seconds(s, r, t);
    for (uint64_t r = 0; r < s->dst_ranks; r++)
        if (wex__plan_link_seconds(s->recv[r], t) > worst)
            worst = wex__plan_link_seconds(s->recv[r], t);
    return worst;
}

static void write_array(FILE *out, const uint64_t *v, uint32_t n)
{
    fputc('[', out);
    for (uint32_t i = 0; i < n; i++)
        fprintf(out, i ? ",%" PRIu64 : "%" PRIu64, v[i]);
    fputc(']', out);
}

const char *wex__op_transform_name(uint32_t transform)
{
    static const char *const names[] = {"copy", "convert", "dequantize",
                                        "quantize", "scale"};

    return transform < 5 ? names[transform] : "unknown";
}

void wex__plan_write_ops(FILE *out, const wex__op *ops, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        const wex__op *o = &ops[i];
        fprintf(out,
                "{\"src_rank\":%" PRIu64 ",\"src_tensor\":%" PRIu64
                ",\"src_offset\":",
                o->src_rank, o->src_tensor);
        write_array(out, o->src_off, o->src_ndim);
        fprintf(out,
                ",\"dst_rank\":%" PRIu64 ",\"dst_tensor\":%" PRIu64
                ",\"dst_offset\":",
                o->dst_rank, o->dst_tensor);
        write_array(out, o->dst_off, o->dst_ndim);
        fputs(",\"extent\":", out);
        write_array(out, o->extent, o->ndim);
        if (o->transform != WEX__OP_COPY)
            fprintf(out, ",\"transform\":\"%s\",\"source_bytes\":%" PRIu64,
                    wex__op_transform_name(o->transform), o->src_bytes);
        /* which weight's blocks: the canonical (row, col) of the box's
         * first element, or for scales its first block */
        if (o->transform >= WEX__OP_DEQUANTIZE) {
            fprintf(out, ",\"canonical\":%" PRIu64 ",\"canonical_offset\":",
                    o->canonical);
            write_array(out, o->canon_off, 2);
        }
        fprintf(out, ",\"bytes\":%" PRIu64 "}\n", o->bytes);
    }
}
