/*
 * wex run with checkpoints: --from-checkpoint DIR has the sources read
 * DIR instead of synthetic weights and every destination check what it
 * holds against it; --save OUT has the destination ranks write what they
 * hold to OUT after the last step.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "checkpoint_check.h"
#include "error.h"
#include "run.h"
#include "synth_weights.h"

/* Every rank of `side` holds each tensor in the checkpoint's dtype (to
 * read a checkpoint), or in one it can be saved from (`saving`). */
static wex_status checkpoint_dtypes(const wex__side *side, const char *what,
                                    int saving)
{
    for (uint64_t r = 0; r < side->ranks; r++) {
        const wex__rank_layout *l = &side->layouts[r];
        for (size_t k = 0; k < l->piece_count; k++) {
            const wex__piece *p = &l->pieces[k];
            const wex__tensor *c = &side->model->tensors[p->canonical];
            const wex__local_tensor *t = &l->tensors[p->tensor];
            if (saving ? !wex__ckpt_savable(t->dtype, c->dtype)
                       : t->dtype != c->dtype)
                return wex__error(WEX_ERR_INVALID, "%s: %s rank %llu holds "
                                  "%s as %s, the checkpoint stores %s",
                                  what, side->what, (unsigned long long)r,
                                  c->name, wex_dtype_name(t->dtype),
                                  wex_dtype_name(c->dtype));
        }
    }
    return WEX_OK;
}

wex_status run_check_checkpoint(launch *l, const run_args *a)
{
    wex__checkpoint ck;
    wex_status st;

    if (a->from_checkpoint != NULL) {
        if (strcmp(l->plan.job->source.name, "hf") != 0)
            return wex__error(WEX_ERR_INVALID, "--from-checkpoint: the job's "
                              "source engine is %s; a checkpoint is read as "
                              "engine hf's layout (\"source\": {\"engine\": "
                              "\"hf\"})", l->plan.job->source.name);
        st = checkpoint_dtypes(&l->plan.src, "--from-checkpoint", 0);
        if (st != WEX_OK)
            return st;
        st = wex__checkpoint_open(a->from_checkpoint, l->plan.src_model, NULL,
                                  NULL, &ck);
        if (st != WEX_OK)
            return st;
        wex__checkpoint_close(&ck);
    }
    if (a->save != NULL) {
        st = checkpoint_dtypes(&l->plan.dst, "--save", 1);
        if (st == WEX_OK)
            st = wex__ckpt_target_free(a->save);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

wex_status run_worker_checkpoint_open(wex_job *job, const run_args *a,
                                      wex__checkpoint **ck_p)
{
    wex_status st;

    *ck_p = NULL;
    if (a->from_checkpoint == NULL)
        return WEX_OK;
    if (job->side == WEX_SIDE_SOURCE)
        return wex_job_bind_checkpoint(job, a->from_checkpoint);
    *ck_p = calloc(1, sizeof(**ck_p));
    if (*ck_p == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    st = wex__checkpoint_open(a->from_checkpoint, job->mine->model, NULL, NULL,
                              *ck_p);
    if (st != WEX_OK) {
        free(*ck_p);
        *ck_p = NULL;
    }
    return st;
}

uint64_t run_worker_mismatches(const wex_job *job, const wex__checkpoint *ck,
                               uint64_t step)
{
    return ck != NULL ? wex__checkpoint_mismatches(job, ck)
                      : wex__synth_check(job, step);
}

void run_worker_checkpoint_close(wex__checkpoint *ck)
{
    if (ck != NULL)
        wex__checkpoint_close(ck);
    free(ck);
}
