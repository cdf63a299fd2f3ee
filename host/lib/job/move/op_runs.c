/*
 * An operation's bytes as runs: the box it copies walked in row-major
 * order, contiguous in both its source and its destination tensor, and
 * the digest of what landed at the destination, taken over the same
 * walk so it matches the source's. What the executor, the delta steps
 * and the checks share.
 */
#include <xxhash.h>

#include "box_runs.h"
#include "delta_move.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "job.h"

void wex__op_runs(const wex_job *job, const wex__op *o, wex__box_runs *w)
{
    const wex__local_tensor *s =
        &job->plan.src.layouts[o->src_rank].tensors[o->src_tensor];
    const wex__local_tensor *d =
        &job->plan.dst.layouts[o->dst_rank].tensors[o->dst_tensor];
    wex__box_side src = {s->ndim, s->shape, o->src_off};
    wex__box_side dst = {d->ndim, d->shape, o->dst_off};

    wex__box_runs_init(w, o->ndim, o->extent, o->dtype_size, &src, &dst);
}

/* Whether op o's box is one run in its destination tensor (else its
 * source tensor), and where it starts there. */
static int one_run(const wex_job *job, const wex__op *o, int destination,
                   uint64_t *offset)
{
    const wex__local_tensor *t =
        destination
            ? &job->plan.dst.layouts[o->dst_rank].tensors[o->dst_tensor]
            : &job->plan.src.layouts[o->src_rank].tensors[o->src_tensor];
    wex__box_side side = {t->ndim, t->shape,
                          destination ? o->dst_off : o->src_off};
    wex__box_runs w;

    wex__box_runs_init1(&w, o->ndim, o->extent, o->dtype_size, &side);
    *offset = w.a_base;
    return w.outer == 0;
}

int wex__op_digest_on_device(wex_job *job, const wex__op *o, int destination,
                             uint64_t *offset)
{
    if (!one_run(job, o, destination, offset))
        return 0;
    if (wex__device_kernels_ready(job->device))
        return 1;
    wex__error_clear(); /* through staging then */
    return 0;
}

uint64_t wex__digest_landed(wex_job *job, const wex__op *o)
{
    const wex__binding *bound = &job->bind[o->dst_tensor];
    /* what landed: in the host copy of a CUDA tensor, when it has one */
    const unsigned char *base = bound->shadow ? bound->shadow : bound->address;
    int cuda = job->memory_kind != NULL &&
               job->memory_kind[o->dst_tensor] == WEX_MEMORY_CUDA &&
               bound->shadow == NULL;
    wex__digest *h = job->scratch.hash;
    wex_status st = WEX_OK;
    wex__box_runs w;
    uint64_t a, d = 0;

    /* The same walk as the source's, so the runs come in the same order;
     * only the destination offsets are used. */
    wex__op_runs(job, o, &w);
    /* one run of device memory: digested on the device, where the kernels
     * are (only the blocks' digests cross the bus) */
    if (cuda && wex__op_digest_on_device(job, o, 1, &a)) {
        st = wex__device_digest(job->device, base + a, o->bytes, &d);
        return st == WEX_OK ? d : ~(uint64_t)0x9e3779b97f4a7c15ull;
    }
    wex__digest_reset(h);
    while (st == WEX_OK && wex__box_runs_next(&w, &a, &d)) {
        if (cuda)
            st = wex__device_hash_run(job->device, h, base + d, w.run_bytes);
        else
            wex__digest_add(h, base + d, w.run_bytes);
    }
    if (st == WEX_OK && cuda)
        st = wex__device_hash_end(job->device, h);
    /* Unreadable device memory must not verify: perturb the digest. */
    return wex__digest_final(h) ^ (st == WEX_OK ? 0 : 0x9e3779b97f4a7c15ull);
}
