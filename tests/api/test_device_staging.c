/*
 * Device memory through a host transport, on a machine without a GPU:
 * libwex loads the tests' CUDA runtime (tests/fakes/fake_cudart.c,
 * through WEX_CUDA_RUNTIME), whose device pointers fault on any CPU
 * access. One hf source, two vLLM TP2 destinations, over shm, with
 * digests, three steps, every tensor of a side in host or CUDA memory:
 * - a CUDA source (filled with cudaMemcpy): its boxes of row-parallel
 *   weights are strided rows in device memory, read only through pinned
 *   staging, a box's rows with one strided copy;
 * - CUDA destinations: the transport writes pinned host copies, copied
 *   to the device once checked;
 * - both.
 * Then a delta job (about 1 % of the words change a step): a CUDA source's
 * boxes read through staging and encoded against its host snapshots;
 * CUDA destinations whose tensors fit the staging window apply deltas
 * into its pinned copies at commit and copy what changed to the device;
 * the destinations take deltas from step 2 on and hold what they hold
 * when both sides hold host memory. Through a 64 KiB window (in passes)
 * they take deltas too: checked against the device's bytes read through
 * staging, applied on the device by the kernel (the fake's), and hold the
 * same.
 * Then bf16 Megatron TP4 sources into an FP8 vLLM TP2 server (blocks cut
 * between sources, which agree on their amax): CUDA sources quantized on
 * the device by the kernels' entry points (the fake's, on the CPU).
 * Every step verifies, and what every destination holds after the last
 * (read back with cudaMemcpy) is byte for byte what it holds when both
 * sides hold host memory.
 *
 *   test_device_staging FAKE_CUDART.so
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

#define TOKEN "device-staging-test"
#include "api_check.h"
#include "device_ranks.h"

#define STEPS 3

/* Steps each rank runs: STEPS, or many while a rank is killed. */
static uint64_t steps = STEPS;
/* Whether destinations must report deltas after their first step (1),
 * every step whole (-1), or either (0). */
static int expect_deltas;
/* Whether CUDA destinations apply them with the kernels library (not
 * when WEX_CUDA_KERNELS names none). */
static int expect_kernel = 1;
/* Whether CUDA sources keep their snapshots in host memory (delta.snapshots
 * "host"): they encode on the CPU, kernels or not. */
static int host_snapshots;
/* Whether a CUDA source's device is full once its tensors are there: the
 * next cudaMalloc (its snapshots') fails, and it must fall back to
 * snapshots in host memory. */
static int device_full;
/* Where a rank writes a byte once its first step committed (-1: not). */
static int started_fd = -1;

/* What the destinations of the last run_job held in tensors of at most
 * 64 KiB, in bytes: how much a 64 KiB window had to take in passes. */
static uint64_t small_bytes[2];

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
    if (device_full && side == WEX_SIDE_SOURCE && kind == WEX_MEMORY_CUDA) {
        char next[48];
        snprintf(next, sizeof(next), "cudaMalloc@%lu",
                 cuda_calls("cudaMalloc") + 1);
        setenv("WEX_FAKE_CUDA_FAIL", next, 1);
    }
    for (uint64_t step = 1; step <= steps; step++) {
        wex_sync_report report;

        if (side == WEX_SIDE_SOURCE &&
            fill_sources(job, step, kind, mem, host) != 0)
            goto out;
        /* a delta job's destinations take deltas after the first step */
        if (sync_checked(job, side, rank, step, expect_deltas, &report) != 0)
            goto out;
        if (started_fd >= 0) {
            if (write(started_fd, "", 1) != 1)
                goto out;
            close(started_fd);
            started_fd = -1;
        }
    }
    /* CUDA destinations apply deltas on the device: the kernel ran (the
     * bytes it wrote are checked below, read back from the device) */
    if (expect_deltas > 0 && expect_kernel && side == WEX_SIDE_DESTINATION &&
        kind == WEX_MEMORY_CUDA && cuda_calls("wex_cuda_delta_apply") == 0) {
        fprintf(stderr,
                "destination %llu: its deltas were not applied on the "
                "device (no call of wex_cuda_delta_apply)\n",
                (unsigned long long)rank);
        goto out;
    }
    /* CUDA sources encode them on the device where the kernels are, and
     * through staging on the CPU where they are not */
    if (expect_deltas > 0 && side == WEX_SIDE_SOURCE &&
        kind == WEX_MEMORY_CUDA &&
        (cuda_calls("wex_cuda_delta_encode") > 0) !=
            (expect_kernel && !host_snapshots)) {
        fprintf(stderr,
                "source %llu: %s wex_cuda_delta_encode while the kernels "
                "library is %s and the snapshots are %s memory\n",
                (unsigned long long)rank,
                expect_kernel && !host_snapshots ? "no call of" : "a call of",
                expect_kernel ? "there" : "not",
                host_snapshots ? "host" : "device");
        goto out;
    }
    if (side == WEX_SIDE_DESTINATION &&
        destination_holds(job, kind, mem, host, &held, &small) != 0)
        goto out;
    rc = side == WEX_SIDE_DESTINATION &&
                 (write(out, &held, sizeof(held)) != sizeof(held) ||
                  write(out, &small, sizeof(small)) != sizeof(small))
             ? 3
             : 0;
out:
    wex_job_close(job);
    free(host);
    free(mem);
    return rc;
}

/* `sources` sources and two destinations of job `text` as processes,
 * each side's tensors in memory of its kind; held[d]: what destination d
 * holds after the last step. */
static void run_job(const char *text, int sources, uint32_t source_kind,
                    uint32_t destination_kind, uint64_t held[2])
{
    enum { MOST = 8 };
    wex_store *store;
    int ranks = sources + 2, fds[MOST][2], addr[MOST][2];
    pid_t pids[MOST];

    if (ranks > MOST)
        return;
    for (int i = 0; i < ranks; i++) {
        int source = i < sources;
        if (pipe(fds[i]) != 0 || pipe(addr[i]) != 0)
            return;
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[i][0]);
            close(addr[i][1]);
            _exit(rank_main(
                text, source ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                (uint64_t)(source ? i : i - sources), await_address(addr[i][0]),
                source ? source_kind : destination_kind, fds[i][1]));
        }
        close(fds[i][1]);
        close(addr[i][0]);
    }
    store = serve(ranks, addr);
    for (int i = sources; i < ranks; i++) {
        EXPECT(read(fds[i][0], &held[i - sources], sizeof(held[0])) ==
                       sizeof(held[0]) &&
                   read(fds[i][0], &small_bytes[i - sources],
                        sizeof(small_bytes[0])) == sizeof(small_bytes[0]),
               "destination %d reported nothing", i - sources);
        close(fds[i][0]);
    }
    for (int i = 0; i < sources; i++)
        close(fds[i][0]);
    expect_clean_exits(pids, sources, ranks);
    wex_store_close(store);
}

/* The window job, one source and two destinations, many steps, and
 * destination 1 killed after `delay_ms`: the source and destination 0
 * must fail (not hang, not crash) with an error naming the dead rank. */
static void kill_a_destination(const char *text, unsigned delay_ms)
{
    wex_store *store = NULL;
    char logs[2][32] = {"/tmp/wex-window-src-XXXXXX",
                        "/tmp/wex-window-dst-XXXXXX"};
    int status, fds[3][2], addr[3][2], started[2];
    pid_t pids[3];
    struct timespec nap = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
    char byte;

    for (int l = 0; l < 2; l++)
        close(mkstemp(logs[l]));
    steps = 100000;
    if (pipe(started) != 0)
        return;
    for (int i = 0; i < 3; i++) {
        if (pipe(fds[i]) != 0 || pipe(addr[i]) != 0)
            return;
        pids[i] = fork();
        if (pids[i] == 0) {
            int fd = i < 2 ? open(logs[i], O_WRONLY | O_APPEND) : -1;
            close(fds[i][0]);
            close(addr[i][1]);
            if (fd >= 0)
                dup2(fd, 2);
            close(started[0]);
            if (i == 0)
                started_fd = started[1];
            else
                close(started[1]);
            _exit(rank_main(
                text, i == 0 ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                i == 0 ? 0 : (uint64_t)i - 1, await_address(addr[i][0]),
                WEX_MEMORY_CUDA, fds[i][1]));
        }
        close(fds[i][1]);
        close(addr[i][0]);
    }
    store = serve(3, addr);
    steps = STEPS;
    close(started[1]);
    /* a step or more into the job, and then at a random point */
    EXPECT(read(started[0], &byte, 1) == 1, "the windowed job never "
                                            "committed a step");
    close(started[0]);
    nanosleep(&nap, NULL);
    kill(pids[2], SIGKILL);
    for (int i = 0; i < 3; i++) {
        const char *who[3] = {"the source", "destination 0", "destination 1"};
        EXPECT(waitpid(pids[i], &status, 0) == pids[i], "waitpid");
        if (i == 2)
            continue;
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 1,
               "%s: %s %d after destination 1 was killed", who[i],
               WIFSIGNALED(status) ? "killed by signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
        EXPECT(log_says(logs[i], "destination rank 1") ||
                   log_says(logs[i], "destination/1"),
               "%s's error does not name destination rank 1 (%s)", who[i],
               logs[i]);
        close(fds[i][0]);
    }
    close(fds[2][0]);
    for (int l = 0; l < 2; l++)
        if (failures == 0)
            unlink(logs[l]);
    wex_store_close(store);
}

int main(int argc, char **argv)
{

    if (argc != 2) {
        fprintf(stderr, "usage: test_device_staging FAKE_CUDART.so\n");
        return 2;
    }
    if (load_fake_runtime(argv[1]) != 0)
        return 1;
    {
        static const char *const what[] = {"the source's",
                                           "the "
                                           "destinations'",
                                           "both sides'"};
        const uint32_t kinds[3][2] = {{WEX_MEMORY_CUDA, WEX_MEMORY_HOST},
                                      {WEX_MEMORY_HOST, WEX_MEMORY_CUDA},
                                      {WEX_MEMORY_CUDA, WEX_MEMORY_CUDA}};
        uint64_t host[2] = {1, 2}, fp8_host[2] = {5, 6}, fp8_cuda[2] = {7, 8};
        uint64_t windowed[2] = {9, 10};
        char copy_job[1024], fp8_job[1024], window_job[1024];
        snprintf(copy_job, sizeof(copy_job), "%s", job_text(COPY_JOB, 0));
        snprintf(fp8_job, sizeof(fp8_job), "%s", job_text(FP8_JOB, 0));
        snprintf(window_job, sizeof(window_job), "%s",
                 job_text(COPY_JOB, 65536));
        run_job(copy_job, 1, WEX_MEMORY_HOST, WEX_MEMORY_HOST, host);
        for (int k = 0; k < 3; k++) {
            uint64_t cuda[2] = {3, 4};
            run_job(copy_job, 1, kinds[k][0], kinds[k][1], cuda);
            for (int d = 0; d < 2; d++)
                EXPECT(host[d] == cuda[d],
                       "destination %d holds other "
                       "bytes when %s memory is CUDA",
                       d, what[k]);
        }
        /* CUDA destinations through a 64 KiB window: tensors of 64 KiB
         * or less fill it pass after pass, larger ones get their own */
        run_job(window_job, 1, WEX_MEMORY_CUDA, WEX_MEMORY_CUDA, windowed);
        for (int d = 0; d < 2; d++) {
            EXPECT(host[d] == windowed[d],
                   "destination %d holds other bytes "
                   "when its CUDA tensors come through a 64 KiB window",
                   d);
            EXPECT(small_bytes[d] > 2 * 65536,
                   "destination %d: only %llu "
                   "bytes of small tensors, fewer than three passes",
                   d, (unsigned long long)small_bytes[d]);
        }
        {
            unsigned seed = (unsigned)time(NULL);
            printf("killing destination 1 of the windowed job at random "
                   "points after its first step (seed %u)\n",
                   seed);
            for (int k = 0; k < 5; k++)
                kill_a_destination(window_job, (unsigned)rand_r(&seed) % 40);
        }
        {
            char delta_job[1100], window_delta[1150];
            uint64_t dh[2] = {11, 12};
            size_t n = strlen(copy_job);
            snprintf(delta_job, sizeof(delta_job), "%.*s, \"delta\": true}",
                     (int)(n - 1), copy_job);
            n = strlen(window_job);
            /* 2 %: some boxes of a fused tensor go whole beside the
             * others' deltas (a place in the window then holds only those
             * boxes, copied by their runs) */
            snprintf(window_delta, sizeof(window_delta),
                     "%.*s, \"delta\": {\"max_fraction\": 0.02}}", (int)(n - 1),
                     window_job);
            few_changes = expect_deltas = 1;
            run_job(delta_job, 1, WEX_MEMORY_HOST, WEX_MEMORY_HOST, dh);
            for (int k = 0; k < 3; k++) {
                uint64_t dc[2] = {13, 14};
                run_job(delta_job, 1, kinds[k][0], kinds[k][1], dc);
                for (int d = 0; d < 2; d++)
                    EXPECT(dh[d] == dc[d],
                           "delta job: destination %d holds other bytes "
                           "when %s memory is CUDA",
                           d, what[k]);
            }
            /* the CUDA source's snapshots in host memory: encoded on the
             * CPU through staging though the kernels are there */
            {
                char host_job[1150];
                uint64_t dc[2] = {17, 18};
                n = strlen(copy_job);
                snprintf(host_job, sizeof(host_job),
                         "%.*s, \"delta\": {\"snapshots\": \"host\"}}",
                         (int)(n - 1), copy_job);
                host_snapshots = 1;
                run_job(host_job, 1, WEX_MEMORY_CUDA, WEX_MEMORY_CUDA, dc);
                for (int d = 0; d < 2; d++)
                    EXPECT(dh[d] == dc[d],
                           "delta job, the CUDA source's snapshots in host "
                           "memory: destination %d holds other bytes",
                           d);
                /* asked on the device, where there is no room for them:
                 * in host memory all the same, the job unharmed */
                device_full = 1;
                run_job(delta_job, 1, WEX_MEMORY_CUDA, WEX_MEMORY_CUDA, dc);
                device_full = host_snapshots = 0;
                for (int d = 0; d < 2; d++)
                    EXPECT(dh[d] == dc[d],
                           "delta job, no device memory for the CUDA "
                           "source's snapshots: destination %d holds other "
                           "bytes",
                           d);
            }
            /* in passes, a CUDA tensor's place in the window holds other
             * tensors between steps: its deltas are checked against the
             * device's bytes (read through staging) and applied there by
             * the kernel; what came whole is copied whole, or by its boxes
             * where others of the tensor came as deltas */
            /* the source's memory host, then CUDA; then host with the
             * device's bytes read back in 4 KiB slices (an operation over
             * several, runs cut between two) */
            for (int k = 1; k < 4; k++) {
                uint64_t dw[2] = {15, 16};
                if (k == 3)
                    setenv("WEX_TEST_DEVICE_SLICE", "4096", 1);
                run_job(window_delta, 1, k < 3 ? kinds[k][0] : WEX_MEMORY_HOST,
                        WEX_MEMORY_CUDA, dw);
                unsetenv("WEX_TEST_DEVICE_SLICE");
                for (int d = 0; d < 2; d++)
                    EXPECT(dh[d] == dw[d],
                           "delta job: destination %d holds other bytes "
                           "when its CUDA tensors come through a 64 KiB "
                           "window (%s)",
                           d,
                           k == 1   ? "the source's memory host"
                           : k == 2 ? "the source's memory CUDA"
                                    : "read back in 4 KiB slices");
            }
            /* without libwex_cuda.so: one pass still takes deltas, the
             * tensors they touched copied whole from their pinned
             * copies; in passes every step comes whole; CUDA sources
             * read theirs through staging and encode them on the CPU */
            setenv("WEX_CUDA_KERNELS", "/nonexistent/libwex_cuda.so", 1);
            expect_kernel = 0;
            for (int k = 0; k < 3; k++) {
                uint64_t dn[2] = {19, 20};
                expect_deltas = k == 1 ? -1 : 1;
                run_job(k == 1 ? window_delta : delta_job, 1,
                        k == 2 ? WEX_MEMORY_CUDA : WEX_MEMORY_HOST,
                        k == 2 ? WEX_MEMORY_HOST : WEX_MEMORY_CUDA, dn);
                for (int d = 0; d < 2; d++)
                    EXPECT(dh[d] == dn[d],
                           "delta job without the kernels library: "
                           "destination %d holds other bytes (%s)",
                           d,
                           k == 0   ? "one pass"
                           : k == 1 ? "in passes"
                                    : "CUDA sources encoded on the CPU");
            }
            setenv("WEX_CUDA_KERNELS", argv[1], 1);
            expect_kernel = 1;
            few_changes = expect_deltas = 0;
        }
        run_job(fp8_job, 4, WEX_MEMORY_HOST, WEX_MEMORY_HOST, fp8_host);
        run_job(fp8_job, 4, WEX_MEMORY_CUDA, WEX_MEMORY_HOST, fp8_cuda);
        for (int d = 0; d < 2; d++)
            EXPECT(fp8_host[d] == fp8_cuda[d],
                   "fp8 destination %d holds "
                   "other bytes when the sources quantize on the device",
                   d);
    }
    if (failures == 0)
        printf("CUDA sources, destinations and both over shm, through "
               "pinned host memory, and CUDA sources quantized into fp8 on "
               "the device: %d steps verified, every byte as with host "
               "memory\n",
               STEPS);
    return failures ? 1 : 0;
}
