/*
 * Device failures in the middle of a step, on a machine without a GPU:
 * the fake CUDA runtime (tests/fakes/fake_cudart.c) fails one call on
 * demand (WEX_FAKE_CUDA_FAIL), in one rank, in the middle of step 2 of
 * four:
 * - a destination's copy of a drained window pass to the device, and its
 *   wait for the copies (the staging window, 64 KiB);
 * - a CUDA source's strided copy into pinned staging, mid-pass;
 * - a CUDA source's quantization kernel, and its amax kernel (bf16
 *   Megatron TP4 into the FP8 checkpoint).
 * Each time, every rank agrees on step 2 (no rank commits what another
 * does not), the failing rank's error says what failed, the steps after
 * it commit, and what the destinations hold after the last step is byte
 * for byte what a run without the failure leaves. Then a delta job whose
 * CUDA destination's kernel fails applying step 2 at commit: that
 * destination alone fails step 2 (the others have committed it), is
 * sent step 3 whole (it is dirty) and holds, after the last, what a run
 * without the failure leaves; and delta jobs whose CUDA source's
 * encoding kernels (the count, the write) or its digest kernel fail in
 * step 2: every rank fails it, step 3 goes whole, and the destinations
 * end as without the failure. Then, in one process:
 * a failed pinned allocation (the device's staging, the window, a
 * tensor's own staging) fails the binding with its reason and leaves
 * nothing behind; and a CUDA source the job would dequantize is refused
 * when it is bound.
 *
 *   test_device_faults FAKE_CUDART.so
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define TOKEN "device-faults-test"
#include "api_check.h"
#include "device_ranks.h"

#define STEPS 4
#define FAILING_STEP 2
#define RANKS 6

/* What one rank saw: per step, 1 committed or 0 failed; a destination's
 * hash of what it holds after the last step. */
typedef struct outcome {
    unsigned char committed[STEPS + 1];
    uint64_t held;
} outcome;

/* One rank of the job, its tensors in memory of `kind`; `entry` (NULL:
 * none) fails once, halfway through its calls of step FAILING_STEP as
 * counted in step 1. Errors go to stderr. */
static int fault_rank(const char *text, uint32_t side, uint64_t rank,
                      const char *address, uint32_t kind, const char *entry,
                      int out)
{
    unsigned char **mem = NULL, *host = NULL;
    unsigned long before = 0;
    uint64_t small;
    outcome o;
    wex_job *job = NULL;
    int rc = 1;

    memset(&o, 0, sizeof(o));
    if (open_rank(text, side, rank, address, kind, &job, &mem, &host) != 0)
        goto out;
    for (uint64_t step = 1; step <= STEPS; step++) {
        wex_sync_report report;
        char spec[96];

        if (entry != NULL && step == 1)
            before = cuda_calls(entry);
        if (entry != NULL && step == FAILING_STEP) {
            /* halfway through as in step 1; the first call of an entry
             * step 1 did not call (a delta step's) */
            unsigned long per_step = cuda_calls(entry) - before;
            snprintf(spec, sizeof(spec), "%s@%lu", entry,
                     cuda_calls(entry) +
                         (per_step > 0 ? (per_step + 1) / 2 : 1));
            setenv("WEX_FAKE_CUDA_FAIL", spec, 1);
        }
        if (side == WEX_SIDE_SOURCE &&
            fill_sources(job, step, kind, mem, host) != 0)
            goto out;
        memset(&report, 0, sizeof(report));
        report.struct_size = sizeof(report);
        if (wex_sync(job, step, &report) == WEX_OK && report.verified == 1)
            o.committed[step] = 1;
        else
            fprintf(stderr, "step %llu: %s\n", (unsigned long long)step,
                    wex_last_error());
    }
    if (side == WEX_SIDE_DESTINATION &&
        destination_holds(job, kind, mem, host, &o.held, &small) != 0)
        goto out;
    rc = write(out, &o, sizeof(o)) == (ssize_t)sizeof(o) ? 0 : 3;
out:
    wex_job_close(job);
    free(host);
    free(mem);
    return rc;
}

/* The job's ranks as processes (`sources` sources, then two
 * destinations); rank `failing` (-1: none) fails `entry`. Each rank's
 * stderr goes to logs[rank]. */
static void run_job(const char *text, int sources, const uint32_t kind[2],
                    int failing, const char *entry, outcome *o,
                    char (*logs)[40])
{
    int ranks = sources + 2, status, fds[RANKS][2], addr[RANKS][2];
    wex_store *store;
    pid_t pids[RANKS];

    for (int i = 0; i < ranks; i++) {
        int source = i < sources;
        snprintf(logs[i], sizeof(logs[i]), "/tmp/wex-device-fault-XXXXXX");
        close(mkstemp(logs[i]));
        if (pipe(fds[i]) != 0 || pipe(addr[i]) != 0)
            return;
        pids[i] = fork();
        if (pids[i] == 0) {
            int log = open(logs[i], O_WRONLY | O_APPEND);
            dup2(log, 2);
            close(fds[i][0]);
            close(addr[i][1]);
            _exit(fault_rank(
                text, source ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                (uint64_t)(source ? i : i - sources), await_address(addr[i][0]),
                kind[!source], i == failing ? entry : NULL, fds[i][1]));
        }
        close(fds[i][1]);
        close(addr[i][0]);
    }
    store = serve(ranks, addr);
    for (int i = 0; i < ranks; i++) {
        EXPECT(read(fds[i][0], &o[i], sizeof(o[i])) == (ssize_t)sizeof(o[i]),
               "rank %d reported nothing (%s)", i, logs[i]);
        close(fds[i][0]);
        EXPECT(waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0,
               "rank %d: status %d (%s)", i, status, logs[i]);
    }
    wex_store_close(store);
}

/* The job without failures: every step commits on every rank. */
static void clean_run(const char *text, int sources, const uint32_t kind[2],
                      outcome *o)
{
    char logs[RANKS][40];

    run_job(text, sources, kind, -1, NULL, o, logs);
    for (int i = 0; i < sources + 2; i++) {
        for (int step = 1; step <= STEPS; step++)
            EXPECT(o[i].committed[step],
                   "without failures, rank %d did not "
                   "commit step %d (%s)",
                   i, step, logs[i]);
        if (failures == 0)
            unlink(logs[i]);
    }
}

typedef struct scenario {
    const char *what;
    int fp8;          /* the FP8 job, else the window job */
    uint32_t kind[2]; /* sources', destinations' memory */
    int failing;      /* the rank, sources first */
    const char *entry;
    const char *says; /* in the failing rank's error */
} scenario;

static void check(const scenario *sc, const outcome *clean)
{
    int sources = sc->fp8 ? 4 : 1;
    char text[1024], logs[RANKS][40];
    outcome o[RANKS];

    memset(o, 0, sizeof(o));
    snprintf(text, sizeof(text), "%s",
             sc->fp8 ? job_text(FP8_JOB, 0) : job_text(COPY_JOB, 65536));
    run_job(text, sources, sc->kind, sc->failing, sc->entry, o, logs);
    for (int i = 0; i < sources + 2; i++) {
        for (int step = 1; step <= STEPS; step++)
            EXPECT(o[i].committed[step] == (step != FAILING_STEP),
                   "%s: rank %d %s step %d (%s)", sc->what, i,
                   o[i].committed[step] ? "committed" : "failed", step,
                   logs[i]);
        if (i >= sources)
            EXPECT(o[i].held == clean[i].held,
                   "%s: destination %d holds "
                   "other bytes than without the failure",
                   sc->what, i - sources);
    }
    EXPECT(log_says(logs[sc->failing], "injected failure") &&
               log_says(logs[sc->failing], sc->says),
           "%s: the failing rank's error does not say \"%s\" (%s)", sc->what,
           sc->says, logs[sc->failing]);
    for (int i = 0; i < sources + 2 && failures == 0; i++)
        unlink(logs[i]);
    printf("%s: step %d failed on every rank, the others committed, every "
           "byte right\n",
           sc->what, FAILING_STEP);
}

/* A delta job (about 1 % of the words change a step) whose rank
 * `failing` fails `entry` in step 2: with `alone`, after every rank
 * passed the step's verdict (that rank alone fails the step), else
 * before (every rank fails it). */
static void delta_job_fails(const char *what, const uint32_t kind[2],
                            int failing, const char *entry, const char *says,
                            int alone)
{
    char text[1100], logs[RANKS][40];
    outcome clean[RANKS], o[RANKS];
    const char *base = job_text(COPY_JOB, 0);

    snprintf(text, sizeof(text), "%.*s, \"delta\": true}",
             (int)strlen(base) - 1, base);
    few_changes = 1;
    clean_run(text, 1, kind, clean);
    memset(o, 0, sizeof(o));
    run_job(text, 1, kind, failing, entry, o, logs);
    few_changes = 0;
    for (int i = 0; i < 3; i++) {
        for (int step = 1; step <= STEPS; step++)
            EXPECT(o[i].committed[step] ==
                       (step != FAILING_STEP || (alone && i != failing)),
                   "%s: rank %d %s step %d (%s)", what, i,
                   o[i].committed[step] ? "committed" : "failed", step,
                   logs[i]);
        if (i >= 1)
            EXPECT(o[i].held == clean[i].held,
                   "%s: destination %d holds other bytes than without the "
                   "failure",
                   what, i - 1);
    }
    EXPECT(log_says(logs[failing], "injected failure") &&
               log_says(logs[failing], says),
           "%s: the failing rank's error does not say \"%s\" (%s)", what, says,
           logs[failing]);
    for (int i = 0; i < 3 && failures == 0; i++)
        unlink(logs[i]);
    printf("%s: %s step %d, the steps after it committed, every byte "
           "right\n",
           what, alone ? "it alone failed" : "every rank failed", FAILING_STEP);
}

/* One destination of the copy job alone, its window `window` bytes:
 * binding CUDA tensors fails on the `nth` pinned allocation, saying
 * `says`. */
static void failed_pinned_allocation(int nth, unsigned window, const char *says)
{
    wex_job_options opts = {sizeof(opts), 0, "127.0.0.1:1", TOKEN, NULL};
    wex_job *job = NULL;
    wex_status st = WEX_OK;
    char spec[64];
    void *mem;
    pid_t pid;
    int status;

    fflush(NULL);
    pid = fork();
    if (pid == 0) { /* a fresh count of calls */
        snprintf(spec, sizeof(spec), "cudaMallocHost@%d", nth);
        setenv("WEX_FAKE_CUDA_FAIL", spec, 1);
        if (wex_job_open(job_text(COPY_JOB, window), WEX_SIDE_DESTINATION, 0,
                         &opts, &job) != WEX_OK)
            _exit(2);
        for (uint64_t i = 0; i < wex_job_tensor_count(job) && st == WEX_OK; i++)
            st = wex_job_alloc_memory(job, i, WEX_MEMORY_CUDA, &mem);
        printf("pinned allocation %d failed: %s\n", nth, wex_last_error());
        fflush(stdout);
        wex_job_close(job);
        /* exit, not _exit: under LeakSanitizer, nothing must be left */
        exit(st != WEX_OK && strstr(wex_last_error(), says) &&
                     strstr(wex_last_error(), "injected failure")
                 ? 0
                 : 1);
    }
    EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
               WEXITSTATUS(status) == 0,
           "pinned allocation %d: not refused saying \"%s\" (status %d)", nth,
           says, status);
}

/* An FP8 vLLM source feeding a bf16 trainer: its fp8 weights and their
 * scales are refused as CUDA memory when bound, host memory is not. */
static void dequantizing_a_cuda_source_is_refused(void)
{
    wex_job_options opts = {sizeof(opts), 0, "127.0.0.1:1", TOKEN, NULL};
    char path[512];
    wex_job *job = NULL;
    int refused = 0, accepted = 0;
    void *mem;

    snprintf(path, sizeof(path), "%s/jobs/fp8-vllm-tp2-to-megatron-tp2.json",
             WEX_TEST_DATA);
    EXPECT(wex_job_open(path, WEX_SIDE_SOURCE, 0, &opts, &job) == WEX_OK,
           "opening %s: %s", path, wex_last_error());
    for (uint64_t i = 0; job != NULL && i < wex_job_tensor_count(job); i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(job, i, &t);
        if (t.dtype != WEX_DTYPE_F8_E4M3)
            continue;
        if (wex_job_alloc_memory(job, i, WEX_MEMORY_CUDA, &mem) ==
                WEX_ERR_UNSUPPORTED &&
            strstr(wex_last_error(), t.name) &&
            strstr(wex_last_error(), "host memory only"))
            refused++;
        if (wex_job_alloc_memory(job, i, WEX_MEMORY_HOST, &mem) == WEX_OK)
            accepted++;
    }
    EXPECT(refused > 0 && refused == accepted,
           "%d fp8 tensors refused as "
           "CUDA memory, %d accepted as host memory",
           refused, accepted);
    printf("an fp8 CUDA source the job dequantizes: %d tensors refused when "
           "bound (%s)\n",
           refused, wex_last_error());
    wex_job_close(job);
}

int main(int argc, char **argv)
{
    static const uint32_t host_to_cuda[2] = {WEX_MEMORY_HOST, WEX_MEMORY_CUDA};
    static const uint32_t cuda_to_cuda[2] = {WEX_MEMORY_CUDA, WEX_MEMORY_CUDA};
    static const uint32_t cuda_to_host[2] = {WEX_MEMORY_CUDA, WEX_MEMORY_HOST};
    const scenario scenarios[] = {
        {"a destination's copy of a window pass to the device",
         0,
         {WEX_MEMORY_HOST, WEX_MEMORY_CUDA},
         1,
         "cudaMemcpyAsync",
         "copying into device memory"},
        {"a destination's wait for its copies to the device",
         0,
         {WEX_MEMORY_HOST, WEX_MEMORY_CUDA},
         2,
         "cudaStreamSynchronize",
         "copying into device memory"},
        {"a CUDA source's strided copy into staging, mid-pass",
         0,
         {WEX_MEMORY_CUDA, WEX_MEMORY_CUDA},
         0,
         "cudaMemcpy2DAsync",
         "copying device rows out"},
        {"a CUDA source's quantization kernel",
         1,
         {WEX_MEMORY_CUDA, WEX_MEMORY_HOST},
         1,
         "wex_cuda_box_quantize",
         "the quantization kernel"},
        {"a CUDA source's amax kernel",
         1,
         {WEX_MEMORY_CUDA, WEX_MEMORY_HOST},
         2,
         "wex_cuda_box_amax",
         "the amax kernel"},
    };
    /* one scenario alone, by its index, when looking into it */
    const char *only = getenv("WEX_TEST_SCENARIO");
    outcome window_clean[2][RANKS], fp8_clean[RANKS];

    if (argc != 2) {
        fprintf(stderr, "usage: test_device_faults FAKE_CUDART.so\n");
        return 2;
    }
    if (load_fake_runtime(argv[1]) != 0)
        return 1;
    setvbuf(stdout, NULL, _IOLBF, 0);
    /* without failures: what every destination must hold at the end */
    clean_run(job_text(COPY_JOB, 65536), 1, host_to_cuda, window_clean[0]);
    clean_run(job_text(COPY_JOB, 65536), 1, cuda_to_cuda, window_clean[1]);
    clean_run(job_text(FP8_JOB, 0), 4, cuda_to_host, fp8_clean);
    for (size_t k = 0; k < sizeof(scenarios) / sizeof(scenarios[0]); k++)
        if (only == NULL || (size_t)atoi(only) == k)
            check(&scenarios[k], scenarios[k].fp8 ? fp8_clean
                                 : scenarios[k].kind[0] == WEX_MEMORY_CUDA
                                     ? window_clean[1]
                                     : window_clean[0]);
    if (only == NULL) {
        delta_job_fails("a destination's delta kernel failing at commit",
                        host_to_cuda, 1, "wex_cuda_delta_apply",
                        "the delta kernel", 1);
        /* the snapshot after a failed step holds no step: step 3 goes
         * whole, step 4 as a delta again */
        delta_job_fails("a CUDA source's delta count kernel", cuda_to_cuda, 0,
                        "wex_cuda_delta_count", "the delta count kernel", 0);
        delta_job_fails("a CUDA source's delta encoding kernel", cuda_to_host,
                        0, "wex_cuda_delta_encode", "the delta encoding kernel",
                        0);
        delta_job_fails("a CUDA source's digest kernel", cuda_to_host, 0,
                        "wex_cuda_digest_blocks", "the digest kernel", 0);
    }
    /* the device's staging; the window, too small for the first tensor,
     * then large enough */
    failed_pinned_allocation(1, 65536, "pinned staging memory");
    failed_pinned_allocation(2, 65536,
                             "its own staging (larger than "
                             "device_staging_bytes)");
    failed_pinned_allocation(2, 1u << 20,
                             "the staging window "
                             "(device_staging_bytes)");
    dequantizing_a_cuda_source_is_refused();
    printf("%s\n", failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
