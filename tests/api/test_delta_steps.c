/*
 * Delta steps between real processes at a real `wex store`, over shm and
 * over ucx: one source, two destination replicas (hf, dp 2), a job with
 * "delta": true. Every step the source changes a fraction of its bf16
 * elements (positions and values from a hash of step, tensor and
 * element, so every process knows what it must hold):
 *   step 1  everything (the first step goes whole)
 *   step 2  1 %: deltas, at most 2 % of the bytes on the wire
 *   step 3  1 %, but destination B scribbled one element of its live
 *           tensors before the step: the digest of what it would hold
 *           catches it, the step fails on every rank, and destination A,
 *           which checked fine, has not changed a byte (deltas apply only
 *           at commit) and is not dirty
 *   step 4  1 %: after a failed step every destination gets the whole
 *           bytes, B is healed
 *   step 5  nothing changed: deltas of at most 0.1 % of the bytes
 *   step 6  half: past max_fraction, every operation goes whole
 * After every committed step both destinations hold exactly the source's
 * bytes.
 *
 *   test_delta_steps WEX_COMMAND
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "delta-steps-test"
#define STEPS 6

static const char model_json[] =
    "{\"architectures\": [\"Qwen3ForCausalLM\"], \"head_dim\": 128,"
    " \"hidden_size\": 1024, \"intermediate_size\": 2048,"
    " \"num_attention_heads\": 8, \"num_hidden_layers\": 1,"
    " \"num_key_value_heads\": 4, \"rms_norm_eps\": 1e-06,"
    " \"tie_word_embeddings\": true, \"torch_dtype\": \"bfloat16\","
    " \"vocab_size\": 4096}";

/* The fraction of elements each step changes (per mille). */
static const unsigned changed_per_mille[STEPS + 1] = {0,  1000, 10, 10,
                                                      10, 0,    500};

typedef struct rank_job {
    wex_job *job;
    uint16_t **mem;
    uint16_t **expect;
    uint64_t *elems;
    uint64_t count, bytes;
} rank_job;

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

/* What step `step` does to element e of tensor t. */
static void evolve(uint16_t **bufs, const uint64_t *elems, uint64_t count,
                   uint64_t step)
{
    for (uint64_t t = 0; t < count; t++)
        for (uint64_t e = 0; e < elems[t]; e++) {
            uint64_t h = mix(step * 0x9e3779b97f4a7c15ull ^ mix(t << 40 ^ e));
            if (h % 1000 < changed_per_mille[step])
                bufs[t][e] = (uint16_t)(h >> 32);
        }
}

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
    r.expect = calloc(r.count + 1, sizeof(*r.expect));
    r.elems = calloc(r.count + 1, sizeof(*r.elems));
    for (uint64_t i = 0; i < r.count; i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(r.job, i, &t);
        r.elems[i] = t.bytes / 2;
        r.bytes += t.bytes;
        r.expect[i] = calloc(r.elems[i] + 1, 2);
        if (wex_job_alloc(r.job, i, (void **)&r.mem[i]) != WEX_OK) {
            fprintf(stderr, "alloc: %s\n", wex_last_error());
            _exit(11);
        }
    }
    return r;
}

static int holds_expected(const rank_job *r)
{
    for (uint64_t i = 0; i < r->count; i++)
        if (memcmp(r->mem[i], r->expect[i], r->elems[i] * 2) != 0)
            return 0;
    return 1;
}

static wex_status sync_step(const rank_job *r, uint64_t step,
                            wex_sync_report *rep)
{
    memset(rep, 0, sizeof(*rep));
    rep->struct_size = sizeof(*rep);
    return wex_sync(r->job, step, rep);
}

static int source(const char *text, const char *address)
{
    rank_job r = open_rank(text, WEX_SIDE_SOURCE, 0, address);
    wex_sync_report rep;

    for (uint64_t step = 1; step <= STEPS; step++) {
        wex_status st;
        evolve(r.mem, r.elems, r.count, step);
        st = sync_step(&r, step, &rep);
        EXPECT((step == 3) == (st != WEX_OK), "source: step %llu: %s",
               (unsigned long long)step, st ? wex_last_error() : "ok");
        if (step == 2)
            EXPECT(rep.mode == WEX_SYNC_DELTA && rep.changed_elements > 0 &&
                       rep.changed_elements * 50 < rep.delta_elements,
                   "source: step 2 sent deltas of about 1 %% (mode %u, %llu "
                   "of %llu elements changed)",
                   rep.mode, (unsigned long long)rep.changed_elements,
                   (unsigned long long)rep.delta_elements);
    }
    wex_job_close(r.job);
    return failures;
}

static int destination(const char *text, const char *address, uint64_t rank)
{
    rank_job r = open_rank(text, WEX_SIDE_DESTINATION, rank, address);
    const char *me = rank == 0 ? "destination A" : "destination B";
    wex_sync_report rep;

    for (uint64_t step = 1; step <= STEPS; step++) {
        wex_status st;
        if (step == 3 && rank == 1)
            r.mem[0][12345] ^= 0x40; /* a scribble in its live tensor */
        if (step == 3) {
            /* it still holds step 2 (A) or that and the scribble (B) */
            st = sync_step(&r, step, &rep);
            EXPECT(st != WEX_OK && wex_job_committed_step(r.job) == 2,
                   "%s: step 3 fails everywhere (B was scribbled): %s", me,
                   wex_last_error());
            if (rank == 0)
                EXPECT(holds_expected(&r) && !wex_job_dirty(r.job),
                       "%s: the failed delta step changed nothing and left "
                       "it clean",
                       me);
            evolve(r.expect, r.elems, r.count, step);
            continue;
        }
        evolve(r.expect, r.elems, r.count, step);
        st = sync_step(&r, step, &rep);
        EXPECT(st == WEX_OK, "%s: step %llu: %s", me, (unsigned long long)step,
               wex_last_error());
        EXPECT(holds_expected(&r) && !wex_job_dirty(r.job),
               "%s: after step %llu it holds exactly the source's bytes", me,
               (unsigned long long)step);
        if (step == 1 || step == 4 || step == 6)
            EXPECT(rep.mode == WEX_SYNC_FULL && rep.wire_bytes == r.bytes,
                   "%s: step %llu goes whole (mode %u, %llu of %llu bytes)", me,
                   (unsigned long long)step, rep.mode,
                   (unsigned long long)rep.wire_bytes,
                   (unsigned long long)r.bytes);
        if (step == 2)
            EXPECT(rep.mode == WEX_SYNC_DELTA && rep.wire_bytes * 50 <= r.bytes,
                   "%s: step 2 (1 %%) takes deltas of %llu bytes of %llu", me,
                   (unsigned long long)rep.wire_bytes,
                   (unsigned long long)r.bytes);
        if (step == 5)
            EXPECT(rep.mode == WEX_SYNC_DELTA &&
                       rep.wire_bytes * 1000 <= r.bytes &&
                       rep.changed_elements == 0,
                   "%s: step 5 (nothing changed) takes %llu bytes of %llu", me,
                   (unsigned long long)rep.wire_bytes,
                   (unsigned long long)r.bytes);
        if (rank == 0)
            printf("step %llu: mode %s, %llu bytes on the wire of %llu "
                   "(%.3f %%), %llu of %llu elements changed, applied in "
                   "%.4f s\n",
                   (unsigned long long)step,
                   rep.mode == WEX_SYNC_DELTA  ? "delta"
                   : rep.mode == WEX_SYNC_FULL ? "full"
                                               : "mixed",
                   (unsigned long long)rep.wire_bytes,
                   (unsigned long long)r.bytes,
                   100.0 * (double)rep.wire_bytes / (double)r.bytes,
                   (unsigned long long)rep.changed_elements,
                   (unsigned long long)rep.delta_elements, rep.apply_seconds);
        fflush(stdout);
    }
    wex_job_close(r.job);
    return failures;
}

static int exit_code(pid_t pid)
{
    int status = 0;

    waitpid(pid, &status, 0);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static void run(const char *wex, const char *transport, const char *model)
{
    char address[300], text[1024];
    pid_t store = start_store(wex, TOKEN, address, sizeof(address));
    pid_t a, b, s;

    EXPECT(store > 0, "wex store started");
    snprintf(
        text, sizeof(text),
        "{\"model\": \"%s\", \"source\": {\"engine\": \"hf\"},"
        " \"destination\": {\"engine\": \"hf\", \"parallel\": {\"dp\": 2}},"
        " \"transport\": \"%s\", \"verify\": \"digest\", \"delta\": true,"
        " \"timeouts\": {\"connect_seconds\": 30, \"step_seconds\": 30}}",
        model, transport);
    printf("%s:\n", transport);
    fflush(stdout);
    if ((a = fork()) == 0)
        _exit(destination(text, address, 0));
    if ((b = fork()) == 0)
        _exit(destination(text, address, 1));
    if ((s = fork()) == 0)
        _exit(source(text, address));
    EXPECT(exit_code(s) == 0, "%s: the source", transport);
    EXPECT(exit_code(a) == 0, "%s: destination A", transport);
    EXPECT(exit_code(b) == 0, "%s: destination B", transport);
    kill(store, SIGTERM);
    waitpid(store, NULL, 0);
}

int main(int argc, char **argv)
{
    char model[] = "/tmp/wex-delta-model-XXXXXX";
    int fd;

    if (argc != 2) {
        fprintf(stderr, "usage: %s WEX_COMMAND\n", argv[0]);
        return 2;
    }
    fd = mkstemp(model);
    if (fd < 0 || write(fd, model_json, sizeof(model_json) - 1) !=
                      (ssize_t)(sizeof(model_json) - 1))
        return 2;
    close(fd);
    run(argv[1], "shm", model);
    run(argv[1], "ucx", model);
    unlink(model);
    if (failures == 0)
        printf("delta steps: every committed step exact, deltas at 1 %% and "
               "0 %%, a scribble caught and healed, over shm and ucx\n");
    return failures ? 1 : 0;
}
