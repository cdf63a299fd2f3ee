/*
 * A job is one thread's at a time. Every call that changes a job takes
 * its lock without waiting: a second thread calling in while the first
 * is inside is told so at once (its call would otherwise interleave
 * store requests on the job's one connection). wex_job_close alone
 * waits for a running call to return before it frees the job.
 */
#include <stdio.h>

#include "error.h"
#include "job.h"

void wex__job_lock_init(wex_job *job)
{
    pthread_mutex_init(&job->lock.busy, NULL);
    job->lock.ready = 1;
}

wex_status wex__job_enter(wex_job *job, const char *call)
{
    if (job == NULL)
        return wex__error(WEX_ERR_INVALID, "%s: no job", call);
    if (pthread_mutex_trylock(&job->lock.busy) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: the job is in use by another "
                          "thread (a job is used by one thread at a time)",
                          call);
    if (job->lock.closing) {
        pthread_mutex_unlock(&job->lock.busy);
        return wex__error(WEX_ERR_INVALID, "%s: the job is being closed", call);
    }
    return WEX_OK;
}

void wex__job_leave(wex_job *job)
{
    pthread_mutex_unlock(&job->lock.busy);
}

void wex__job_lock_close(wex_job *job)
{
    if (!job->lock.ready)
        return;
    pthread_mutex_lock(&job->lock.busy);
    job->lock.closing = 1;
    pthread_mutex_unlock(&job->lock.busy);
    pthread_mutex_destroy(&job->lock.busy);
    job->lock.ready = 0;
}
