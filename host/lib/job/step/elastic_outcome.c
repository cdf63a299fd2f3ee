/* A step's outcome with elastic destination replicas (elastic_outcome.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "elastic_outcome.h"
#include "elastic_seed.h"
#include "error.h"
#include "verdicts.h"

void wex__elastic_announce(wex_job *job, uint64_t step)
{
    char key[64];

    snprintf(key, sizeof(key), "steps/after/%llu",
             (unsigned long long)job->members.earlier_steps[1]);
    wex__store_set(job->rendezvous.store, key, &step, sizeof(step));
    wex__store_set(job->rendezvous.store, "steps/latest", &step, sizeof(step));
}

void wex__elastic_barrier(const wex_job *job, wex__store_elastic *el)
{
    free(el->absent);
    memset(el, 0, sizeof(*el));
    el->replica_ranks = job->members.replica_ranks;
    el->min_replicas = job->plan.job->elastic_min_replicas;
}

void wex__elastic_too_few(const wex_job *job, uint64_t step, char *why,
                          size_t cap)
{
    snprintf(why, cap, "no replica committed step %llu; min_replicas %llu (%s)",
             (unsigned long long)step,
             (unsigned long long)job->plan.job->elastic_min_replicas,
             wex__last_error());
}

int wex__elastic_left_out(wex_job *job, uint64_t step, const char *prefix,
                          const uint64_t *absent, uint64_t n, char *why,
                          size_t cap)
{
    uint64_t per = job->members.replica_ranks, q;

    if (n == 0)
        return 0;
    wex__elastic_post_absent(job, prefix, absent, n);
    if (job->side != WEX_SIDE_DESTINATION ||
        !wex__elastic_is_absent(absent, n, job->rank))
        return 0;
    q = job->rank / per;
    snprintf(why, cap,
             "step %llu went on without this replica (destination ranks "
             "%llu-%llu), which was not whole at its barrier; nothing was "
             "written: sync a later step",
             (unsigned long long)step, (unsigned long long)(q * per),
             (unsigned long long)(q * per + per - 1));
    return 1;
}

wex_status wex__elastic_post_absent(wex_job *job, const char *prefix,
                                    const uint64_t *absent, uint64_t n)
{
    wex_status st = WEX_OK;

    for (uint64_t i = 0; i < n && st == WEX_OK; i++) {
        char key[160];
        snprintf(key, sizeof(key), "%s%llu", prefix,
                 (unsigned long long)absent[i]);
        st = wex__store_set(job->rendezvous.store, key, WEX__VERDICT_ABSENT,
                            strlen(WEX__VERDICT_ABSENT));
    }
    return st;
}

static int is(const wex__store_gathered *v, const char *what)
{
    return v->present && strcmp(v->value, what) == 0;
}

int wex__elastic_outcome(wex_job *job, uint64_t step,
                         const wex__store_gathered *v, char *why, size_t cap)
{
    wex__job_members *m = &job->members;
    uint64_t per = m->replica_ranks, replicas = job->plan.dst.ranks / per;
    uint64_t least = job->plan.job->elastic_min_replicas, mine = 0;
    int mine_ok = 0, mine_seeded = 0;

    int retry = 0, died = 0, live_failed = 0;

    m->replicas_present = m->replicas_committed = m->replicas_seeded = 0;
    for (uint64_t d = 0; d < job->plan.dst.ranks; d++)
        retry |= v[d].present && strncmp(v[d].value, "retry:", 6) == 0;
    for (uint64_t q = 0; q < replicas; q++) {
        int here = 1, ok = 1, dead = 0, seeded = 1;
        for (uint64_t k = 0; k < per; k++) {
            here &= !is(&v[q * per + k], WEX__VERDICT_ABSENT);
            ok &= is(&v[q * per + k], "ok");
            seeded &= is(&v[q * per + k], WEX__VERDICT_SEED);
            dead |= !v[q * per + k].present;
        }
        m->here[q] = (uint8_t)here;
        m->replicas_present += (uint64_t)here;
        m->replicas_seeded += (uint64_t)seeded;
        m->replicas_committed += (uint64_t)ok;
        died |= dead;
        live_failed |= here && !dead && !ok && !seeded;
        if (job->side == WEX_SIDE_DESTINATION && q == job->rank / per)
            mine = q, mine_ok = ok, mine_seeded = seeded;
    }
    /* A source died (failover), or a destination died where a source
     * could not finish writing the others (a transport whose flush fails
     * with a dead peer): the next try leaves the dead out. */
    if (retry || (died && live_failed)) {
        wex__step_tell_verdicts(v, job->plan.dst.ranks, 0, why, cap);
        return WEX__ELASTIC_RETRY;
    }
    if (job->side == WEX_SIDE_DESTINATION && mine_seeded) {
        /* its seeder must have committed the step it copies */
        uint64_t from = m->seeded_by[mine] - 1;
        int ok = 1;
        for (uint64_t k = 0; k < per; k++)
            ok &= is(&v[from * per + k], "ok");
        if (ok)
            return WEX__ELASTIC_SEED;
        {
            size_t used = (size_t)snprintf(
                why, cap,
                "the replica that was to seed this one (destination "
                "ranks %llu-%llu) did not commit step %llu",
                (unsigned long long)(from * per),
                (unsigned long long)(from * per + per - 1),
                (unsigned long long)step);
            if (used + 2 < cap) {
                snprintf(why + used, cap - used, ": ");
                wex__step_tell_verdicts(v + from * per, per, from * per,
                                        why + used + 2, cap - used - 2);
            }
        }
        return WEX__ELASTIC_FAILED;
    }
    if (job->side == WEX_SIDE_DESTINATION) {
        if (mine_ok)
            return WEX__ELASTIC_OK;
        wex__step_tell_verdicts(v + mine * per, per, mine * per, why, cap);
        return WEX__ELASTIC_FAILED;
    }
    if (m->replicas_committed >= least)
        return WEX__ELASTIC_OK;
    {
        size_t used;
        if (m->replicas_committed == 0)
            used = (size_t)snprintf(why, cap,
                                    "no replica committed step %llu; "
                                    "min_replicas %llu",
                                    (unsigned long long)step,
                                    (unsigned long long)least);
        else
            used = (size_t)snprintf(
                why, cap,
                "%llu replica%s committed step %llu, fewer than "
                "min_replicas %llu",
                (unsigned long long)m->replicas_committed,
                m->replicas_committed == 1 ? "" : "s", (unsigned long long)step,
                (unsigned long long)least);
        if (used + 2 < cap && m->replicas_present > 0) {
            snprintf(why + used, cap - used, ": ");
            wex__step_tell_verdicts(v, job->plan.dst.ranks, 0, why + used + 2,
                                    cap - used - 2);
        }
    }
    return WEX__ELASTIC_FAILED;
}

void wex__elastic_settle(wex_job *job)
{
    wex__job_members *m = &job->members;
    uint64_t replicas;

    if (m->replica_ranks == 0)
        return;
    replicas = job->plan.dst.ranks / m->replica_ranks;
    m->replicas_joined = m->replicas_left = 0;
    for (uint64_t q = 0; q < replicas; q++) {
        m->replicas_joined += m->here[q] && !m->took_part[q];
        m->replicas_left += !m->here[q] && m->took_part[q];
        m->took_part[q] = m->here[q];
    }
}
