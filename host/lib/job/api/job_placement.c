/* wex_job_set_placement: a destination's experts moved (connect/
 * placement.c does the work). */
#include "error.h"
#include "job.h"

wex_status wex_job_set_placement(wex_job *job, uint64_t layers,
                                 uint64_t physical, const int32_t *map)
{
    wex_status st = wex__job_enter(job, "wex_job_set_placement");

    if (st != WEX_OK)
        return st;
    st = wex__placement_set(job, layers, physical, map);
    wex__job_leave(job);
    return st;
}
