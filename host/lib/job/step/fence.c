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
 * on, the destination waits (job_sync.c) for its sources to say they are
 * done with it, up to the step's timeout but for a source that already
 * let that pass, so a live source is never caught inside it: only a
 * stalled one is.
 */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "error.h"
#include "log.h"
#include "job.h"

uint64_t wex__fence_epoch(uint64_t step, uint64_t number)
{
    uint64_t both[2] = {step, number};
    uint64_t epoch = XXH3_64bits_withSeed(both, sizeof(both), 0x66656e6365ull);

    return epoch != 0 ? epoch : 1;
}

static wex_status call(wex_job *job, wex_transport_fence *f)
{
    wex_status st;

    f->struct_size = sizeof(*f);
    wex__error_clear();
    st = job->transport.ops->fence(job->transport.ctx, f);
    if (st != WEX_OK && wex__last_error()[0] == '\0')
        wex__error(st, "failed without a message");
    if (st != WEX_OK)
        return wex__error_prefix(st, "transport %s",
                                 job->plan.job->transport.name);
    return WEX_OK;
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

wex_status wex__fence_write(wex_job *job, uint64_t epoch)
{
    wex_transport_fence f;

    if (job->transport.ops->fence == NULL)
        return WEX_OK;
    memset(&f, 0, sizeof(f));
    f.op = WEX_FENCE_WRITE;
    f.epoch = epoch;
    return call(job, &f);
}
