/* `wex run --rebalance-every N`: a destination moves its experts as
 * EPLB does between steps, so the oracle checks every physical slot
 * under placements that change while the job runs. */
#include <stdlib.h>

#include "run.h"
#include "tool_base.h"
#include "tool_job.h"

/* splitmix64: a seeded stream, the same in every process. */
static uint64_t next(uint64_t *state)
{
    uint64_t z = (*state += UINT64_C(0x9e3779b97f4a7c15));

    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

wex_status run_rebalance(wex_job *job, const run_args *a, uint64_t step)
{
    uint64_t layers, physical, experts;
    int32_t *map;
    wex_status st;

    if (a->rebalance_every == 0 || step == 1 ||
        (step - 1) % a->rebalance_every != 0)
        return WEX_OK;
    st = wex_tool_job_expert_slots(job, &layers, &physical, &experts);
    if (st != WEX_OK)
        return st;
    map = malloc(layers * physical * sizeof(*map) + 1);
    if (map == NULL)
        return wex_tool_error(WEX_ERR_NOMEM, "rebalance: out of memory");
    for (uint64_t l = 0; l < layers; l++) {
        int32_t *row = map + l * physical;
        uint64_t state = step * UINT64_C(1000003) + l;
        /* every logical expert in some slot, then the slots shuffled */
        for (uint64_t p = 0; p < physical; p++)
            row[p] = (int32_t)(p % experts);
        for (uint64_t p = physical - 1; p > 0; p--) {
            uint64_t q = next(&state) % (p + 1);
            int32_t t = row[p];
            row[p] = row[q];
            row[q] = t;
        }
    }
    st = wex_job_set_placement(job, layers, physical, map);
    free(map);
    return st;
}
