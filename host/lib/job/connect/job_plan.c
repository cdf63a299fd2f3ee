/* A job opened from its plan share lays out every rank when it must:
 * failing over, checkpoints, the oracle (docs/design.md, Plan shares). */
#include "log.h"
#include "job.h"

wex_status wex__job_complete_plan(wex_job *job)
{
    wex_status st;

    if (!job->plan.from_share)
        return WEX_OK;
    WEX__INFO("%s rank %llu: laying out every rank, beyond its plan share",
              job->mine->what, (unsigned long long)job->rank);
    st = wex__planner_complete(&job->plan, job->side, job->rank);
    job->layout = &job->mine->layouts[job->rank];
    return st;
}
