/* Seeding a replica that is behind from one that is not (elastic_seed.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "elastic_seed.h"
#include "error.h"
#include "log.h"
#include "step_failure.h"

/* What a destination rank holds before a try: the step its tensors hold
 * whole (0: none, or a failed step left them mixed), and whether every
 * one of them is host memory (a seed copies host memory only). */
typedef struct held {
    uint64_t step, host;
} held;

static void key_of(char *key, size_t cap, const char *prefix, const char *what,
                   uint64_t rank)
{
    snprintf(key, cap, "%s%s%llu", prefix, what, (unsigned long long)rank);
}

static uint64_t replica_count(const wex_job *job)
{
    return job->plan.dst.ranks / job->members.replica_ranks;
}

static int seeding(const wex_job *job)
{
    return job->members.replica_ranks != 0 &&
           job->plan.job->elastic_seed_replicas;
}

wex_status wex__seed_post_held(wex_job *job, const char *prefix)
{
    held h = {job->dst.dirty ? 0 : job->dst.committed, 1};
    char key[160];

    if (!seeding(job) || job->side != WEX_SIDE_DESTINATION)
        return WEX_OK;
    for (size_t t = 0; t < job->layout->tensor_count; t++)
        h.host &= job->memory_kind[t] == WEX_MEMORY_HOST;
    key_of(key, sizeof(key), prefix, "held/", job->rank);
    return wex__store_set(job->rendezvous.store, key, &h, sizeof(h));
}

/* Replica q as the ranks present posted it: 0 when it is absent or a
 * rank of it cannot be read; else its step (the least of its ranks'),
 * and in *host whether all its ranks are host memory. */
static uint64_t replica_held(wex_job *job, const char *prefix, uint64_t q,
                             const uint64_t *absent, uint64_t absent_count,
                             int *host)
{
    uint64_t per = job->members.replica_ranks, least = UINT64_MAX;

    *host = 1;
    for (uint64_t r = q * per; r < q * per + per; r++) {
        char key[160];
        held h;
        void *value = NULL;
        size_t len = 0;
        int ok;

        if (wex__elastic_is_absent(absent, absent_count, r))
            return *host = 0;
        key_of(key, sizeof(key), prefix, "held/", r);
        /* set before its rank arrived at the barrier that has passed */
        ok = wex__store_get(job->rendezvous.store, key, 0, &value, &len) ==
                 WEX_OK &&
             len == sizeof(h);
        if (ok)
            memcpy(&h, value, sizeof(h));
        free(value);
        if (!ok)
            return *host = 0;
        *host &= h.host != 0;
        if (h.step < least)
            least = h.step;
    }
    return least;
}

/* Source rank 0's decision: the replicas present that hold the newest
 * step seed those present that hold an older one (host memory on both
 * ends), round robin, as long as the sources still fill min_replicas. */
static void decide(wex_job *job, const char *prefix, const uint64_t *absent,
                   uint64_t absent_count, uint64_t *seeded_by)
{
    uint64_t replicas = replica_count(job), newest = 0, present = 0;
    uint64_t seeders = 0, next = 0, room;
    uint64_t *step = calloc(replicas, sizeof(*step));
    int *host = calloc(replicas, sizeof(*host));

    if (step == NULL || host == NULL) {
        free(step);
        free(host);
        return; /* the sources fill every replica */
    }
    for (uint64_t q = 0; q < replicas; q++) {
        int whole = !wex__elastic_is_absent(absent, absent_count,
                                            q * job->members.replica_ranks);
        step[q] = replica_held(job, prefix, q, absent, absent_count, &host[q]);
        present += (uint64_t)whole;
        if (host[q] && step[q] > newest)
            newest = step[q];
    }
    for (uint64_t q = 0; q < replicas; q++)
        seeders += host[q] && newest > 0 && step[q] == newest;
    room = present > job->plan.job->elastic_min_replicas
               ? present - job->plan.job->elastic_min_replicas
               : 0;
    for (uint64_t q = 0; q < replicas && seeders > 0 && room > 0; q++) {
        if (!host[q] || step[q] == newest)
            continue;
        /* the next seeder, round robin */
        while (!(host[next % replicas] && step[next % replicas] == newest))
            next++;
        seeded_by[q] = next % replicas + 1;
        next++;
        room--;
    }
    free(step);
    free(host);
}

wex_status wex__seed_decide(wex_job *job, const char *prefix,
                            const uint64_t *absent, uint64_t absent_count,
                            double timeout)
{
    uint64_t replicas, *seeded_by = job->members.seeded_by;
    char key[160];
    void *value = NULL;
    size_t len = 0;
    wex_status st;

    if (!seeding(job))
        return WEX_OK;
    replicas = replica_count(job);
    memset(seeded_by, 0, replicas * sizeof(*seeded_by));
    snprintf(key, sizeof(key), "%sseed", prefix);
    if (job->side == WEX_SIDE_SOURCE && job->rank == 0) {
        decide(job, prefix, absent, absent_count, seeded_by);
        return wex__store_set(job->rendezvous.store, key, seeded_by,
                              replicas * sizeof(*seeded_by));
    }
    st = wex__store_get(job->rendezvous.store, key, timeout, &value, &len);
    if (st == WEX_OK && len == replicas * sizeof(*seeded_by))
        memcpy(seeded_by, value, len);
    else if (st == WEX_OK)
        st = wex__error(WEX_ERR_PEER,
                        "%s: %zu bytes, expected one seeder per "
                        "replica (%llu)",
                        key, len, (unsigned long long)replicas);
    free(value);
    return st == WEX_OK ? WEX_OK
                        : wex__error_prefix(st, "who seeds whom this step");
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

wex_status wex__seed_plan_around(const wex_job *job, const uint64_t *absent,
                                 uint64_t absent_count, uint64_t **out_p,
                                 uint64_t *count_p)
{
    uint64_t per = job->members.replica_ranks, n = absent_count, *out;
    uint64_t replicas = seeding(job) ? replica_count(job) : 0;

    for (uint64_t q = 0; q < replicas; q++)
        n += job->members.seeded_by[q] ? per : 0;
    *out_p = NULL;
    *count_p = 0;
    if (n == 0)
        return WEX_OK;
    if ((out = malloc(n * sizeof(*out))) == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    memcpy(out, absent, absent_count * sizeof(*out));
    n = absent_count;
    for (uint64_t q = 0; q < replicas; q++)
        for (uint64_t k = 0; job->members.seeded_by[q] && k < per; k++)
            out[n++] = q * per + k;
    qsort(out, n, sizeof(*out), cmp_u64);
    *out_p = out;
    *count_p = n;
    return WEX_OK;
}

int wex__seed_is_mine(const wex_job *job)
{
    return seeding(job) && job->side == WEX_SIDE_DESTINATION &&
           job->members.seeded_by[job->rank / job->members.replica_ranks] != 0;
}

/* ---- the seeded replica ------------------------------------------------- */

/* The seeder's digests of rank `job->rank`'s tensors checked against
 * what landed; 0 when they match. */
static int check_copy(wex_job *job, const char *prefix, int verify,
                      double timeout, char *why, size_t cap)
{
    uint64_t per = job->members.replica_ranks;
    uint64_t seeder = job->members.seeded_by[job->rank / per] - 1;
    size_t n = job->layout->tensor_count, len = 0, bad = 0;
    unsigned char *theirs = NULL;
    const char *failed;
    char key[160];
    wex_status st;

    key_of(key, sizeof(key), prefix, "seed/done/", job->rank);
    st = wex__store_get(job->rendezvous.store, key, timeout, (void **)&theirs,
                        &len);
    if (st != WEX_OK) {
        snprintf(why, cap, "waiting for destination rank %llu's copy: %s",
                 (unsigned long long)(seeder * per + job->rank % per),
                 wex__last_error());
        return 1;
    }
    failed = wex__step_failure_reason(theirs, len, sizeof(uint64_t));
    if (failed != NULL || len != n * sizeof(uint64_t)) {
        snprintf(why, cap, "destination rank %llu could not copy into it: %s",
                 (unsigned long long)(seeder * per + job->rank % per),
                 failed != NULL ? failed : "a digest list of the wrong length");
        free(theirs);
        return 1;
    }
    for (size_t t = 0; verify && t < n; t++) {
        uint64_t digest;
        memcpy(&digest, theirs + t * 8, 8);
        bad += XXH3_64bits(job->bind[t].address, job->bind[t].bytes) != digest;
    }
    free(theirs);
    if (bad > 0)
        snprintf(why, cap,
                 "what destination rank %llu copied landed differently "
                 "(%zu tensors affected)",
                 (unsigned long long)(seeder * per + job->rank % per), bad);
    return bad > 0;
}

int wex__seed_receive(wex_job *job, const char *prefix, int verify,
                      double timeout, char *why, size_t cap)
{
    uint64_t per = job->members.replica_ranks, first = job->rank / per * per;
    char key[160], verdict[WEX__ERROR_MAX] = "ok", mine[WEX__ERROR_MAX];
    int failed = check_copy(job, prefix, verify, timeout, mine, sizeof(mine));

    if (failed)
        snprintf(verdict, sizeof(verdict), "fail:%.1000s", mine);
    key_of(key, sizeof(key), prefix, "seed/verdict/", job->rank);
    if (wex__store_set(job->rendezvous.store, key, verdict, strlen(verdict)) !=
        WEX_OK) {
        snprintf(why, cap, "posting the seed's verdict: %s", wex__last_error());
        return 1;
    }
    if (failed) {
        snprintf(why, cap, "seeding this replica: %s", mine);
        return 1;
    }
    /* The replica commits together or not at all. */
    for (uint64_t r = first; r < first + per; r++) {
        char *value = NULL;
        size_t len = 0;
        wex_status st;

        if (r == job->rank)
            continue;
        key_of(key, sizeof(key), prefix, "seed/verdict/", r);
        st = wex__store_get(job->rendezvous.store, key, timeout,
                            (void **)&value, &len);
        if (st != WEX_OK || strcmp(value, "ok") != 0) {
            snprintf(why, cap,
                     "seeding this replica: destination rank %llu: %s",
                     (unsigned long long)r,
                     st != WEX_OK ? wex__last_error() : value);
            free(value);
            return 1;
        }
        free(value);
    }
    job->members.replicas_committed++;
    return 0;
}

/* ---- the seeder ----------------------------------------------------------- */

static wex_status check(wex_job *job, wex_status st, const char *what)
{
    if (st == WEX_OK)
        return WEX_OK;
    if (wex__last_error()[0] == '\0')
        wex__error(st, "failed without a message");
    return wex__error_prefix(st, "transport %s: %s",
                             job->plan.job->transport.name, what);
}

/* The seeder's own context: it writes as source rank S + its own rank,
 * after the job's S source ranks, so a transport tells it from them. */
static wex_status open_ctx(wex_job *job, uint64_t peer)
{
    wex_transport_args args;

    if (job->dst.seed_ctx != NULL)
        return WEX_OK;
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.side = WEX_SIDE_SOURCE;
    args.rank = job->plan.src.ranks + job->rank;
    args.source_ranks = job->plan.src.ranks + job->plan.dst.ranks;
    args.destination_ranks = job->plan.dst.ranks;
    args.options = &job->transport.options;
    args.job_id = job->rendezvous.job_id;
    args.peer_ranks = &peer;
    args.peer_count = 1;
    wex__error_clear();
    return check(
        job,
        job->transport.ops->ctx_create(job->transport.plugin->plugin_state,
                                       &args, &job->dst.seed_ctx),
        "a context to seed from");
}

/* Copies every local tensor into destination rank `to`'s, which holds
 * the same ones (the same rank of another replica); the digests of what
 * it sent into `digests`. */
static wex_status copy_into(wex_job *job, uint64_t to, uint64_t epoch,
                            double timeout, uint64_t *digests)
{
    const wex_transport_ops *ops = job->transport.ops;
    size_t n = job->layout->tensor_count, attached = 0;
    wex_transport_peer **peer = calloc(n ? n : 1, sizeof(*peer));
    wex_status st = peer == NULL ? wex__error(WEX_ERR_NOMEM, "out of memory")
                                 : open_ctx(job, to);

    for (size_t t = 0; t < n && st == WEX_OK; t++, attached++) {
        unsigned char *blob = NULL;
        size_t len = 0;
        char key[96];

        snprintf(key, sizeof(key), "mem/%llu/%zu", (unsigned long long)to, t);
        st = wex__store_get(job->rendezvous.store, key, timeout, (void **)&blob,
                            &len);
        if (st == WEX_OK && len < WEX__MEM_HEADER)
            st = wex__error(WEX_ERR_INVALID, "%s: a %zu-byte memory key", key,
                            len);
        if (st == WEX_OK) {
            wex__error_clear();
            st = check(job,
                       ops->peer_attach(job->dst.seed_ctx, to,
                                        blob + WEX__MEM_HEADER,
                                        len - WEX__MEM_HEADER, &peer[t]),
                       "attaching the replica behind");
        }
        free(blob);
    }
    if (st == WEX_OK)
        st = wex__fence_write_through(job, job->dst.seed_ctx, epoch);
    for (size_t t = 0; t < n && st == WEX_OK; t++) {
        digests[t] = XXH3_64bits(job->bind[t].address, job->bind[t].bytes);
        wex__error_clear();
        if (job->bind[t].bytes > 0)
            st = check(job,
                       ops->put(job->dst.seed_ctx, peer[t], 0,
                                job->bind[t].address, job->bind[t].bytes),
                       job->layout->tensors[t].name);
    }
    if (st == WEX_OK) {
        wex__error_clear();
        st = check(job, ops->flush(job->dst.seed_ctx), "flush");
    }
    for (size_t t = 0; t < attached && peer != NULL; t++)
        if (peer[t] != NULL)
            ops->peer_detach(job->dst.seed_ctx, peer[t]);
    free(peer);
    return st;
}

void wex__seed_send(wex_job *job, uint64_t step, uint64_t number,
                    double timeout)
{
    uint64_t per = job->members.replica_ranks, mine, replicas;
    size_t n = job->layout->tensor_count;
    char prefix[96];

    if (!seeding(job) || job->side != WEX_SIDE_DESTINATION)
        return;
    mine = job->rank / per;
    replicas = replica_count(job);
    snprintf(prefix, sizeof(prefix), "step/%llu/%llu/",
             (unsigned long long)step, (unsigned long long)number);
    for (uint64_t q = 0; q < replicas; q++) {
        uint64_t to = q * per + job->rank % per;
        uint64_t *digests;
        double began = wex__now();
        char key[160];
        wex_status st;

        if (job->members.seeded_by[q] != mine + 1)
            continue;
        digests = calloc(n ? n : 1, sizeof(*digests));
        st = digests == NULL
                 ? wex__error(WEX_ERR_NOMEM, "out of memory")
                 : copy_into(job, to, wex__fence_epoch(step, number), timeout,
                             digests);
        key_of(key, sizeof(key), prefix, "seed/done/", to);
        if (st == WEX_OK) {
            WEX__INFO("destination rank %llu seeded destination rank %llu "
                      "with step %llu (%.3f s)",
                      (unsigned long long)job->rank, (unsigned long long)to,
                      (unsigned long long)step, wex__now() - began);
            wex__store_set(job->rendezvous.store, key, digests,
                           n * sizeof(*digests));
        } else {
            const char *why = wex__last_error();
            char *value = malloc(strlen(why) + 2);
            WEX__WARN("destination rank %llu could not seed destination "
                      "rank %llu: %s",
                      (unsigned long long)job->rank, (unsigned long long)to,
                      why);
            if (value != NULL)
                wex__store_set(job->rendezvous.store, key, value,
                               wex__step_failure(value, why, sizeof(uint64_t)));
            free(value);
        }
        free(digests);
    }
}

void wex__seed_close(wex_job *job)
{
    if (job->dst.seed_ctx != NULL)
        job->transport.ops->ctx_destroy(job->dst.seed_ctx);
    job->dst.seed_ctx = NULL;
}
