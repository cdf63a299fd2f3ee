/*
 * Redundant experts and their placement (vLLM's EPLB, SGLang's
 * --ep-num-redundant-experts): each MoE layer holds experts + redundant
 * physical expert slots, spread contiguously and evenly over the ep ranks,
 * each slot a copy of one logical expert. Linear placement (both engines'
 * initial one: vLLM's EplbState.build_initial_global_physical_to_logical_map,
 * SGLang's ExpertLocationMetadata.init_trivial) puts logical expert
 * p % experts in slot p; options/expert_placement may give the map of every
 * MoE layer instead.
 */
#ifndef WEX_ENGINE_COMMON_EXPERT_PLACEMENT_H
#define WEX_ENGINE_COMMON_EXPERT_PLACEMENT_H

#include "model_view.h"

typedef struct ws_placement {
    int64_t redundant; /* physical slots beyond the logical experts */
    int64_t physical;  /* experts + redundant (0 for a dense model) */
    /* Per model layer (layers + mtp_layers entries): its slots' logical
     * experts, or NULL where placement is linear (a dense layer, an MTP
     * layer, no map given). NULL altogether without a map. */
    int32_t **rows;
    int32_t *cells; /* what rows point into */
} ws_placement;

/* Reads options/redundant_experts and options/expert_placement for an
 * engine spreading experts over `ep` ranks; refuses, in one line naming
 * the option, the layer and the slot, what `engine` would not run. */
wex_status ws_placement_read(ws_emit *e, const wex_options *options,
                             const ws_model *m, int64_t ep, const char *engine,
                             ws_placement *p);
void ws_placement_fini(ws_placement *p);

/* The logical expert physical slot `slot` of layer `layer` holds. */
static inline int64_t ws_placement_logical(const ws_placement *p,
                                           const ws_model *m, int64_t layer,
                                           int64_t slot)
{
    if (p->rows != NULL && p->rows[layer] != NULL)
        return p->rows[layer][slot];
    return slot % m->experts;
}

#endif /* WEX_ENGINE_COMMON_EXPERT_PLACEMENT_H */
