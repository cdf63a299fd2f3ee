/* The steps of a group's encoding that every encoder of a source shares
 * (delta_encode.h). */
#include <stdint.h>
#include <string.h>
#include <xxhash.h>

#include "delta_move.h"
#include "digest_update.h"
#include "job.h"

/* A multiple of every element size, small enough to stay in L2. */
#define SLICE_BYTES (64u << 10)

/* Feeds `n` current bytes at `cur` against the snapshot at `snap` to the
 * encoder, a slice at a time, each digested right
 * after its scan, from cache. */
void wex__delta_feed(wex__delta_enc *e, const uint8_t *cur, uint8_t *snap,
                     uint64_t n, wex__digest *h)
{
    for (uint64_t at = 0; at < n; at += SLICE_BYTES) {
        uint64_t k = n - at < SLICE_BYTES ? n - at : SLICE_BYTES;
        wex__delta_enc_feed(e, cur + at, snap + at, k);
        if (h != NULL)
            wex__digest_add(h, cur + at, k);
    }
}

void wex__delta_encode_start(wex_job *job, wex__delta_enc *e,
                             const wex__delta_group *g, wex__digest *h)
{
    wex__job_source_delta *d = &job->src.delta;

    if (h != NULL)
        wex__digest_reset(h);
    wex__delta_enc_start(e, job->ops[g->first_op].dtype_size,
                         d->outbox + g->out_off, g->out_cap);
}

void wex__delta_settle(wex_job *job, wex__delta_group *g, int verify,
                       uint64_t digest, int64_t len, uint64_t changed,
                       uint64_t elems)
{
    wex__job_source_delta *d = &job->src.delta;

    g->payload_len = len;
    g->changed = changed;
    g->elems = elems;
    if (g->payload_len >= 0 &&
        ((double)g->changed >
             (double)g->elems * job->plan.job->delta_max_fraction ||
         g->fresh))
        g->payload_len = -1; /* goes whole */
    g->digest = verify ? digest : 0;
    g->payload_digest =
        verify && g->payload_len >= 0
            ? XXH3_64bits(d->outbox + g->out_off, (size_t)g->payload_len)
            : 0;
}

void wex__delta_encode_end(wex_job *job, wex__delta_enc *e, wex__delta_group *g,
                           wex__digest *h)
{
    int64_t len = wex__delta_enc_end(e);

    wex__delta_settle(job, g, h != NULL, h != NULL ? wex__digest_final(h) : 0,
                      len, e->changed, e->elems);
}
