/*
 * Fencing: a destination takes the writes of one try at a time.
 *
 * Every try of every step has an epoch, the same on every rank (a hash of
 * step and try, never 0). A destination opens its memory to the try's
 * epoch before it arrives at the try's barrier, so no source of the try
 * can write before it is open, and closes it once the try's outcome is
 * known. A source names its try's epoch to the transport before its
 * first put. The transport refuses a write of any other epoch (ucx checks
 * the epoch each active message carries; shm sources read a control word
 * before each chunk) and, when a destination closes a try it gave up
 * on, stops whoever is still inside a write of it: a same-host process
 * is given the job's fence_seconds to leave its write and is then
 * killed, an endpoint closed, an RDMA key revoked (and a new one
 * published here for the next try). A source so refused fails its step
 * naming the destination that fenced it. Before closing a try it gave up
 * on, the destination waits (wex__fence_close_try) for its sources to say they are
 * done with it, up to the step's timeout but for a source that already
 * let that pass, so a live source is never caught inside it: only a
 * stalled one is.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "clock.h"
#include "error.h"
#include "log.h"
#include "job.h"

uint64_t wex__fence_epoch(uint64_t step, uint64_t number)
{
    uint64_t both[2] = {step, number};
    uint64_t epoch = XXH3_64bits_withSeed(both, sizeof(both), 0x66656e6365ull);

    return epoch != 0 ? epoch : 1;
}

/* The fence op through `ctx`, one of the job's transport's contexts. */
static wex_status call_on(wex_job *job, wex_transport_ctx *ctx,
                          wex_transport_fence *f)
{
    wex_status st;

    f->struct_size = sizeof(*f);
    wex__error_clear();
    st = job->transport.ops->fence(ctx, f);
    if (st != WEX_OK && wex__last_error()[0] == '\0')
        wex__error(st, "failed without a message");
    if (st != WEX_OK)
        return wex__error_prefix(st, "transport %s",
                                 job->plan.job->transport.name);
    return WEX_OK;
}

static wex_status call(wex_job *job, wex_transport_fence *f)
{
    return call_on(job, job->transport.ctx, f);
}

wex_status wex__fence_open(wex_job *job, uint64_t epoch)
{
    wex_transport_fence f;

    if (job->transport.ops->fence == NULL) {
        if (!job->dst.fence_told && job->rank == 0)
            WEX__WARN("transport %s cannot fence its writers: a source that "
                      "stalls inside a step and runs again later can still "
                      "write into destinations that gave up on that step",
                      job->plan.job->transport.name);
        job->dst.fence_told = 1;
        return WEX_OK;
    }
    memset(&f, 0, sizeof(f));
    f.op = WEX_FENCE_OPEN;
    f.epoch = epoch;
    return call(job, &f);
}

wex_status wex__fence_close(wex_job *job, int abandoned, double grace_s)
{
    /* at least a moment: a writer caught at the last instant leaves its
     * write within a chunk */
    double grace = grace_s > 0.05 ? grace_s * 1000.0 : 50.0;
    wex_transport_fence f;
    wex_status st;

    if (job->transport.ops->fence == NULL)
        return WEX_OK;
    memset(&f, 0, sizeof(f));
    f.op = WEX_FENCE_CLOSE;
    f.abandoned = abandoned != 0;
    f.grace_ms = grace < 1 ? 1 : grace > 3.6e6 ? 3600000u : (uint32_t)grace;
    st = call(job, &f);
    if (f.rekeyed) { /* whatever else failed: the old keys are gone */
        wex_status published = wex__job_publish_memory(job);
        if (st == WEX_OK)
            st = published;
    }
    return st;
}

wex_status wex__fence_write_through(wex_job *job, wex_transport_ctx *ctx,
                                    uint64_t epoch)
{
    wex_transport_fence f;

    if (job->transport.ops->fence == NULL)
        return WEX_OK;
    memset(&f, 0, sizeof(f));
    f.op = WEX_FENCE_WRITE;
    f.epoch = epoch;
    return call_on(job, ctx, &f);
}

wex_status wex__fence_write(wex_job *job, uint64_t epoch)
{
    return wex__fence_write_through(job, job->transport.ctx, epoch);
}

/* Whether the rendezvous recorded source `peer` dying (a source that
 * died and came back is then given only the fence's grace). */
static int source_died(wex_job *job, uint64_t peer)
{
    char key[64];
    void *value = NULL;
    size_t len = 0;

    snprintf(key, sizeof(key), "dead/source/%llu", (unsigned long long)peer);
    if (wex__store_get(job->rendezvous.store, key, 0, &value, &len) != WEX_OK)
        return 0;
    free(value);
    return 1;
}

/* A try given up on (a source died or stalled) may still have sources
 * writing it that know nothing yet: each is given the step's timeout to
 * finish and say so, but the ones that died and the one that already
 * let it pass (it stalled), so that only a stalled source is still
 * inside the try when the transport closes it and stops what is still
 * writing. */
static void await_writers(wex_job *job, uint64_t step, uint64_t number,
                          double timeout)
{
    double deadline = wex__now() + timeout;

    for (size_t p = 0; p < job->peer_count && wex__now() < deadline; p++) {
        char key[128];
        void *value = NULL;
        size_t len = 0;

        if (job->dst.silent_peer == job->peers[p] + 1 ||
            source_died(job, job->peers[p]))
            continue;
        snprintf(key, sizeof(key), "step/%llu/%llu/done/%llu/%llu",
                 (unsigned long long)step, (unsigned long long)number,
                 (unsigned long long)job->peers[p],
                 (unsigned long long)job->rank);
        if (wex__store_get(job->rendezvous.store, key, deadline - wex__now(),
                           &value, &len) == WEX_OK)
            free(value);
    }
}

void wex__fence_close_try(wex_job *job, uint64_t step, uint64_t number,
                          double timeout, int abandoned, int sources_wrote,
                          char *why, size_t cap)
{
    size_t used = strlen(why);
    if (abandoned && sources_wrote)
        await_writers(job, step, number, timeout);
    job->dst.silent_peer = 0;
    if (wex__fence_close(job, abandoned, job->plan.job->fence_seconds) ==
        WEX_OK)
        return;
    if (!abandoned) {
        WEX__WARN("destination rank %llu: closing a committed try: %s",
                  (unsigned long long)job->rank, wex__last_error());
        return;
    }
    if (used < cap)
        snprintf(why + used, cap - used,
                 "%sclosing this destination to "
                 "the step: %s",
                 used ? "; " : "", wex__last_error());
}
