/* What `wex run`'s workers reach inside a job, and the test oracle
 * (tool_job.h): job/job.h's wex_job, and oracle/. */
#include "checkpoint_check.h"
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

wex_status wex_tool_job_expert_slots(wex_job *job, uint64_t *layers_p,
                                     uint64_t *physical_p, uint64_t *experts_p)
{
    return wex__planner_expert_slots(&job->plan, layers_p, physical_p,
                                     experts_p);
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
