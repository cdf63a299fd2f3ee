/*
 * Elastic destination replicas between real processes at a real `wex
 * store` (docs/design.md, "Elastic replicas"). The test's parent starts
 * and stops ranks and tells the source when to sync each step, so the
 * timeline is the same every run:
 *
 * hf into four hf replicas (dp 4, one rank each), over shm and ucx:
 *   step 1-4  replicas 0, 1, 2, 3 join one a step (wex_job_join while
 *             the source is stepping): each receives its first step
 *             whole, the source's report counts one more replica a step
 *   step 5    replica 2 dies inside the step (stopped at its barrier,
 *             killed while the source writes): the ranks waiting at the
 *             rendezvous are told of the death, the step is tried again
 *             without its replica, the source's step succeeds and the
 *             three others commit
 *   step 6    without replica 2 (its death is seen at the barrier)
 *   step 7    replica 1 left after step 6 (wex_job_leave): two replicas
 *   step 8    replica 2 is started again and joins, three steps after it
 *             was killed
 *   step 9    every replica has closed its job: the source's step fails
 *             in one line, "no replica committed step 9; min_replicas 1"
 * After every step a destination commits, every byte it holds is the
 * source's byte of that step.
 *
 * hf into two vLLM TP2 replicas (dp 2, two ranks each), over shm:
 *   step 1    both replicas
 *   step 2    rank 3 is killed before the step: its replica misses
 *             the step (rank 2 is told it was left out, nothing written),
 *             replica 0 commits and the source's step succeeds
 *   step 3    rank 3 is started again; ranks 2 and 3 join and their
 *             replica takes the step whole: its ranks then hold what
 *             replica 0's ranks hold
 * and with rank 3 never started, rank 2's join gives up after
 * timeouts.join_seconds naming it, while replica 0 commits.
 *
 * "seed": "replicas", hf into two vLLM TP2 replicas, over shm and ucx
 * (with delta steps over shm):
 *   step 1    replica 0 joins: the source fills it (no replica to copy)
 *   step 2    replica 1 joins: replica 0 copies step 2 into it once it
 *             committed; the source sends one replica's bytes
 *   step 3    both up to date: the source fills both
 *   step 5    replica 1 left after step 3 and joins again at step 5,
 *             seeded again, while replica 0 took step 4 alone
 * after each step both replicas' ranks hold the same bytes. And with
 * min_replicas 2 over two hf replicas, replica 1 restarted after step 1
 * is filled by the source at step 2: seeding it would leave fewer than
 * min_replicas replicas filled by the sources.
 *
 *   test_elastic WEX_COMMAND
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "elastic-test"

static const char model_json[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 64,"
    " \"hidden_size\": 256, \"intermediate_size\": 512,"
    " \"num_attention_heads\": 4, \"num_hidden_layers\": 1,"
    " \"num_key_value_heads\": 2, \"rms_norm_eps\": 1e-06,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"vocab_size\": 1024}";

/* What a rank tells the parent, in one write (atomic: under PIPE_BUF). */
typedef struct event {
    int32_t who; /* -1: the source, else the destination rank */
    int32_t pid; /* the process that told it */
    int32_t kind;
    uint64_t step;
    int32_t rc;
    uint64_t replicas, committed, joined, left;
    uint64_t bytes, peers, seeded; /* the report's (seeded_bytes) */
    uint64_t hash;                 /* FNV-1a of what the destination holds */
    uint32_t attempts;
    char msg[256];
} event;

enum { CONNECTED = 1, FILLED, ABOUT, SYNCED, LEFT };

static int events[2];  /* every rank -> parent */
static int go_pipe[2]; /* parent -> source: the next step */

static void tell(event *e)
{
    e->pid = (int32_t)getpid();
    if (write(events[1], e, sizeof(*e)) != (ssize_t)sizeof(*e))
        _exit(20);
}

/* Events read while waiting for another, in arrival order. */
static event early[512];
static size_t early_count;

/* The next event of `kind` from process `pid` (0: the source). */
static event await_event(pid_t pid, int32_t kind)
{
    event e;

    for (size_t i = 0; i < early_count; i++)
        if ((pid ? early[i].pid == pid : early[i].who == -1) &&
            early[i].kind == kind) {
            e = early[i];
            memmove(&early[i], &early[i + 1],
                    (early_count - i - 1) * sizeof(*early));
            early_count--;
            return e;
        }
    for (;;) {
        if (read(events[0], &e, sizeof(e)) != (ssize_t)sizeof(e)) {
            memset(&e, 0, sizeof(e));
            e.rc = -1;
            snprintf(e.msg, sizeof(e.msg), "the event pipe closed");
            return e;
        }
        if ((pid ? e.pid == pid : e.who == -1) && e.kind == kind)
            return e;
        if (early_count < sizeof(early) / sizeof(*early))
            early[early_count++] = e;
    }
}

typedef struct rank_job {
    wex_job *job;
    uint8_t **mem;
    uint64_t *bytes;
    const char **names;
    uint64_t count;
} rank_job;

static rank_job open_rank(const char *text, uint32_t side, uint64_t rank,
                          const char *address)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    rank_job r;

    memset(&r, 0, sizeof(r));
    if (wex_job_open(text, side, rank, &opts, &r.job) != WEX_OK) {
        fprintf(stderr, "open: %s\n", wex_last_error());
        _exit(10);
    }
    r.count = wex_job_tensor_count(r.job);
    r.mem = calloc(r.count + 1, sizeof(*r.mem));
    r.bytes = calloc(r.count + 1, sizeof(*r.bytes));
    r.names = calloc(r.count + 1, sizeof(*r.names));
    for (uint64_t i = 0; i < r.count; i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(r.job, i, &t);
        r.bytes[i] = t.bytes;
        r.names[i] = t.name;
        if (wex_job_alloc(r.job, i, (void **)&r.mem[i]) != WEX_OK) {
            fprintf(stderr, "alloc: %s\n", wex_last_error());
            _exit(11);
        }
    }
    return r;
}

/* Every byte of every tensor is the oracle's for `step` (same-named
 * tensors on both sides: hf into hf). */
static int holds_step(const rank_job *r, uint64_t step)
{
    for (uint64_t i = 0; i < r->count; i++)
        for (uint64_t b = 0; b < r->bytes[i]; b++)
            if (r->mem[i][b] != expected(r->names[i], b, step))
                return 0;
    return 1;
}

static uint64_t content_hash(const rank_job *r)
{
    uint64_t h = 1469598103934665603ull;

    for (uint64_t i = 0; i < r->count; i++)
        for (uint64_t b = 0; b < r->bytes[i]; b++)
            h = (h ^ r->mem[i][b]) * 1099511628211ull;
    return h;
}

static void report_event(event *e, const wex_sync_report *rep, wex_status st)
{
    e->rc = st;
    e->replicas = rep->replicas;
    e->committed = rep->replicas_committed;
    e->joined = rep->replicas_joined;
    e->left = rep->replicas_left;
    e->attempts = rep->attempts;
    e->bytes = rep->bytes;
    e->peers = rep->peers;
    e->seeded = rep->seeded_bytes;
    snprintf(e->msg, sizeof(e->msg), "%s", st ? wex_last_error() : "");
}

/* ---- the source --------------------------------------------------------- */

static int source(const char *text, const char *address, uint64_t steps)
{
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, 0, address);
    uint64_t step;

    /* an elastic source waits for no destination to connect */
    if (wex_job_connect(r.job) != WEX_OK) {
        fprintf(stderr, "source: connect: %s\n", wex_last_error());
        return 12;
    }

    while (read(go_pipe[0], &step, sizeof(step)) == (ssize_t)sizeof(step) &&
           step <= steps) {
        wex_sync_report rep;
        event e = {.who = -1, .kind = SYNCED, .step = step};
        wex_status st;
        for (uint64_t i = 0; i < r.count; i++)
            for (uint64_t b = 0; b < r.bytes[i]; b++)
                r.mem[i][b] = expected(r.names[i], b, step);
        e.kind = FILLED;
        tell(&e);
        e.kind = SYNCED;
        memset(&rep, 0, sizeof(rep));
        rep.struct_size = sizeof(rep);
        st = wex_sync(r.job, step, &rep);
        report_event(&e, &rep, st);
        tell(&e);
    }
    wex_job_close(r.job);
    return 0;
}

/* ---- a destination ------------------------------------------------------ */

typedef struct plan {
    uint64_t last;   /* syncs through this step, then closes */
    uint64_t die_at; /* killed before syncing this step (0: never) */
    uint64_t leave;  /* leaves after this step (0: closes at `last`) */
    int check_bytes; /* hf: every byte against the oracle */
    int rejoin;      /* a missed step: join the next one */
} plan;

static int destination(const char *text, const char *address, uint64_t rank,
                       const plan *p)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, rank, address);
    event e = {.who = (int32_t)rank, .kind = CONNECTED};
    wex_sync_report rep;
    uint64_t step = 0;
    wex_status st;
    int bad = 0;

    if (wex_job_connect(r.job) != WEX_OK) {
        fprintf(stderr, "destination %llu: connect: %s\n",
                (unsigned long long)rank, wex_last_error());
        return 12;
    }
    tell(&e);
    for (;;) {
        memset(&rep, 0, sizeof(rep));
        rep.struct_size = sizeof(rep);
        if (step == 0) {
            st = wex_job_join(r.job, &step, &rep);
        } else {
            step++;
            if (step == p->die_at)
                raise(SIGKILL); /* killed between two steps */
            e.kind = ABOUT;     /* to sync `step` */
            e.step = step;
            tell(&e);
            st = wex_sync(r.job, step, &rep);
        }
        e.kind = SYNCED;
        e.step = step;
        report_event(&e, &rep, st);
        e.hash = st == WEX_OK ? content_hash(&r) : 0;
        tell(&e);
        if (st != WEX_OK && rep.missed && p->rejoin) {
            step = 0; /* join the next step its replica is whole at */
            continue;
        }
        if (st != WEX_OK) {
            fprintf(stderr, "destination %llu: step %llu: %s\n",
                    (unsigned long long)rank, (unsigned long long)step,
                    wex_last_error());
            bad++;
            break;
        }
        if (p->check_bytes && !holds_step(&r, step)) {
            fprintf(stderr,
                    "destination %llu: after step %llu it does not hold "
                    "the source's bytes\n",
                    (unsigned long long)rank, (unsigned long long)step);
            bad++;
        }
        if (step == p->leave) {
            st = wex_job_leave(r.job);
            e.kind = LEFT;
            e.rc = st;
            tell(&e);
            break;
        }
        if (step >= p->last)
            break;
    }
    wex_job_close(r.job);
    return bad;
}

/* ---- the parent --------------------------------------------------------- */

#define VLLM_TP2_DP2 "\"vllm\", \"parallel\": {\"tp\": 2, \"dp\": 2}"

/* An elastic job from hf into `destination` (its engine and parallel
 * config) over `transport`: min_replicas 1 unless `elastic` (the elastic
 * object's members) says otherwise, and `extra` (job members, each
 * followed by a comma) beside the rest. */
static void job_text_with(char *text, size_t cap, const char *model,
                          const char *destination, const char *elastic,
                          const char *transport, int join_seconds,
                          const char *extra)
{
    snprintf(text, cap,
             "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\"},"
             " \"destination\": {\"engine\": %s, \"elastic\": {%s}},"
             " \"transport\": \"%s\", \"verify\": \"digest\", %s"
             " \"timeouts\": {\"connect_seconds\": 30, \"step_seconds\": 5,"
             " \"join_seconds\": %d}}",
             model, destination, elastic, transport, extra, join_seconds);
}

static void job_text(char *text, size_t cap, const char *model,
                     const char *destination, const char *transport,
                     int join_seconds)
{
    job_text_with(text, cap, model, destination, "\"min_replicas\": 1",
                  transport, join_seconds, "");
}

static int exit_code(pid_t pid)
{
    int status = 0;

    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static pid_t start_destination(const char *text, const char *address,
                               uint64_t rank, plan p)
{
    pid_t pid = fork();

    if (pid == 0) {
        srand((unsigned)time(NULL) ^ (unsigned)getpid());
        _exit(destination(text, address, rank, &p));
    }
    return pid;
}

/* Tells the source to sync `step` and waits for its report; a step past
 * its last only ends it. */
static event step_source(uint64_t step, uint64_t last)
{
    event none;

    if (write(go_pipe[1], &step, sizeof(step)) != (ssize_t)sizeof(step))
        EXPECT(0, "telling the source to sync step %llu",
               (unsigned long long)step);
    if (step <= last)
        return await_event(0, SYNCED);
    memset(&none, 0, sizeof(none));
    return none;
}

/* Two TP2 replicas' ranks `r` (0-1 and 2-3) each synced `step`, and
 * both replicas hold the same bytes after it. */
static void expect_replicas_equal(const pid_t r[4], uint64_t step,
                                  const char *what)
{
    uint64_t hashes[4];

    for (uint64_t k = 0; k < 4; k++) {
        event j = await_event(r[k], SYNCED);
        EXPECT(j.rc == WEX_OK && j.step == step,
               "%s: rank %llu synced step %llu: %s", what,
               (unsigned long long)k, (unsigned long long)step, j.msg);
        hashes[k] = j.hash;
    }
    EXPECT(hashes[0] == hashes[2] && hashes[1] == hashes[3],
           "%s: after step %llu both replicas' ranks hold the same bytes", what,
           (unsigned long long)step);
}

static void expect_step(const char *what, const event *e, uint64_t replicas,
                        uint64_t committed, uint64_t joined, uint64_t left)
{
    EXPECT(e->rc == WEX_OK, "%s: the source's step %llu: %s", what,
           (unsigned long long)e->step, e->msg);
    EXPECT(e->replicas == replicas && e->committed == committed &&
               e->joined == joined && e->left == left,
           "%s: step %llu: %llu replicas, %llu committed, %llu joined, "
           "%llu left; expected %llu, %llu, %llu, %llu",
           what, (unsigned long long)e->step, (unsigned long long)e->replicas,
           (unsigned long long)e->committed, (unsigned long long)e->joined,
           (unsigned long long)e->left, (unsigned long long)replicas,
           (unsigned long long)committed, (unsigned long long)joined,
           (unsigned long long)left);
    printf("  step %llu: %llu replicas, %llu committed, %llu joined, %llu "
           "left\n",
           (unsigned long long)e->step, (unsigned long long)e->replicas,
           (unsigned long long)e->committed, (unsigned long long)e->joined,
           (unsigned long long)e->left);
    fflush(stdout);
}

static void come_and_go(const char *wex, const char *transport,
                        const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    pid_t src, d[4], again;
    plan stay = {8, 0, 0, 1, 0}, leaver = {8, 0, 6, 1, 0};
    plan dies = {8, 0, 0, 1, 0}; /* the parent kills it */
    uint64_t at_five;
    event e, j;

    EXPECT(store > 0, "wex store started");
    early_count = 0;
    job_text(text, sizeof(text), model, "\"hf\", \"parallel\": {\"dp\": 4}",
             transport, 60);
    printf("%s: replicas joining, killed, leaving, joining again:\n",
           transport);
    fflush(stdout);
    if ((src = fork()) == 0)
        _exit(source(text, address, 9));
    for (uint64_t q = 0; q < 4; q++) {
        d[q] = start_destination(text, address, q,
                                 q == 1   ? leaver
                                 : q == 2 ? dies
                                          : stay);
        await_event(d[q], CONNECTED);
        e = step_source(q + 1, 9);
        j = await_event(d[q], SYNCED);
        EXPECT(j.rc == WEX_OK && j.step == q + 1,
               "replica %llu joined step %llu (%s)", (unsigned long long)q,
               (unsigned long long)j.step, j.msg);
        expect_step(transport, &e, q + 1, q + 1, 1, 0);
    }
    /* step 5: replica 2 dies inside it: stopped once it waits at the
     * step's barrier (so the step begins with it), killed once the
     * source is writing */
    {
        uint64_t five = 5;
        struct timespec settle = {0, 50000000L}, inside = {0, 20000000L};
        for (;;) { /* its ABOUT for step 5 */
            j = await_event(d[2], ABOUT);
            if (j.step == 5 || j.rc < 0)
                break;
        }
        nanosleep(&settle, NULL);
        kill(d[2], SIGSTOP);
        if (write(go_pipe[1], &five, sizeof(five)) != (ssize_t)sizeof(five))
            EXPECT(0, "telling the source to sync step 5");
        await_event(0, FILLED);
        nanosleep(&inside, NULL);
        kill(d[2], SIGKILL);
        e = await_event(0, SYNCED);
    }
    at_five = e.replicas;
    /* a retry left it out (or, on a loaded machine, the step's barrier
     * did, if it was not there yet when stopped) */
    EXPECT(e.rc == WEX_OK && e.committed == 3 &&
               ((e.replicas == 3 && e.left == 1) ||
                (e.replicas == 4 && e.left == 0 && e.attempts == 1)),
           "%s: step 5 with replica 2 killed: %s, %llu replicas, %llu "
           "committed",
           transport, e.msg, (unsigned long long)e.replicas,
           (unsigned long long)e.committed);
    printf("  step 5: %llu replicas, %llu committed, %u tr%s (replica 2 "
           "killed)\n",
           (unsigned long long)e.replicas, (unsigned long long)e.committed,
           e.attempts, e.attempts == 1 ? "y" : "ies");
    EXPECT(exit_code(d[2]) == 128 + SIGKILL, "replica 2 was killed");
    e = step_source(6, 9);
    /* gone since step 5, unless a retry of step 5 already left it out */
    expect_step(transport, &e, 3, 3, 0, at_five == 4 ? 1 : 0);
    j = await_event(d[1], LEFT);
    EXPECT(j.rc == WEX_OK, "replica 1 left after step 6: %d", j.rc);
    EXPECT(exit_code(d[1]) == 0, "replica 1 exits cleanly");
    e = step_source(7, 9);
    expect_step(transport, &e, 2, 2, 0, 1);
    again = start_destination(text, address, 2, stay);
    await_event(again, CONNECTED);
    e = step_source(8, 9);
    j = await_event(again, SYNCED);
    EXPECT(j.rc == WEX_OK && j.step == 8,
           "replica 2, started again, joined step %llu (%s)",
           (unsigned long long)j.step, j.msg);
    expect_step(transport, &e, 3, 3, 1, 0);
    EXPECT(exit_code(d[0]) == 0, "replica 0 held every step it committed");
    EXPECT(exit_code(d[3]) == 0, "replica 3 held every step it committed");
    EXPECT(exit_code(again) == 0, "replica 2 (again) held step 8");
    /* every replica closed its job: nobody to commit step 9 */
    e = step_source(9, 9);
    EXPECT(e.rc != WEX_OK &&
               strstr(e.msg, "no replica committed step 9; min_replicas 1") !=
                   NULL &&
               strchr(e.msg, '\n') == NULL,
           "%s: step 9 without replicas fails in one line: %s", transport,
           e.msg);
    printf("  step 9: %s\n", e.msg);
    step_source(10, 9); /* past its last: the source closes */
    EXPECT(exit_code(src) == 0, "%s: the source", transport);
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

static void half_a_replica(const char *wex, const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    pid_t d[4], again;
    plan stay = {3, 0, 0, 0, 1}, dies = {3, 2, 0, 0, 0};
    event e, j;
    pid_t src;

    EXPECT(store > 0, "wex store started");
    early_count = 0;
    job_text(text, sizeof(text), model, VLLM_TP2_DP2, "shm", 60);
    printf("shm: a rank of a two-rank replica killed:\n");
    fflush(stdout);
    if ((src = fork()) == 0)
        _exit(source(text, address, 3));
    for (uint64_t r = 0; r < 4; r++) {
        d[r] = start_destination(text, address, r, r == 3 ? dies : stay);
        await_event(d[r], CONNECTED);
    }
    e = step_source(1, 3);
    expect_step("vllm tp2", &e, 2, 2, 2, 0);
    expect_replicas_equal(d, 1, "both replicas joined");
    EXPECT(exit_code(d[3]) == 128 + SIGKILL, "rank 3 was killed");
    e = step_source(2, 3);
    expect_step("vllm tp2", &e, 1, 1, 0, 1);
    for (uint64_t r = 0; r < 2; r++) {
        j = await_event(d[r], SYNCED);
        EXPECT(j.rc == WEX_OK && j.step == 2,
               "replica 0's rank %llu committed step 2: %s",
               (unsigned long long)r, j.msg);
    }
    j = await_event(d[2], SYNCED);
    EXPECT(j.rc != WEX_OK && strstr(j.msg, "went on without this replica"),
           "rank 2 is told its replica missed step 2: %s", j.msg);
    again = start_destination(text, address, 3, stay);
    await_event(again, CONNECTED);
    e = step_source(3, 3);
    expect_step("vllm tp2", &e, 2, 2, 1, 0);
    {
        pid_t now[4] = {d[0], d[1], d[2], again};
        expect_replicas_equal(now, 3, "the replica that missed step 2");
    }
    step_source(4, 3); /* past its last: the source closes */
    for (uint64_t r = 0; r < 3; r++)
        EXPECT(exit_code(d[r]) == 0, "rank %llu", (unsigned long long)r);
    EXPECT(exit_code(again) == 0, "rank 3 (again)");
    EXPECT(exit_code(src) == 0, "the source");
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

/* Two vLLM TP2 replicas with "seed": "replicas" (the timeline above). */
static void seeded(const char *wex, const char *transport, const char *model,
                   int delta)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    plan stay = {5, 0, 0, 0, 0}, leaves = {5, 0, 3, 0, 0};
    pid_t d[4], src;
    uint64_t hashes[4] = {0}, one = 0;
    event e, j;

    EXPECT(store > 0, "wex store started");
    early_count = 0;
    job_text_with(text, sizeof(text), model, VLLM_TP2_DP2,
                  "\"min_replicas\": 1, \"seed\": \"replicas\"", transport, 60,
                  delta ? "\"delta\": true," : "");
    printf("%s%s: seeding a joiner from a replica:\n", transport,
           delta ? " (delta steps)" : "");
    fflush(stdout);
    if ((src = fork()) == 0)
        _exit(source(text, address, 5));
    for (uint64_t r = 0; r < 2; r++) {
        d[r] = start_destination(text, address, r, stay);
        await_event(d[r], CONNECTED);
    }
    e = step_source(1, 5);
    expect_step("seed", &e, 1, 1, 1, 0);
    one = e.bytes;
    for (uint64_t round = 0; round < 2; round++) {
        uint64_t at = round == 0 ? 2 : 5;
        if (round == 1) { /* replica 1 left after step 3 */
            for (uint64_t r = 2; r < 4; r++) {
                j = await_event(d[r], LEFT);
                EXPECT(j.rc == WEX_OK && exit_code(d[r]) == 0,
                       "rank %llu left after step 3", (unsigned long long)r);
            }
            e = step_source(4, 5);
            expect_step("seed", &e, 1, 1, 0, 1);
        }
        for (uint64_t r = 2; r < 4; r++) {
            d[r] =
                start_destination(text, address, r, round == 0 ? leaves : stay);
            await_event(d[r], CONNECTED);
        }
        e = step_source(at, 5);
        /* the source counts the seeded replica there, not committed:
         * it commits the copy after the source's step */
        expect_step("seed", &e, 2, 1, 1, 0);
        EXPECT(e.bytes == one,
               "%s: step %llu: the source sent %llu bytes, one replica's "
               "(%llu): the joiner took none of them",
               transport, (unsigned long long)at, (unsigned long long)e.bytes,
               (unsigned long long)one);
        for (uint64_t r = 0; r < 4; r++) {
            for (;;) {
                j = await_event(d[r], SYNCED);
                if (j.step >= at || j.rc < 0)
                    break;
            }
            EXPECT(j.rc == WEX_OK && j.step == at,
                   "rank %llu synced step %llu: %s", (unsigned long long)r,
                   (unsigned long long)at, j.msg);
            EXPECT(r < 2 || (j.peers == 1 && j.seeded == j.bytes &&
                             j.seeded > 0 && j.committed == 2),
                   "rank %llu reports its copy from one replica (%llu "
                   "peers, %llu of %llu bytes) and both replicas "
                   "committed (%llu)",
                   (unsigned long long)r, (unsigned long long)j.peers,
                   (unsigned long long)j.seeded, (unsigned long long)j.bytes,
                   (unsigned long long)j.committed);
            hashes[r] = j.hash;
        }
        EXPECT(hashes[0] == hashes[2] && hashes[1] == hashes[3] &&
                   hashes[0] != 0,
               "%s: after step %llu the seeded replica holds what replica 0 "
               "holds",
               transport, (unsigned long long)at);
        if (round == 0) {
            e = step_source(3, 5);
            expect_step("seed", &e, 2, 2, 0, 0);
            EXPECT(e.bytes == 2 * one,
                   "%s: step 3: the source filled both replicas (%llu "
                   "bytes, expected %llu)",
                   transport, (unsigned long long)e.bytes,
                   (unsigned long long)(2 * one));
            expect_replicas_equal(d, 3, transport);
        }
    }
    step_source(6, 5); /* past its last: the source closes */
    for (uint64_t r = 0; r < 4; r++)
        EXPECT(exit_code(d[r]) == 0, "rank %llu", (unsigned long long)r);
    EXPECT(exit_code(src) == 0, "the source");
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

/* "seed": "replicas" never takes a replica from the sources below
 * min_replicas. */
static void seed_keeps_min(const char *wex, const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    plan stay = {2, 0, 0, 1, 0}, once = {1, 0, 0, 1, 0};
    pid_t d[2], again, src;
    uint64_t one;
    event e, j;

    EXPECT(store > 0, "wex store started");
    early_count = 0;
    job_text_with(text, sizeof(text), model,
                  "\"hf\", \"parallel\": {\"dp\": 2}",
                  "\"min_replicas\": 2, \"seed\": \"replicas\"", "shm", 60, "");
    printf("shm: seeding within min_replicas 2:\n");
    fflush(stdout);
    if ((src = fork()) == 0)
        _exit(source(text, address, 2));
    for (uint64_t r = 0; r < 2; r++) {
        d[r] = start_destination(text, address, r, r == 0 ? stay : once);
        await_event(d[r], CONNECTED);
    }
    e = step_source(1, 2);
    expect_step("seed min 2", &e, 2, 2, 2, 0);
    one = e.bytes / 2;
    EXPECT(exit_code(d[1]) == 0, "replica 1 closed after step 1");
    again = start_destination(text, address, 1, stay);
    await_event(again, CONNECTED);
    e = step_source(2, 2);
    expect_step("seed min 2", &e, 2, 2, 0, 0);
    EXPECT(e.bytes == 2 * one,
           "step 2: the source filled both replicas (%llu bytes, expected "
           "%llu): seeding replica 1 would leave one, under min_replicas 2",
           (unsigned long long)e.bytes, (unsigned long long)(2 * one));
    j = await_event(again, SYNCED);
    EXPECT(j.rc == WEX_OK && j.step == 2 && j.seeded == 0 && j.committed == 2,
           "replica 1, restarted, took step 2 from the source: %s", j.msg);
    step_source(3, 2);
    EXPECT(exit_code(d[0]) == 0 && exit_code(again) == 0,
           "both replicas held every step they committed");
    EXPECT(exit_code(src) == 0, "the source");
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

/* Half a replica: rank 3 never starts, so rank 2's join gives up after
 * timeouts.join_seconds, naming it; the source's steps go on with the
 * other replica. */
static void half_started(const char *wex, const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    plan stay = {1, 0, 0, 0, 0};
    pid_t d[3], src;
    event e, j;

    EXPECT(store > 0, "wex store started");
    early_count = 0;
    job_text(text, sizeof(text), model, VLLM_TP2_DP2, "shm", 2);
    printf("shm: half a replica started:\n");
    fflush(stdout);
    if ((src = fork()) == 0)
        _exit(source(text, address, 1));
    for (uint64_t r = 0; r < 3; r++) {
        d[r] = start_destination(text, address, r, stay);
        await_event(d[r], CONNECTED);
    }
    e = step_source(1, 1);
    expect_step("half started", &e, 1, 1, 1, 0);
    j = await_event(d[2], SYNCED);
    EXPECT(j.rc == WEX_ERR_TIMEOUT && strstr(j.msg, "join_seconds (2 s)") &&
               strstr(j.msg, "destination rank 3 of it never connected"),
           "rank 2 gives up its join naming rank 3: %s", j.msg);
    printf("  rank 2: %s\n", j.msg);
    step_source(2, 1);
    EXPECT(exit_code(d[0]) == 0 && exit_code(d[1]) == 0,
           "the whole replica committed step 1");
    EXPECT(exit_code(d[2]) != 0, "rank 2 failed to join");
    EXPECT(exit_code(src) == 0, "the source");
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

int main(int argc, char **argv)
{
    char model[] = "/tmp/wex-elastic-model-XXXXXX";
    int fd;

    if (argc != 2) {
        fprintf(stderr, "usage: %s WEX_COMMAND\n", argv[0]);
        return 2;
    }
    fd = mkstemp(model);
    srand((unsigned)time(NULL));
    if (fd < 0 || write(fd, model_json, sizeof(model_json) - 1) !=
                      (ssize_t)(sizeof(model_json) - 1))
        return 2;
    close(fd);
    if (pipe(events) != 0 || pipe(go_pipe) != 0)
        return 2;
    come_and_go(argv[1], "shm", model);
    come_and_go(argv[1], "ucx", model);
    half_a_replica(argv[1], model);
    half_started(argv[1], model);
    seeded(argv[1], "shm", model, 0);
    seeded(argv[1], "ucx", model, 0);
    seeded(argv[1], "shm", model, 1);
    seed_keeps_min(argv[1], model);
    unlink(model);
    if (failures == 0)
        printf("elastic replicas: joined one a step, killed, left and "
               "joined again over shm and ucx, a half replica left out; "
               "the source's steps never failed while a replica was there\n");
    return failures ? 1 : 0;
}
