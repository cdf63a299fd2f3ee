/*
 * How long one rank takes to be ready: wex_job_open, from the call to a
 * plan it can replay and a transport context to replay it with, timed
 * REPEAT times (the job closed between). tools/bench-plan.sh runs it
 * with and without the rank's plan share (WEX_PLAN_SHARES).
 *
 * usage: bench_job_open JOB.json source|destination RANK [REPEAT]
 * prints: ready_ms min M median D max X over N opens
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wex/wex.h>

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    wex_job_options o;
    uint32_t side;
    int repeat = argc > 4 ? atoi(argv[4]) : 5;
    double *ms;

    if (argc < 4 || repeat < 1 ||
        (strcmp(argv[2], "source") != 0 &&
         strcmp(argv[2], "destination") != 0)) {
        fprintf(stderr, "usage: bench_job_open JOB.json source|destination "
                        "RANK [REPEAT]\n");
        return 2;
    }
    side =
        strcmp(argv[2], "source") == 0 ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION;
    ms = calloc((size_t)repeat, sizeof(*ms));
    if (ms == NULL)
        return 1;
    /* Nothing connects: any token and address do. */
    memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    o.rendezvous = "127.0.0.1:1";
    o.token = "bench-job-open";
    for (int i = 0; i < repeat; i++) {
        wex_job *job = NULL;
        double t0 = now();
        if (wex_job_open(argv[1], side, strtoull(argv[3], NULL, 10), &o,
                         &job) != WEX_OK) {
            fprintf(stderr, "bench_job_open: %s\n", wex_last_error());
            free(ms);
            return 1;
        }
        ms[i] = (now() - t0) * 1e3;
        wex_job_close(job);
    }
    qsort(ms, (size_t)repeat, sizeof(*ms), cmp_double);
    printf("ready_ms min %.1f median %.1f max %.1f over %d opens\n", ms[0],
           ms[repeat / 2], ms[repeat - 1], repeat);
    free(ms);
    return 0;
}
