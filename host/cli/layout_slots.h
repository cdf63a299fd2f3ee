/* wex layout with redundant experts: which logical expert each physical
 * expert slot of a rank holds. */
#ifndef CLI_LAYOUT_SLOTS_H
#define CLI_LAYOUT_SLOTS_H

#include <stdint.h>

#include <cjson/cJSON.h>

/* Prints, for the layout document's rank entry `rank_doc` (an element of
 * wex_tool_layout_document's "layout"), one line per run of MoE layers
 * whose slots hold the same experts: "  layers 3-60 slots 252-287:
 * experts 252 253 ...", the slots numbered from the rank's expert-parallel
 * coordinate (ranks hold equal shares of them). Prints nothing for a rank
 * without stacked experts. */
void layout_print_slots(const cJSON *rank_doc);

#endif /* CLI_LAYOUT_SLOTS_H */
