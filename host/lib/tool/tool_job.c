/* What `wex run`'s workers reach inside a job, and the test oracle
 * (tool_job.h): job/job.h's wex_job, and oracle/. */
#include <stdio.h>
#include <string.h>

#include "checkpoint_check.h"
#include "error.h"
#include "job.h"
#include "synth_values.h"
#include "synth_weights.h"
#include "tool_job.h"

void wex_tool_job_after_barrier(wex_job *job, wex_tool_step_hook hook)
{
    job->members.after_barrier = hook;
}

void wex_tool_job_set_verify(wex_job *job, int digest)
{
    job->plan.job->verify_digest = digest;
}

wex_tool_store_client *wex_tool_job_store(const wex_job *job)
{
    return job->rendezvous.store;
}

const uint64_t *wex_tool_job_peers(const wex_job *job, size_t *count_p)
{
    *count_p = job->peer_count;
    return job->peers;
}

const wex_model *wex_tool_job_model(const wex_job *job)
{
    return job->mine->model;
}

uint64_t wex_tool_job_snapshot_bytes(const wex_job *job)
{
    return job->side == WEX_SIDE_SOURCE ? job->src.delta.snapshot_bytes : 0;
}

uint64_t wex_tool_job_placements(const wex_job *job)
{
    return job->members.placements;
}

wex_status wex_tool_job_expert_slots(const wex_job *job, uint64_t *layers_p,
                                     uint64_t *physical_p, uint64_t *experts_p)
{
    const wex_model *m = job->plan.dst.model;
    const cJSON *hidden =
        cJSON_GetObjectItemCaseSensitive(m->config, "num_hidden_layers");
    const cJSON *opts = job->plan.job->destination.options;
    const cJSON *extra =
        cJSON_GetObjectItemCaseSensitive(opts, "redundant_experts");
    uint64_t layers = 0, experts = 0;

    for (uint64_t c = 0; c < m->count; c++) {
        const char *name = m->tensors[c].name, *x = strstr(name, ".experts.");
        long long layer, expert;
        if (x == NULL || sscanf(name, "model.layers.%lld.", &layer) != 1 ||
            sscanf(x, ".experts.%lld.", &expert) != 1 ||
            (cJSON_IsNumber(hidden) && layer >= hidden->valuedouble))
            continue;
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

void wex_tool_synth_set_changed(double fraction)
{
    wex__synth_set_changed(fraction);
}

wex_status wex_tool_synth_prepare(wex_job *job)
{
    return wex__synth_prepare(job);
}

void wex_tool_synth_fill(const wex_job *job, uint64_t step)
{
    wex__synth_fill(job, step);
}

uint64_t wex_tool_synth_check(const wex_job *job, uint64_t step)
{
    return wex__synth_check(job, step);
}

void wex_tool_synth_scribble(const wex_job *job)
{
    wex__synth_scribble(job);
}

uint64_t wex_tool_checkpoint_mismatches(const wex_job *job,
                                        const wex_tool_checkpoint *ck)
{
    return wex__checkpoint_mismatches(job, ck);
}
