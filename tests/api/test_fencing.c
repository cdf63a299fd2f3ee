/*
 * A source the destination gave up on never writes into it again, between
 * real processes at a real `wex store`, over shm and over ucx:
 *   source A syncs steps 1 and 2, goes into step 3 and is stopped
 *   (SIGSTOP) in the middle of its writes; the destination's step 3 fails
 *   once step_seconds pass, and it is dirty;
 *   - with a replacement: a new source 0 joins and steps 4 and 5 commit;
 *     then A runs again (SIGCONT) and, 1.5 s later, every byte of the
 *     destination still holds step 5;
 *   - without one: A runs again and, 1.5 s later, the destination's
 *     memory is what it was when its step 3 failed.
 * Either way A never writes again: it was killed (shm, when caught inside
 * a write: fence_seconds after the destination gave up), or its step 3
 * failed saying it was fenced, or that the destination closed its
 * connection (ucx).
 *
 * Then a failover over ucx puts: a source replica killed inside a step,
 * and the retry from the other one over the keys the destination
 * registered anew ("failover" runs only that).
 *
 *   test_fencing WEX_COMMAND [failover]
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "fencing-test"

/* A Qwen3 whose tied embedding is 131072 x 1024 bf16 (256 MiB): a step's
 * writes take long enough to stop a source in the middle of them. */
static const char model_json[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 128,"
    " \"hidden_size\": 1024, \"intermediate_size\": 2048,"
    " \"num_attention_heads\": 8, \"num_hidden_layers\": 2,"
    " \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"vocab_size\": 131072}";

typedef struct rank_job {
    wex_job *job;
    unsigned char **mem;
    uint64_t count;
} rank_job;

/* What the destination tells the test. */
typedef struct dest_report {
    int step3_failed, dirty_after_3, steps_4_5_ok, still_5, unchanged;
    uint64_t committed, holding_5, all;
} dest_report;

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static rank_job open_rank(const char *text, uint32_t side, const char *address)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    rank_job r = {NULL, NULL, 0};

    if (wex_job_open(text, side, 0, &opts, &r.job) != WEX_OK) {
        fprintf(stderr, "open: %s\n", wex_last_error());
        _exit(10);
    }
    r.count = wex_job_tensor_count(r.job);
    r.mem = calloc(r.count ? r.count : 1, sizeof(*r.mem));
    for (uint64_t i = 0; i < r.count; i++)
        if (wex_job_alloc(r.job, i, (void **)&r.mem[i]) != WEX_OK) {
            fprintf(stderr, "alloc: %s\n", wex_last_error());
            _exit(11);
        }
    return r;
}

static uint64_t tensor_bytes(const rank_job *r, uint64_t i)
{
    wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};

    wex_job_tensor(r->job, i, &t);
    return t.bytes;
}

static void fill(const rank_job *r, uint64_t step)
{
    for (uint64_t i = 0; i < r->count; i++)
        memset(r->mem[i], (int)(step & 0xff), tensor_bytes(r, i));
}

static uint64_t holding(const rank_job *r, uint64_t step, uint64_t *all)
{
    uint64_t n = 0;

    *all = 0;
    for (uint64_t i = 0; i < r->count; i++) {
        uint64_t bytes = tensor_bytes(r, i);
        *all += bytes;
        for (uint64_t b = 0; b < bytes; b++)
            n += r->mem[i][b] == (unsigned char)step;
    }
    return n;
}

/* A cheap fingerprint of everything the rank holds. */
static uint64_t fingerprint(const rank_job *r)
{
    uint64_t h = 1469598103934665603ull;

    for (uint64_t i = 0; i < r->count; i++) {
        uint64_t bytes = tensor_bytes(r, i);
        for (uint64_t b = 0; b < bytes; b++)
            h = (h ^ r->mem[i][b]) * 1099511628211ull;
    }
    return h;
}

static int say(int fd, char c)
{
    return write(fd, &c, 1) == 1 ? 0 : -1;
}

static int hear(int fd)
{
    char c;

    return read(fd, &c, 1) == 1 ? c : -1;
}

/* ---- the ranks ----------------------------------------------------------- */

/* Source A: steps 1 and 2, then step 3, in which it is stopped. Exits 0
 * when step 3 failed for a reason that keeps it out ("fenced", or its
 * connection to the destination closed), 1 when step 3 committed (the
 * stop came too late), 2 otherwise; the message goes to stderr. */
static int stalling_source(const char *text, const char *address, int out)
{
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, address);
    const char *why;

    /* A stopped process is sent SIGHUP when its process group is
     * orphaned (the test run from a shell that has exited): not what
     * this test is about. */
    signal(SIGHUP, SIG_IGN);
    for (uint64_t step = 1; step <= 2; step++) {
        fill(&r, step);
        if (wex_sync(r.job, step, NULL) != WEX_OK) {
            fprintf(stderr, "source A: step %llu: %s\n",
                    (unsigned long long)step, wex_last_error());
            return 3;
        }
    }
    fill(&r, 3);
    if (say(out, '3') != 0)
        return 4;
    if (wex_sync(r.job, 3, NULL) == WEX_OK)
        return 1;
    why = wex_last_error();
    fprintf(stderr, "source A, resumed: step 3: %s\n", why);
    return strstr(why, "fenced") != NULL ||
                   strstr(why, "destination rank 0") != NULL
               ? 0
               : 2;
}

/* Source 0 again, in a new process: connects, says so, then steps 4
 * and 5. */
static int replacement_source(const char *text, const char *address, int out)
{
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, address);

    if (wex_job_connect(r.job) != WEX_OK) {
        fprintf(stderr, "replacement source: %s\n", wex_last_error());
        return 31;
    }
    if (say(out, 'c') != 0)
        return 32;
    for (uint64_t step = 4; step <= 5; step++) {
        fill(&r, step);
        if (wex_sync(r.job, step, NULL) != WEX_OK) {
            fprintf(stderr, "replacement source: step %llu: %s\n",
                    (unsigned long long)step, wex_last_error());
            return 30;
        }
    }
    wex_job_close(r.job);
    return 0;
}

/* Steps 1 to 3, saying '3' once step 3 has failed (or '!' if it
 * committed); with a replacement, steps 4 and 5 once told 'g', saying
 * '5'; then waits for 'c' and checks what it holds. */
static int destination(const char *text, const char *address, int replace,
                       int in, int out)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, address);
    dest_report rep;
    uint64_t before;

    memset(&rep, 0, sizeof(rep));
    for (uint64_t step = 1; step <= 2; step++)
        if (wex_sync(r.job, step, NULL) != WEX_OK)
            return 40;
    rep.step3_failed = wex_sync(r.job, 3, NULL) != WEX_OK;
    rep.dirty_after_3 = wex_job_dirty(r.job);
    before = fingerprint(&r);
    if (say(out, rep.step3_failed ? '3' : '!') != 0)
        return 41;
    if (!rep.step3_failed)
        return 0;
    if (replace) {
        /* after the replacement has connected: a source that died since
         * step 3 (killed by the fence) fails the first barrier of a rank
         * that has not yet heard of the death, unless it is back */
        if (hear(in) != 'g')
            return 45;
        rep.steps_4_5_ok = wex_sync(r.job, 4, NULL) == WEX_OK &&
                           wex_sync(r.job, 5, NULL) == WEX_OK;
        if (!rep.steps_4_5_ok)
            fprintf(stderr, "destination: %s\n", wex_last_error());
        if (say(out, '5') != 0)
            return 42;
    }
    if (hear(in) != 'c')
        return 43;
    rep.committed = wex_job_committed_step(r.job);
    rep.holding_5 = holding(&r, 5, &rep.all);
    rep.still_5 = rep.holding_5 == rep.all && !wex_job_dirty(r.job);
    rep.unchanged = fingerprint(&r) == before;
    if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
        return 44;
    wex_job_close(r.job);
    return 0;
}

/* ---- the scenario -------------------------------------------------------- */

static int exit_code(pid_t pid)
{
    int status = 0;

    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* One try with A stopped `delay_ms` after it went into step 3; returns
 * 1 when the stop landed (the destination's step 3 failed). */
static int stalled_source(const char *wex, const char *transport,
                          const char *model, int replace, long delay_ms)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    int to_dst[2], from_dst[2], from_a[2], a_status;
    pid_t dst, a, b = -1;
    dest_report rep;

    if (store <= 0 || pipe(to_dst) || pipe(from_dst) || pipe(from_a)) {
        EXPECT(0, "store and pipes");
        return 1;
    }
    snprintf(text, sizeof(text),
             "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\"},"
             " \"destination\": {\"engine\": \"hf\"},"
             " \"transport\": \"%s\", \"verify\": \"digest\","
             " \"timeouts\": {\"connect_seconds\": 30, \"step_seconds\": 3,"
             " \"fence_seconds\": 0.5}}",
             model, transport);
    fflush(stdout); /* children must not print the parent's lines again */
    if ((dst = fork()) == 0)
        _exit(destination(text, address, replace, to_dst[0], from_dst[1]));
    if ((a = fork()) == 0)
        _exit(stalling_source(text, address, from_a[1]));
    close(from_dst[1]); /* a child that dies is an end of file */
    close(to_dst[0]);
    EXPECT(hear(from_a[0]) == '3', "%s: source A reached step 3", transport);
    pause_ms(delay_ms);
    kill(a, SIGSTOP);
    if (hear(from_dst[0]) != '3') { /* step 3 committed: stopped too late */
        kill(a, SIGCONT);
        exit_code(a);
        close(to_dst[1]); /* the destination waits for 'c': EOF ends it */
        exit_code(dst);
        close(from_dst[0]);
        close(from_a[0]);
        close(from_a[1]);
        kill(store, SIGTERM);
        waitpid(store, NULL, 0);
        return 0;
    }
    if (replace) {
        if ((b = fork()) == 0)
            _exit(replacement_source(text, address, from_a[1]));
        EXPECT(hear(from_a[0]) == 'c', "%s: the replacement connected",
               transport);
        EXPECT(say(to_dst[1], 'g') == 0, "step 4 go");
        EXPECT(hear(from_dst[0]) == '5',
               "%s: the destination went through "
               "steps 4 and 5",
               transport);
        EXPECT(exit_code(b) == 0,
               "%s: the replacement source committed "
               "steps 4 and 5",
               transport);
    }
    kill(a, SIGCONT);
    pause_ms(1500);
    EXPECT(say(to_dst[1], 'c') == 0, "tell the destination to check");
    memset(&rep, 0, sizeof(rep));
    EXPECT(read(from_dst[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep),
           "%s: the destination reported", transport);
    EXPECT(exit_code(dst) == 0, "%s: the destination exited cleanly",
           transport);
    a_status = exit_code(a);
    EXPECT(rep.dirty_after_3,
           "%s: the failed step 3 left the destination "
           "dirty",
           transport);
    if (replace) {
        EXPECT(rep.steps_4_5_ok && rep.committed == 5 && rep.still_5,
               "%s: 1.5 s after source A ran again the destination holds "
               "step 5 in %llu of %llu bytes (committed %llu)",
               transport, (unsigned long long)rep.holding_5,
               (unsigned long long)rep.all, (unsigned long long)rep.committed);
    } else {
        EXPECT(rep.unchanged && rep.committed == 2,
               "%s: 1.5 s after source "
               "A ran again, with no sync running, the destination is what "
               "its failed step 3 left",
               transport);
    }
    EXPECT(a_status == 0 || a_status == 128 + SIGKILL,
           "%s: source A was fenced (exit %d)", transport, a_status);
    EXPECT(strcmp(transport, "shm") == 0 || a_status == 0,
           "%s: a network source is never killed, only refused", transport);
    printf("%s, %s: source A stopped %ld ms into step 3: %s\n", transport,
           replace ? "replaced" : "not replaced", delay_ms,
           a_status == 0 ? "fenced when it ran again"
                         : "killed by the destination, stopped inside a "
                           "write");
    close(to_dst[1]);
    close(from_dst[0]);
    close(from_a[0]);
    close(from_a[1]);
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
    return 1;
}

static void fences(const char *wex, const char *transport, const char *model,
                   int replace)
{
    static const long delays[] = {15, 5, 40, 2};
    int landed = 0;

    for (size_t k = 0; k < sizeof(delays) / sizeof(delays[0]) && !landed; k++)
        landed = stalled_source(wex, transport, model, replace, delays[k]);
    EXPECT(landed, "%s: no stop landed inside step 3's writes", transport);
}

/* ---- ucx puts: keys revoked, and followed -------------------------------- */

/* Source replica `rank` (dp 2): steps 1 and 2; replica 1 says '2' and
 * waits to be killed inside step 2. */
static int replica(const char *text, const char *address, uint64_t rank,
                   int out)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    rank_job r = {NULL, NULL, 0};

    if (wex_job_open(text, WEX_SIDE_SOURCE, rank, &opts, &r.job) != WEX_OK)
        return 50;
    r.count = wex_job_tensor_count(r.job);
    r.mem = calloc(r.count ? r.count : 1, sizeof(*r.mem));
    for (uint64_t i = 0; i < r.count; i++)
        if (wex_job_alloc(r.job, i, (void **)&r.mem[i]) != WEX_OK)
            return 51;
    for (uint64_t step = 1; step <= 2; step++) {
        fill(&r, step);
        if (step == 2 && rank == 1 && say(out, '2') != 0)
            return 52;
        if (wex_sync(r.job, step, NULL) != WEX_OK) {
            fprintf(stderr, "source %llu: step %llu: %s\n",
                    (unsigned long long)rank, (unsigned long long)step,
                    wex_last_error());
            return 53;
        }
    }
    wex_job_close(r.job);
    return 0;
}

/* The destination binds memory of its own, which ucx registers (and can
 * register again); says the report of step 2. */
static int binding_destination(const char *text, const char *address, int out)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    rank_job r = {NULL, NULL, 0};
    wex_sync_report rep;
    uint64_t all, held;

    if (wex_job_open(text, WEX_SIDE_DESTINATION, 0, &opts, &r.job) != WEX_OK)
        return 60;
    r.count = wex_job_tensor_count(r.job);
    r.mem = calloc(r.count ? r.count : 1, sizeof(*r.mem));
    for (uint64_t i = 0; i < r.count; i++) {
        uint64_t bytes = tensor_bytes(&r, i);
        r.mem[i] = aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
        if (r.mem[i] == NULL ||
            wex_job_bind(r.job, i, r.mem[i], bytes) != WEX_OK)
            return 61;
    }
    if (wex_sync(r.job, 1, NULL) != WEX_OK)
        return 62;
    memset(&rep, 0, sizeof(rep));
    rep.struct_size = sizeof(rep);
    if (wex_sync(r.job, 2, &rep) != WEX_OK) {
        fprintf(stderr, "destination: step 2: %s\n", wex_last_error());
        return 63;
    }
    held = holding(&r, 2, &all);
    if (write(out, &rep.attempts, sizeof(rep.attempts)) < 0 ||
        write(out, &held, sizeof(held)) < 0 || write(out, &all, 8) < 0)
        return 64;
    wex_job_close(r.job);
    return 0;
}

/* Source replica 1 is killed inside step 2: the destination gives the
 * try up, revokes its keys and publishes new ones, and the retry without
 * replica 1 commits from replica 0, which attached the new keys. With
 * UCX's error handling, not "none": a same-host peer killed in the middle
 * of a send can leave UCX's shared-memory receive queue waiting for the
 * slot it took (the destination's worker then spins and takes nothing
 * more, about one run in eight on two busy cores), a limit of that
 * option, said in docs/cli.md. */
static void failover_follows_new_keys(const char *wex, const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    int from_dst[2], from_one[2];
    uint32_t attempts = 0;
    uint64_t held = 0, all = 1;
    pid_t dst, zero, one;

    if (store <= 0 || pipe(from_dst) || pipe(from_one)) {
        EXPECT(0, "store and pipes");
        return;
    }
    snprintf(text, sizeof(text),
             "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\","
             " \"parallel\": {\"dp\": 2}},"
             " \"destination\": {\"engine\": \"hf\"},"
             " \"transport\": {\"name\": \"ucx\", \"options\":"
             " {\"data_path\": \"put\"}},"
             " \"verify\": \"digest\","
             " \"timeouts\": {\"connect_seconds\": 30, \"step_seconds\": 20,"
             " \"fence_seconds\": 0.5}}",
             model);
    fflush(stdout);
    if ((dst = fork()) == 0)
        _exit(binding_destination(text, address, from_dst[1]));
    if ((zero = fork()) == 0)
        _exit(replica(text, address, 0, -1));
    if ((one = fork()) == 0)
        _exit(replica(text, address, 1, from_one[1]));
    close(from_dst[1]); /* a child that dies is an end of file */
    close(from_one[1]);
    EXPECT(hear(from_one[0]) == '2', "source 1 reached step 2");
    pause_ms(10);
    kill(one, SIGKILL);
    exit_code(one);
    EXPECT(read(from_dst[0], &attempts, sizeof(attempts)) ==
                   (ssize_t)sizeof(attempts) &&
               read(from_dst[0], &held, 8) == 8 &&
               read(from_dst[0], &all, 8) == 8,
           "ucx puts: the destination committed step 2");
    EXPECT(exit_code(dst) == 0 && exit_code(zero) == 0,
           "ucx puts: the destination and source 0 committed step 2");
    EXPECT(held == all,
           "ucx puts: step 2 whole after the failover (%llu of "
           "%llu bytes)",
           (unsigned long long)held, (unsigned long long)all);
    printf("ucx puts: source 1 killed inside step 2: committed in %u "
           "tr%s, every byte step 2's\n",
           attempts, attempts == 1 ? "y" : "ies");
    close(from_dst[0]);
    close(from_one[0]);
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

int main(int argc, char **argv)
{
    char model[] = "/tmp/wex-fencing-model-XXXXXX";
    const char *transports[] = {"shm", "ucx"};
    int fd;

    if (argc < 2 || argc > 3 || (argc == 3 && strcmp(argv[2], "failover"))) {
        fprintf(stderr, "usage: %s WEX_COMMAND [failover]\n", argv[0]);
        return 2;
    }
    fd = mkstemp(model);
    if (fd < 0 || write(fd, model_json, sizeof(model_json) - 1) !=
                      (ssize_t)(sizeof(model_json) - 1))
        return 2;
    close(fd);
    for (int t = 0; t < 2 && argc == 2; t++) {
        fences(argv[1], transports[t], model, 1);
        fences(argv[1], transports[t], model, 0);
    }
    failover_follows_new_keys(argv[1], model);
    unlink(model);
    if (failures == 0)
        printf("fencing: a stopped source never writes again, replaced or "
               "not, over shm and ucx\n");
    return failures ? 1 : 0;
}
