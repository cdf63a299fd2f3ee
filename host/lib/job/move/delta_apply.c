/* A destination's apply at commit (delta_dest.h): every payload the
 * step's check queued, written into the live tensors on the rank's delta
 * threads, then, for CUDA tensors, on the device. */
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "delta_dest.h"
#include "delta_move.h"
#include "error.h"
#include "parallel.h"

unsigned wex__delta_threads(const wex_job *job)
{
    unsigned asked = job->plan.job->delta_threads;

    return asked > 0 ? asked : wex__parallel_default(WEX__DELTA_THREADS);
}

/* The apply's work: each entry's payload cut into pieces that threads
 * take one at a time (pieces write disjoint elements). */
typedef struct apply_task {
    size_t entry;
    wex__delta_piece piece;
} apply_task;

typedef struct apply_work {
    wex_job *job;
    apply_task *tasks;
} apply_work;

static int apply_task_run(void *arg, size_t k, unsigned worker, char *why,
                          size_t cap)
{
    apply_work *a = arg;
    wex_job *job = a->job;
    wex__job_destination_delta *d = &job->dst.delta;
    const apply_task *t = &a->tasks[k];
    const uint8_t *payload =
        d->inbox[d->apply_at[t->entry][0]] + d->apply_at[t->entry][1];

    (void)worker;
    return wex__delta_write_piece(job, &job->ops[d->apply[t->entry]], payload,
                                  &t->piece, why, cap);
}

/* The pieces of this try's entries: with one thread an entry each, with
 * more about two a thread of the step's payload bytes, no piece under
 * 256 KiB. NULL when out of memory. */
static apply_task *apply_tasks(wex_job *job, unsigned threads, size_t *count)
{
    wex__job_destination_delta *d = &job->dst.delta;
    uint64_t total = 0, share;
    size_t n = 0, cap = 0;
    apply_task *tasks;

    for (size_t e = 0; e < d->apply_count; e++)
        total += d->apply_at[e][2];
    share = total / (2 * (uint64_t)threads);
    if (share < ((uint64_t)256 << 10))
        share = (uint64_t)256 << 10;
    for (size_t e = 0; e < d->apply_count; e++) {
        uint64_t want = threads > 1 ? d->apply_at[e][2] / share + 1 : 1;
        cap += want < 64 ? want : 64;
    }
    /* (a tensor on the device only is applied there alone) */
    tasks = malloc((cap + 1) * sizeof(*tasks));
    if (tasks == NULL)
        return NULL;
    for (size_t e = 0; e < d->apply_count; e++) {
        const wex__op *o = &job->ops[d->apply[e]];
        uint64_t want = threads > 1 ? d->apply_at[e][2] / share + 1 : 1;
        wex__delta_piece pieces[64];
        if (wex__delta_on_device(job, o->dst_tensor))
            continue;
        size_t got = wex__delta_cut(
            d->inbox[d->apply_at[e][0]] + d->apply_at[e][1],
            (size_t)d->apply_at[e][2], o->dtype_size, o->bytes / o->dtype_size,
            want < 64 ? (size_t)want : 64, pieces);
        for (size_t k = 0; k < got; k++)
            tasks[n++] = (apply_task){e, pieces[k]};
    }
    *count = n;
    return tasks;
}

wex_status wex__delta_apply(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;
    double t0 = wex__now();
    unsigned threads = d->threads > 0 ? d->threads : 1;
    apply_work a = {job, NULL};
    char why[256];
    size_t count = 0;
    wex_status st;
    int rc;

    if (d->apply_count > 0 &&
        (a.tasks = apply_tasks(job, threads, &count)) == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    rc = wex__parallel(count, threads, apply_task_run, &a, why, sizeof(why));
    free(a.tasks);
    /* checked at the step's verdict: it decodes */
    if (rc != 0)
        return wex__error(WEX_ERR_INTERNAL,
                          "applying a delta that was checked: %s", why);
    st = wex__delta_apply_device(job);
    d->apply_seconds = wex__now() - t0;
    d->apply_count = 0;
    return st;
}
