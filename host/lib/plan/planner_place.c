/* A destination replica whose experts moved (EPLB): its ranks laid out
 * again under the new placement, everything that indexes the
 * destination's pieces rebuilt, the policy opened afresh. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "planner.h"
#include "quantize_plan.h"

/* The destination's options with "expert_placement" set to `placement`
 * (borrowed; a copy goes in). */
static cJSON *options_with(const cJSON *options, const cJSON *placement)
{
    cJSON *o =
        options != NULL ? cJSON_Duplicate(options, 1) : cJSON_CreateObject();
    cJSON *copy = cJSON_Duplicate(placement, 1);

    if (o == NULL || copy == NULL) {
        cJSON_Delete(o);
        cJSON_Delete(copy);
        return NULL;
    }
    cJSON_DeleteItemFromObjectCaseSensitive(o, "expert_placement");
    cJSON_AddItemToObject(o, "expert_placement", copy);
    return o;
}

wex_status wex__planner_open_placed(wex__planner *p, const cJSON *placement,
                                    wex__engine **engine_p)
{
    const wex__job_config *j = p->job;
    cJSON *options = options_with(j->destination.options, placement);
    wex_status st;

    *engine_p = NULL;
    if (options == NULL)
        return wex__error(WEX_ERR_NOMEM, "placement: out of memory");
    st = wex__engine_open(p->registry, j->destination.name, p->dst_model,
                          j->destination_parallel, options, engine_p);
    cJSON_Delete(options);
    if (st != WEX_OK)
        return wex__error_prefix(st, "destination");
    return WEX_OK;
}

wex_status wex__planner_place(wex__planner *p, wex__engine *engine,
                              uint64_t first, uint64_t count)
{
    wex_status st;

    if (p->from_share)
        return wex__error(WEX_ERR_INVALID,
                          "placement: the plan share lays out only this "
                          "rank's peers; lay every rank out first");
    st = wex__side_replace_pieces(&p->dst, engine, first, count);
    if (st != WEX_OK)
        return st;
    /* The pieces moved: which ones the host plans itself, the facts and
     * the policy's caches follow them. */
    free(p->quantized);
    p->quantized = NULL;
    st = wex__quantize_classify(p);
    p->sides_digest_known = 0;
    return st == WEX_OK ? wex__planner_policy_ctx(p) : st;
}

wex_status wex__planner_expert_slots(wex__planner *p, uint64_t *layers_p,
                                     uint64_t *physical_p, uint64_t *experts_p)
{
    const wex_model *m;
    const cJSON *hidden, *extra;
    uint64_t layers = 0, experts = 0;
    wex_status st = wex__planner_load_models(p);

    if (st != WEX_OK)
        return st;
    m = p->dst_model;
    hidden = cJSON_GetObjectItemCaseSensitive(m->config, "num_hidden_layers");
    extra = cJSON_GetObjectItemCaseSensitive(p->job->destination.options,
                                             "redundant_experts");
    for (uint64_t c = 0; c < m->count; c++) {
        const char *name = m->tensors[c].name, *x = strstr(name, ".experts.");
        long long layer, expert;
        if (x == NULL || sscanf(name, "model.layers.%lld.", &layer) != 1 ||
            sscanf(x, ".experts.%lld.", &expert) != 1 ||
            (cJSON_IsNumber(hidden) && layer >= hidden->valuedouble))
            continue;
        /* one tensor a MoE layer: expert 0's gate (w1 in Mixtral) */
        layers += expert == 0 && strstr(x, "_scale") == NULL &&
                  (strstr(x, "gate_proj.weight") != NULL ||
                   strstr(x, ".w1.weight") != NULL);
        if ((uint64_t)expert + 1 > experts)
            experts = (uint64_t)expert + 1;
    }
    if (experts == 0)
        return wex__error(WEX_ERR_INVALID,
                          "the destination's model has no routed experts");
    *layers_p = layers;
    *experts_p = experts;
    *physical_p =
        experts + (cJSON_IsNumber(extra) ? (uint64_t)extra->valuedouble : 0);
    return WEX_OK;
}
