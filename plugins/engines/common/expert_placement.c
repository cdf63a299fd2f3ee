#include "expert_placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAP "/expert_placement/physical_to_logical"

void ws_placement_fini(ws_placement *p)
{
    free(p->rows);
    free(p->cells);
    memset(p, 0, sizeof(*p));
}

static wex_status read_redundant(ws_emit *e, const wex_options *options,
                                 const ws_model *m, int64_t ep,
                                 const char *engine, ws_placement *p)
{
    const wex_host_services *h = e->host;

    if (h->opt_type(options, "/redundant_experts") != WEX_JSON_MISSING &&
        h->opt_get_i64(options, "/redundant_experts", &p->redundant) != WEX_OK)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/redundant_experts: expected an integer >= 0");
    if (p->redundant < 0 || p->redundant > 1 << 20)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/redundant_experts: expected 0..%d, got %lld",
                       1 << 20, (long long)p->redundant);
    p->physical = m->experts > 0 ? m->experts + p->redundant : 0;
    if (p->redundant == 0)
        return WEX_OK;
    if (m->experts == 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/redundant_experts: %lld redundant experts, "
                       "but the model has no routed experts",
                       (long long)p->redundant);
    if (ep < 2)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/redundant_experts: redundant experts are "
                       "placed over expert-parallel ranks (%s runs them with "
                       "expert parallelism only); expected parallel/ep > 1",
                       engine);
    if (p->physical % ep != 0)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options/redundant_experts: %lld experts + %lld "
                       "redundant = %lld physical slots do not spread evenly "
                       "over ep = %lld ranks, which %s requires",
                       (long long)m->experts, (long long)p->redundant,
                       (long long)p->physical, (long long)ep, engine);
    return WEX_OK;
}

/* Row `row` of the map, MoE layer `layer`: every slot a logical expert,
 * every logical expert in some slot. */
static wex_status read_row(ws_emit *e, const wex_options *options,
                           const ws_model *m, const ws_placement *p,
                           uint64_t row, int64_t layer, int32_t *cells,
                           unsigned char *seen)
{
    const wex_host_services *h = e->host;
    char ptr[96];
    uint64_t n = 0;

    snprintf(ptr, sizeof(ptr), MAP "/%llu", (unsigned long long)row);
    if (h->opt_count(options, ptr, &n) != WEX_OK ||
        h->opt_type(options, ptr) != WEX_JSON_ARRAY ||
        n != (uint64_t)p->physical)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options%s: layer %lld's map has %llu slots; expected "
                       "an array of %lld (%lld experts + %lld redundant)",
                       ptr, (long long)layer, (unsigned long long)n,
                       (long long)p->physical, (long long)m->experts,
                       (long long)p->redundant);
    memset(seen, 0, (size_t)m->experts);
    for (int64_t s = 0; s < p->physical; s++) {
        int64_t v = -1;
        snprintf(ptr, sizeof(ptr), MAP "/%llu/%lld", (unsigned long long)row,
                 (long long)s);
        if (h->opt_get_i64(options, ptr, &v) != WEX_OK || v < 0 ||
            v >= m->experts)
            return ws_fail(e, WEX_ERR_INVALID,
                           "options%s: slot %lld of layer %lld: expected a "
                           "logical expert 0..%lld",
                           ptr, (long long)s, (long long)layer,
                           (long long)m->experts - 1);
        cells[s] = (int32_t)v;
        seen[v] = 1;
    }
    for (int64_t x = 0; x < m->experts; x++)
        if (!seen[x])
            return ws_fail(e, WEX_ERR_INVALID,
                           "options" MAP "/%llu: layer %lld holds logical "
                           "expert %lld in no slot; every expert needs one",
                           (unsigned long long)row, (long long)layer,
                           (long long)x);
    return WEX_OK;
}

static wex_status read_map(ws_emit *e, const wex_options *options,
                           const ws_model *m, ws_placement *p)
{
    const wex_host_services *h = e->host;
    int64_t total = m->layers + m->mtp_layers, moe_layers = 0;
    uint64_t rows = 0, row = 0;
    unsigned char *seen;
    ws_layer l;

    for (int64_t layer = 0; layer < m->layers; layer++) {
        ws_layer_probe(e, m, layer, &l);
        moe_layers += l.moe;
    }
    if (h->opt_type(options, MAP) != WEX_JSON_ARRAY ||
        h->opt_count(options, MAP, &rows) != WEX_OK ||
        rows != (uint64_t)moe_layers)
        return ws_fail(e, WEX_ERR_INVALID,
                       "options" MAP ": expected an array of %lld maps, one "
                       "per MoE layer in layer order; got %llu",
                       (long long)moe_layers, (unsigned long long)rows);
    p->rows = calloc((size_t)total + 1, sizeof(*p->rows));
    p->cells = malloc(((size_t)moe_layers * (size_t)p->physical + 1) *
                      sizeof(*p->cells));
    seen = malloc((size_t)m->experts + 1);
    if (p->rows == NULL || p->cells == NULL || seen == NULL) {
        free(seen);
        return ws_fail(e, WEX_ERR_NOMEM, "expert placement: out of memory");
    }
    for (int64_t layer = 0; layer < m->layers && e->status == WEX_OK; layer++) {
        ws_layer_probe(e, m, layer, &l);
        if (!l.moe)
            continue;
        p->rows[layer] = p->cells + row * (uint64_t)p->physical;
        read_row(e, options, m, p, row++, layer, p->rows[layer], seen);
    }
    free(seen);
    return e->status;
}

wex_status ws_placement_read(ws_emit *e, const wex_options *options,
                             const ws_model *m, int64_t ep, const char *engine,
                             ws_placement *p)
{
    const wex_host_services *h = e->host;
    const char *how = NULL;

    memset(p, 0, sizeof(*p));
    if (read_redundant(e, options, m, ep, engine, p) != WEX_OK)
        return e->status;
    switch (h->opt_type(options, "/expert_placement")) {
    case WEX_JSON_MISSING: return WEX_OK;
    case WEX_JSON_STRING:
        if (h->opt_get_str(options, "/expert_placement", &how) == WEX_OK &&
            strcmp(how, "linear") == 0)
            return WEX_OK;
        break;
    case WEX_JSON_OBJECT:
        if (m->experts == 0)
            return ws_fail(e, WEX_ERR_INVALID,
                           "options/expert_placement: a map of expert slots, "
                           "but the model has no routed experts");
        return read_map(e, options, m, p);
    default: break;
    }
    return ws_fail(e, WEX_ERR_INVALID,
                   "options/expert_placement: expected \"linear\" or "
                   "{\"physical_to_logical\": [[...], ...]}");
}
