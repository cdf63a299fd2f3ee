/*
 * The cuda-ipc transport between processes, on a machine without a GPU.
 * The plugin links libcudart.so.13; this program runs itself again with
 * the fake runtime preloaded (tests/fakes/fake_cudart.c, which libwex
 * loads too, through WEX_CUDA_RUNTIME), whose device memory another
 * process maps through CUDA IPC (fake_cuda_ipc.c). Every rank is its own
 * process, every tensor of both sides in CUDA memory, and a source copies
 * straight into the destinations' buffers:
 * - one hf source into two vLLM TP2 destination ranks: the rows of a
 *   destination's column slice go as one 2-D copy;
 * - two vLLM TP2 source replicas into the same destinations: four
 *   processes open each destination's allocations;
 * - the first again as a delta job (about 1 % of the words change a
 *   step): from step 2 the destinations take deltas, encoded by the
 *   sources' (fake) kernels, written into inboxes of device memory and
 *   applied by the destinations' kernel; and bf16 Megatron TP4 sources
 *   into an FP8 vLLM TP2 server, quantized on the sources' device;
 * each for several steps with digests, after which every destination
 * holds byte for byte what it holds when the same job runs over shm with
 * host memory. Then a rank dies while the job runs step after step: the
 * source in the middle of step 2's copies into the destinations (the fake
 * runtime kills it inside a copy call), and destination 1 or the source
 * killed at random points after the first step. The others fail (exit 1)
 * within the step's budget, never hang.
 *
 *   test_device_ipc FAKE_CUDART.so
 *
 * Where the cuda-ipc transport was not built (no CUDA toolkit) it says so
 * and exits 77, which ctest reports as skipped.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <wex/wex.h>

#define TOKEN "device-ipc-test"
#include "api_check.h"
#include "device_forks.h"

#define STEPS 3
#define IPC                                                                    \
    "{\"name\": \"cuda-ipc\", \"options\": {\"flush_timeout_ms\": 5000}}"
/* Survivors of a lost rank fail within a step's budget (job_step_seconds:
 * 20 s) and then some. */
#define FAIL_WITHIN_MS 25000
/* Two source replicas: every source feeds both destinations. */
#define VLLM_TP2_DP2                                                           \
    "{\"engine\": \"vllm\", \"parallel\": {\"tp\": 2, \"dp\": 2}}"

/* Steps each rank runs: STEPS, or many while a rank is killed. */
static uint64_t steps = STEPS;
/* Set: a delta job's destinations must take deltas after step 1. */
static int expect_deltas;
/* Set: every source must have copied strided rows as 2-D copies. */
static int expect_2d;

/* Makes this source kill itself in the middle of step 2's copies into
 * the destinations, given how many it had made before step 1
 * (`before`): at the copy halfway through as many as step 1 made, which
 * the fake runtime counts as "ipc_copy" (WEX_FAKE_CUDA_FAIL's "!"). */
static void die_in_step_2(unsigned long before)
{
    unsigned long now = cuda_calls("ipc_copy");
    char spec[64];

    snprintf(spec, sizeof(spec), "ipc_copy@%lu!", now + (now - before) / 2 + 1);
    setenv("WEX_FAKE_CUDA_FAIL", spec, 1);
}

/* One rank, its tensors in memory of `kind`; a destination writes an
 * FNV hash of everything it holds after the last step to `out`. */
static int rank_main(const char *text, uint32_t side, uint64_t rank,
                     const char *address, uint32_t kind, int out)
{
    unsigned char **mem = NULL, *host = NULL;
    wex_job *job = NULL;
    uint64_t held = 0, small = 0;
    int rc = 1;

    if (open_rank(text, side, rank, address, kind, &job, &mem, &host) != 0)
        goto out;
    for (uint64_t step = 1; step <= steps; step++) {
        unsigned long before = cuda_calls("ipc_copy");
        wex_sync_report report;

        if (side == WEX_SIDE_SOURCE &&
            fill_sources(job, step, kind, mem, host) != 0)
            goto out;
        if (sync_checked(job, side, rank, step, expect_deltas, &report) != 0)
            goto out;
        if (started_fd >= 0) {
            if (write(started_fd, "", 1) != 1)
                goto out;
            close(started_fd);
            started_fd = -1;
        }
        if (dying >= 0 && step == 1)
            die_in_step_2(before);
    }
    if (side == WEX_SIDE_DESTINATION &&
        destination_holds(job, kind, mem, host, &held, &small) != 0)
        goto out;
    /* CUDA memory moves over cuda-ipc here: a source copied into memory
     * it opened with cudaIpcOpenMemHandle */
    if (side == WEX_SIDE_SOURCE && kind == WEX_MEMORY_CUDA &&
        cuda_calls("ipc_copy") == 0) {
        fprintf(stderr, "source %llu: no copy into a destination's memory\n",
                (unsigned long long)rank);
        goto out;
    }
    /* a delta job's deltas are encoded on the sources' devices and
     * applied on the destinations', by the kernels */
    if (expect_deltas && kind == WEX_MEMORY_CUDA &&
        cuda_calls(side == WEX_SIDE_SOURCE ? "wex_cuda_delta_encode"
                                           : "wex_cuda_delta_apply") == 0) {
        fprintf(stderr, "%s %llu: no call of %s\n",
                side == WEX_SIDE_SOURCE ? "source" : "destination",
                (unsigned long long)rank,
                side == WEX_SIDE_SOURCE ? "wex_cuda_delta_encode"
                                        : "wex_cuda_delta_apply");
        goto out;
    }
    /* digests of device memory: the operations that are one run taken
     * on the device (the blocks' digests, digest_blocks.h); the hf
     * source's rows of a column split are one run too */
    if (kind == WEX_MEMORY_CUDA &&
        (side == WEX_SIDE_DESTINATION || expect_2d) &&
        cuda_calls("wex_cuda_digest_blocks") == 0) {
        fprintf(stderr, "%s %llu: nothing digested on the device\n",
                side == WEX_SIDE_SOURCE ? "source" : "destination",
                (unsigned long long)rank);
        goto out;
    }
    if (expect_2d && side == WEX_SIDE_SOURCE && kind == WEX_MEMORY_CUDA &&
        cuda_calls("cudaMemcpy2DAsync") == 0) {
        fprintf(stderr, "source %llu: no strided rows went as a 2-D copy\n",
                (unsigned long long)rank);
        goto out;
    }
    rc = side == WEX_SIDE_DESTINATION &&
                 write(out, &held, sizeof(held)) != sizeof(held)
             ? 3
             : 0;
out:
    wex_job_close(job);
    free(host);
    free(mem);
    return rc;
}

/* The job text of `source` into `destination` over `transport`, a delta
 * job when `delta`. */
static const char *job_over(const char *transport, const char *source,
                            const char *destination, int delta)
{
    static char text[1100];
    const char *base;

    job_transport = transport;
    base = job_text(source, destination, 0);
    snprintf(text, sizeof(text), "%.*s%s}", (int)strlen(base) - 1, base,
             delta ? ", \"delta\": true" : "");
    return text;
}

/* `sources` sources of `source` into two destinations of `destination`,
 * a delta job when `delta`, over shm with host memory and over cuda-ipc
 * with CUDA memory: the destinations must hold the same bytes. A delta
 * job's destinations take deltas after the first step over both (over
 * cuda-ipc into inboxes of device memory). */
static void compare(const char *what, const char *source,
                    const char *destination, int sources, int delta)
{
    uint64_t host[2] = {1, 2}, cuda[2] = {3, 4};
    double t = now_ms();

    few_changes = delta;
    expect_deltas = delta;
    run_job(rank_main, job_over("\"shm\"", source, destination, delta), sources,
            WEX_MEMORY_HOST, host);
    run_job(rank_main, job_over(IPC, source, destination, delta), sources,
            WEX_MEMORY_CUDA, cuda);
    few_changes = expect_deltas = 0;
    for (int d = 0; d < 2; d++)
        EXPECT(host[d] == cuda[d],
               "%s: destination %d holds other bytes over cuda-ipc in CUDA "
               "memory than over shm in host memory",
               what, d);
    printf("%s: %d steps over cuda-ipc and over shm, %.1f s\n", what, STEPS,
           (now_ms() - t) / 1e3);
}

/* Job `text` (one source, two destinations) for many steps, and rank
 * `victim` (0 the source, 2 destination 1) goes: killed by the test
 * `delay_ms` after the first step committed, or, with delay_ms < 0,
 * killing itself in the middle of step 2's copies. The other two must
 * exit 1 within FAIL_WITHIN_MS: an error, never a hang. */
static void lose_a_rank(const char *text, int victim, int delay_ms)
{
    static const char *const who[3] = {"the source", "destination 0",
                                       "destination 1"};
    char log[] = "/tmp/wex-ipc-kill-XXXXXX";
    struct timespec nap = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    int fds[3][2], started[2], status, fd = mkstemp(log), before = failures;
    pid_t pids[3];
    wex_store *store;
    double since;
    char byte;

    if (fd < 0 || pipe(started) != 0)
        return;
    /* the ranks' errors go to the log, shown when a check fails */
    log_fd = fd;
    steps = 100000;
    started_fd = started[1];
    dying = delay_ms < 0 ? victim : -1;
    store = start_ranks(rank_main, text, 1, WEX_MEMORY_CUDA, pids, fds);
    steps = STEPS;
    started_fd = log_fd = dying = -1;
    close(started[1]);
    EXPECT(read(started[0], &byte, 1) == 1, "the job never committed a step");
    close(started[0]);
    since = now_ms();
    if (delay_ms >= 0) {
        nanosleep(&nap, NULL);
        kill(pids[victim], SIGKILL);
    }
    EXPECT(reap(pids[victim], &status, since, FAIL_WITHIN_MS) &&
               WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
           "%s did not die", who[victim]);
    since = now_ms();
    for (int i = 0; i < 3; i++) {
        if (i == victim)
            continue;
        if (!reap(pids[i], &status, since, FAIL_WITHIN_MS)) {
            EXPECT(0, "%s still ran %d ms after %s died", who[i],
                   FAIL_WITHIN_MS, who[victim]);
            continue;
        }
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 1,
               "%s: %s %d after %s died", who[i],
               WIFSIGNALED(status) ? "killed by signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
               who[victim]);
    }
    if (delay_ms >= 0)
        printf("  %s killed %d ms after the first step: the others failed "
               "%.0f ms later\n",
               who[victim], delay_ms, now_ms() - since);
    else
        printf("  %s died in the middle of step 2's copies: the others "
               "failed %.0f ms later\n",
               who[victim], now_ms() - since);
    for (int i = 0; i < 3; i++)
        close(fds[i][0]);
    /* the survivors name the rank they lost, as the rendezvous or the
     * step's verdict calls it */
    EXPECT(
        log_says(log, victim == 0 ? "source/0" : "destination/1") ||
            log_says(log, victim == 0 ? "source rank 0" : "destination rank 1"),
        "no rank's error names %s", who[victim]);
    if (failures > before)
        show(log);
    else
        unlink(log);
    close(fd);
    wex_store_close(store);
}

int main(int argc, char **argv)
{
    char path[1024];

    if (argc != 2) {
        fprintf(stderr, "usage: test_device_ipc FAKE_CUDART.so\n");
        return 2;
    }
    snprintf(path, sizeof(path), "%s/transport-cuda-ipc.json",
             WEX_BUILD_PLUGINS);
    if (access(path, R_OK) != 0) {
        printf("skipped: the cuda-ipc transport was not built (it needs the "
               "CUDA toolkit, docs/gpu.md)\n");
        return 77;
    }
    /* the plugin's calls of libcudart.so.13 land in the fake */
    preload(argv, argv[1], NULL);
    if (load_fake_runtime(argv[1]) != 0)
        return 1;
    /* the hf source's rows of a destination's column slice go as 2-D
     * copies; the replicas' slices are the destinations' own */
    expect_2d = 1;
    compare("1 source into two destination ranks", COPY_JOB, 1, 0);
    expect_2d = 0;
    compare("2 x 2 sources into two destination ranks", VLLM_TP2_DP2, VLLM_TP2,
            4, 0);
    compare("1 source into two destination ranks, a delta job", COPY_JOB, 1, 1);
    compare("bf16 Megatron TP4 sources into fp8 vLLM TP2", FP8_JOB, 4, 0);
    {
        unsigned seed = (unsigned)time(NULL);
        const char *text = job_over(IPC, COPY_JOB, 0);

        printf("a rank dies mid-copy, or at random points after the first "
               "step (seed %u)\n",
               seed);
        lose_a_rank(text, 0, -1);
        for (int k = 0; k < 3; k++)
            lose_a_rank(text, 2 * (k % 2 == 0), (int)(rand_r(&seed) % 150));
    }
    if (failures == 0)
        printf("cuda-ipc between processes, CUDA memory on both sides: "
               "every byte as over shm; a rank that dies fails the others "
               "in time\n");
    return failures ? 1 : 0;
}
