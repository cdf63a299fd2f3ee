/* A destination replica whose experts moved (EPLB): its ranks laid out
 * again under the new placement, everything that indexes the
 * destination's pieces rebuilt, the policy opened afresh. */
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
    wex_policy_args args;
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
    if (st != WEX_OK)
        return st;
    if (p->ctx != NULL) {
        p->ops->ctx_destroy(p->ctx);
        p->ctx = NULL;
    }
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.options = &p->policy_options;
    wex__error_clear();
    st = p->ops->ctx_create(p->policy->plugin_state, &args, &p->ctx);
    if (st != WEX_OK && wex__last_error()[0] == '\0')
        wex__error(st, "failed without a message");
    return st == WEX_OK
               ? WEX_OK
               : wex__error_prefix(st, "policy %s", p->job->policy.name);
}
