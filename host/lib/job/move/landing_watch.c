/* A destination watching its landing board (see landing.h): it digests
 * each operation as soon as its source's word says it has landed. */
#include <string.h>
#include <time.h>

#include "clock.h"
#include "landing.h"
#include "job.h"

/* How long a destination watches a board on which nothing moves before
 * it leaves the rest to the check after "done": long enough for a
 * source descheduled on a busy host, short against any timeout. */
#define WATCH_IDLE_SECONDS 0.1
/* Sleeps between looks at an idle board, doubling from the first to the
 * last: short enough that what landed meanwhile is still in cache. */
#define WATCH_NAP_FIRST_NS 50000L
#define WATCH_NAP_LAST_NS 800000L

static void nap(long ns)
{
    struct timespec ts = {0, ns};

    nanosleep(&ts, NULL);
}

void wex__landing_watch(wex_job *job, uint32_t tag)
{
    size_t left = job->op_count;
    double quiet_since = wex__now();
    long wait = WATCH_NAP_FIRST_NS;

    memset(job->dst.early, 0, job->op_count ? job->op_count : 1);
    memset(job->scratch.landed, 0,
           (job->peer_count + 1) * sizeof(*job->scratch.landed));
    if (job->dst.board == NULL)
        return;
    while (left > 0) {
        int moved = 0;

        for (size_t p = 0; p < job->peer_count; p++) {
            uint64_t count = wex__landing_count(job, p, tag);

            while (job->scratch.landed[p] < count) {
                size_t i = job->scratch.peer_ops[job->scratch.peer_first[p] +
                                                 job->scratch.landed[p]++];
                job->scratch.digests[i] = wex__digest_landed(job, &job->ops[i]);
                job->dst.early[i] = 1;
                left--;
                moved = 1;
            }
        }
        if (moved) {
            quiet_since = wex__now();
            wait = WATCH_NAP_FIRST_NS;
            continue;
        }
        if (wex__now() - quiet_since > WATCH_IDLE_SECONDS)
            break;
        nap(wait);
        if (wait < WATCH_NAP_LAST_NS)
            wait *= 2;
    }
}
