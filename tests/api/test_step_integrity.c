/*
 * What keeps an engine's weights the step it committed, between real
 * processes at a real `wex store`, over shm and over ucx:
 *   - steps only go forward: a source syncing 1, 1, 2, 1, 2, 3 is
 *     refused the replays at once, and its destination holds exactly
 *     each step it commits;
 *   - a source killed in the middle of a step leaves its destination
 *     holding a mix of two steps: the destination is dirty, save refuses
 *     it, and the next committed step (from a replacement source) clears
 *     it;
 *   - a source replica started again after a step went on without it
 *     is told it missed that step (wex_sync_report.missed), writing
 *     nothing;
 * and, in one process: a job's calls are one thread's at a time (close
 * waits for a running sync), bindings may not share memory, and steps
 * lie in [1, 2^63).
 *
 *   test_step_integrity WEX_COMMAND
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "step-integrity-test"

/* A Qwen3 whose tied embedding is `vocab` x 1024 bf16. */
static const char model_format[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 128,"
    " \"hidden_size\": 1024, \"intermediate_size\": 2048,"
    " \"num_attention_heads\": 8, \"num_hidden_layers\": 2,"
    " \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"vocab_size\": %d}";

typedef struct rank_job {
    wex_job *job;
    unsigned char **mem;
    uint64_t count;
} rank_job;

static void pause_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void job_text(char *out, size_t cap, const char *model,
                     const char *transport, int connect_seconds)
{
    snprintf(out, cap,
             "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\"},"
             " \"destination\": {\"engine\": \"hf\"},"
             " \"transport\": \"%s\", \"verify\": \"digest\","
             " \"timeouts\": {\"connect_seconds\": %d,"
             " \"step_seconds\": 20}}",
             model, transport, connect_seconds);
}

/* Opens this rank's job and lets wex allocate every tensor; exits the
 * process on failure. */
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

/* A step's weights: every byte is the step's number. */
static void fill(const rank_job *r, uint64_t step)
{
    for (uint64_t i = 0; i < r->count; i++)
        memset(r->mem[i], (int)(step & 0xff), tensor_bytes(r, i));
}

/* How many bytes of the rank's tensors hold step `step`. */
static uint64_t holding(const rank_job *r, uint64_t step)
{
    uint64_t n = 0;

    for (uint64_t i = 0; i < r->count; i++) {
        uint64_t bytes = tensor_bytes(r, i);
        for (uint64_t b = 0; b < bytes; b++)
            n += r->mem[i][b] == (unsigned char)step;
    }
    return n;
}

static uint64_t total_bytes(const rank_job *r)
{
    uint64_t n = 0;

    for (uint64_t i = 0; i < r->count; i++)
        n += tensor_bytes(r, i);
    return n;
}

static wex_status sync_step(const rank_job *r, uint64_t step)
{
    wex_sync_report report;

    memset(&report, 0, sizeof(report));
    report.struct_size = sizeof(report);
    return wex_sync(r->job, step, &report);
}

static pid_t spawn(int (*body)(const char *, const char *, int, int),
                   const char *text, const char *address, int in, int out)
{
    pid_t pid = fork();

    if (pid == 0) {
        failures = 0; /* the child counts its own, not the parent's so far */
        _exit(body(text, address, in, out));
    }
    return pid;
}

static int exit_code(pid_t pid)
{
    int status = 0;

    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

/* ---- steps only go forward ----------------------------------------------- */

static int replaying_source(const char *text, const char *address, int in,
                            int out)
{
    static const uint64_t steps[] = {1, 1, 2, 1, 2, 3};
    static const int refused[] = {0, 1, 0, 1, 1, 0};
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, address);

    (void)in;
    (void)out;
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        wex_status st;
        fill(&r, steps[k]);
        st = sync_step(&r, steps[k]);
        EXPECT(refused[k] ? st == WEX_ERR_INVALID : st == WEX_OK,
               "source: sync %zu (step %llu) %s: %s", k,
               (unsigned long long)steps[k],
               refused[k] ? "must be refused" : "must commit",
               wex_last_error());
        if (refused[k])
            EXPECT(strstr(wex_last_error(), "steps only go forward") != NULL,
                   "the refusal says why: %s", wex_last_error());
    }
    wex_job_close(r.job);
    return failures;
}

static int committing_destination(const char *text, const char *address, int in,
                                  int out)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, address);
    uint64_t all = total_bytes(&r);

    (void)in;
    (void)out;
    for (uint64_t step = 1; step <= 3; step++) {
        EXPECT(sync_step(&r, step) == WEX_OK, "destination: step %llu: %s",
               (unsigned long long)step, wex_last_error());
        EXPECT(holding(&r, step) == all &&
                   wex_job_committed_step(r.job) == step,
               "destination: after committing step %llu every byte is "
               "step %llu's (%llu of %llu)",
               (unsigned long long)step, (unsigned long long)step,
               (unsigned long long)holding(&r, step), (unsigned long long)all);
    }
    wex_job_close(r.job);
    return failures;
}

static void replayed_step_changes_nothing(const char *wex,
                                          const char *transport,
                                          const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    pid_t src, dst;

    EXPECT(store > 0, "wex store started");
    job_text(text, sizeof(text), model, transport, 30);
    dst = spawn(committing_destination, text, address, -1, -1);
    src = spawn(replaying_source, text, address, -1, -1);
    EXPECT(exit_code(src) == 0,
           "%s: the replaying source was refused "
           "every replay and committed every new step",
           transport);
    EXPECT(exit_code(dst) == 0,
           "%s: the destination held exactly each "
           "committed step",
           transport);
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

/* ---- a failed step is dirty ---------------------------------------------- */

typedef struct dirty_report {
    int failed, dirty, save_refused, clean_after;
    uint64_t committed, old_bytes, new_bytes, all;
} dirty_report;

static int dying_source(const char *text, const char *address, int in, int out)
{
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, address);
    char go;

    fill(&r, 1);
    if (sync_step(&r, 1) != WEX_OK)
        return 20;
    fill(&r, 2);
    if (read(in, &go, 1) != 1 || write(out, "g", 1) != 1)
        return 21;
    sync_step(&r, 2); /* killed in here */
    return 22;
}

static int replacement_source(const char *text, const char *address, int in,
                              int out)
{
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, address);

    (void)in;
    (void)out;
    fill(&r, 3);
    if (sync_step(&r, 3) != WEX_OK) {
        fprintf(stderr, "replacement source: %s\n", wex_last_error());
        return 30;
    }
    wex_job_close(r.job);
    return 0;
}

/* Watches a destination's tensors while it syncs: says 'w' on `out` as
 * soon as a sampled byte holds the step's, so the test can kill the
 * source in the middle of its writes whatever the machine's pace; says
 * 'n' when the sync ends without one seen. */
typedef struct watcher {
    const rank_job *r;
    const uint64_t *bytes; /* each tensor's, read before the sync */
    unsigned char step;
    int out;
    atomic_int done, seen;
} watcher;

static void *watch_for_step(void *arg)
{
    watcher *w = arg;

    while (!atomic_load(&w->done)) {
        for (uint64_t i = 0; i < w->r->count; i++) {
            const volatile unsigned char *mem = w->r->mem[i];
            for (uint64_t b = 0; b < w->bytes[i]; b += 4096)
                if (mem[b] == w->step) {
                    atomic_store(&w->seen, 1);
                    return write(w->out, "w", 1) == 1 ? NULL : w;
                }
        }
    }
    return NULL;
}

static int dirtied_destination(const char *text, const char *address, int in,
                               int out)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, address);
    char dir[] = "/tmp/wex-dirty-save-XXXXXX";
    uint64_t *bytes = calloc(r.count ? r.count : 1, sizeof(*bytes));
    watcher w = {&r, bytes, 2, out, 0, 0};
    pthread_t watching;
    dirty_report rep;

    (void)in;
    memset(&rep, 0, sizeof(rep));
    rep.all = total_bytes(&r);
    for (uint64_t i = 0; bytes != NULL && i < r.count; i++)
        bytes[i] = tensor_bytes(&r, i);
    if (sync_step(&r, 1) != WEX_OK || wex_job_dirty(r.job))
        return 40;
    if (bytes == NULL || write(out, "2", 1) != 1 ||
        pthread_create(&watching, NULL, watch_for_step, &w) != 0)
        return 41;
    rep.failed = sync_step(&r, 2) != WEX_OK;
    atomic_store(&w.done, 1);
    pthread_join(watching, NULL);
    free(bytes);
    if (!atomic_load(&w.seen) && write(out, "n", 1) != 1)
        return 41;
    rep.dirty = wex_job_dirty(r.job);
    rep.committed = wex_job_committed_step(r.job);
    rep.old_bytes = holding(&r, 1);
    rep.new_bytes = holding(&r, 2);
    if (mkdtemp(dir) != NULL) {
        rep.save_refused = wex_job_save(r.job, dir, 0) == WEX_ERR_INVALID &&
                           strstr(wex_last_error(), "dirty") != NULL;
        if (rmdir(dir) != 0) { /* a save wrote into it */
            char cmd[64];
            snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
            if (system(cmd) != 0)
                return 42;
        }
    }
    rep.clean_after = sync_step(&r, 3) == WEX_OK && !wex_job_dirty(r.job) &&
                      holding(&r, 3) == rep.all;
    if (write(out, &rep, sizeof(rep)) != (ssize_t)sizeof(rep))
        return 43;
    wex_job_close(r.job);
    return 0;
}

/* One try: the source is killed as soon as its destination sees the
 * first bytes of step 2 land. Returns whether the kill left the
 * destination holding a mix of steps 1 and 2. */
static int kill_mid_step(const char *wex, const char *transport,
                         const char *model)
{
    char address[300], text[1024], c, seen = 0;
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    int to_src[2], from_src[2], from_dst[2], mixed;
    pid_t src, dst, next;
    dirty_report rep;

    memset(&rep, 0, sizeof(rep));
    if (store <= 0 || pipe(to_src) || pipe(from_src) || pipe(from_dst))
        return 0;
    job_text(text, sizeof(text), model, transport, 30);
    dst = spawn(dirtied_destination, text, address, -1, from_dst[1]);
    src = spawn(dying_source, text, address, to_src[0], from_src[1]);
    /* the destination is at step 2's barrier before the source comes */
    EXPECT(read(from_dst[0], &c, 1) == 1, "destination reached step 2");
    pause_ms(200);
    EXPECT(write(to_src[1], "g", 1) == 1 && read(from_src[0], &c, 1) == 1,
           "source went into step 2");
    EXPECT(read(from_dst[0], &seen, 1) == 1, "the destination's watcher spoke");
    kill(src, SIGKILL);
    exit_code(src);
    next = spawn(replacement_source, text, address, -1, -1);
    EXPECT(read(from_dst[0], &rep, sizeof(rep)) == (ssize_t)sizeof(rep),
           "the destination reported");
    EXPECT(exit_code(next) == 0, "%s: a replacement source committed step 3",
           transport);
    EXPECT(exit_code(dst) == 0, "destination exited cleanly");
    mixed = rep.old_bytes > 0 && rep.new_bytes > 0;
    /* a kill that came after the last byte lets step 2 commit, which is
     * right; the try then says nothing, and the next one goes again */
    if (rep.new_bytes != rep.all)
        EXPECT(rep.failed && rep.committed == 1,
               "%s: step 2 failed, 1 stays committed (committed %llu)",
               transport, (unsigned long long)rep.committed);
    if (mixed) {
        EXPECT(rep.dirty,
               "%s: a destination holding %llu bytes of step 1 "
               "and %llu of step 2 is dirty",
               transport, (unsigned long long)rep.old_bytes,
               (unsigned long long)rep.new_bytes);
        EXPECT(rep.save_refused, "%s: save refuses a dirty destination",
               transport);
    }
    EXPECT(rep.clean_after,
           "%s: the next committed step clears dirty and "
           "every byte is step 3's",
           transport);
    printf("%s: source killed %s: %llu bytes of step 1, %llu of step 2; "
           "dirty %d\n",
           transport,
           seen == 'w' ? "once step 2's first bytes landed"
                       : "after step 2, no byte of it seen before",
           (unsigned long long)rep.old_bytes, (unsigned long long)rep.new_bytes,
           rep.dirty);
    for (int i = 0; i < 2; i++) {
        close(to_src[i]);
        close(from_src[i]);
        close(from_dst[i]);
    }
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
    return mixed;
}

static void failed_step_marks_destination_dirty(const char *wex,
                                                const char *transport,
                                                const char *model)
{
    int mixed = 0;

    for (int k = 0; k < 3 && !mixed; k++)
        mixed = kill_mid_step(wex, transport, model);
    EXPECT(mixed, "%s: no kill landed in the middle of step 2's writes",
           transport);
}

/* ---- a rejoined replica misses the step that went on without it --------- */

/* Two source replicas (dp 2): source 1 may be left out of a step. */
static void replica_job_text(char *out, size_t cap, const char *model,
                             const char *transport)
{
    snprintf(out, cap,
             "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\","
             " \"parallel\": {\"dp\": 2}},"
             " \"destination\": {\"engine\": \"hf\"},"
             " \"transport\": \"%s\", \"verify\": \"digest\","
             " \"timeouts\": {\"connect_seconds\": 30,"
             " \"step_seconds\": 20}}",
             model, transport);
}

static rank_job open_source(const char *text, uint64_t rank,
                            const char *address)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    rank_job r = {NULL, NULL, 0};

    if (wex_job_open(text, WEX_SIDE_SOURCE, rank, &opts, &r.job) != WEX_OK) {
        fprintf(stderr, "open source %llu: %s\n", (unsigned long long)rank,
                wex_last_error());
        _exit(10);
    }
    r.count = wex_job_tensor_count(r.job);
    r.mem = calloc(r.count ? r.count : 1, sizeof(*r.mem));
    for (uint64_t i = 0; i < r.count; i++)
        if (wex_job_alloc(r.job, i, (void **)&r.mem[i]) != WEX_OK)
            _exit(11);
    return r;
}

/* Source 1 takes part in step 1, then dies without a goodbye (what a
 * crash looks like), so step 2 goes on without it. It dies after a step,
 * not straight after connecting: UCX 1.13 aborts the destination on an
 * assertion when a peer dies while the destination's side of the wireup
 * is still pending (openucx/ucx#8175, fixed in later releases). */
static int vanishing_replica(const char *text, const char *address, int in,
                             int out)
{
    rank_job r = open_source(text, 1, address);

    (void)in;
    (void)out;
    fill(&r, 1);
    if (sync_step(&r, 1) != WEX_OK) {
        fprintf(stderr, "source 1: step 1: %s\n", wex_last_error());
        return 50;
    }
    _exit(0);
}

/* Source 1 started again once step 2 committed: its sync(2) is told it
 * missed the step, at once and writing nothing. It then leaves with a
 * goodbye (a rank dying straight after connecting trips the UCX
 * assertion above). */
static int late_replica(const char *text, const char *address, int in, int out)
{
    rank_job r = open_source(text, 1, address);
    wex_sync_report report;
    double t0;
    wex_status st;

    (void)in;
    (void)out;
    fill(&r, 9); /* written anywhere, it would show */
    memset(&report, 0, sizeof(report));
    report.struct_size = sizeof(report);
    t0 = (double)time(NULL);
    st = wex_sync(r.job, 2, &report);
    EXPECT(st == WEX_ERR_PEER && report.missed == 1,
           "the late replica's sync(2) fails as missed (status %d, missed "
           "%u): %s",
           st, report.missed, wex_last_error());
    EXPECT(strstr(wex_last_error(), "went on without this rank") != NULL,
           "the error says the step went on without it: %s", wex_last_error());
    EXPECT((double)time(NULL) - t0 < 10, "refused at once, not at a "
                                         "timeout");
    wex_job_close(r.job); /* leaves: step 3 goes on without it */
    _exit(failures);
}

/* Steps 1 to 3; steps 2 and 3 wait for a byte on `in`. */
static int replicated_source(const char *text, const char *address, int in,
                             int out)
{
    rank_job r = open_source(text, 0, address);
    char go;

    (void)out;
    for (uint64_t step = 1; step <= 3; step++) {
        if (step > 1 && read(in, &go, 1) != 1)
            return 60;
        fill(&r, step);
        EXPECT(sync_step(&r, step) == WEX_OK, "source 0: step %llu: %s",
               (unsigned long long)step, wex_last_error());
    }
    wex_job_close(r.job);
    return failures;
}

/* Steps 1 to 3, each whole and clean; says on `out` when steps 1 and 2
 * committed, and waits on `in` before steps 2 and 3. */
static int replicated_destination(const char *text, const char *address, int in,
                                  int out)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, address);
    uint64_t all = total_bytes(&r);
    char go;

    for (uint64_t step = 1; step <= 3; step++) {
        if (step > 1 && read(in, &go, 1) != 1)
            return 70;
        EXPECT(sync_step(&r, step) == WEX_OK, "destination: step %llu: %s",
               (unsigned long long)step, wex_last_error());
        EXPECT(holding(&r, step) == all && !wex_job_dirty(r.job),
               "destination: step %llu whole and clean (%llu of %llu)",
               (unsigned long long)step, (unsigned long long)holding(&r, step),
               (unsigned long long)all);
        if (step < 3 && write(out, "1", 1) != 1)
            return 71;
    }
    wex_job_close(r.job);
    return failures;
}

static void rejoined_replica_misses_a_step(const char *wex,
                                           const char *transport,
                                           const char *model)
{
    char address[300], text[1024], c;
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    int to_src[2], to_dst[2], from_dst[2];
    pid_t src, dst, gone, late;

    if (store <= 0 || pipe(to_src) || pipe(to_dst) || pipe(from_dst)) {
        EXPECT(0, "store and pipes");
        return;
    }
    replica_job_text(text, sizeof(text), model, transport);
    dst = spawn(replicated_destination, text, address, to_dst[0], from_dst[1]);
    src = spawn(replicated_source, text, address, to_src[0], -1);
    gone = spawn(vanishing_replica, text, address, -1, -1);
    EXPECT(exit_code(gone) == 0,
           "%s: source 1 took part in step 1, then "
           "vanished",
           transport);
    EXPECT(read(from_dst[0], &c, 1) == 1, "%s: step 1 committed", transport);
    EXPECT(write(to_src[1], "2", 1) == 1 && write(to_dst[1], "2", 1) == 1,
           "step 2 go");
    EXPECT(read(from_dst[0], &c, 1) == 1,
           "%s: step 2 committed without "
           "source 1",
           transport);
    late = spawn(late_replica, text, address, -1, -1);
    EXPECT(exit_code(late) == 0,
           "%s: the rejoined source 1 was told it "
           "missed step 2",
           transport);
    EXPECT(write(to_src[1], "3", 1) == 1 && write(to_dst[1], "3", 1) == 1,
           "step 3 go");
    EXPECT(exit_code(src) == 0 && exit_code(dst) == 0,
           "%s: step 3 commits whole after the late source left", transport);
    for (int i = 0; i < 2; i++) {
        close(to_src[i]);
        close(to_dst[i]);
        close(from_dst[i]);
    }
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

/* ---- one thread's, its own memory, steps in range ------------------------- */

typedef struct syncing {
    wex_job *job;
    wex_status st;
    char why[512];
} syncing;

static void *sync_one(void *arg)
{
    syncing *s = arg;

    s->st = wex_sync(s->job, 1, NULL);
    snprintf(s->why, sizeof(s->why), "%s", wex_last_error());
    return NULL;
}

static int one_process_rules(const char *text, const char *address, int in,
                             int out)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, address);
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    syncing s = {r.job, WEX_OK, ""};
    wex_job *fresh = NULL;
    pthread_t thread;
    uint64_t a = UINT64_MAX, b = UINT64_MAX;
    unsigned char *buf;

    (void)in;
    (void)out;
    /* no source comes: the thread's sync waits out the connect timeout */
    pthread_create(&thread, NULL, sync_one, &s);
    pause_ms(300);
    EXPECT(wex_sync(r.job, 2, NULL) == WEX_ERR_INVALID &&
               strstr(wex_last_error(), "another thread") != NULL,
           "a second thread's sync is refused at once: %s", wex_last_error());
    wex_job_close(r.job); /* waits for the running sync */
    pthread_join(thread, NULL);
    EXPECT(s.st != WEX_OK && strstr(s.why, "malformed") == NULL,
           "the running sync failed on its own terms: %s", s.why);

    EXPECT(wex_job_open(text, WEX_SIDE_DESTINATION, 0, &opts, &fresh) == WEX_OK,
           "open: %s", wex_last_error());
    EXPECT(wex_sync(fresh, 0, NULL) == WEX_ERR_INVALID &&
               wex_sync(fresh, UINT64_C(1) << 63, NULL) == WEX_ERR_INVALID &&
               strstr(wex_last_error(), "[1, 2^63)") != NULL,
           "steps 0 and 2^63 are refused: %s", wex_last_error());
    for (uint64_t i = 0; i < wex_job_tensor_count(fresh); i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(fresh, i, &t);
        if (t.bytes >= 4096 && a == UINT64_MAX)
            a = i;
        else if (t.bytes >= 4096 && b == UINT64_MAX)
            b = i;
    }
    {
        wex_tensor ta = {sizeof(ta), 0, 0, 0, NULL, NULL, 0};
        wex_tensor tb = {sizeof(tb), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(fresh, a, &ta);
        wex_job_tensor(fresh, b, &tb);
        buf = aligned_alloc(4096, (ta.bytes + tb.bytes + 4095) / 4096 * 4096);
        EXPECT(wex_job_bind(fresh, a, buf, ta.bytes) == WEX_OK, "bind: %s",
               wex_last_error());
        EXPECT(wex_job_bind(fresh, b, buf, tb.bytes) == WEX_ERR_INVALID &&
                   strstr(wex_last_error(), "overlaps") != NULL,
               "one buffer bound under two names is refused: %s",
               wex_last_error());
        EXPECT(wex_job_bind(fresh, b, buf + ta.bytes / 2, tb.bytes) ==
                   WEX_ERR_INVALID,
               "a half-overlapping view is refused");
        EXPECT(wex_job_bind(fresh, b, buf + ta.bytes, tb.bytes) == WEX_OK,
               "memory right after another tensor's binds: %s",
               wex_last_error());
    }
    wex_job_close(fresh);
    free(buf);
    return failures;
}

int main(int argc, char **argv)
{
    char small[] = "/tmp/wex-integrity-small-XXXXXX";
    char large[] = "/tmp/wex-integrity-large-XXXXXX";
    char json[1024], address[300], text[1024];
    const char *transports[] = {"shm", "ucx"};
    pid_t store;
    int fd;

    if (argc != 2) {
        fprintf(stderr, "usage: %s WEX_COMMAND\n", argv[0]);
        return 2;
    }
    for (int k = 0; k < 2; k++) {
        char *path = k ? large : small;
        int n = snprintf(json, sizeof(json), model_format, k ? 131072 : 512);
        fd = mkstemp(path);
        if (fd < 0 || write(fd, json, (size_t)n) != n)
            return 2;
        close(fd);
    }
    for (int t = 0; t < 2; t++) {
        replayed_step_changes_nothing(argv[1], transports[t], small);
        failed_step_marks_destination_dirty(argv[1], transports[t], large);
        rejoined_replica_misses_a_step(argv[1], transports[t], small);
    }
    store = start_store(argv[1], TOKEN, address, sizeof(address));
    job_text(text, sizeof(text), small, "shm", 2);
    EXPECT(exit_code(spawn(one_process_rules, text, address, -1, -1)) == 0,
           "one thread at a time, memory of its own, steps in [1, 2^63)");
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
    unlink(small);
    unlink(large);
    if (failures == 0)
        printf("step integrity: replays refused, failed steps dirty, late "
               "replicas told they missed a step, over "
               "shm and ucx; one thread at a time; overlapping bindings and "
               "steps outside [1, 2^63) refused\n");
    return failures ? 1 : 0;
}
