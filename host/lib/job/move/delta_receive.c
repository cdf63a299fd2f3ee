/*
 * Delta steps over nccl on a destination (delta_move.h): a receive must
 * match each send in length and order, and a delta's length is known
 * only once its source has encoded it. So each source posts, before it
 * sends, the records of its ops into this destination (delta_send.c);
 * the destination reads them, posts in op order the receives of an op
 * that comes whole (its runs, into the live tensor, as without deltas)
 * or of a payload (into the inbox's device memory), waits for them, and
 * copies the payloads to the inbox's host copy, where the step's check
 * and the apply at commit read them (a step's payload, not its tensors).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box_runs.h"
#include "delta_dest.h"
#include "delta_move.h"
#include "device_memory.h"
#include "error.h"
#include "step_failure.h"

/* Source rank `peer`'s layout into d->layout, its ops in op order. */
static wex__peer_outcome read_layout(wex_job *job, const char *try_prefix,
                                     uint64_t peer, double timeout, char *why,
                                     size_t cap)
{
    char key[160];
    unsigned char *value = NULL;
    size_t len = 0, n = 0, k = 0;
    const char *failed;
    wex_status st;

    snprintf(key, sizeof(key), "%slayout/%llu/%llu", try_prefix,
             (unsigned long long)job->rank, (unsigned long long)peer);
    st = wex__store_get(job->rendezvous.store, key, timeout, (void **)&value,
                        &len);
    if (st == WEX_ERR_PEER) { /* the message names who died */
        snprintf(why, cap, "%s", wex__last_error());
        return WEX__PEER_DIED;
    }
    if (st != WEX_OK) {
        snprintf(why, cap, "source rank %llu did not say what it sends: %s",
                 (unsigned long long)peer, wex__last_error());
        return WEX__PEER_FAILED;
    }
    failed = wex__step_failure_reason(value, len, sizeof(wex__delta_record));
    for (size_t i = 0; i < job->op_count; i++)
        n += job->ops[i].src_rank == peer;
    if (failed != NULL)
        snprintf(why, cap, "source rank %llu failed: %s",
                 (unsigned long long)peer, failed);
    else if (len != n * sizeof(wex__delta_record))
        snprintf(why, cap,
                 "source rank %llu's layout holds %zu bytes, not the records "
                 "of its %zu operations",
                 (unsigned long long)peer, len, n);
    else
        for (size_t i = 0; i < job->op_count; i++)
            if (job->ops[i].src_rank == peer)
                memcpy(&job->dst.delta.layout[i],
                       value + k++ * sizeof(wex__delta_record),
                       sizeof(wex__delta_record));
    free(value);
    return failed != NULL || k != n ? WEX__PEER_FAILED : WEX__PEER_OK;
}

/* Op i's receives: its runs, or its payload into the inbox (whose
 * received bytes `fill` counts). 0, or -1 with why said. */
static int receive_op(wex_job *job, size_t i, uint64_t *fill, char *why,
                      size_t cap)
{
    wex__job_destination_delta *d = &job->dst.delta;
    const wex__op *o = &job->ops[i];
    const wex__delta_record *r = &d->layout[i];
    const wex_transport_ops *t = job->transport.ops;
    wex_status st = WEX_OK;

    if (r->mode == WEX__DELTA_OP_PAYLOAD) {
        size_t slot = wex__delta_inbox_slot(job, o->src_rank);
        if (slot == SIZE_MAX || r->offset > d->inbox_size[slot] ||
            r->length > d->inbox_size[slot] - r->offset) {
            snprintf(why, cap,
                     "source rank %llu would send a %llu-byte delta at %llu, "
                     "past the inbox this destination keeps for it",
                     (unsigned long long)o->src_rank,
                     (unsigned long long)r->length,
                     (unsigned long long)r->offset);
            return -1;
        }
        if (r->length > 0)
            st = t->recv(job->transport.ctx, o->src_rank, d->inbox_mem[slot],
                         r->offset, r->length);
        if (r->offset + r->length > fill[slot])
            fill[slot] = r->offset + r->length;
    } else if (r->mode == WEX__DELTA_OP_FULL) {
        st = wex__recv_op(job, i);
    } else {
        snprintf(why, cap,
                 "source rank %llu would send an operation of an "
                 "unknown kind",
                 (unsigned long long)o->src_rank);
        return -1;
    }
    if (st != WEX_OK)
        snprintf(why, cap, "%s", wex__last_error());
    return st == WEX_OK ? 0 : -1;
}

/* The received part of each inbox, from device memory to its host copy
 * through staging. */
static wex_status copy_out(wex_job *job, const uint64_t *fill)
{
    wex_status st = WEX_OK;

    for (size_t k = 0; k < job->dst.delta.inbox_count && st == WEX_OK; k++)
        st = wex__delta_inbox_fetch(job, k, 0, fill[k]);
    return st;
}

wex__peer_outcome wex__delta_receive(wex_job *job, const char *try_prefix,
                                     double timeout, char *why, size_t cap)
{
    wex__job_destination_delta *d = &job->dst.delta;
    uint64_t *fill = calloc(d->inbox_count + 1, sizeof(*fill));
    wex__peer_outcome how = WEX__PEER_OK;
    wex_status st;

    if (fill == NULL) {
        snprintf(why, cap, "job: out of memory");
        return WEX__PEER_FAILED;
    }
    for (size_t p = 0; p < job->peer_count && how == WEX__PEER_OK; p++)
        how = read_layout(job, try_prefix, job->peers[p], timeout, why, cap);
    wex__error_clear();
    for (size_t i = 0; i < job->op_count && how == WEX__PEER_OK; i++)
        if (receive_op(job, i, fill, why, cap) != 0)
            how = WEX__PEER_FAILED;
    if (how == WEX__PEER_OK &&
        ((st = job->transport.ops->flush(job->transport.ctx)) != WEX_OK ||
         (st = copy_out(job, fill)) != WEX_OK)) {
        snprintf(why, cap, "receiving the step: %s", wex__last_error());
        how = WEX__PEER_FAILED;
    }
    free(fill);
    return how;
}
