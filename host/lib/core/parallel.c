/* Work split over a few threads (parallel.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* sched_getaffinity */
#endif
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "parallel.h"

typedef struct shared {
    wex__parallel_fn fn;
    void *arg;
    size_t tasks;
    atomic_size_t next;
    atomic_int failed;
    char *why; /* the first failure's, said by the call that won `failed` */
    size_t cap;
} shared;

typedef struct worker {
    shared *s;
    unsigned index;
} worker;

static void *work(void *p)
{
    shared *s = ((worker *)p)->s;
    unsigned index = ((worker *)p)->index;

    for (;;) {
        char why[256];
        size_t k;
        int rc, none = 0;
        if (atomic_load(&s->failed) != 0)
            break;
        k = atomic_fetch_add(&s->next, 1);
        if (k >= s->tasks)
            break;
        why[0] = '\0';
        if ((rc = s->fn(s->arg, k, index, why, sizeof(why))) != 0 &&
            atomic_compare_exchange_strong(&s->failed, &none, rc) &&
            s->why != NULL)
            snprintf(s->why, s->cap, "%s", why);
    }
    return NULL;
}

int wex__parallel(size_t tasks, unsigned threads, wex__parallel_fn fn,
                  void *arg, char *why, size_t cap)
{
    shared s = {fn, arg, tasks, 0, 0, cap > 0 ? why : NULL, cap};
    pthread_t *helpers = NULL;
    worker *workers = NULL, self = {&s, 0};
    unsigned started = 0;

    if (s.why != NULL)
        s.why[0] = '\0';
    if (threads > tasks)
        threads = (unsigned)tasks;
    if (threads > 1) {
        helpers = malloc((threads - 1) * sizeof(*helpers));
        workers = malloc((threads - 1) * sizeof(*workers));
    }
    for (unsigned t = 0; helpers != NULL && workers != NULL && t + 1 < threads;
         t++) {
        workers[started] = (worker){&s, started + 1};
        if (pthread_create(&helpers[started], NULL, work, &workers[started]) ==
            0)
            started++;
    }
    work(&self);
    for (unsigned t = 0; t < started; t++)
        pthread_join(helpers[t], NULL);
    free(helpers);
    free(workers);
    return atomic_load(&s.failed);
}

unsigned wex__parallel_default(unsigned cap)
{
    cpu_set_t set;
    unsigned n = 1;

    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        n = (unsigned)CPU_COUNT(&set);
    if (n < 1)
        n = 1;
    return n < cap ? n : cap;
}
