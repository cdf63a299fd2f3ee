#include "op_transform.h"

#include "quantize.h"

const wex__piece *wex__piece_holding(const wex__side *side, uint64_t rank,
                                     uint64_t tensor, const uint64_t *off,
                                     uint32_t ndim, const uint64_t *extent)
{
    const wex__rank_layout *l = &side->layouts[rank];
    const wex__local_tensor *t = &l->tensors[tensor];
    uint32_t lead = t->ndim - ndim;

    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        uint32_t plead = t->ndim - p->ndim;
        int inside = p->tensor == tensor && p->ndim >= ndim;

        for (uint32_t d = 0; inside && d < t->ndim; d++) {
            uint64_t lo = p->at[d];
            uint64_t hi = lo + (d < plead ? 1 : p->extent[d - plead]);
            uint64_t ext = d < lead ? 1 : extent[d - lead];
            inside = off[d] >= lo && off[d] + ext <= hi;
        }
        if (inside)
            return p;
    }
    return NULL;
}

/* Where the scales of the weight piece `w` are on the same rank: the
 * piece of scale tensor `scale` that holds w's first block. */
static const wex__piece *scale_piece(const wex__side *side, uint64_t rank,
                                     const wex__piece *w, uint64_t scale)
{
    const wex__rank_layout *l = &side->layouts[rank];
    uint64_t br = w->offset[0] / WEX__QUANT_BLOCK;
    uint64_t bc = w->offset[1] / WEX__QUANT_BLOCK;

    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        if (p->canonical == scale && br >= p->offset[0] &&
            br < p->offset[0] + p->extent[0] && bc >= p->offset[1] &&
            bc < p->offset[1] + p->extent[1])
            return p;
    }
    return NULL;
}

wex_status wex__op_derive(const wex__side *src, const wex__side *dst,
                          wex__op *o, const char **why)
{
    uint32_t sdt = src->layouts[o->src_rank].tensors[o->src_tensor].dtype;
    uint32_t ddt = dst->layouts[o->dst_rank].tensors[o->dst_tensor].dtype;
    uint32_t lead = o->src_ndim - 2;
    const wex__piece *w, *s;
    int64_t scale;

    if (wex__is_float_dtype(sdt) && wex__is_float_dtype(ddt)) {
        o->transform = WEX__OP_CONVERT;
        return WEX_OK;
    }
    if (sdt != WEX_DTYPE_F8_E4M3 || !wex__is_float_dtype(ddt)) {
        *why = ddt == WEX_DTYPE_F8_E4M3 && wex__is_float_dtype(sdt)
                   ? "an fp8 destination fed floats is quantized by the "
                     "host, never planned by a policy"
                   : "the host converts only between floats and from an "
                     "fp8 weight to floats";
        return WEX_ERR_INVALID;
    }
    /* e4m3 to a float: the source's block scales dequantize it */
    w = wex__piece_holding(src, o->src_rank, o->src_tensor, o->src_off, o->ndim,
                           o->extent);
    scale = w ? wex__scale_of(src->model, w->canonical) : -1;
    s = scale >= 0 ? scale_piece(src, o->src_rank, w, (uint64_t)scale) : NULL;
    if (w == NULL || w->ndim != 2 || o->ndim != 2 || s == NULL) {
        *why = "an fp8 source box must lie in one piece of a 2-d fp8 weight "
               "whose block scales the source rank holds";
        return WEX_ERR_INVALID;
    }
    o->transform = WEX__OP_DEQUANTIZE;
    o->canonical = w->canonical;
    for (uint32_t d = 0; d < 2; d++)
        o->canon_off[d] =
            w->offset[d] + (o->src_off[lead + d] - w->at[lead + d]);
    o->scale_tensor = s->tensor;
    o->scale_block[0] = s->offset[0];
    o->scale_block[1] = s->offset[1];
    for (uint32_t d = 0; d < WEX_MAX_DIMS; d++)
        o->scale_at[d] = s->at[d];
    return WEX_OK;
}
