/*
 * Who takes part in a step: which sources a step may go on without
 * (their regions have other holders), this rank's operations planned
 * around the sources that are dead, and, on a source, the destination
 * buffers it writes into, followed when a destination rank dies and
 * comes back with new memory.
 *
 * A destination counts its connects in "incarnation/destination/R",
 * prefixes each memory key it publishes with that count, then adds one
 * to "joins"; a source that sees "joins" move re-reads the counts of the
 * ranks it writes to and attaches again those that changed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "delta_move.h"
#include "landing.h"
#include "job.h"
#include "transforms.h"

wex_status wex__job_find_replicas(wex_job *job)
{
    const uint8_t *bits = wex__planner_replicated(&job->plan);
    size_t bytes = (job->plan.src.ranks + 7) / 8 + 1;

    free(job->members.optional_sources);
    job->members.optional_sources = bits ? malloc(bytes) : NULL;
    if (job->members.optional_sources == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    memcpy(job->members.optional_sources, bits, bytes);
    return WEX_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

void wex__job_members_fini(wex_job *job)
{
    free(job->members.optional_sources);
    free(job->members.dead);
    free(job->members.absent);
    free(job->members.took_part);
    free(job->members.here);
    free(job->members.seeded_by);
    free(job->members.placed);
    free(job->members.placing);
    job->members.placed = NULL;
    job->members.placing = NULL;
    job->members.here = NULL;
    job->members.seeded_by = NULL;
    job->members.optional_sources = NULL;
    job->members.dead = NULL;
    job->members.absent = NULL;
    job->members.took_part = NULL;
}

void wex__job_ops_free(wex_job *job)
{
    free(job->ops);
    free(job->peers);
    free(job->op_peer_index);
    free(job->scratch.digests);
    free(job->scratch.pair_digests);
    wex__digest_free(job->scratch.hash);
    free(job->src.op_peer);
    free(job->src.op_pass);
    free(job->src.peer_passes);
    job->ops = NULL;
    job->op_count = 0;
}

void wex__job_detach_all(wex_job *job)
{
    for (size_t i = 0; i < job->src.attached_count; i++)
        job->transport.ops->peer_detach(job->transport.ctx,
                                        job->src.attached[i]);
    free(job->src.attached);
    free(job->src.attached_what);
    job->src.attached = NULL;
    job->src.attached_what = NULL;
    job->src.attached_count = 0;
}

wex_status wex__job_take_ops(wex_job *job, wex_plan_builder *b,
                             const uint64_t *dead, uint64_t dead_count)
{
    wex_status st;
    size_t n;

    free(job->ops);
    job->ops = b->ops;
    job->op_count = b->count;
    b->ops = NULL;
    b->count = b->cap = 0;
    n = job->op_count ? job->op_count : 1;
    free(job->peers);
    free(job->scratch.digests);
    free(job->scratch.pair_digests);
    free(job->src.op_peer);
    free(job->op_peer_index);
    free(job->src.op_pass);
    free(job->src.peer_passes);
    job->peers = malloc(n * sizeof(uint64_t));
    job->scratch.digests = calloc(n, sizeof(uint64_t));
    job->scratch.pair_digests = calloc(n, sizeof(uint64_t));
    job->src.op_peer = calloc(n, sizeof(*job->src.op_peer));
    job->op_peer_index = malloc(n * sizeof(*job->op_peer_index));
    job->src.op_pass = calloc(n, sizeof(*job->src.op_pass));
    job->src.peer_passes = calloc(n, sizeof(*job->src.peer_passes));
    job->peer_count = 0;
    if (job->scratch.hash == NULL)
        job->scratch.hash = wex__digest_create();
    if (job->peers == NULL || job->scratch.digests == NULL ||
        job->scratch.hash == NULL || job->scratch.pair_digests == NULL ||
        job->src.op_peer == NULL || job->op_peer_index == NULL ||
        job->src.op_pass == NULL || job->src.peer_passes == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t i = 0; i < job->op_count; i++)
        job->peers[job->peer_count++] = job->side == WEX_SIDE_SOURCE
                                            ? job->ops[i].dst_rank
                                            : job->ops[i].src_rank;
    qsort(job->peers, job->peer_count, sizeof(uint64_t), cmp_u64);
    n = 0;
    for (size_t i = 0; i < job->peer_count; i++)
        if (n == 0 || job->peers[n - 1] != job->peers[i])
            job->peers[n++] = job->peers[i];
    job->peer_count = n;
    for (size_t i = 0; i < job->op_count; i++) {
        uint64_t peer = job->side == WEX_SIDE_SOURCE ? job->ops[i].dst_rank
                                                     : job->ops[i].src_rank;
        const uint64_t *at = bsearch(&peer, job->peers, job->peer_count,
                                     sizeof(uint64_t), cmp_u64);
        job->op_peer_index[i] = (uint32_t)(at - job->peers);
    }
    if (job->transport.ops != NULL && /* re-planned: what packs may differ */
        (st = wex__pack_prepare(job)) != WEX_OK)
        return st;
    if (wex__landing_size(job) != WEX_OK)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    st = wex__transforms_prepare(job, dead, dead_count);
    return st == WEX_OK ? wex__delta_prepare(job) : st;
}

/* Attaches destination `rank`'s `tensor` (or its landing board,
 * WEX__BOARD_TENSOR) as published at the rendezvous. */
static wex_status attach_one(wex_job *job, uint64_t rank, uint64_t tensor,
                             double timeout, wex_transport_peer **peer_p)
{
    size_t n = job->src.attached_count;
    wex_transport_peer **grown;
    wex__attachment *what;
    unsigned char *blob = NULL;
    size_t len = 0;
    uint64_t bytes = 0;
    char key[96];
    wex_status st;

    if (tensor == WEX__BOARD_TENSOR)
        snprintf(key, sizeof(key), "mem/%llu/board", (unsigned long long)rank);
    else if (tensor == WEX__INBOX_TENSOR)
        snprintf(key, sizeof(key), "mem/%llu/inbox/%llu",
                 (unsigned long long)rank, (unsigned long long)job->rank);
    else
        snprintf(key, sizeof(key), "mem/%llu/%llu", (unsigned long long)rank,
                 (unsigned long long)tensor);
    st = wex__store_get(job->rendezvous.store, key, timeout, (void **)&blob,
                        &len);
    if (st != WEX_OK)
        return wex__error_prefix(st,
                                 "waiting for destination rank %llu's "
                                 "memory",
                                 (unsigned long long)rank);
    if (len < WEX__MEM_HEADER) {
        free(blob);
        return wex__error(WEX_ERR_INVALID,
                          "destination rank %llu published "
                          "a %zu-byte memory key",
                          (unsigned long long)rank, len);
    }
    /* an inbox: its size after the header, and none at all when the
     * destination cannot take deltas */
    if (tensor == WEX__INBOX_TENSOR && len < WEX__MEM_HEADER + 8) {
        free(blob);
        *peer_p = NULL;
        return WEX_OK;
    }
    if (tensor == WEX__INBOX_TENSOR) {
        memcpy(&bytes, blob + WEX__MEM_HEADER, 8);
        memmove(blob + WEX__MEM_HEADER, blob + WEX__MEM_HEADER + 8,
                len - WEX__MEM_HEADER - 8);
        len -= 8;
    }
    grown = realloc(job->src.attached, (n + 1) * sizeof(*grown));
    if (grown != NULL)
        job->src.attached = grown;
    what = realloc(job->src.attached_what, (n + 1) * sizeof(*what));
    if (what != NULL)
        job->src.attached_what = what;
    if (grown == NULL || what == NULL) {
        free(blob);
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    }
    wex__error_clear();
    st = job->transport.ops->peer_attach(job->transport.ctx, rank,
                                         blob + WEX__MEM_HEADER,
                                         len - WEX__MEM_HEADER, peer_p);
    what[n].rank = rank;
    what[n].tensor = tensor;
    what[n].bytes = bytes;
    memcpy(&what[n].incarnation, blob, 8);
    memcpy(&what[n].pass, blob + 8, 4);
    memcpy(&what[n].passes, blob + 12, 4);
    free(blob);
    if (st != WEX_OK)
        return wex__error_prefix(st, "attaching destination rank %llu",
                                 (unsigned long long)rank);
    job->src.attached[n] = *peer_p;
    job->src.attached_count = n + 1;
    return WEX_OK;
}

/* The landing board of every destination the ops write into (landing.h),
 * where the transport offers one. */
static wex_status attach_boards(wex_job *job, double timeout)
{
    if (!wex__landing_on(job))
        return WEX_OK;
    for (size_t p = 0; p < job->peer_count; p++) {
        size_t k = 0;
        wex_status st;

        job->src.board_peer[p] = NULL; /* no tells where attaching failed */
        if (job->src.peer_passes[p] > 1)
            continue; /* it drains pass by pass: no board (window.h) */
        while (k < job->src.attached_count &&
               (job->src.attached_what[k].rank != job->peers[p] ||
                job->src.attached_what[k].tensor != WEX__BOARD_TENSOR))
            k++;
        if (k < job->src.attached_count) {
            job->src.board_peer[p] = job->src.attached[k];
            continue;
        }
        st = attach_one(job, job->peers[p], WEX__BOARD_TENSOR, timeout,
                        &job->src.board_peer[p]);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

/* Each peer's inbox for this source, where deltas go (delta_move.h). */
static wex_status attach_inboxes(wex_job *job, double timeout)
{
    wex__job_source_delta *d = &job->src.delta;

    if (!job->plan.job->delta || d->inbox == NULL)
        return WEX_OK;
    for (size_t p = 0; p < job->peer_count; p++) {
        size_t k = 0;
        wex_status st;

        while (k < job->src.attached_count &&
               (job->src.attached_what[k].rank != job->peers[p] ||
                job->src.attached_what[k].tensor != WEX__INBOX_TENSOR))
            k++;
        if (k < job->src.attached_count) {
            d->inbox[p] = job->src.attached[k];
            d->inbox_size[p] = job->src.attached_what[k].bytes;
            continue;
        }
        st = attach_one(job, job->peers[p], WEX__INBOX_TENSOR, timeout,
                        &d->inbox[p]);
        if (st != WEX_OK)
            return st;
        d->inbox_size[p] =
            d->inbox[p] != NULL
                ? job->src.attached_what[job->src.attached_count - 1].bytes
                : 0;
    }
    return WEX_OK;
}

wex_status wex__job_attach(wex_job *job, double timeout)
{
    wex_status st;

    if (job->side != WEX_SIDE_SOURCE)
        return WEX_OK;
    for (size_t i = 0; i < job->op_count; i++) {
        const wex__op *o = &job->ops[i];
        size_t k = 0;
        wex_status st;

        job->src.op_peer[i] = NULL;
        while (k < job->src.attached_count &&
               (job->src.attached_what[k].rank != o->dst_rank ||
                job->src.attached_what[k].tensor != o->dst_tensor))
            k++;
        if (k == job->src.attached_count) {
            st = attach_one(job, o->dst_rank, o->dst_tensor, timeout,
                            &job->src.op_peer[i]);
            if (st != WEX_OK)
                return st;
        }
        job->src.op_peer[i] = job->src.attached[k];
        /* the pass its destination receives it in (window.h) */
        job->src.op_pass[i] = job->src.attached_what[k].pass;
        job->src.peer_passes[job->op_peer_index[i]] =
            job->src.attached_what[k].passes;
    }
    st = attach_boards(job, timeout);
    return st == WEX_OK ? attach_inboxes(job, timeout) : st;
}

/* Detaches attachment k; the last takes its place. */
static void drop_attachment(wex_job *job, size_t k)
{
    job->transport.ops->peer_detach(job->transport.ctx, job->src.attached[k]);
    job->src.attached_count--;
    job->src.attached[k] = job->src.attached[job->src.attached_count];
    job->src.attached_what[k] = job->src.attached_what[job->src.attached_count];
}

wex_status wex__job_follow_rejoins(wex_job *job, double timeout)
{
    int64_t joins = 0;
    wex_status st;

    if (job->side != WEX_SIDE_SOURCE)
        return WEX_OK;
    st = wex__store_add(job->rendezvous.store, "joins", 0, &joins);
    if (st != WEX_OK || joins == job->src.joins_seen)
        return st;
    /* an elastic source attaches once it knows who takes part (fit) */
    if (job->members.absent_count == UINT64_MAX) {
        job->src.joins_seen = joins;
        return WEX_OK;
    }
    for (size_t k = 0; k < job->src.attached_count;) {
        uint64_t rank = job->src.attached_what[k].rank;
        int64_t now = 0;
        char key[96];
        snprintf(key, sizeof(key), "incarnation/destination/%llu",
                 (unsigned long long)rank);
        st = wex__store_add(job->rendezvous.store, key, 0, &now);
        if (st != WEX_OK)
            return st;
        if (now == job->src.attached_what[k].incarnation) {
            k++;
            continue;
        }
        /* The rank came back with new memory: the old is gone with the
         * process that owned it. */
        drop_attachment(job, k);
    }
    job->src.joins_seen = joins;
    return wex__job_attach(job, timeout);
}

static int same_set(const uint64_t *a, uint64_t na, const uint64_t *b,
                    uint64_t nb)
{
    return na == nb && (na == 0 || memcmp(a, b, na * sizeof(*a)) == 0);
}

/* Drops the attachments of destination ranks `ranks` (sorted): a
 * replica left out of a step may be dead, and a transport may fail
 * every flush while it keeps an endpoint to a dead peer. A replica
 * that comes back is attached again (wex__job_attach). */
static void detach_ranks(wex_job *job, const uint64_t *ranks, uint64_t n)
{
    for (size_t k = 0; k < job->src.attached_count;) {
        if (!wex__elastic_is_absent(ranks, n, job->src.attached_what[k].rank)) {
            k++;
            continue;
        }
        drop_attachment(job, k);
    }
}

/* A copy of `n` ranks (UINT64_MAX: none), or NULL when out of memory. */
static uint64_t *copy_ranks(const uint64_t *ranks, uint64_t n)
{
    uint64_t *copy = malloc(n && n != UINT64_MAX ? n * sizeof(*copy) : 1);

    if (copy != NULL && n && n != UINT64_MAX)
        memcpy(copy, ranks, n * sizeof(*copy));
    return copy;
}

wex_status wex__job_fit(wex_job *job, const uint64_t *dead, uint64_t dead_count,
                        const uint64_t *absent, uint64_t absent_count,
                        double timeout)
{
    wex_plan_builder b;
    uint64_t *copy, *gone;
    wex_status st;

    /* only a source's operations depend on which destinations are here */
    if (job->side != WEX_SIDE_SOURCE || job->members.replica_ranks == 0) {
        absent = job->members.absent;
        absent_count = job->members.absent_count;
    }
    if (!job->members.replan &&
        same_set(job->members.dead, job->members.dead_count, dead,
                 dead_count) &&
        (absent_count == job->members.absent_count &&
         (absent_count == UINT64_MAX ||
          same_set(job->members.absent, job->members.absent_count, absent,
                   absent_count))))
        return WEX_OK;
    if ((st = wex__job_complete_plan(job)) != WEX_OK)
        return st;
    copy = copy_ranks(dead, dead_count);
    gone = copy_ranks(absent, absent_count);
    if (copy == NULL || gone == NULL) {
        free(copy);
        free(gone);
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    }
    wex__plan_builder_init(&b, &job->plan.src, &job->plan.dst);
    st = wex__planner_rank_without(&job->plan, job->side, job->rank, dead,
                                   dead_count, &b);
    if (st == WEX_OK && absent_count != UINT64_MAX) {
        wex__elastic_drop_absent(&b, absent, absent_count);
        detach_ranks(job, absent, absent_count);
    }
    if (st == WEX_OK)
        st = wex__job_take_ops(job, &b, dead, dead_count);
    wex__plan_builder_fini(&b);
    job->members.replan = 0;
    /* Whatever happened, the ops no longer match the old set: a failed
     * plan leaves none, and the next fit plans again. */
    free(job->members.dead);
    job->members.dead = copy;
    job->members.dead_count = dead_count;
    free(job->members.absent);
    job->members.absent = gone;
    job->members.absent_count = absent_count;
    if (st != WEX_OK) {
        job->op_count = 0;
        job->peer_count = 0;
        job->members.dead_count = UINT64_MAX; /* matches no set */
        return st;
    }
    return wex__job_attach(job, timeout);
}
