/* Running this rank's operations: contiguous runs of each box go
 * straight from the source's live buffer into the destination's through
 * the transport, digested on the way when the job verifies. */
#include <xxhash.h>

#include "box_runs.h"
#include "error.h"
#include "runtime.h"

static void op_sides(const wex_job *job, const wex__op *o, wex__box_side *src,
                     wex__box_side *dst)
{
    const wex__local_tensor *s =
        &job->plan.src.layouts[o->src_rank].tensors[o->src_tensor];
    const wex__local_tensor *d =
        &job->plan.dst.layouts[o->dst_rank].tensors[o->dst_tensor];

    src->ndim = s->ndim;
    src->shape = s->shape;
    src->offset = o->src_off;
    dst->ndim = d->ndim;
    dst->shape = d->shape;
    dst->offset = o->dst_off;
}

wex_status wex__execute_ops(wex_job *job, uint64_t *digests)
{
    XXH3_state_t *h = digests ? job->hash : NULL;
    wex_status st = WEX_OK;

    for (size_t i = 0; i < job->op_count && st == WEX_OK; i++) {
        const wex__op *o = &job->ops[i];
        const unsigned char *base = job->bind[o->src_tensor].address;
        wex__box_side src, dst;
        wex__box_runs w;
        uint64_t a, b;

        op_sides(job, o, &src, &dst);
        wex__box_runs_init(&w, o->ndim, o->extent, o->dtype_size, &src, &dst);
        if (h != NULL)
            XXH3_64bits_reset(h);
        while (st == WEX_OK && wex__box_runs_next(&w, &a, &b)) {
            st = job->tops->put(job->tctx, job->op_peer[i], b, base + a,
                                w.run_bytes);
            if (h != NULL)
                XXH3_64bits_update(h, base + a, w.run_bytes);
        }
        if (h != NULL)
            digests[i] = XXH3_64bits_digest(h);
    }
    if (st == WEX_OK)
        st = job->tops->flush(job->tctx);
    return st;
}

uint64_t wex__digest_landed(wex_job *job, const wex__op *o)
{
    const unsigned char *base = job->bind[o->dst_tensor].address;
    XXH3_state_t *h = job->hash;
    wex__box_side src, dst;
    wex__box_runs w;
    uint64_t a, d = 0;

    op_sides(job, o, &src, &dst);
    /* The same walk as the source's, so the runs come in the same order;
     * only the destination offsets are used. */
    wex__box_runs_init(&w, o->ndim, o->extent, o->dtype_size, &src, &dst);
    XXH3_64bits_reset(h);
    while (wex__box_runs_next(&w, &a, &d))
        XXH3_64bits_update(h, base + d, w.run_bytes);
    return XXH3_64bits_digest(h);
}
