/* The digests a destination's check takes of its operations' deltas in
 * host memory, on the rank's delta threads (delta_dest.h). */
#include <pthread.h>
#include <stdio.h>

#include "delta_dest.h"
#include "parallel.h"

typedef struct digest_work {
    wex_job *job;
    wex__delta_pending *pending;
    int verify;
    pthread_mutex_t lock;
    char *why; /* the first failure's */
    size_t cap;
} digest_work;

static int digest_one(void *arg, size_t k, unsigned worker)
{
    digest_work *w = arg;
    wex__job_destination_delta *d = &w->job->dst.delta;
    wex__delta_pending *p = &w->pending[k];
    wex__digest *h = !w->verify   ? NULL
                     : worker > 0 ? d->check_hashes[worker]
                                  : w->job->scratch.hash;
    char why[256];

    if (wex__delta_digest_host(
            w->job, &w->job->ops[p->op], p->payload, p->len, h,
            d->check_chunks + (size_t)worker * WEX__DELTA_CHUNK * 8, &p->digest,
            &p->changed, why, sizeof(why)) == 0)
        return 0;
    pthread_mutex_lock(&w->lock);
    if (w->why[0] == '\0')
        snprintf(w->why, w->cap, "%s", why);
    pthread_mutex_unlock(&w->lock);
    return 1;
}

int wex__delta_digest_pending(wex_job *job, wex__delta_pending *pending,
                              size_t count, int verify, char *why, size_t cap)
{
    digest_work w = {job, pending, verify, PTHREAD_MUTEX_INITIALIZER, why, cap};
    int rc;

    why[0] = '\0';
    rc = wex__parallel(count, job->dst.delta.threads, digest_one, &w);
    pthread_mutex_destroy(&w.lock);
    return rc != 0 ? -1 : 0;
}
