/*
 * How long a replica that joins a running job takes to be ready: from
 * wex_job_open to its first committed step, each rank its own process at
 * a real `wex store`. A source steps, replica 0 takes every step, and
 * after step 1 replica 1's ranks start: open (a plan share in
 * WEX_PLAN_SHARES, when set, is what they open from), take their memory
 * (wex_job_alloc), connect, and wex_job_join, which commits step 2 (from
 * the sources, or copied from replica 0 with "seed": "replicas" in the
 * job). tools/bench-join.sh runs it over the four combinations.
 *
 * usage: bench_join WEX JOB.json
 * prints, per joining rank: open, memory, connect and join seconds, and
 * their sum from open to commit, against its limit: the time one thread's
 * memcpy takes to copy the bytes the rank holds (measured in the same
 * run); then the source's bytes of step 2 (what the joiners took from the
 * sources).
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "bench-join"
#define STEPS 3

typedef struct timing {
    int32_t rank, rc;
    double open_s, memory_s, connect_s, join_s;
    uint64_t step, bytes, seeded;
    char msg[200];
} timing;

static int results[2]; /* ranks -> parent */
static int go[2];      /* parent -> source: the next step */

static double now(void)
{
    struct timespec t;

    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void tell(timing *t)
{
    if (write(results[1], t, sizeof(*t)) != (ssize_t)sizeof(*t))
        _exit(20);
}

static wex_job *open_job(const char *job_path, uint32_t side, uint64_t rank,
                         const char *address, timing *t)
{
    wex_job_options o = {sizeof(o), 0, address, TOKEN, NULL};
    wex_job *job = NULL;
    double t0 = now();

    if (wex_job_open(job_path, side, rank, &o, &job) != WEX_OK) {
        fprintf(stderr, "bench_join: open: %s\n", wex_last_error());
        _exit(10);
    }
    t->open_s = now() - t0;
    t0 = now();
    for (uint64_t i = 0; i < wex_job_tensor_count(job); i++) {
        void *mem;
        if (wex_job_alloc(job, i, &mem) != WEX_OK) {
            fprintf(stderr, "bench_join: alloc: %s\n", wex_last_error());
            _exit(11);
        }
    }
    t->memory_s = now() - t0;
    return job;
}

static int source(const char *job_path, const char *address)
{
    timing t = {.rank = -1};
    wex_job *job = open_job(job_path, WEX_SIDE_SOURCE, 0, address, &t);
    uint64_t step;

    if (wex_job_connect(job) != WEX_OK)
        return 12;
    while (read(go[0], &step, sizeof(step)) == (ssize_t)sizeof(step) &&
           step <= STEPS) {
        wex_sync_report r = {.struct_size = sizeof(r)};
        t.rc = wex_sync(job, step, &r);
        t.step = step;
        t.bytes = r.bytes;
        t.seeded = r.replicas_seeded;
        snprintf(t.msg, sizeof(t.msg), "%s", t.rc ? wex_last_error() : "");
        tell(&t);
    }
    wex_job_close(job);
    return 0;
}

/* Replica 0's ranks: every step. */
static int stays(const char *job_path, const char *address, uint64_t rank)
{
    timing t = {.rank = (int32_t)rank};
    wex_job *job = open_job(job_path, WEX_SIDE_DESTINATION, rank, address, &t);
    uint64_t step = 0;
    int bad = 0;

    if (wex_job_connect(job) != WEX_OK || wex_job_join(job, &step, NULL))
        bad = 1;
    for (step++; !bad && step <= STEPS; step++)
        bad = wex_sync(job, step, NULL) != WEX_OK;
    if (bad)
        fprintf(stderr, "bench_join: rank %llu: %s\n", (unsigned long long)rank,
                wex_last_error());
    wex_job_close(job);
    return bad;
}

/* Replica 1's ranks: open, connect, join, and say how long each took. */
static int joins(const char *job_path, const char *address, uint64_t rank)
{
    timing t = {.rank = (int32_t)rank};
    wex_job *job = open_job(job_path, WEX_SIDE_DESTINATION, rank, address, &t);
    wex_sync_report r = {.struct_size = sizeof(r)};
    double t0 = now();

    t.rc = wex_job_connect(job);
    t.connect_s = now() - t0;
    tell(&t); /* connected (step 0): the parent starts step 2 */
    t0 = now();
    if (t.rc == WEX_OK)
        t.rc = wex_job_join(job, &t.step, &r);
    t.join_s = now() - t0;
    t.bytes = r.bytes;
    t.seeded = r.seeded_bytes;
    snprintf(t.msg, sizeof(t.msg), "%s", t.rc ? wex_last_error() : "");
    tell(&t);
    if (t.rc == WEX_OK) /* on to the last step, as a replica does */
        for (uint64_t s = t.step + 1; s <= STEPS && t.rc == WEX_OK; s++)
            t.rc = wex_sync(job, s, NULL);
    wex_job_close(job);
    return t.rc != WEX_OK;
}

static timing await_rank(int32_t rank)
{
    static timing early[16];
    static size_t count;
    timing t;

    for (size_t i = 0; i < count; i++)
        if (early[i].rank == rank) {
            t = early[i];
            early[i] = early[--count];
            return t;
        }
    while (read(results[0], &t, sizeof(t)) == (ssize_t)sizeof(t)) {
        if (t.rank == rank)
            return t;
        if (count < 16)
            early[count++] = t;
    }
    memset(&t, 0, sizeof(t));
    t.rc = -1;
    snprintf(t.msg, sizeof(t.msg), "the result pipe closed");
    return t;
}

/* Single-thread memcpy bandwidth, bytes a second: the best of three
 * copies of 256 MiB (the pages touched first). */
static double memcpy_bandwidth(void)
{
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;

    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    for (int i = 0; i < 3; i++) {
        double t0 = now(), s;
        memcpy(b, a, n);
        s = now() - t0;
        if (s > 0 && n / s > best)
            best = (double)n / s;
        a[i] = b[n - 1 - (size_t)i]; /* keep the copies */
    }
    free(a);
    free(b);
    return best;
}

static int exit_code_of(pid_t pid)
{
    int status = 0;

    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static timing step_source(uint64_t step)
{
    if (write(go[1], &step, sizeof(step)) != (ssize_t)sizeof(step))
        EXPECT(0, "telling the source to sync step %llu",
               (unsigned long long)step);
    return await_rank(-1);
}

int main(int argc, char **argv)
{
    char address[300];
    pid_t store, src, d[4];
    uint64_t per = 2;
    double bandwidth;
    timing s;

    if (argc != 3) {
        fprintf(stderr, "usage: bench_join WEX JOB.json\n");
        return 2;
    }
    if (pipe(results) != 0 || pipe(go) != 0)
        return 2;
    bandwidth = memcpy_bandwidth();
    store = start_store(argv[1], TOKEN, address, sizeof(address));
    EXPECT(store > 0, "wex store started");
    if (store <= 0)
        return 1;
    if ((src = fork()) == 0)
        _exit(source(argv[2], address));
    for (uint64_t r = 0; r < per; r++)
        if ((d[r] = fork()) == 0)
            _exit(stays(argv[2], address, r));
    s = step_source(1);
    EXPECT(s.rc == WEX_OK, "step 1: %s", s.msg);
    for (uint64_t r = per; r < 2 * per; r++)
        if ((d[r] = fork()) == 0)
            _exit(joins(argv[2], address, r));
    /* A step's barrier waits for the ranks connected when it begins: the
     * joiners' join (from their connect to their commit) waits for the
     * step after 1, begun once both connected. */
    for (uint64_t r = per; r < 2 * per; r++) {
        timing t = await_rank((int32_t)r);
        EXPECT(t.rc == WEX_OK, "rank %llu connected: %s", (unsigned long long)r,
               t.msg);
    }
    s = step_source(2);
    EXPECT(s.rc == WEX_OK, "step 2: %s", s.msg);
    for (uint64_t r = per; r < 2 * per; r++) {
        timing t = await_rank((int32_t)r);
        EXPECT(t.rc == WEX_OK && t.step == 2, "rank %llu joined step %llu: %s",
               (unsigned long long)r, (unsigned long long)t.step, t.msg);
        double ready = t.open_s + t.memory_s + t.connect_s + t.join_s;
        double limit = bandwidth > 0 ? (double)t.bytes / bandwidth : 0;
        printf("rank %llu  open %.3f s  memory %.3f s  connect %.3f s  join "
               "%.3f s  ready %.3f s; memcpy of its %llu bytes %.3f s "
               "(%.1f GB/s): ratio %.1f (%s)\n",
               (unsigned long long)r, t.open_s, t.memory_s, t.connect_s,
               t.join_s, ready, (unsigned long long)t.bytes, limit,
               bandwidth / 1e9, limit > 0 ? ready / limit : 0,
               t.seeded ? "copied from a replica" : "from the sources");
    }
    printf("source    step 2: %llu bytes sent, %llu replica%s seeded\n",
           (unsigned long long)s.bytes, (unsigned long long)s.seeded,
           s.seeded == 1 ? "" : "s");
    s = step_source(3);
    EXPECT(s.rc == WEX_OK, "step 3: %s", s.msg);
    { /* past the last: the source closes, telling nothing */
        uint64_t past = STEPS + 1;
        if (write(go[1], &past, sizeof(past)) != (ssize_t)sizeof(past))
            EXPECT(0, "telling the source to close");
    }
    for (uint64_t r = 0; r < 2 * per; r++)
        EXPECT(exit_code_of(d[r]) == 0, "destination rank %llu",
               (unsigned long long)r);
    EXPECT(exit_code_of(src) == 0, "the source");
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
    return failures ? 1 : 0;
}
