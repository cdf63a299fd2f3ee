/*
 * One step. Every rank meets at the step's start; sources write their
 * operations and post, per destination, the digests of what they sent;
 * a destination waits for each of its sources, compares, and commits
 * the step only when every operation landed and matched. Each
 * destination posts its verdict, which its sources wait for, so a
 * failure is seen on both sides.
 *
 * Keys: step/S/begin (barrier), step/S/done/SRC/DST (digests),
 * step/S/result/DST ("ok" or the reason).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "runtime.h"

static double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static uint64_t peer_of(const wex_job *job, const wex__op *o)
{
    return job->side == WEX_SIDE_SOURCE ? o->dst_rank : o->src_rank;
}

/* Destination tensors the ops with `peer` write into. */
static uint64_t tensors_touched(const wex_job *job, uint64_t peer)
{
    uint64_t count = 0;

    for (size_t i = 0; i < job->op_count; i++) {
        int seen = 0;
        if (peer_of(job, &job->ops[i]) != peer)
            continue;
        for (size_t j = 0; j < i && !seen; j++)
            seen = peer_of(job, &job->ops[j]) == peer &&
                   job->ops[j].dst_tensor == job->ops[i].dst_tensor;
        count += !seen;
    }
    return count;
}

static wex_status post_digests(wex_job *job, uint64_t step, int verify)
{
    uint64_t *mine = job->pair_digests;
    wex_status st = WEX_OK;

    for (size_t p = 0; p < job->peer_count && st == WEX_OK; p++) {
        size_t n = 0;
        char key[128];
        for (size_t i = 0; i < job->op_count; i++)
            if (job->ops[i].dst_rank == job->peers[p])
                mine[n++] = verify ? job->digests[i] : 0;
        snprintf(key, sizeof(key), "step/%llu/done/%llu/%llu",
                 (unsigned long long)step, (unsigned long long)job->rank,
                 (unsigned long long)job->peers[p]);
        st = wex__store_set(job->store, key, mine, n * sizeof(uint64_t));
    }
    return st;
}

static wex_status source_step(wex_job *job, uint64_t step, int verify,
                              double timeout)
{
    wex_status st = wex__execute_ops(job, verify ? job->digests : NULL);

    if (st != WEX_OK)
        return wex__error_prefix(st, "step %llu", (unsigned long long)step);
    st = post_digests(job, step, verify);
    for (size_t p = 0; p < job->peer_count && st == WEX_OK; p++) {
        char key[96];
        char *verdict = NULL;
        size_t len = 0;
        snprintf(key, sizeof(key), "step/%llu/result/%llu",
                 (unsigned long long)step, (unsigned long long)job->peers[p]);
        st = wex__store_get(job->store, key, timeout, (void **)&verdict, &len);
        if (st != WEX_OK)
            return wex__error_prefix(st, "step %llu: waiting for destination "
                                     "rank %llu to commit",
                                     (unsigned long long)step,
                                     (unsigned long long)job->peers[p]);
        if (len != 2 || memcmp(verdict, "ok", 2) != 0) {
            st = wex__error(WEX_ERR_PEER, "step %llu: destination rank %llu "
                            "did not commit: %.*s", (unsigned long long)step,
                            (unsigned long long)job->peers[p], (int)len,
                            verdict);
        }
        free(verdict);
    }
    return st;
}

/* Checks source `peer`'s operations against its digests; returns the
 * number that differ, or -1 when the source never reported. */
static wex_status check_peer(wex_job *job, uint64_t step, uint64_t peer,
                             int verify, double timeout, uint64_t *bad_p)
{
    char key[128];
    uint64_t *theirs = NULL;
    size_t len = 0, n = 0;
    wex_status st;

    snprintf(key, sizeof(key), "step/%llu/done/%llu/%llu",
             (unsigned long long)step, (unsigned long long)peer,
             (unsigned long long)job->rank);
    st = wex__store_get(job->store, key, timeout, (void **)&theirs, &len);
    if (st != WEX_OK)
        return st;
    *bad_p = 0;
    for (size_t i = 0; i < job->op_count; i++) {
        if (job->ops[i].src_rank != peer)
            continue;
        if ((n + 1) * sizeof(uint64_t) > len) {
            (*bad_p)++;
        } else if (verify &&
                   wex__digest_landed(job, &job->ops[i]) != theirs[n]) {
            (*bad_p)++;
        }
        n++;
    }
    if (n * sizeof(uint64_t) != len)
        *bad_p += 1;
    free(theirs);
    return WEX_OK;
}

static wex_status destination_step(wex_job *job, uint64_t step, int verify,
                                   double timeout)
{
    char reason[WEX__ERROR_MAX] = "", key[96];
    wex_status first = WEX_OK;
    size_t used = 0;

    for (size_t p = 0; p < job->peer_count; p++) {
        uint64_t bad = 0, peer = job->peers[p];
        wex_status st = check_peer(job, step, peer, verify, timeout, &bad);
        if (st == WEX_OK && bad == 0)
            continue;
        if (first == WEX_OK)
            first = st != WEX_OK ? st : WEX_ERR_PEER;
        used += (size_t)snprintf(
            reason + used, used < sizeof(reason) ? sizeof(reason) - used : 0,
            "%ssource rank %llu %s%s (%llu tensors affected)",
            used ? "; " : "", (unsigned long long)peer,
            st != WEX_OK ? "did not finish: " : "sent bytes that landed "
                                                "differently",
            st != WEX_OK ? wex__last_error() : "",
            (unsigned long long)tensors_touched(job, peer));
        if (st != WEX_OK && st != WEX_ERR_TIMEOUT)
            break; /* a dead peer fails every other wait too */
    }
    snprintf(key, sizeof(key), "step/%llu/result/%llu",
             (unsigned long long)step, (unsigned long long)job->rank);
    if (first != WEX_OK) {
        wex__store_set(job->store, key, reason, strlen(reason));
        return wex__error(first, "step %llu not committed (still %llu): %s",
                          (unsigned long long)step,
                          (unsigned long long)job->committed, reason);
    }
    job->committed = step;
    return wex__store_set(job->store, key, "ok", 2);
}

wex_status wex__job_sync(wex_job *job, uint64_t step, wex_sync_report *r)
{
    int verify = job->plan.job->verify_digest;
    double timeout = job->plan.job->step_seconds, t0;
    int64_t everyone = (int64_t)(job->plan.src.ranks + job->plan.dst.ranks);
    char key[64];
    wex_status st = WEX_OK;
    uint64_t bytes = 0;

    if (step == 0 || step <= job->committed)
        return wex__error(WEX_ERR_INVALID, "wex_sync: step %llu must be past "
                          "the committed step %llu (steps start at 1)",
                          (unsigned long long)step,
                          (unsigned long long)job->committed);
    if (!job->connected)
        st = wex__job_connect(job);
    if (st != WEX_OK)
        return st;
    snprintf(key, sizeof(key), "step/%llu/begin", (unsigned long long)step);
    st = wex__store_barrier(job->store, key, everyone, timeout);
    if (st != WEX_OK)
        return wex__error_prefix(st, "step %llu: waiting for every rank",
                                 (unsigned long long)step);
    t0 = now();
    if (job->side == WEX_SIDE_SOURCE)
        st = source_step(job, step, verify, timeout);
    else
        st = destination_step(job, step, verify, timeout);
    for (size_t i = 0; i < job->op_count; i++)
        bytes += job->ops[i].bytes;
    if (r != NULL) {
        wex_sync_report full;
        uint32_t size = r->struct_size < sizeof(full) ? r->struct_size
                                                      : (uint32_t)sizeof(full);
        memset(&full, 0, sizeof(full));
        full.struct_size = size;
        full.verified = st == WEX_OK && verify;
        full.step = step;
        full.committed_step = job->committed;
        full.operations = job->op_count;
        full.bytes = bytes;
        full.peers = job->peer_count;
        full.seconds = now() - t0;
        memcpy(r, &full, size);
    }
    return st;
}
