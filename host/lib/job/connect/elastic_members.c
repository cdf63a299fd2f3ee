/*
 * Elastic destination replicas (docs/design.md, "Elastic replicas"): a
 * job whose destination says "elastic" takes its replicas as they come.
 * A replica is `replica_ranks` consecutive destination ranks (the
 * serving engines number dp outermost); each step's barrier says which
 * destination ranks it left out, and a source plans its operations
 * without them, attaching a replica's memory only once it takes part.
 */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "job.h"

wex_status wex__elastic_setup(wex_job *job)
{
    uint64_t replicas = job->plan.job->destination_replicas;
    uint64_t ranks = job->plan.dst.ranks;

    job->members.replica_ranks = 0;
    if (job->plan.job->elastic_min_replicas == 0)
        return WEX_OK;
    if (replicas == 0 || ranks % replicas != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /destination/elastic: the destination's %llu "
                          "ranks are not %llu replicas of equal size",
                          job->plan.job->path, (unsigned long long)ranks,
                          (unsigned long long)replicas);
    job->members.replica_ranks = ranks / replicas;
    free(job->members.took_part);
    free(job->members.here);
    free(job->members.seeded_by);
    job->members.took_part = calloc(replicas, 1);
    job->members.here = calloc(replicas, 1);
    job->members.seeded_by = calloc(replicas, sizeof(uint64_t));
    if (job->members.took_part == NULL || job->members.here == NULL ||
        job->members.seeded_by == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    /* a source attaches a replica once it takes part: plan at the first
     * step's barrier */
    if (job->side == WEX_SIDE_SOURCE)
        job->members.absent_count = UINT64_MAX;
    return WEX_OK;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

int wex__elastic_is_absent(const uint64_t *absent, uint64_t n, uint64_t rank)
{
    return n > 0 && bsearch(&rank, absent, n, sizeof(*absent), cmp_u64) != NULL;
}

void wex__elastic_drop_absent(wex_plan_builder *b, const uint64_t *absent,
                              uint64_t absent_count)
{
    size_t kept = 0;

    for (size_t i = 0; i < b->count; i++)
        if (!wex__elastic_is_absent(absent, absent_count, b->ops[i].dst_rank))
            b->ops[kept++] = b->ops[i];
    b->count = kept;
}
