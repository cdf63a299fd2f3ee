/* The digests a destination's check takes of its operations' deltas in
 * host memory, on the rank's delta threads (delta_dest.h). */
#include "delta_dest.h"
#include "parallel.h"

typedef struct digest_work {
    wex_job *job;
    wex__delta_pending *pending;
    int verify;
} digest_work;

static int digest_one(void *arg, size_t k, unsigned worker, char *why,
                      size_t cap)
{
    digest_work *w = arg;
    wex__job_destination_delta *d = &w->job->dst.delta;
    wex__delta_pending *p = &w->pending[k];
    wex__digest *h = !w->verify   ? NULL
                     : worker > 0 ? d->check_hashes[worker]
                                  : w->job->scratch.hash;

    return wex__delta_digest_host(
        w->job, &w->job->ops[p->op], d->inbox[p->slot] + p->offset, p->len, h,
        d->check_chunks + (size_t)worker * WEX__DELTA_CHUNK * 8, &p->digest,
        &p->changed, why, cap);
}

int wex__delta_digest_pending(wex_job *job, wex__delta_pending *pending,
                              size_t count, int verify, char *why, size_t cap)
{
    digest_work w = {job, pending, verify};

    return wex__parallel(count, job->dst.delta.threads, digest_one, &w, why,
                         cap) != 0
               ? -1
               : 0;
}
