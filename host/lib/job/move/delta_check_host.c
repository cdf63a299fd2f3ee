/* The digests a destination's check takes of its operations' deltas in
 * host memory, on the rank's delta threads (delta_dest.h). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "delta_dest.h"
#include "parallel.h"

typedef struct digest_work {
    wex_job *job;
    wex__delta_pending *pending;
    wex__digest **hashes; /* a worker's; NULL when not verifying */
    uint8_t *chunks;      /* a worker's chunk scratch each */
    pthread_mutex_t lock;
    char *why; /* the first failure's */
    size_t cap;
} digest_work;

static int digest_one(void *arg, size_t k, unsigned worker)
{
    digest_work *w = arg;
    wex__delta_pending *p = &w->pending[k];
    char why[256];

    if (wex__delta_digest_host(w->job, &w->job->ops[p->op], p->payload, p->len,
                               w->hashes != NULL ? w->hashes[worker] : NULL,
                               w->chunks +
                                   (size_t)worker * WEX__DELTA_CHUNK * 8,
                               &p->digest, &p->changed, why, sizeof(why)) == 0)
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
    unsigned threads = job->dst.delta.threads > 0 ? job->dst.delta.threads : 1;
    digest_work w = {job, pending, NULL, NULL, PTHREAD_MUTEX_INITIALIZER,
                     why, cap};
    unsigned made = 0;
    int rc = -1;

    if (count == 0)
        return 0;
    if (threads > count)
        threads = (unsigned)count;
    why[0] = '\0';
    w.chunks = malloc((size_t)threads * WEX__DELTA_CHUNK * 8);
    if (verify && (w.hashes = calloc(threads, sizeof(*w.hashes))) != NULL)
        while (made < threads && (w.hashes[made] = wex__digest_create()))
            made++;
    if (w.chunks == NULL || (verify && made < threads))
        snprintf(why, cap, "checking deltas: out of memory");
    else
        rc = wex__parallel(count, threads, digest_one, &w) != 0 ? -1 : 0;
    while (made > 0)
        wex__digest_free(w.hashes[--made]);
    free(w.hashes);
    free(w.chunks);
    pthread_mutex_destroy(&w.lock);
    return rc;
}
