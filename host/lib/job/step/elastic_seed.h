/*
 * Seeding from replicas (docs/design.md, "Elastic replicas"): with
 * "seed": "replicas", a replica that is behind (a joiner, one that missed
 * or failed a step) takes no bytes from the sources. The sources fill
 * the replicas that are up to date, and once one of them has committed
 * the step, each of its ranks copies its local tensors whole into the
 * same rank of the replica behind, destination to destination over the
 * job's transport; that replica checks them against the seeder's digests
 * and commits the step when all its ranks did.
 *
 * Keys, for step S and try T: step/S/T/held/R (a destination's committed
 * step and whether its tensors are host memory, before the barrier),
 * step/S/T/seed (who fills whom, from source rank 0), step/S/T/seed/done/R
 * (the seeder's digests of what it copied into rank R, or "!" and why),
 * step/S/T/seed/verdict/R ("ok" or "fail:why").
 */
#ifndef WEX_HOST_ELASTIC_SEED_H
#define WEX_HOST_ELASTIC_SEED_H

#include "job.h"

#define WEX__VERDICT_SEED "seed" /* a seeded rank's verdict on the sources */

/* Destinations, before a try's barrier: what this rank holds, under
 * `prefix` ("step/S/T/") "held/R". */
wex_status wex__seed_post_held(wex_job *job, const char *prefix);
/* After the barrier (which left out the destination ranks `absent`,
 * ascending): who fills whom this try, into members.seeded_by. Source
 * rank 0 decides from what the replicas present hold and posts it; every
 * other rank reads it. */
wex_status wex__seed_decide(wex_job *job, const char *prefix,
                            const uint64_t *absent, uint64_t absent_count,
                            double timeout);
/* `absent` and the ranks of the replicas seeded this try, ascending, in
 * a new array (*out_p; NULL with *count_p 0 when both are empty). */
wex_status wex__seed_plan_around(const wex_job *job, const uint64_t *absent,
                                 uint64_t absent_count, uint64_t **out_p,
                                 uint64_t *count_p);
/* Whether this destination's replica is seeded this try. */
int wex__seed_is_mine(const wex_job *job);
/* A seeded destination whose seeder committed: takes its copy, checks
 * it (with `verify`) and agrees with its replica's other ranks; 0 when
 * all did, else why in `why`. */
int wex__seed_receive(wex_job *job, const char *prefix, int verify,
                      double timeout, char *why, size_t cap);
/* A destination that committed try `number` of `step`: copies its
 * tensors into the same rank of each replica it seeds in that try. Failures are the seeded
 * replica's (it does not commit); this rank's step stands. */
void wex__seed_send(wex_job *job, uint64_t step, uint64_t number,
                    double timeout);
/* The transport context a seeder writes through (job close). */
void wex__seed_close(wex_job *job);

#endif /* WEX_HOST_ELASTIC_SEED_H */
