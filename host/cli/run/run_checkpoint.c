/*
 * wex run with checkpoints: --from-checkpoint DIR has the sources read
 * DIR instead of synthetic weights and every destination check what it
 * holds against it; --save OUT has the destination ranks write what they
 * hold to OUT after the last step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "tool_base.h"
#include "tool_job.h"

/* Every rank of `side` holds each tensor in the checkpoint's dtype (to
 * read a checkpoint), or in one it can be saved from (`saving`). */
static wex_status checkpoint_dtypes(const wex_tool_planner *plan, uint32_t side,
                                    const char *what, int saving)
{
    const wex_model *model = wex_tool_planner_model(plan, side);
    wex_tool_job_info job;
    uint64_t ranks;

    wex_tool_planner_get_job(plan, &job);
    ranks = side == WEX_SIDE_SOURCE ? job.source_ranks : job.destination_ranks;
    for (uint64_t r = 0; r < ranks; r++) {
        const wex_tool_layout *l = wex_tool_planner_layout(plan, side, r);
        wex_tool_layout_info info;

        wex_tool_layout_get_info(l, &info);
        for (size_t k = 0; k < info.piece_count; k++) {
            wex_tool_piece p;
            wex_tool_tensor c, t;
            wex_tool_layout_piece(l, k, &p);
            wex_tool_model_tensor(model, p.canonical, &c);
            wex_tool_layout_tensor(l, p.tensor, &t);
            if (saving ? !wex_tool_checkpoint_savable(t.dtype, c.dtype)
                       : t.dtype != c.dtype)
                return wex_tool_error(
                    WEX_ERR_INVALID,
                    "%s: %s rank %llu holds %s as %s, the "
                    "checkpoint stores %s",
                    what, side == WEX_SIDE_SOURCE ? "source" : "destination",
                    (unsigned long long)r, c.name, wex_dtype_name(t.dtype),
                    wex_dtype_name(c.dtype));
        }
    }
    return WEX_OK;
}

wex_status run_check_checkpoint(launch *l, const run_args *a)
{
    wex_tool_checkpoint *ck;
    wex_tool_job_info job;
    wex_status st;

    wex_tool_planner_get_job(l->plan, &job);
    if (a->from_checkpoint != NULL) {
        if (strcmp(job.source_engine, "hf") != 0)
            return wex_tool_error(WEX_ERR_INVALID,
                                  "--from-checkpoint: the "
                                  "job's source engine is %s; a checkpoint "
                                  "is read as engine hf's layout "
                                  "(\"source\": {\"engine\": \"hf\"})",
                                  job.source_engine);
        st =
            checkpoint_dtypes(l->plan, WEX_SIDE_SOURCE, "--from-checkpoint", 0);
        if (st != WEX_OK)
            return st;
        st = wex_tool_checkpoint_open(
            a->from_checkpoint,
            wex_tool_planner_model(l->plan, WEX_SIDE_SOURCE), NULL, NULL, &ck);
        if (st != WEX_OK)
            return st;
        wex_tool_checkpoint_close(ck);
    }
    if (a->save != NULL) {
        st = checkpoint_dtypes(l->plan, WEX_SIDE_DESTINATION, "--save", 1);
        if (st == WEX_OK)
            st = wex_tool_checkpoint_target_free(a->save);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

wex_status run_worker_checkpoint_open(wex_job *job, const run_args *a,
                                      wex_tool_checkpoint **ck_p)
{
    *ck_p = NULL;
    if (a->from_checkpoint == NULL)
        return WEX_OK;
    if (a->side == WEX_SIDE_SOURCE)
        return wex_job_bind_checkpoint(job, a->from_checkpoint);
    return wex_tool_checkpoint_open(a->from_checkpoint, wex_tool_job_model(job),
                                    NULL, NULL, ck_p);
}

uint64_t run_worker_mismatches(const wex_job *job,
                               const wex_tool_checkpoint *ck, uint64_t step)
{
    return ck != NULL ? wex_tool_checkpoint_mismatches(job, ck)
                      : wex_tool_synth_check(job, step);
}

void run_worker_checkpoint_close(wex_tool_checkpoint *ck)
{
    wex_tool_checkpoint_close(ck);
}
