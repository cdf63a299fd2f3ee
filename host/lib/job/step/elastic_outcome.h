/*
 * A step with elastic destination replicas (docs/design.md, "Elastic
 * replicas"): the barrier names the destination ranks it left out; every
 * rank posts "absent" as their verdicts, so the verdicts' gather has one
 * for each; a replica commits when every one of its ranks says "ok", and
 * the sources' step succeeds when at least min_replicas replicas did.
 */
#ifndef WEX_HOST_ELASTIC_OUTCOME_H
#define WEX_HOST_ELASTIC_OUTCOME_H

#include "job.h"
#include "store.h"

#define WEX__VERDICT_ABSENT "absent"

/* Sources, before a step's barrier: "steps/latest" and
 * "steps/after/PREVIOUS" are `step`, for ranks that join (job_join.c). */
void wex__elastic_announce(wex_job *job, uint64_t step);
/* A try's barrier asks with the job's replica shape (not elastic: none);
 * what the try before left in `el` is freed. */
void wex__elastic_barrier(const wex_job *job, wex__store_elastic *el);
/* The barrier failed (the thread's error) for too few replicas: the
 * step's one line in `why`. */
void wex__elastic_too_few(const wex_job *job, uint64_t step, char *why,
                          size_t cap);
/* After the barrier: posts the left-out ranks' "absent" verdicts under
 * `prefix`; 1, with why, when this destination is one of them. */
int wex__elastic_left_out(wex_job *job, uint64_t step, const char *prefix,
                          const uint64_t *absent, uint64_t n, char *why,
                          size_t cap);
/* Posts "absent" under `prefix` ("step/S/T/verdict/") for each rank. */
wex_status wex__elastic_post_absent(wex_job *job, const char *prefix,
                                    const uint64_t *absent, uint64_t n);

enum {
    WEX__ELASTIC_OK,
    WEX__ELASTIC_RETRY,
    WEX__ELASTIC_FAILED,
    WEX__ELASTIC_SEED /* a seeded destination whose seeder committed */
};
/* The try's outcome for this rank from every destination's verdict
 * (v[0..dst.ranks)): a "retry:" anywhere (a source died: failover), or
 * a destination that died while a whole live replica failed, retries
 * the step; else a destination's replica commits or not (a seeded one
 * goes on to its seed when its seeder committed), and a source succeeds
 * when min_replicas replicas commit. Why not in `why`. */
int wex__elastic_outcome(wex_job *job, uint64_t step,
                         const wex__store_gathered *v, char *why, size_t cap);
/* After a step's last try: the replicas that took part in it become the
 * ones the next step's joined and left are counted against. */
void wex__elastic_settle(wex_job *job);

#endif /* WEX_HOST_ELASTIC_OUTCOME_H */
