/* Engines and the rank layouts they describe, for the command
 * (tool_model.h): layout/engine.h, layout.h and layout_document.h. */
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"
#include "layout_document.h"
#include "tool_model.h"

wex_status wex_tool_engine_open(wex_tool_registry *registry, const char *name,
                                const wex_model *model, const cJSON *parallel,
                                const cJSON *options,
                                wex_tool_engine **engine_p)
{
    wex_status st = wex__engine_check_options(registry, name, options);

    if (st != WEX_OK)
        return st;
    return wex__engine_open(registry, name, model, parallel, options, engine_p);
}

void wex_tool_engine_close(wex_tool_engine *engine)
{
    wex__engine_close(engine);
}

uint64_t wex_tool_engine_ranks(const wex_tool_engine *engine)
{
    return engine->ranks;
}

wex_status wex_tool_engine_describe(wex_tool_engine *engine, uint64_t rank,
                                    wex_tool_layout **layout_p)
{
    wex__rank_layout *l = calloc(1, sizeof(*l));
    wex_status st;

    *layout_p = NULL;
    if (l == NULL)
        return wex__error(WEX_ERR_NOMEM, "rank %llu: out of memory",
                          (unsigned long long)rank);
    st = wex__engine_describe(engine, rank, l);
    if (st != WEX_OK) {
        wex__rank_layout_fini(l);
        free(l);
        return st;
    }
    *layout_p = l;
    return WEX_OK;
}

cJSON *wex_tool_layout_document(wex_tool_engine *engine, uint64_t first,
                                uint64_t last)
{
    return wex__layout_document(engine, first, last);
}

void wex_tool_layout_get_info(const wex_tool_layout *layout,
                              wex_tool_layout_info *info)
{
    info->coord_count = layout->coord_count;
    info->tensor_count = layout->tensor_count;
    info->piece_count = layout->piece_count;
    info->bytes = layout->bytes;
}

void wex_tool_layout_coord(const wex_tool_layout *layout, size_t index,
                           const char **key_p, int64_t *value_p)
{
    *key_p = layout->coords[index].key;
    *value_p = layout->coords[index].value;
}

void wex_tool_layout_tensor(const wex_tool_layout *layout, size_t index,
                            wex_tool_tensor *tensor)
{
    const wex__local_tensor *t = &layout->tensors[index];
    uint64_t elements = 1;

    memset(tensor, 0, sizeof(*tensor));
    tensor->name = t->name;
    tensor->dtype = t->dtype;
    tensor->ndim = t->ndim;
    for (uint32_t d = 0; d < t->ndim; d++) {
        tensor->shape[d] = t->shape[d];
        elements *= t->shape[d];
    }
    tensor->bytes = t->bytes;
    tensor->elements = elements;
}

void wex_tool_layout_piece(const wex_tool_layout *layout, size_t index,
                           wex_tool_piece *piece)
{
    const wex__piece *p = &layout->pieces[index];

    memset(piece, 0, sizeof(*piece));
    piece->canonical = p->canonical;
    piece->tensor = p->tensor;
    piece->transform = p->transform;
    piece->ndim = p->ndim;
    memcpy(piece->offset, p->offset, sizeof(piece->offset));
    memcpy(piece->extent, p->extent, sizeof(piece->extent));
    memcpy(piece->at, p->at, sizeof(piece->at));
}

void wex_tool_layout_free(wex_tool_layout *layout)
{
    if (layout == NULL)
        return;
    wex__rank_layout_fini(layout);
    free(layout);
}
