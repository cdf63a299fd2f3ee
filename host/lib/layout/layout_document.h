/*
 * Layouts as documents: what `wex layout --json` prints and wex_layout_json
 * returns, valid against schemas/layout.schema.json. Numbers are JSON
 * numbers (exact below 2^53, which every tensor size is).
 */
#ifndef WEX_HOST_LAYOUT_DOCUMENT_H
#define WEX_HOST_LAYOUT_DOCUMENT_H

#include <cjson/cJSON.h>

#include "engine.h"

/* The "model" member: architecture, canonical tensors, total bytes. */
cJSON *wex__model_document(const wex_model *model);
/* One entry of "layout": a described rank, its coordinates, local
 * tensors and the pieces of each. */
cJSON *wex__rank_document(const wex_model *model, const wex__rank_layout *l);
/* The whole document for ranks first..last of an open engine. NULL with the thread's error set when a rank cannot be
 * described or memory runs out. */
cJSON *wex__layout_document(wex__engine *engine, uint64_t first, uint64_t last);

#endif /* WEX_HOST_LAYOUT_DOCUMENT_H */
