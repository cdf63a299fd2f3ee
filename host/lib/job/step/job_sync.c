/*
 * One step. Every rank meets at the step's barrier, which may leave out
 * dead sources whose regions other sources hold; sources write their
 * operations and post, per destination, the digests of what they sent;
 * each destination checks what landed and posts its verdict; then every
 * rank reads every destination's verdict, so all agree on the outcome:
 * destinations commit only when every verdict is "ok".
 *
 * When a rank dies during a try, the verdicts say so ("retry:"). If no
 * destination died, the step is tried again: its barrier leaves out the
 * dead sources and the policy plans around them (failover). A dead
 * destination, or a dead source whose regions no one else holds, fails
 * the step for everyone; the next step waits for the rank to rejoin.
 *
 * Keys, for step S and try T: step/S/T/begin (barrier),
 * step/S/T/done/SRC/DST (digests, or "!" and why the source failed),
 * step/S/T/verdict/DST ("ok", "retry:why" or "fail:why").
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_copy.h"
#include "error.h"
#include "clock.h"
#include "delta_move.h"
#include "elastic_outcome.h"
#include "elastic_seed.h"
#include "landing.h"
#include "log.h"
#include "window.h"
#include "job.h"
#include "verdicts.h"
#include "step_failure.h"

typedef struct step_try {
    uint64_t step, number;
    int verify;
    double timeout;
    double started;           /* when the first try's barrier passed */
    int wrote;                /* a try passed its barrier: sources wrote */
    int passed;               /* this try passed its barrier */
    int missed;               /* the step began without this rank */
    int seeded;               /* a replica fills this rank's, this try */
    wex__store_elastic el;    /* the barrier's, and who it left out */
    char why[WEX__ERROR_MAX]; /* why this rank could not take part */
} step_try;

static void try_key(char *key, size_t cap, const step_try *t, const char *what)
{
    snprintf(key, cap, "step/%llu/%llu/%s", (unsigned long long)t->step,
             (unsigned long long)t->number, what);
}

static void done_key(char *key, size_t cap, const step_try *t, uint64_t src,
                     uint64_t dst)
{
    snprintf(key, cap, "step/%llu/%llu/done/%llu/%llu",
             (unsigned long long)t->step, (unsigned long long)t->number,
             (unsigned long long)src, (unsigned long long)dst);
}

/* Destination tensors the ops with source `peer` write into. */
static uint64_t tensors_touched(const wex_job *job, uint64_t peer)
{
    uint64_t count = 0;

    for (size_t i = 0; i < job->op_count; i++) {
        int seen = 0;
        if (job->ops[i].src_rank != peer)
            continue;
        for (size_t j = 0; j < i && !seen; j++)
            seen = job->ops[j].src_rank == peer &&
                   job->ops[j].dst_tensor == job->ops[i].dst_tensor;
        count += !seen;
    }
    return count;
}

/* ---- sources ------------------------------------------------------------ */

/* Per destination, in op order: each op's digest, or in a delta job its
 * record (how it went, and where its payload is: delta_move.h). */
static wex_status post_digests(wex_job *job, const step_try *t)
{
    uint64_t *mine = job->scratch.pair_digests;
    int delta = job->plan.job->delta;
    wex_status st = WEX_OK;

    for (size_t p = 0; p < job->peer_count && st == WEX_OK; p++) {
        size_t n = 0;
        char key[128];
        for (size_t i = 0; i < job->op_count; i++) {
            if (job->ops[i].dst_rank != job->peers[p])
                continue;
            if (delta)
                job->src.delta.pair_records[n] = job->src.delta.records[i];
            else
                mine[n] = t->verify ? job->scratch.digests[i] : 0;
            n++;
        }
        done_key(key, sizeof(key), t, job->rank, job->peers[p]);
        st = delta ? wex__store_set(job->rendezvous.store, key,
                                    job->src.delta.pair_records,
                                    n * sizeof(wex__delta_record))
                   : wex__store_set(job->rendezvous.store, key, mine,
                                    n * sizeof(uint64_t));
    }
    return st;
}

/* Tells every destination this source failed, so none waits out its
 * timeout for digests that will not come (step_failure.h). */
static void post_failure(wex_job *job, const step_try *t, const char *why)
{
    char *value = malloc(strlen(why) + 2);
    size_t n;

    if (value == NULL)
        return;
    n = wex__step_failure(value, why, sizeof(uint64_t));
    for (uint64_t d = 0; d < job->plan.dst.ranks; d++) {
        char key[128];
        done_key(key, sizeof(key), t, job->rank, d);
        wex__store_set(job->rendezvous.store, key, value, n);
    }
    /* and to destinations waiting for a pass of their window, or (nccl)
     * for a delta try's layout */
    {
        char prefix[96];
        try_key(prefix, sizeof(prefix), t, "");
        wex__window_fail(job, prefix, value, n);
        wex__delta_fail_layouts(job, prefix, value, n);
    }
    free(value);
}

static void source_try(wex_job *job, step_try *t)
{
    char prefix[96];
    wex_status st;

    if (t->why[0] != '\0') {
        post_failure(job, t, t->why);
        return;
    }
    try_key(prefix, sizeof(prefix), t, "");
    st = wex__fence_write(job, wex__fence_epoch(t->step, t->number));
    if (st == WEX_OK)
        st = wex__delta_begin(job, t->number, prefix, t->timeout,
                              t->verify ? job->scratch.hash : NULL);
    if (st == WEX_OK)
        st = wex__execute_ops(job, t->verify ? job->scratch.digests : NULL,
                              wex__landing_tag(t->step, t->number), prefix,
                              t->timeout);
    if (st == WEX_OK)
        st = post_digests(job, t);
    if (st != WEX_OK) {
        snprintf(t->why, sizeof(t->why), "%s", wex__last_error());
        post_failure(job, t, t->why);
    }
}

/* ---- destinations ------------------------------------------------------- */

/* Checks source `peer`'s operations against its digests; says how it
 * went, with the reason in `why`. */
static wex__peer_outcome check_peer(wex_job *job, const step_try *t,
                                    uint64_t peer, char *why, size_t cap)
{
    char key[128];
    unsigned char *theirs = NULL;
    size_t len = 0, n = 0;
    uint64_t bad = 0, digest;
    const char *failed;
    wex_status st;

    done_key(key, sizeof(key), t, peer, job->rank);
    st = wex__store_get(job->rendezvous.store, key, t->timeout,
                        (void **)&theirs, &len);
    if (st == WEX_ERR_PEER) { /* the message names who died */
        snprintf(why, cap, "%s", wex__last_error());
        return WEX__PEER_DIED;
    }
    if (st != WEX_OK) {
        snprintf(why, cap, "source rank %llu did not finish: %s",
                 (unsigned long long)peer, wex__last_error());
        job->dst.silent_peer = peer + 1;
        return WEX__PEER_FAILED;
    }
    failed = wex__step_failure_reason(theirs, len, sizeof(uint64_t));
    if (failed != NULL) {
        snprintf(why, cap, "source rank %llu failed: %s",
                 (unsigned long long)peer, failed);
        free(theirs);
        return WEX__PEER_FAILED;
    }
    if (job->plan.job->delta) { /* records: its ops, whole or as deltas */
        wex__peer_outcome how = WEX__PEER_FAILED;
        if (len % sizeof(wex__delta_record) != 0)
            snprintf(why, cap, "source rank %llu posted %zu bytes of records",
                     (unsigned long long)peer, len);
        else
            how = wex__delta_check(job, peer, (void *)theirs,
                                   len / sizeof(wex__delta_record), t->verify,
                                   why, cap);
        free(theirs);
        return how;
    }
    for (size_t i = 0; i < job->op_count; i++) {
        if (job->ops[i].src_rank != peer)
            continue;
        if ((n + 1) * sizeof(uint64_t) > len) {
            bad++;
        } else if (t->verify) {
            memcpy(&digest, theirs + n * 8, 8);
            /* digested as it landed (landing.c), or now */
            bad += (job->dst.early[i]
                        ? job->scratch.digests[i]
                        : wex__digest_landed(job, &job->ops[i])) != digest;
        }
        n++;
    }
    bad += n * sizeof(uint64_t) != len;
    free(theirs);
    if (bad == 0)
        return WEX__PEER_OK;
    snprintf(why, cap,
             "source rank %llu sent bytes that landed differently "
             "(%llu tensors affected)",
             (unsigned long long)peer,
             (unsigned long long)tensors_touched(job, peer));
    return WEX__PEER_FAILED;
}

/* "ok", or "retry:" / "fail:" and the reasons. */
static wex_status destination_try(wex_job *job, const step_try *t)
{
    char verdict[WEX__ERROR_MAX] = "ok", key[96], prefix[96];
    size_t used = 0;
    wex__peer_outcome worst = WEX__PEER_OK;

    try_key(prefix, sizeof(prefix), t, "");
    if (job->plan.job->delta)
        wex__delta_try_start(job);
    if (t->why[0] != '\0') {
        snprintf(verdict, sizeof(verdict), "fail:%.1000s", t->why);
        worst = WEX__PEER_FAILED;
    } else if (job->dst.delta.inbox_count > 0 && wex__delta_matched(job)) {
        /* over nccl: the receives as each source's layout says */
        worst = wex__delta_receive(job, prefix, t->timeout, verdict,
                                   sizeof(verdict));
        used = worst != WEX__PEER_OK ? strlen(verdict) : 0;
    } else if (wex__post_receives(job) != WEX_OK) {
        snprintf(verdict, sizeof(verdict), "%.1000s", wex__last_error());
        worst = WEX__PEER_FAILED;
        used = strlen(verdict);
    }
    if (worst == WEX__PEER_OK && t->verify)
        wex__landing_watch(job, wex__landing_tag(t->step, t->number));
    if (worst != WEX__PEER_OK) { /* every pass of the window but the last */
        wex__window_refuse(job, prefix, verdict);
    } else {
        worst = wex__window_drain(job, prefix, t->verify, t->timeout, verdict,
                                  sizeof(verdict));
        used = worst != WEX__PEER_OK ? strlen(verdict) : 0;
    }
    for (size_t p = 0; p < job->peer_count && worst == WEX__PEER_OK; p++) {
        char why[WEX__ERROR_MAX];
        wex__peer_outcome how =
            check_peer(job, t, job->peers[p], why, sizeof(why));
        if (how == WEX__PEER_OK)
            continue;
        if (how > worst)
            worst = how;
        used += (size_t)snprintf(
            verdict + used, used < sizeof(verdict) ? sizeof(verdict) - used : 0,
            "%s%.900s", used ? "; " : "", why);
    }
    /* Checked: what landed in host copies of CUDA tensors goes to the
     * device before this destination says so. */
    if (worst == WEX__PEER_OK && t->why[0] == '\0' &&
        (job->dst.delta.inbox_count > 0
             ? wex__delta_copy_landed(job) /* one pass: what came whole */
             : wex__window_copy_in(job, job->dst.passes > 1
                                            ? job->dst.passes - 1
                                            : UINT32_MAX)) != WEX_OK) {
        snprintf(verdict, sizeof(verdict), "%.1000s", wex__last_error());
        worst = WEX__PEER_FAILED;
    }
    /* A source that failed or died may have written whole ops: only a
     * try whose every source's records were read knows it wrote none. */
    if (worst != WEX__PEER_OK || t->why[0] != '\0')
        job->dst.delta.live_written = 1;
    if (worst != WEX__PEER_OK && t->why[0] == '\0') {
        /* The reasons, after the class. */
        char reasons[WEX__ERROR_MAX];
        snprintf(reasons, sizeof(reasons), "%s", verdict);
        snprintf(verdict, sizeof(verdict), "%s:%.1000s",
                 worst == WEX__PEER_DIED ? "retry" : "fail", reasons);
    }
    try_key(key, sizeof(key), t, "verdict/");
    snprintf(key + strlen(key), sizeof(key) - strlen(key), "%llu",
             (unsigned long long)job->rank);
    return wex__store_set(job->rendezvous.store, key, verdict, strlen(verdict));
}

/* A destination a replica seeds this try says so, in place of checking
 * what the sources wrote (they write none of it). */
static wex_status seed_verdict(wex_job *job, const step_try *t)
{
    char key[96];

    if (job->plan.job->delta)
        wex__delta_try_start(job); /* nothing to apply but the seed */
    job->dst.delta.live_written = 1;
    try_key(key, sizeof(key), t, "verdict/");
    snprintf(key + strlen(key), sizeof(key) - strlen(key), "%llu",
             (unsigned long long)job->rank);
    return wex__store_set(job->rendezvous.store, key, WEX__VERDICT_SEED,
                          strlen(WEX__VERDICT_SEED));
}

/* ---- the outcome -------------------------------------------------------- */

enum { STEP_OK, STEP_RETRY, STEP_FAILED, STEP_SEED };

/* Every destination's verdict, the same for every rank: the outcome,
 * and what went wrong in `why`. */
static int outcome(wex_job *job, const step_try *t, char *why, size_t cap)
{
    char prefix[96];
    wex__store_gathered *v = NULL;
    int result = STEP_OK;
    wex_status st;

    try_key(prefix, sizeof(prefix), t, "verdict/");
    st = wex__store_gather(job->rendezvous.store, prefix, job->plan.dst.ranks,
                           "destination/", t->timeout, &v);
    if (st != WEX_OK) {
        snprintf(why, cap, "waiting for the destinations' verdicts: %s",
                 wex__last_error());
        return STEP_FAILED;
    }
    if (job->members.replica_ranks) {
        int how = wex__elastic_outcome(job, t->step, v, why, cap);
        free(v);
        return how == WEX__ELASTIC_OK      ? STEP_OK
               : how == WEX__ELASTIC_RETRY ? STEP_RETRY
               : how == WEX__ELASTIC_SEED  ? STEP_SEED
                                           : STEP_FAILED;
    }
    for (uint64_t d = 0; d < job->plan.dst.ranks; d++) {
        int retry = v[d].present && strncmp(v[d].value, "retry:", 6) == 0;
        if (v[d].present && strcmp(v[d].value, "ok") == 0)
            continue;
        if (retry && result == STEP_OK)
            result = STEP_RETRY;
        else if (!retry)
            result = STEP_FAILED;
    }
    wex__step_tell_verdicts(v, job->plan.dst.ranks, 0, why, cap);
    free(v);
    return result;
}

/* A source that failed the try itself (fenced, a transport error) says
 * so before what the destinations' verdicts say. */
static int with_own_reason(const wex_job *job, const step_try *t, int result,
                           char *why, size_t cap)
{
    char verdicts[WEX__ERROR_MAX];

    if (result == STEP_OK || job->side != WEX_SIDE_SOURCE || t->why[0] == '\0')
        return result;
    snprintf(verdicts, sizeof(verdicts), "%s", why);
    snprintf(why, cap, "this source: %.500s; %.500s", t->why, verdicts);
    return result;
}

/* ---- one try, and the step ---------------------------------------------- */

static int run_try(wex_job *job, step_try *t, char *why, size_t cap)
{
    uint64_t *dead = NULL, dead_count = 0;
    char key[96], unopened[WEX__ERROR_MAX] = "";
    wex_status st;

    /* Open before arriving: no source of this try writes before the
     * barrier passes, so none finds the destination not yet open. */
    if (job->side == WEX_SIDE_DESTINATION &&
        wex__fence_open(job, wex__fence_epoch(t->step, t->number)) != WEX_OK)
        snprintf(unopened, sizeof(unopened), "%s", wex__last_error());
    if (job->side == WEX_SIDE_DESTINATION && job->plan.job->delta) {
        /* the step its tensors hold, for its sources to send deltas to;
         * none when its experts move this step (their slots go whole) */
        uint64_t base = job->members.placing ? 0 : wex__delta_base(job);
        char at[128];
        try_key(at, sizeof(at), t, "base/");
        snprintf(at + strlen(at), sizeof(at) - strlen(at), "%llu",
                 (unsigned long long)job->rank);
        if (wex__store_set(job->rendezvous.store, at, &base, sizeof(base)) !=
                WEX_OK &&
            unopened[0] == '\0')
            snprintf(unopened, sizeof(unopened), "%s", wex__last_error());
    }
    if (job->side == WEX_SIDE_DESTINATION) {
        char prefix[96];
        try_key(prefix, sizeof(prefix), t, "");
        if ((wex__seed_post_held(job, prefix) != WEX_OK ||
             wex__placement_post(job, prefix) != WEX_OK) &&
            unopened[0] == '\0')
            snprintf(unopened, sizeof(unopened), "%s", wex__last_error());
    }
    if (job->members.replica_ranks && job->side == WEX_SIDE_SOURCE &&
        t->number == 0)
        wex__elastic_announce(job, t->step);
    try_key(key, sizeof(key), t, "begin");
    /* A retry must not wait for a destination that died: only a source
     * can be failed over (or, elastic, a replica left out). */
    wex__elastic_barrier(job, &t->el);
    st = wex__store_arrive_elastic(job->rendezvous.store, key, t->number > 0,
                                   job->plan.src.ranks, job->plan.dst.ranks,
                                   job->members.optional_sources, &t->el,
                                   t->timeout, &dead, &dead_count);
    if (st != WEX_OK && t->number == 0 &&
        wex__store_missed(job->rendezvous.store)) {
        /* Nothing of the step was touched: the rank takes part from a
         * later one. */
        t->missed = 1;
        snprintf(why, cap,
                 "the step went on without this rank, which came "
                 "after its barrier (a rank that rejoined while it ran, or a "
                 "replayed step); nothing was written: sync a later step "
                 "(%s)",
                 wex__last_error());
        return STEP_FAILED;
    }
    if (st != WEX_OK && t->el.too_few) {
        wex__elastic_too_few(job, t->step, why, cap);
        return STEP_FAILED;
    }
    if (st != WEX_OK) {
        snprintf(why, cap, "%s: %s",
                 t->number > 0 ? "cannot go on without the dead (only "
                                 "sources whose regions others hold can be "
                                 "left out)"
                               : "waiting for every rank",
                 wex__last_error());
        return STEP_FAILED;
    }
    {
        char prefix[96];
        try_key(prefix, sizeof(prefix), t, "verdict/");
        if (wex__elastic_left_out(job, t->step, prefix, t->el.absent,
                                  t->el.absent_count, why, cap)) {
            free(dead);
            t->missed = 1; /* nothing of the step reaches it */
            return STEP_FAILED;
        }
    }
    if (t->number == 0)
        t->started = wex__now();
    t->wrote = t->passed = 1;
    if (job->members.after_barrier != NULL)
        job->members.after_barrier(job, t->step);
    /* Everyone has passed this barrier, so everyone is done with the
     * step before last: one rank drops its keys, or a long job's
     * rendezvous would grow by a step's keys every step. (The last step
     * is kept: a source that rejoined late may still read it.) */
    if (t->number == 0 && job->side == WEX_SIDE_SOURCE && job->rank == 0 &&
        job->members.earlier_steps[0] != 0) {
        snprintf(key, sizeof(key), "step/%llu/",
                 (unsigned long long)job->members.earlier_steps[0]);
        wex__store_drop(job->rendezvous.store, key, NULL);
    }
    t->why[0] = '\0';
    {
        char prefix[96];
        uint64_t *around = NULL, around_count = 0;
        try_key(prefix, sizeof(prefix), t, "");
        st = wex__placement_follow(job, prefix, t->timeout);
        if (st == WEX_OK)
            st = wex__seed_decide(job, prefix, t->el.absent, t->el.absent_count,
                                  t->timeout);
        t->seeded = st == WEX_OK && wex__seed_is_mine(job);
        if (st == WEX_OK)
            st = wex__seed_plan_around(job, t->el.absent, t->el.absent_count,
                                       &around, &around_count);
        if (st == WEX_OK)
            st = wex__job_follow_rejoins(job, t->timeout);
        if (st == WEX_OK)
            st = wex__job_fit(
                job, dead, dead_count, around != NULL ? around : t->el.absent,
                around != NULL ? around_count : t->el.absent_count, t->timeout);
        free(around);
    }
    if (st != WEX_OK && dead_count > 0)
        snprintf(t->why, sizeof(t->why),
                 "%llu dead source rank%s (first %llu)"
                 ": %s",
                 (unsigned long long)dead_count, dead_count > 1 ? "s" : "",
                 (unsigned long long)dead[0], wex__last_error());
    else if (st != WEX_OK)
        snprintf(t->why, sizeof(t->why), "%s", wex__last_error());
    if (t->why[0] == '\0' && unopened[0] != '\0')
        snprintf(t->why, sizeof(t->why), "%s", unopened);
    free(dead);
    if (job->side == WEX_SIDE_SOURCE)
        source_try(job, t);
    else if (t->seeded && t->why[0] == '\0') {
        /* no source writes it: a replica copies the step in after */
        if (seed_verdict(job, t) != WEX_OK) {
            snprintf(why, cap, "posting the verdict: %s", wex__last_error());
            return STEP_FAILED;
        }
    } else if (destination_try(job, t) != WEX_OK) {
        snprintf(why, cap, "posting the verdict: %s", wex__last_error());
        return STEP_FAILED;
    }
    return with_own_reason(job, t, outcome(job, t, why, cap), why, cap);
}

wex_status wex__job_sync(wex_job *job, uint64_t step, wex_sync_report *r)
{
    step_try t = {.step = step,
                  .verify = job->plan.job->verify_digest,
                  .timeout = job->plan.job->step_seconds,
                  .started = wex__now()};
    char why[WEX__ERROR_MAX] = "", first[WEX__ERROR_MAX] = "";
    int result;
    wex_status st = WEX_OK;

    if (step == 0 || step >= WEX__STEP_LIMIT)
        return wex__error(WEX_ERR_INVALID,
                          "wex_sync: step %llu is outside "
                          "[1, 2^63)",
                          (unsigned long long)step);
    /* Steps only go forward, on both sides: a replayed or repeated step
     * would pass barriers its peers left behind. */
    if (step <= job->dst.committed || step <= job->members.earlier_steps[1])
        return wex__error(
            WEX_ERR_INVALID,
            "wex_sync: step %llu must be past "
            "this rank's last step %llu (steps only go forward)",
            (unsigned long long)step,
            (unsigned long long)(job->dst.committed >
                                         job->members.earlier_steps[1]
                                     ? job->dst.committed
                                     : job->members.earlier_steps[1]));
    if (r != NULL && r->struct_size < WEX_SYNC_REPORT_SIZE_1_0)
        return wex__error(WEX_ERR_ABI,
                          "wex_sync: report struct_size %u is "
                          "smaller than ABI 1.0's %u",
                          r->struct_size, WEX_SYNC_REPORT_SIZE_1_0);
    if (!job->rendezvous.connected)
        st = wex__job_connect(job);
    if (st != WEX_OK)
        return st;
    job->dst.delta.live_written = 0;
    /* Each retry leaves out at least one more dead source. */
    for (;; t.number++) {
        t.passed = t.seeded = 0;
        result = run_try(job, &t, why, sizeof(why));
        if (result == STEP_SEED) {
            char prefix[96];
            try_key(prefix, sizeof(prefix), &t, "");
            result = wex__seed_receive(job, prefix, t.verify, t.timeout, why,
                                       sizeof(why)) == 0
                         ? STEP_OK
                         : STEP_FAILED;
        }
        if (job->side == WEX_SIDE_DESTINATION)
            wex__fence_close_try(job, step, t.number, t.timeout,
                                 result != STEP_OK, t.passed && !t.seeded, why,
                                 sizeof(why));
        if (t.number == 0)
            snprintf(first, sizeof(first), "%s", why);
        if (result != STEP_RETRY || t.number >= job->plan.src.ranks)
            break;
    }
    free(t.el.absent);
    if (t.passed)
        wex__elastic_settle(job);
    if (result == STEP_OK && job->side == WEX_SIDE_DESTINATION &&
        job->plan.job->delta && (st = wex__delta_apply(job)) != WEX_OK) {
        job->dst.dirty = 1; /* a copy to the device failed */
        result = STEP_FAILED;
        snprintf(why, sizeof(why), "%s", wex__last_error());
    }
    if (result == STEP_OK && job->side == WEX_SIDE_DESTINATION) {
        job->dst.committed = step;
        job->dst.dirty = 0;
        /* Committed: the replicas behind it that it seeds copy it now. */
        wex__seed_send(job, step, t.number, t.timeout);
    } else if (t.wrote && job->side == WEX_SIDE_DESTINATION &&
               (!job->plan.job->delta || job->dst.delta.live_written)) {
        job->dst.dirty = 1; /* sources may have written part of the step */
    }
    wex__delta_end(job, step, result == STEP_OK);
    job->dst.seeded = t.seeded;
    job->members.earlier_steps[0] = job->members.earlier_steps[1];
    job->members.earlier_steps[1] = step;
    if (r != NULL)
        wex__sync_report_fill(job, r, step, t.number, t.started, t.missed,
                              result == STEP_OK, t.passed);
    if (result == STEP_OK)
        return WEX_OK;
    if (t.number > 0)
        return wex__error(WEX_ERR_PEER,
                          "step %llu not committed (still "
                          "%llu): %s; tried again without the dead: %s",
                          (unsigned long long)step,
                          (unsigned long long)job->dst.committed, first, why);
    return wex__error(WEX_ERR_PEER,
                      "step %llu not committed (still %llu): "
                      "%s",
                      (unsigned long long)step,
                      (unsigned long long)job->dst.committed, why);
}
