/*
 * The nccl transport between processes, on a machine without a GPU. The
 * plugin links libnccl.so.2 and libcudart.so.13; this program runs
 * itself again with the tests' fakes preloaded (LD_PRELOAD): NCCL over
 * Unix sockets (tests/fakes/fake_nccl.c) and the CUDA runtime whose device
 * pointers fault on CPU access (fake_cudart.c, which libwex loads too,
 * through WEX_CUDA_RUNTIME). Every rank is its own process, every tensor
 * of both sides in CUDA memory, and every rank joins the job's one
 * communicator:
 * - one hf source into two vLLM TP2 destination ranks: the source sends
 *   to both in one group;
 * - two vLLM TP2 source replicas into the same destinations: every
 *   source sends to both, each destination receives from all four in one
 *   group;
 * each for several steps with digests, after which every destination
 * holds byte for byte what it holds when the same job runs over shm with
 * host memory, and received at least its bytes through the fake NCCL.
 * Then a rank dies while the job runs step after step: destination 1,
 * and then the source, halfway through their bytes of step 2 (in the
 * middle of a group's transfers; the fake kills the process), and
 * destination 1 killed at random points after the first step. The
 * others fail (exit 1) within the transport's timeout_ms and the step's
 * budget, never hang; a death mid-transfer fails the transfers waiting
 * on it.
 *
 *   test_device_nccl FAKE_CUDART.so [FAKE_NCCL.so]
 *
 * Without FAKE_NCCL.so (the nccl transport was not built: no CUDA toolkit
 * or no nccl.h) it says so and exits 77, which ctest reports as skipped.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <wex/wex.h>

#define TOKEN "device-nccl-test"
#include "api_check.h"
#include "device_forks.h"

#define STEPS 4
/* The transport, with a 5 s timeout_ms (1.5 s where a rank stalls);
 * survivors of a lost rank must fail within that and a step's budget
 * (job_step_seconds: 20 s, 4 s where a rank stalls). */
#define NCCL "{\"name\": \"nccl\", \"options\": {\"timeout_ms\": 5000}}"
#define NCCL_QUICK "{\"name\": \"nccl\", \"options\": {\"timeout_ms\": 1500}}"
#define FAIL_WITHIN_MS 25000
/* Two source replicas: every source feeds both destinations, and each
 * destination hears from all four. */
#define VLLM_TP2_DP2                                                           \
    "{\"engine\": \"vllm\", \"parallel\": {\"tp\": 2, \"dp\": 2}}"

/* Steps each rank runs: STEPS, or many while a rank is killed. */
static uint64_t steps = STEPS;
/* Set: a delta job, whose destinations must take deltas after step 1,
 * and, over nccl, apply them on the device. */
static int expect_deltas;
/* What the rank that is to die (`dying`, device_forks.h) sends itself
 * halfway through step 2's transfers. */
static int dying_signal;
/* The fake NCCL's own (fake_nccl.h), found in the preloaded library. */
typedef void (*signal_after_fn)(uint64_t, int);
typedef uint64_t (*moved_fn)(void);

/* One rank, its tensors in memory of `kind`; a destination writes an
 * FNV hash of everything it holds after the last step to `out`. */
static int rank_main(const char *text, uint32_t side, uint64_t rank,
                     const char *address, uint32_t kind, int out)
{
    unsigned char **mem = NULL, *host = NULL;
    wex_job *job = NULL;
    uint64_t held = 0, small = 0, received = 0;
    int rc = 1;

    if (open_rank(text, side, rank, address, kind, &job, &mem, &host) != 0)
        goto out;
    for (uint64_t step = 1; step <= steps; step++) {
        wex_sync_report report;

        if (side == WEX_SIDE_SOURCE &&
            fill_sources(job, step, kind, mem, host) != 0)
            goto out;
        if (sync_checked(job, side, rank, step, expect_deltas, &report) != 0)
            goto out;
        received += expect_deltas ? report.wire_bytes : report.bytes;
        if (started_fd >= 0) {
            if (write(started_fd, "", 1) != 1)
                goto out;
            close(started_fd);
            started_fd = -1;
        }
        /* step 2 moves what step 1 did: stop with half of it moved */
        if (dying >= 0 && step == 1) {
            signal_after_fn die = (signal_after_fn)(uintptr_t)dlsym(
                RTLD_DEFAULT, "fake_nccl_signal_after");
            if (die == NULL)
                goto out;
            die(report.bytes / 2, dying_signal);
        }
    }
    if (side == WEX_SIDE_DESTINATION &&
        destination_holds(job, kind, mem, host, &held, &small) != 0)
        goto out;
    /* over nccl the deltas are encoded on the sources' devices, and
     * applied on the destinations', by the kernels */
    if (expect_deltas && side == WEX_SIDE_SOURCE && kind == WEX_MEMORY_CUDA &&
        cuda_calls("wex_cuda_delta_encode") == 0) {
        fprintf(stderr, "source %llu: no call of wex_cuda_delta_encode\n",
                (unsigned long long)rank);
        goto out;
    }
    /* over nccl the deltas are applied on the device, by the kernel */
    if (expect_deltas && side == WEX_SIDE_DESTINATION &&
        kind == WEX_MEMORY_CUDA && cuda_calls("wex_cuda_delta_apply") == 0) {
        fprintf(stderr, "destination %llu: no call of wex_cuda_delta_apply\n",
                (unsigned long long)rank);
        goto out;
    }
    /* CUDA memory moves over nccl here: its bytes (a delta job's, those
     * on the wire) crossed the fake */
    if (side == WEX_SIDE_DESTINATION && kind == WEX_MEMORY_CUDA) {
        moved_fn moved =
            (moved_fn)(uintptr_t)dlsym(RTLD_DEFAULT, "fake_nccl_moved");
        if (moved == NULL || moved() < received) {
            fprintf(stderr,
                    "destination %llu: %llu bytes received, %llu through "
                    "the fake NCCL\n",
                    (unsigned long long)rank, (unsigned long long)received,
                    (unsigned long long)(moved ? moved() : 0));
            goto out;
        }
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

/* Job `text` over nccl (one source, two destinations) for many steps,
 * and rank `victim` (0 the source, 2 destination 1) goes: killed by the
 * test `delay_ms` after the first step committed, or, with delay_ms < 0,
 * sending itself `sig` halfway through its bytes of step 2, in the middle
 * of a group's transfers (fake_nccl_signal_after): SIGKILL dies, SIGSTOP
 * stalls with its sockets open, which only timeout_ms can tell. The
 * other two must exit 1 within FAIL_WITHIN_MS: an error, never a hang. */
static void lose_a_rank(const char *text, int victim, int delay_ms, int sig)
{
    static const char *const who[3] = {"the source", "destination 0",
                                       "destination 1"};
    char log[] = "/tmp/wex-nccl-kill-XXXXXX";
    struct timespec nap = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    int fds[3][2], started[2], status, fd = mkstemp(log), before = failures;
    const char *how = sig == SIGSTOP ? "stalled" : "died";
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
    dying_signal = sig;
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
    if (sig == SIGKILL) {
        EXPECT(reap(pids[victim], &status, since, FAIL_WITHIN_MS) &&
                   WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
               "%s did not die", who[victim]);
        since = now_ms();
    }
    for (int i = 0; i < 3; i++) {
        if (i == victim)
            continue;
        if (!reap(pids[i], &status, since, FAIL_WITHIN_MS)) {
            EXPECT(0, "%s still ran %d ms after %s %s", who[i], FAIL_WITHIN_MS,
                   who[victim], how);
            continue;
        }
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 1,
               "%s: %s %d after %s %s", who[i],
               WIFSIGNALED(status) ? "killed by signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
               who[victim], how);
    }
    if (delay_ms >= 0)
        printf("  %s killed %d ms after the first step: the others failed "
               "%.0f ms later\n",
               who[victim], delay_ms, now_ms() - since);
    else
        printf("  %s %s halfway through step 2's transfers: the others "
               "failed %.0f ms %s\n",
               who[victim], how, now_ms() - since,
               sig == SIGSTOP ? "after the first step" : "later");
    if (sig == SIGSTOP) {
        kill(pids[victim], SIGKILL);
        waitpid(pids[victim], &status, 0);
    }
    for (int i = 0; i < 3; i++)
        close(fds[i][0]);
    /* the group waiting on a rank that died or stalled mid-transfer
     * fails: at once, or when timeout_ms runs out */
    EXPECT(delay_ms >= 0 || log_says(log, sig == SIGSTOP ? "within timeout_ms"
                                                         : "transfers failed"),
           "no rank's error says its transfers %s when %s %s",
           sig == SIGSTOP ? "timed out" : "failed", who[victim], how);
    if (failures > before)
        show(log);
    else
        unlink(log);
    close(fd);
    wex_store_close(store);
}

int main(int argc, char **argv)
{
    static const char *const jobs[][2] = {{COPY_JOB}, {VLLM_TP2_DP2, VLLM_TP2}};
    static const int sources[] = {1, 4};
    char path[1024];

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: test_device_nccl FAKE_CUDART.so "
                        "[FAKE_NCCL.so]\n");
        return 2;
    }
    snprintf(path, sizeof(path), "%s/transport-nccl.json", WEX_BUILD_PLUGINS);
    if (argc == 2 || access(path, R_OK) != 0) {
        printf("skipped: the nccl transport was not built (it needs the CUDA "
               "toolkit and NCCL's nccl.h, docs/gpu.md)\n");
        return 77;
    }
    /* the nccl plugin's calls of libnccl.so.2 and libcudart.so.13 land
     * in the fakes */
    preload(argv, argv[1], argv[2]);
    if (load_fake_runtime(argv[1]) != 0)
        return 1;
    /* each job whole, then as a delta job (about 1 % of the words change
     * a step): over nccl the sources post their payloads' lengths first,
     * the destinations receive them into device inboxes and apply them
     * on the device with the (fake) kernel at commit */
    for (size_t k = 0; k < 2 * sizeof(jobs) / sizeof(jobs[0]); k++) {
        size_t j = k % 2;
        uint64_t host[2] = {1, 2}, cuda[2] = {3, 4};
        char text[1100];
        double t = now_ms();

        few_changes = expect_deltas = k >= 2;
        for (int over_nccl = 0; over_nccl < 2; over_nccl++) {
            const char *base;
            job_transport = over_nccl ? NCCL : "\"shm\"";
            base = job_text(jobs[j][0], jobs[j][1], 0);
            snprintf(text, sizeof(text), "%.*s%s}", (int)strlen(base) - 1, base,
                     expect_deltas ? ", \"delta\": true" : "");
            run_job(rank_main, text, sources[j],
                    over_nccl ? WEX_MEMORY_CUDA : WEX_MEMORY_HOST,
                    over_nccl ? cuda : host);
        }
        for (int d = 0; d < 2; d++)
            EXPECT(host[d] == cuda[d],
                   "%d source(s)%s: destination %d holds other bytes over "
                   "nccl in CUDA memory than over shm in host memory",
                   sources[j], expect_deltas ? ", deltas" : "", d);
        printf("%d source(s) into two destination ranks: %d steps%s over "
               "nccl and over shm, %.1f s\n",
               sources[j], STEPS, expect_deltas ? " of deltas" : "",
               (now_ms() - t) / 1e3);
    }
    few_changes = expect_deltas = 0;
    { /* bf16 Megatron TP4 into FP8 vLLM TP2: quantized on the sources'
       * device, the blocks' scales made on the host in pinned memory, a
       * converting operation put and received a row at a time */
        uint64_t host[2] = {1, 2}, cuda[2] = {3, 4};
        char text[1024];
        double t = now_ms();

        job_transport = "\"shm\"";
        snprintf(text, sizeof(text), "%s", job_text(FP8_JOB, 0));
        run_job(rank_main, text, 4, WEX_MEMORY_HOST, host);
        job_transport = NCCL;
        snprintf(text, sizeof(text), "%s", job_text(FP8_JOB, 0));
        run_job(rank_main, text, 4, WEX_MEMORY_CUDA, cuda);
        for (int d = 0; d < 2; d++)
            EXPECT(host[d] == cuda[d],
                   "fp8: destination %d holds other bytes over nccl in CUDA "
                   "memory than over shm in host memory",
                   d);
        printf("bf16 Megatron TP4 sources into fp8 vLLM TP2: %d steps over "
               "nccl and over shm, %.1f s\n",
               STEPS, (now_ms() - t) / 1e3);
    }
    {
        unsigned seed = (unsigned)time(NULL);
        char text[1024];

        job_transport = NCCL;
        snprintf(text, sizeof(text), "%s", job_text(COPY_JOB, 0));
        printf("a rank dies or stalls mid-transfer, or dies at random "
               "points after the first step (seed %u)\n",
               seed);
        lose_a_rank(text, 2, -1, SIGKILL);
        lose_a_rank(text, 0, -1, SIGKILL);
        for (int k = 0; k < 3; k++)
            lose_a_rank(text, 2, (int)(rand_r(&seed) % 150), SIGKILL);
        /* a delta job's: its destinations wait for the sources' layouts
         * and receive into their inboxes */
        snprintf(text, sizeof(text), "%.*s, \"delta\": true}",
                 (int)strlen(job_text(COPY_JOB, 0)) - 1, job_text(COPY_JOB, 0));
        few_changes = 1;
        for (int k = 0; k < 2; k++)
            lose_a_rank(text, 2 * k, (int)(rand_r(&seed) % 150), SIGKILL);
        few_changes = 0;
        /* destinations wait out timeout_ms, then the step's timeout for
         * the stalled source to say it is done writing (the host's
         * fence): both short here */
        job_transport = NCCL_QUICK;
        job_step_seconds = 4;
        snprintf(text, sizeof(text), "%s", job_text(COPY_JOB, 0));
        lose_a_rank(text, 0, -1, SIGSTOP);
        job_step_seconds = 20;
    }
    if (failures == 0)
        printf("nccl between processes, CUDA memory on both sides: every "
               "byte as over shm; a rank that dies or stalls fails the "
               "others in time\n");
    return failures ? 1 : 0;
}
