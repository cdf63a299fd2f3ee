/* Checkpoints in the engine API: a source rank bound to a checkpoint's
 * mapped files (the page cache is its memory), and a side saving what it
 * holds as a Hugging Face checkpoint, all its ranks together. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "box_runs.h"
#include "checkpoint.h"
#include "error.h"
#include "quantize.h"
#include "job.h"

static const char *side_name(const wex_job *job)
{
    return job->side == WEX_SIDE_SOURCE ? "source" : "destination";
}

/* Local tensor i is exactly one canonical tensor, whole, in its
 * checkpoint dtype and shape (engine hf holding the checkpoint); the
 * canonical tensor's index, or -1. */
static int64_t whole_canonical(const wex_job *job, uint64_t i)
{
    const wex__rank_layout *l = job->layout;
    const wex__local_tensor *t = &l->tensors[i];
    const wex__piece *only = NULL;
    const wex__tensor *c;

    for (size_t k = 0; k < l->piece_count; k++)
        if (l->pieces[k].tensor == i) {
            if (only != NULL)
                return -1;
            only = &l->pieces[k];
        }
    if (only == NULL)
        return -1;
    c = &job->mine->model->tensors[only->canonical];
    if (only->transform != WEX_TRANSFORM_NONE || t->dtype != c->dtype ||
        t->ndim != c->ndim ||
        memcmp(t->shape, c->shape, c->ndim * sizeof(uint64_t)) != 0)
        return -1;
    for (uint32_t d = 0; d < c->ndim; d++)
        if (only->offset[d] != 0 || only->extent[d] != c->shape[d])
            return -1;
    return (int64_t)only->canonical;
}

static wex_status bind_checkpoint(wex_job *job, const char *dir)
{
    wex__checkpoint *ck;
    wex_status st;

    if (job == NULL || dir == NULL)
        return wex__error(WEX_ERR_INVALID, "wex_job_bind_checkpoint: no job "
                                           "or no directory");
    if (job->side != WEX_SIDE_SOURCE)
        return wex__error(WEX_ERR_INVALID,
                          "%s: a checkpoint is read as a "
                          "source; this rank is a destination",
                          dir);
    /* the model's tensors, which a plan share does not hold */
    if ((st = wex__job_complete_plan(job)) != WEX_OK)
        return st;
    for (uint64_t i = 0; i < job->layout->tensor_count; i++) {
        if (whole_canonical(job, i) < 0)
            return wex__error(WEX_ERR_INVALID,
                              "%s: local tensor %s is not "
                              "a whole checkpoint tensor: a checkpoint is "
                              "bound to engine hf's layout holding the "
                              "checkpoint's dtypes (this job's source engine "
                              "is %s)",
                              dir, job->layout->tensors[i].name,
                              job->plan.job->source.name);
        if (job->rendezvous.connected || job->bind[i].address != NULL)
            return wex__error(WEX_ERR_INVALID,
                              "%s: local tensor %s is "
                              "already bound",
                              dir, job->layout->tensors[i].name);
    }
    ck = calloc(1, sizeof(*ck));
    if (ck == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    st = wex__checkpoint_open(dir, job->mine->model, NULL, NULL, ck);
    if (st != WEX_OK) {
        free(ck);
        return st;
    }
    for (uint64_t i = 0; i < job->layout->tensor_count; i++) {
        uint64_t c = (uint64_t)whole_canonical(job, i);
        /* read-only mappings: a source only reads its memory */
        job->bind[i].address = (void *)wex__checkpoint_data(ck, c);
        job->bind[i].bytes = job->layout->tensors[i].bytes;
        job->memory_kind[i] = WEX_MEMORY_HOST;
    }
    job->src.checkpoint = ck;
    return WEX_OK;
}

void wex__job_checkpoint_close(wex_job *job)
{
    if (job->src.checkpoint == NULL)
        return;
    wex__checkpoint_close(job->src.checkpoint);
    free(job->src.checkpoint);
    job->src.checkpoint = NULL;
}

/* Piece k of this rank is written by a lower rank of the side too (the
 * same region of the same tensor): a replica's copy is left to it. */
static int lower_rank_holds(const wex_job *job, const wex__piece *p)
{
    const wex__side *s = job->mine;

    for (uint64_t i = s->canon_start[p->canonical];
         i < s->canon_start[p->canonical + 1]; i++) {
        const wex__piece_ref *r = &s->canon_refs[i];
        const wex__piece *q = &s->layouts[r->rank].pieces[r->piece];
        if (r->rank < job->rank &&
            memcmp(q->offset, p->offset, p->ndim * sizeof(uint64_t)) == 0 &&
            memcmp(q->extent, p->extent, p->ndim * sizeof(uint64_t)) == 0)
            return 1;
    }
    return 0;
}

static wex_status save_pieces(wex_job *job, const wex__ckpt_plan *plan,
                              const char *staging)
{
    const wex__rank_layout *l = job->layout;
    wex_status st = WEX_OK;

    for (size_t k = 0; st == WEX_OK && k < l->piece_count; k++) {
        const wex__piece *p = &l->pieces[k];
        const wex__local_tensor *t = &l->tensors[p->tensor];
        const wex__tensor *c = &job->mine->model->tensors[p->canonical];
        const unsigned char *base = job->bind[p->tensor].address;
        wex__box_runs w;
        uint64_t a, b;

        uint32_t lsize = wex_dtype_size(t->dtype);
        uint32_t csize = wex_dtype_size(c->dtype);

        if (lower_rank_holds(job, p))
            continue;
        wex__piece_runs_init(&w, l, job->mine->model, p);
        while (st == WEX_OK && wex__box_runs_next(&w, &a, &b)) {
            uint64_t n = w.run_bytes / lsize;
            if (t->dtype == c->dtype) {
                st = wex__ckpt_write(plan, staging, p->canonical, b, base + a,
                                     w.run_bytes);
                continue;
            }
            /* a float held in another float dtype: back to the
             * checkpoint's, a bounded chunk at a time */
            for (uint64_t done = 0; st == WEX_OK && done < n;) {
                unsigned char chunk[16384];
                uint64_t m = n - done < sizeof(chunk) / csize
                                 ? n - done
                                 : sizeof(chunk) / csize;
                wex__convert_floats(t->dtype, base + a + done * lsize, m,
                                    c->dtype, chunk);
                st = wex__ckpt_write(plan, staging, p->canonical,
                                     (b / lsize + done) * csize, chunk,
                                     m * csize);
                done += m;
            }
        }
    }
    return st;
}

/* What this rank can save: every tensor bound, in host memory, in the
 * checkpoint's dtypes. */
static wex_status savable(const wex_job *job)
{
    const wex__rank_layout *l = job->layout;

    for (uint64_t i = 0; i < l->tensor_count; i++) {
        if (job->bind[i].address == NULL)
            return wex__error(WEX_ERR_INVALID,
                              "save: local tensor %s is not "
                              "bound",
                              l->tensors[i].name);
        if (job->memory_kind[i] != WEX_MEMORY_HOST)
            return wex__error(WEX_ERR_UNSUPPORTED,
                              "save: local tensor %s is "
                              "in device memory; wex saves host memory",
                              l->tensors[i].name);
    }
    for (size_t k = 0; k < l->piece_count; k++) {
        const wex__piece *p = &l->pieces[k];
        const wex__tensor *c = &job->mine->model->tensors[p->canonical];
        if (!wex__ckpt_savable(l->tensors[p->tensor].dtype, c->dtype))
            return wex__error(WEX_ERR_UNSUPPORTED,
                              "save: local tensor %s "
                              "holds %s as %s, the checkpoint stores %s: wex "
                              "saves floats converted, not quantized",
                              l->tensors[p->tensor].name, c->name,
                              wex_dtype_name(l->tensors[p->tensor].dtype),
                              wex_dtype_name(c->dtype));
    }
    return WEX_OK;
}

static void post(wex_job *job, const char *key, wex_status st)
{
    char value[1024];

    snprintf(value, sizeof(value), "%s%s", st == WEX_OK ? "ok" : "!",
             st == WEX_OK ? "" : wex__last_error());
    (void)wex__store_set(job->rendezvous.store, key, value, strlen(value));
}

/* Waits for `key` and turns a posted failure into this rank's error. */
static wex_status await(wex_job *job, const char *key, const char *who)
{
    char *value = NULL;
    size_t len = 0;
    wex_status st =
        wex__store_get(job->rendezvous.store, key, job->plan.job->step_seconds,
                       (void **)&value, &len);

    if (st == WEX_OK && value[0] == '!')
        st = wex__error(WEX_ERR_PEER, "%s: %s", who, value + 1);
    free(value);
    return st;
}

static wex_status save(wex_job *job, const char *dir, uint64_t shard_bytes)
{
    uint64_t ranks, n;
    wex__ckpt_plan plan;
    char key[128], who[64], *staging;
    wex_status st;

    if (job == NULL || dir == NULL || dir[0] == '\0')
        return wex__error(WEX_ERR_INVALID, "wex_job_save: no job or no "
                                           "directory");
    if (job->side == WEX_SIDE_DESTINATION && job->dst.dirty)
        return wex__error(WEX_ERR_INVALID,
                          "save: destination rank %" PRIu64
                          " is dirty: a failed step wrote part of its "
                          "tensors, which may hold a mix of two steps (the "
                          "last committed is %" PRIu64 "); save after the "
                          "next committed step",
                          job->rank, job->dst.committed);
    if ((st = wex__job_complete_plan(job)) != WEX_OK)
        return st;
    ranks = job->mine->ranks;
    if (ranks > 1 && !job->rendezvous.connected)
        return wex__error(WEX_ERR_INVALID,
                          "save: the %s side's %" PRIu64
                          " ranks save together, through the rendezvous: "
                          "connect (or sync) first",
                          side_name(job), ranks);
    if ((st = wex__ckpt_plan_make(job->mine->model, shard_bytes, &plan)) !=
        WEX_OK)
        return st;
    n = ++job->saves;
    staging = wex__ckpt_staging_dir(
        dir, job->rendezvous.job_id ? job->rendezvous.job_id : "local");
    if (staging == NULL) {
        wex__ckpt_plan_free(&plan);
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    }
    /* rank 0 creates the files; every rank writes its pieces; rank 0
     * commits once all have, or removes everything */
    st = savable(job);
    if (job->rank == 0 && st == WEX_OK)
        st = wex__ckpt_create(&plan, dir, staging);
    if (ranks > 1) {
        snprintf(key, sizeof(key), "save/%s/%" PRIu64 "/created",
                 side_name(job), n);
        if (job->rank == 0)
            post(job, key, st);
        else if (st == WEX_OK)
            st = await(job, key, "save: rank 0 could not create the files");
    }
    if (st == WEX_OK)
        st = save_pieces(job, &plan, staging);
    if (ranks > 1 && job->rank != 0) {
        snprintf(key, sizeof(key), "save/%s/%" PRIu64 "/written/%" PRIu64,
                 side_name(job), n, job->rank);
        post(job, key, st);
    }
    for (uint64_t r = 1; job->rank == 0 && r < ranks; r++) {
        wex_status theirs;
        snprintf(key, sizeof(key), "save/%s/%" PRIu64 "/written/%" PRIu64,
                 side_name(job), n, r);
        snprintf(who, sizeof(who), "save: %s rank %" PRIu64, side_name(job), r);
        theirs = await(job, key, who);
        if (st == WEX_OK)
            st = theirs;
    }
    if (job->rank == 0)
        st = st == WEX_OK ? wex__ckpt_commit(&plan, dir, staging)
                          : (wex__ckpt_abort(&plan, staging), st);
    if (ranks > 1) {
        snprintf(key, sizeof(key), "save/%s/%" PRIu64 "/result", side_name(job),
                 n);
        if (job->rank == 0)
            post(job, key, st);
        else if (st == WEX_OK)
            st = await(job, key, "save: rank 0");
    }
    free(staging);
    wex__ckpt_plan_free(&plan);
    return st;
}

wex_status wex_job_bind_checkpoint(wex_job *job, const char *dir)
{
    wex_status st = wex__job_enter(job, "wex_job_bind_checkpoint");

    if (st != WEX_OK)
        return st;
    st = bind_checkpoint(job, dir);
    wex__job_leave(job);
    return st;
}

wex_status wex_job_save(wex_job *job, const char *dir, uint64_t shard_bytes)
{
    wex_status st = wex__job_enter(job, "wex_job_save");

    if (st != WEX_OK)
        return st;
    st = save(job, dir, shard_bytes);
    wex__job_leave(job);
    return st;
}
