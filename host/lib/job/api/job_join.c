/*
 * Joining and leaving a running job (docs/design.md, "Elastic
 * replicas"). A destination rank that starts while the sources are
 * already stepping does not know which step comes next: before each
 * step's barrier the sources set "steps/latest" and "steps/after/PREV"
 * to it (job_sync.c), so a joiner tries the latest step, and while that
 * one went on without it (it came late, or its replica was not whole),
 * waits for the step after it and tries that.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_copy.h"
#include "clock.h"
#include "error.h"
#include "job.h"

/* The step the sources announced: the latest (after == NULL), or the one
 * after `*after`; 0 when none yet (latest only). */
static wex_status announced(wex_job *job, const uint64_t *after, double timeout,
                            uint64_t *step_p)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;
    wex_status st;

    if (after == NULL)
        snprintf(key, sizeof(key), "steps/latest");
    else
        snprintf(key, sizeof(key), "steps/after/%llu",
                 (unsigned long long)*after);
    st = wex__store_get(job->rendezvous.store, key, timeout, &value, &len);
    *step_p = 0;
    if (st == WEX_ERR_TIMEOUT && after == NULL)
        return WEX_OK; /* no step yet */
    if (st == WEX_OK && len == sizeof(uint64_t))
        memcpy(step_p, value, sizeof(uint64_t));
    free(value);
    return st;
}

/* ", destination rank 3 of it never connected": the ranks of this
 * rank's replica that never published memory (a half-started replica),
 * or "" when every one did at some point. */
static void siblings_never_connected(wex_job *job, char *out, size_t cap)
{
    uint64_t per = job->members.replica_ranks;
    uint64_t first = per ? job->rank / per * per : 0;
    char ranks[200] = "";
    size_t used = 0, count = 0;

    for (uint64_t r = first; per && r < first + per; r++) {
        char key[64];
        int64_t seen = 0;
        snprintf(key, sizeof(key), "incarnation/destination/%llu",
                 (unsigned long long)r);
        if (r == job->rank ||
            wex__store_add(job->rendezvous.store, key, 0, &seen) != WEX_OK ||
            seen > 0 || used >= sizeof(ranks))
            continue;
        used += (size_t)snprintf(ranks + used, sizeof(ranks) - used, "%s%llu",
                                 count++ ? ", " : "", (unsigned long long)r);
    }
    out[0] = '\0';
    if (count > 0)
        snprintf(out, cap, ", destination rank%s %s of it never connected",
                 count > 1 ? "s" : "", ranks);
}

static wex_status join(wex_job *job, uint64_t *step_p, wex_sync_report *r)
{
    double deadline = wex__now() + job->plan.job->join_seconds;
    char last[WEX__ERROR_MAX] = "no step was announced";
    uint64_t step = 0;
    wex_status st;

    if (job->side != WEX_SIDE_DESTINATION)
        return wex__error(WEX_ERR_INVALID,
                          "wex_job_join: source rank %llu: only a "
                          "destination joins (sources sync the steps they "
                          "make)",
                          (unsigned long long)job->rank);
    if (!job->rendezvous.connected && (st = wex__job_connect(job)) != WEX_OK)
        return st;
    if ((st = announced(job, NULL, 0, &step)) != WEX_OK)
        return wex__error_prefix(st, "wex_job_join: the latest step");
    for (;;) {
        wex_sync_report mine;
        uint64_t past = job->dst.committed > job->members.earlier_steps[1]
                            ? job->dst.committed
                            : job->members.earlier_steps[1];
        if (step > past) {
            memset(&mine, 0, sizeof(mine));
            mine.struct_size = sizeof(mine);
            st = wex__job_sync(job, step, &mine);
            if (r != NULL)
                wex__abi_out(r, &mine, sizeof(mine));
            if (st == WEX_OK) {
                *step_p = step;
                return WEX_OK;
            }
            if (!mine.missed)
                return st;
            snprintf(last, sizeof(last), "%s", wex__last_error());
        }
        if (wex__now() >= deadline)
            break;
        past = step;
        st = announced(job, &past, deadline - wex__now(), &step);
        if (st == WEX_ERR_TIMEOUT)
            break;
        if (st != WEX_OK)
            return wex__error_prefix(st,
                                     "wex_job_join: waiting for the "
                                     "step after %llu",
                                     (unsigned long long)past);
    }
    {
        char never[256];
        siblings_never_connected(job, never, sizeof(never));
        return wex__error(WEX_ERR_TIMEOUT,
                          "wex_job_join: destination rank %llu: no step took "
                          "this replica within timeouts.join_seconds (%g "
                          "s)%s; the last: %s",
                          (unsigned long long)job->rank,
                          job->plan.job->join_seconds, never, last);
    }
}

wex_status wex_job_join(wex_job *job, uint64_t *step_p, wex_sync_report *report)
{
    wex_status st;
    uint64_t step = 0;

    if (step_p == NULL)
        return wex__error(WEX_ERR_INVALID, "wex_job_join: step_p is NULL");
    if (report != NULL && report->struct_size < WEX_SYNC_REPORT_SIZE_1_0)
        return wex__error(WEX_ERR_ABI,
                          "wex_job_join: report struct_size %u is smaller "
                          "than ABI 1.0's %u",
                          report->struct_size, WEX_SYNC_REPORT_SIZE_1_0);
    if ((st = wex__job_enter(job, "wex_job_join")) != WEX_OK)
        return st;
    st = join(job, &step, report);
    wex__job_leave(job);
    *step_p = st == WEX_OK ? step : 0;
    return st;
}

wex_status wex_job_leave(wex_job *job)
{
    wex_status st = wex__job_enter(job, "wex_job_leave");

    if (st != WEX_OK)
        return st;
    if (job->side != WEX_SIDE_DESTINATION)
        st = wex__error(WEX_ERR_INVALID,
                        "wex_job_leave: source rank %llu: only a "
                        "destination replica leaves a job",
                        (unsigned long long)job->rank);
    else if (job->rendezvous.connected) {
        /* A goodbye: the next barrier leaves the replica out without
         * counting a death; a later join connects again. */
        wex__store_close(job->rendezvous.store);
        job->rendezvous.store = NULL;
        job->rendezvous.connected = 0;
    }
    wex__job_leave(job);
    return st;
}
