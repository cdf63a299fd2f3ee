/*
 * wex run plans every source rank it starts once, in the launcher, and
 * leaves each its plan share: a source worker opens the job from its
 * share instead of laying out every rank of both sides and planning
 * (docs/design.md, Plan shares). Destination workers plan for
 * themselves: the oracle that checks every element they hold needs the
 * whole plan anyway (which dtype the sources hold each tensor in), and
 * completing a plan after the UCX context exists crashed LeakSanitizer's
 * tracer at their exit. The shares go where WEX_PLAN_SHARES or the job's
 * plan_shares says, and stay there; otherwise into a directory of the
 * run's own, removed when it ends.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "tool_base.h"

wex_status run_write_shares(launch *l, const run_args *a)
{
    const char *dir = secure_getenv("WEX_PLAN_SHARES");
    char prefix[40];
    uint64_t bytes = 0, files = 0;
    double t0 = wex_tool_now();
    wex_status st = WEX_OK;
    wex_tool_job_info job;

    wex_tool_planner_get_job(l->plan, &job);
    if (dir == NULL || dir[0] == '\0')
        dir = job.plan_shares;
    if (dir == NULL) {
        snprintf(prefix, sizeof(prefix), "wex-run-%ld", (long)getpid());
        if (wex_tool_temp_dir_make(l->shares, sizeof(l->shares), prefix) != 0)
            return wex_tool_error(WEX_ERR_SYSTEM, "%s: %s", l->shares,
                                  strerror(errno));
        l->shares_owned = 1;
        dir = l->shares;
    } else {
        snprintf(l->shares, sizeof(l->shares), "%s", dir);
    }
    for (uint64_t r = 0; r < job.source_ranks && st == WEX_OK; r++) {
        if (a->host >= 0 && wex_tool_planner_host(l->plan, WEX_SIDE_SOURCE,
                                                  r) != (uint64_t)a->host)
            continue;
        st = wex_tool_share_make(l->plan, dir, WEX_SIDE_SOURCE, r, &bytes);
        files++;
    }
    if (st != WEX_OK)
        return wex_tool_error_prefix(st, "plan shares");
    wex_tool_log(WEX_LOG_DEBUG,
                 "run: %llu plan shares (%.1f MB) written to "
                 "%s in %.3f s",
                 (unsigned long long)files, bytes / 1e6, dir,
                 wex_tool_now() - t0);
    return WEX_OK;
}

void run_remove_shares(launch *l)
{
    if (!l->shares_owned)
        return;
    wex_tool_temp_dir_remove(l->shares);
    l->shares_owned = 0;
}
