/* This machine's memcpy bandwidth, the limit `wex run` reports its
 * throughput against: one thread (the figure a single copying rank can
 * reach), and two threads copying at once (what the memory system gives
 * two ranks, the most a sync on a small machine can hope for). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "run.h"
#include "tool_base.h"

#define MEMCPY_BYTES ((size_t)256 << 20)
#define MEMCPY_PASSES 5

typedef struct copier {
    char *a, *b;
    pthread_barrier_t *start;
} copier;

static void *copy_once(void *arg)
{
    copier *c = arg;

    if (c->start != NULL)
        pthread_barrier_wait(c->start);
    memcpy(c->b, c->a, MEMCPY_BYTES);
    c->a[0] = c->b[MEMCPY_BYTES - 1]; /* keep the copy observable */
    return NULL;
}

/* Best of several passes of `threads` threads each copying 256 MiB at
 * once; GB/s of all of them together, 0 when memory runs short. */
static double measure(int threads)
{
    copier c[2] = {{NULL, NULL, NULL}, {NULL, NULL, NULL}};
    pthread_barrier_t start;
    double best = 0;
    int ok = 1;

    for (int t = 0; t < threads; t++) {
        c[t].a = malloc(MEMCPY_BYTES);
        c[t].b = malloc(MEMCPY_BYTES);
        ok = ok && c[t].a != NULL && c[t].b != NULL;
        if (ok) {
            memset(c[t].a, 1, MEMCPY_BYTES);
            memset(c[t].b, 2, MEMCPY_BYTES);
        }
    }
    for (int pass = 0; ok && pass < MEMCPY_PASSES; pass++) {
        pthread_t other;
        double t0, dt;
        if (threads == 2) {
            pthread_barrier_init(&start, NULL, 2);
            c[0].start = c[1].start = &start;
            if (pthread_create(&other, NULL, copy_once, &c[1]) != 0) {
                pthread_barrier_destroy(&start);
                break;
            }
        }
        t0 = wex_tool_now();
        copy_once(&c[0]);
        if (threads == 2) {
            pthread_join(other, NULL);
            pthread_barrier_destroy(&start);
        }
        dt = wex_tool_now() - t0;
        if (dt > 0 && (double)threads * MEMCPY_BYTES / dt > best)
            best = (double)threads * MEMCPY_BYTES / dt;
    }
    for (int t = 0; t < threads; t++) {
        free(c[t].a);
        free(c[t].b);
    }
    return best / 1e9;
}

double run_memcpy_gbps(int threads)
{
    return measure(threads == 2 ? 2 : 1);
}
