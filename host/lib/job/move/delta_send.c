/*
 * What a source sends of a delta try (delta_move.h): which destinations
 * take deltas, each operation's record (whole, or a payload and its place
 * in the destination's inbox), and how the step ends for the snapshots.
 *
 * Over a transport of device memory only (nccl, cuda-ipc) the records
 * are decided before the first put (every group is encoded by then: such
 * a transport carries CUDA memory only, and nothing is quantized on the
 * host) and the payloads go from device memory (the transport reads
 * nothing else), copied there from the host outbox the encoder wrote.
 * Over one of matched sends and receives (nccl) a destination must post
 * a receive of the right length for every send, in order, so the
 * records are also posted, per destination, under
 * step/S/T/layout/DST/SRC before the first send; the records posted with
 * "done" must say the same.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta_move.h"
#include "device_memory.h"
#include "error.h"
#include "job.h"

wex_status wex__delta_read_bases(wex_job *job, uint64_t number,
                                 const char *try_prefix, double timeout)
{
    wex__job_source_delta *d = &job->src.delta;

    for (size_t p = 0; p < job->peer_count; p++) {
        char key[160];
        void *value = NULL;
        size_t len = 0;
        uint64_t base = 0;
        wex_status st;

        d->peer_delta[p] = 0;
        d->inbox_used[p] = 0;
        if (number != 0 || d->snap_step == 0 || d->inbox[p] == NULL)
            continue;
        snprintf(key, sizeof(key), "%sbase/%llu", try_prefix,
                 (unsigned long long)job->peers[p]);
        st = wex__store_get(job->rendezvous.store, key, timeout, &value, &len);
        if (st != WEX_OK)
            return wex__error_prefix(st, "destination rank %llu's base step",
                                     (unsigned long long)job->peers[p]);
        if (len == sizeof(base))
            memcpy(&base, value, sizeof(base));
        free(value);
        d->peer_delta[p] = base == d->snap_step;
    }
    return WEX_OK;
}

int wex__delta_decide(wex_job *job, size_t i, wex__delta_record *r)
{
    wex__job_source_delta *d = &job->src.delta;
    uint32_t gi = d->group_of != NULL ? d->group_of[i] : UINT32_MAX;
    size_t p = job->op_peer_index[i];
    const wex__delta_group *g;

    memset(r, 0, sizeof(*r));
    r->mode = WEX__DELTA_OP_FULL;
    if (gi == UINT32_MAX || !d->peer_delta[p])
        return 0;
    g = &d->groups[gi];
    if (g->payload_len < 0 ||
        (uint64_t)g->payload_len > d->inbox_size[p] - d->inbox_used[p])
        return 0;
    r->mode = WEX__DELTA_OP_PAYLOAD;
    r->offset = d->inbox_used[p];
    r->length = (uint64_t)g->payload_len;
    r->payload_digest = g->payload_digest;
    r->digest = g->digest;
    d->inbox_used[p] += (r->length + 7) & ~(uint64_t)7;
    return 1;
}

/* The payloads that go out this try, copied from the host outbox into
 * device memory (grown when too small), each group's once. */
static wex_status payloads_to_device(wex_job *job)
{
    wex__job_source_delta *d = &job->src.delta;
    uint64_t total = 0;
    wex_status st = WEX_OK;
    int any = 0;

    for (size_t g = 0; g < d->group_count; g++)
        d->groups[g].dev_off = UINT64_MAX;
    for (size_t i = 0; i < job->op_count; i++) {
        wex__delta_group *g;
        if (d->records[i].mode != WEX__DELTA_OP_PAYLOAD ||
            d->records[i].length == 0)
            continue;
        g = &d->groups[d->group_of[i]];
        if (g->dev_off == UINT64_MAX) {
            g->dev_off = total;
            total += ((uint64_t)g->payload_len + 63) & ~(uint64_t)63;
        }
    }
    if (total > d->dev_outbox_bytes) {
        wex__device_free(job->device, d->dev_outbox);
        d->dev_outbox = NULL;
        d->dev_outbox_bytes = 0;
        st = wex__device_alloc(job->device, total, (void **)&d->dev_outbox);
        if (st != WEX_OK)
            return wex__error_prefix(st,
                                     "a %llu-byte device outbox for "
                                     "delta payloads",
                                     (unsigned long long)total);
        d->dev_outbox_bytes = total;
    }
    for (size_t k = 0; k < d->group_count && st == WEX_OK; k++) {
        const wex__delta_group *g = &d->groups[k];
        if (g->dev_off == UINT64_MAX)
            continue;
        st = wex__device_copy_in(job->device, d->dev_outbox + g->dev_off,
                                 d->outbox + g->out_off,
                                 (uint64_t)g->payload_len);
        any = 1;
    }
    if (st == WEX_OK && any)
        st = wex__device_copy_in_end(job->device);
    return st;
}

static void layout_key(char *key, size_t cap, const char *try_prefix,
                       uint64_t dst, uint64_t src)
{
    snprintf(key, cap, "%slayout/%llu/%llu", try_prefix,
             (unsigned long long)dst, (unsigned long long)src);
}

wex_status wex__delta_send_layout(wex_job *job, const char *try_prefix)
{
    wex__job_source_delta *d = &job->src.delta;
    wex_status st;

    for (size_t i = 0; i < job->op_count; i++)
        (void)wex__delta_decide(job, i, &d->records[i]);
    st = payloads_to_device(job);
    for (size_t p = 0; d->matched && p < job->peer_count && st == WEX_OK; p++) {
        char key[160];
        size_t n = 0;
        for (size_t i = 0; i < job->op_count; i++)
            if (job->op_peer_index[i] == p)
                d->pair_records[n++] = d->records[i];
        layout_key(key, sizeof(key), try_prefix, job->peers[p], job->rank);
        st = wex__store_set(job->rendezvous.store, key, d->pair_records,
                            n * sizeof(wex__delta_record));
    }
    return st;
}

void wex__delta_fail_layouts(wex_job *job, const char *try_prefix,
                             const char *value, size_t len)
{
    if (!job->plan.job->delta || !job->src.delta.matched)
        return;
    for (uint64_t dst = 0; dst < job->plan.dst.ranks; dst++) {
        char key[160];
        layout_key(key, sizeof(key), try_prefix, dst, job->rank);
        wex__store_set(job->rendezvous.store, key, value, len);
    }
}

const uint8_t *wex__delta_payload_of(const wex_job *job, size_t group)
{
    const wex__job_source_delta *d = &job->src.delta;
    const wex__delta_group *g = &d->groups[group];

    return d->decided ? d->dev_outbox + g->dev_off : d->outbox + g->out_off;
}

void wex__delta_full_done(wex_job *job, size_t i, uint64_t digest)
{
    wex__job_source_delta *d = &job->src.delta;

    if (!job->plan.job->delta)
        return;
    d->records[i].mode = WEX__DELTA_OP_FULL;
    d->records[i].digest = digest;
    d->wire_bytes += job->ops[i].bytes;
}

void wex__delta_end(wex_job *job, uint64_t step, int committed)
{
    wex__job_source_delta *d = &job->src.delta;

    if (job->side != WEX_SIDE_SOURCE || !job->plan.job->delta)
        return;
    d->snap_step = committed ? step : 0;
    for (size_t g = 0; committed && g < d->group_count; g++)
        d->groups[g].fresh = 0; /* encoded this step: it holds it */
}
