/* The packed boxes and hosts of each canonical tensor's pieces, built
 * once per policy context. Every rank's plan walks the same pieces of
 * the tensors it holds, and a replicated tensor (a norm, an attention
 * weight) has a piece per rank on each side: packing them again for each
 * of a thousand ranks made planning quadratic in the rank count. */
#include <stdlib.h>
#include <string.h>

#include "balanced.h"

void pb_cache_fini(pb_cache *cache)
{
    for (uint64_t c = 0; cache->v != NULL && c < cache->len; c++) {
        free(cache->v[c].sbox);
        free(cache->v[c].dbox);
        free(cache->v[c].src_host);
    }
    free(cache->v);
    memset(cache, 0, sizeof(*cache));
}

/* Grows the table to hold canonical c; a request over other layouts
 * than the cached ones starts it afresh. */
static wex_status slot(pb_cache *cache, const wex_plan_request *req, uint64_t c,
                       pb_packed **slot_p)
{
    if (cache->src != req->source || cache->dst != req->destination) {
        pb_cache_fini(cache);
        cache->src = req->source;
        cache->dst = req->destination;
    }
    if (c >= cache->len) {
        uint64_t len = cache->len ? cache->len : 256;
        pb_packed *grown;
        while (len <= c)
            len *= 2;
        grown = realloc(cache->v, len * sizeof(*grown));
        if (grown == NULL)
            return WEX_ERR_NOMEM;
        memset(grown + cache->len, 0, (len - cache->len) * sizeof(*grown));
        cache->v = grown;
        cache->len = len;
    }
    *slot_p = &cache->v[c];
    return WEX_OK;
}

wex_status pb_cache_get(pb_cache *cache, const wex_host_services *h,
                        const wex_plan_request *req, uint64_t c,
                        const pb_packed **packed_p)
{
    const wex_piece_view *src, *dst;
    uint64_t nsrc, ndst, cap = 0;
    pb_packed *p;
    wex_status st = slot(cache, req, c, &p);

    if (st != WEX_OK)
        return st;
    *packed_p = p;
    if (p->ready)
        return WEX_OK;
    free(p->src_host); /* what a failed packing left */
    free(p->sbox);
    free(p->dbox);
    p->sbox = p->dbox = NULL;
    src = h->layout_canonical_pieces(req->source, c, &nsrc);
    dst = h->layout_canonical_pieces(req->destination, c, &ndst);
    p->ndim = ndst ? WEX_PIECE_VIEW_AT(dst, 0)->ndim : 0;
    p->src_host = malloc((nsrc ? nsrc : 1) * sizeof(*p->src_host));
    if (p->src_host == NULL)
        return WEX_ERR_NOMEM;
    for (uint64_t i = 0; i < nsrc; i++)
        p->src_host[i] =
            h->layout_host(req->source, WEX_PIECE_VIEW_AT(src, i)->rank);
    st = pb_pack_boxes(src, nsrc, p->ndim, &p->sbox, &cap);
    cap = 0;
    if (st == WEX_OK)
        st = pb_pack_boxes(dst, ndst, p->ndim, &p->dbox, &cap);
    p->ready = st == WEX_OK;
    return st;
}
