/*
 * What the device-memory programs of tests/api share (test_device_staging,
 * test_device_faults, test_device_nccl, test_device_ipc): the job they
 * run, ranks forked before the rendezvous opens and told its address
 * through a pipe, filling a source's tensors for a step and hashing what
 * a destination holds, through the fake CUDA runtime's cudaMemcpy
 * (tests/fakes/fake_cudart.c), waiting for ranks against a deadline, and
 * running the program again with the fakes preloaded.
 * Define TOKEN before including.
 */
#ifndef WEX_TEST_DEVICE_RANKS_H
#define WEX_TEST_DEVICE_RANKS_H

#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <wex/wex.h>

#include "api_check.h"

typedef int (*memcpy_fn)(void *, const void *, size_t, int);

/* The fake runtime's cudaMemcpy (kind 1: to the device, 2: from it). */
static memcpy_fn cuda_memcpy;

/* How often this process called an entry of the fake runtime or kernels
 * (fake_cuda_calls: those WEX_FAKE_CUDA_FAIL can fail). */
typedef unsigned long (*calls_fn)(const char *);
static calls_fn cuda_calls;

/* The transport job_text names, as JSON (shm unless a test sets it), and
 * the steps' timeout. */
static const char *job_transport = "\"shm\"";
static unsigned job_step_seconds = 20;

/* The job: `source` and `destination` are the sides' JSON; `window` the
 * destinations' staging window (0: the default). Steps time out after
 * job_step_seconds, so a rank that hangs fails the test instead of
 * stalling it. */
static const char *job_text(const char *source, const char *destination,
                            unsigned window)
{
    static char text[1024];

    snprintf(text, sizeof(text),
             "{\"model\": \"%s/models/DeepSeek-V3-tiny-fp8.config.json\", "
             "\"source\": %s, \"destination\": %s, \"transport\": %s, "
             "\"verify\": \"digest\", \"timeouts\": {\"step_seconds\": %u}"
             "%s%.0u}",
             WEX_TEST_DATA, source, destination, job_transport,
             job_step_seconds, window ? ", \"device_staging_bytes\": " : "",
             window);
    return text;
}

/* A rank forked before the parent opens the rendezvous (whose thread a
 * fork must not copy mid-lock) waits here for its address. */
static const char *await_address(int from)
{
    static char address[256];
    ssize_t n = read(from, address, sizeof(address) - 1);

    if (n <= 0)
        _exit(4);
    address[n] = '\0';
    close(from);
    return address;
}

/* Opens the rendezvous once every rank is forked, and tells them where. */
static wex_store *serve(int n, int (*addr)[2])
{
    wex_store *store = NULL;

    EXPECT(wex_store_open("127.0.0.1:0", TOKEN, &store) == WEX_OK,
           "wex_store_open: %s", wex_last_error());
    for (int i = 0; i < n; i++) {
        const char *a = store ? wex_store_address(store) : "";
        if (write(addr[i][1], a, strlen(a)) != (ssize_t)strlen(a))
            EXPECT(0, "telling rank %d the rendezvous", i);
        close(addr[i][1]);
    }
    return store;
}

/* Whether the file at `path` holds `text`. */
static int log_says(const char *path, const char *text)
{
    static char buf[1 << 16];
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

    if (f != NULL)
        fclose(f);
    buf[n] = '\0';
    return strstr(buf, text) != NULL;
}

/* One hf source and two vLLM TP2 destinations: no dtype changes. */
#define COPY_JOB "{\"engine\": \"hf\"}", VLLM_TP2
/* bf16 Megatron TP4 sources into the FP8 checkpoint: quantized. */
#define FP8_JOB                                                                \
    "{\"engine\": \"megatron\", \"parallel\": {\"tp\": 4}}", VLLM_TP2
#define VLLM_TP2 "{\"engine\": \"vllm\", \"parallel\": {\"tp\": 2}}"

/* Opens the job as this rank and allocates every tensor in memory of
 * `kind` (*mem: a pointer per tensor) and a host buffer as large as the
 * largest (*host). 0, or -1 with the reason on stderr; the caller closes
 * the job and frees both either way. */
static int open_rank(const char *text, uint32_t side, uint64_t rank,
                     const char *address, uint32_t kind, wex_job **job,
                     unsigned char ***mem, unsigned char **host)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    uint64_t count, most = 0;

    *mem = NULL;
    *host = NULL;
    if (wex_job_open(text, side, rank, &opts, job) != WEX_OK) {
        fprintf(stderr, "open: %s\n", wex_last_error());
        return -1;
    }
    count = wex_job_tensor_count(*job);
    *mem = calloc(count ? count : 1, sizeof(**mem));
    for (uint64_t i = 0; *mem != NULL && i < count; i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(*job, i, &t);
        most = t.bytes > most ? t.bytes : most;
        if (wex_job_alloc_memory(*job, i, kind, (void **)&(*mem)[i]) !=
            WEX_OK) {
            fprintf(stderr, "alloc %llu: %s\n", (unsigned long long)i,
                    wex_last_error());
            return -1;
        }
    }
    *host = malloc(most ? most : 1);
    return *mem != NULL && *host != NULL ? 0 : -1;
}

/* Waits for the `ranks` forked ranks, the first `sources` of them
 * sources: each must exit 0. */
static inline void expect_clean_exits(const pid_t *pids, int sources, int ranks)
{
    for (int i = 0; i < ranks; i++) {
        int source = i < sources, status = 0;
        EXPECT(waitpid(pids[i], &status, 0) == pids[i] && WIFEXITED(status) &&
                   WEXITSTATUS(status) == 0,
               "%s %d: %s %d", source ? "source" : "destination",
               source ? i : i - sources,
               WIFSIGNALED(status) ? "killed by signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
}

/* Loads the fake runtime at `path` (its cudaMemcpy and call counts) and
 * points libwex at it, at its kernels and at the build's plugins; 0, or
 * -1 said on stderr. */
static int load_fake_runtime(const char *path)
{
    void *dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);

    if (dl == NULL ||
        (cuda_memcpy = (memcpy_fn)dlsym(dl, "cudaMemcpy")) == NULL ||
        (cuda_calls = (calls_fn)dlsym(dl, "fake_cuda_calls")) == NULL) {
        fprintf(stderr, "%s: %s\n", path, dlerror());
        return -1;
    }
    setenv("WEX_CUDA_RUNTIME", path, 1);
    setenv("WEX_CUDA_KERNELS", path, 1);
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    return 0;
}

/* Syncs `step` on a rank and checks its report: verified in one try, and
 * for a destination, with `deltas` 1, a delta after step 1 (most of its
 * bytes off the wire), with -1 every step whole (0: either). 0, or -1
 * said on stderr. */
static inline int sync_checked(wex_job *job, uint32_t side, uint64_t rank,
                               uint64_t step, int deltas,
                               wex_sync_report *report)
{
    const char *who = side == WEX_SIDE_SOURCE ? "source" : "destination";

    memset(report, 0, sizeof(*report));
    report->struct_size = sizeof(*report);
    if (wex_sync(job, step, report) != WEX_OK) {
        fprintf(stderr, "%s %llu: step %llu: %s\n", who,
                (unsigned long long)rank, (unsigned long long)step,
                wex_last_error());
        return -1;
    }
    if (report->verified != 1 || report->attempts != 1) {
        fprintf(stderr, "%s %llu: step %llu: verified %d, %u tries\n", who,
                (unsigned long long)rank, (unsigned long long)step,
                (int)report->verified, (unsigned)report->attempts);
        return -1;
    }
    if (side != WEX_SIDE_DESTINATION)
        return 0;
    if (deltas < 0 && report->mode != WEX_SYNC_FULL) {
        fprintf(stderr, "destination %llu: step %llu: mode %u, not whole\n",
                (unsigned long long)rank, (unsigned long long)step,
                report->mode);
        return -1;
    }
    if (deltas > 0 && step > 1 &&
        (report->mode == WEX_SYNC_FULL ||
         report->wire_bytes * 10 > report->bytes)) {
        fprintf(stderr,
                "destination %llu: step %llu: %llu of %llu bytes on the "
                "wire, mode %u: not a delta\n",
                (unsigned long long)rank, (unsigned long long)step,
                (unsigned long long)report->wire_bytes,
                (unsigned long long)report->bytes, report->mode);
        return -1;
    }
    return 0;
}

/* Set: a step after the first changes about 1 % of each tensor's 8-byte
 * words (a delta job's steps), not every byte. */
static int few_changes;

/* The step whose bytes word `w` of tensor `name` holds at `step`: the
 * last one that changed it. */
static uint64_t changed_at(const char *name, uint64_t w, uint64_t step)
{
    for (; step > 1; step--) {
        uint64_t x =
            (w + 1) * 0x9e3779b97f4a7c15ull ^ step * 0xbf58476d1ce4e5b9ull;
        for (const char *c = name; *c; c++)
            x = (x ^ (unsigned char)*c) * 0x100000001b3ull;
        x ^= x >> 31;
        if (x % 100 == 0)
            return step;
    }
    return 1;
}

/* Writes step `step`'s bytes into every tensor of a source, `mem[i]`
 * in memory of `kind`, through `host` (room for the largest tensor). */
static int fill_sources(wex_job *job, uint64_t step, uint32_t kind,
                        unsigned char **mem, unsigned char *host)
{
    for (uint64_t i = 0; i < wex_job_tensor_count(job); i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(job, i, &t);
        for (uint64_t b = 0; b < t.bytes; b++)
            host[b] =
                expected(t.name, b,
                         few_changes ? changed_at(t.name, b / 8, step) : step);
        /* bf16 in +-[2^-7, 2^-3): random bytes would put a NaN in
         * nearly every 128 x 128 block, and quantize it all to NaN */
        for (uint64_t b = 1; b < t.bytes && t.dtype == WEX_DTYPE_BF16; b += 2)
            host[b] = (unsigned char)((host[b] & 0x81u) | 0x3cu);
        if (kind == WEX_MEMORY_HOST)
            memcpy(mem[i], host, t.bytes);
        else if (cuda_memcpy(mem[i], host, t.bytes, 1) != 0)
            return -1;
    }
    return 0;
}

/* An FNV hash of every byte a destination holds, and how many bytes its
 * tensors of at most 64 KiB hold. */
static int destination_holds(wex_job *job, uint32_t kind, unsigned char **mem,
                             unsigned char *host, uint64_t *held,
                             uint64_t *small)
{
    *held = 1469598103934665603ull;
    *small = 0;
    for (uint64_t i = 0; i < wex_job_tensor_count(job); i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        const unsigned char *bytes = mem[i];
        wex_job_tensor(job, i, &t);
        if (kind == WEX_MEMORY_CUDA) {
            if (cuda_memcpy(host, mem[i], t.bytes, 2) != 0)
                return -1;
            bytes = host;
        }
        for (uint64_t b = 0; b < t.bytes; b++)
            *held = (*held ^ bytes[b]) * 1099511628211ull;
        *small += t.bytes <= 65536 ? t.bytes : 0;
    }
    return 0;
}

static inline double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* Copies the file at `path` (where the ranks' stderr went) to stderr. */
static inline void show(const char *path)
{
    char buf[4096];
    FILE *f = fopen(path, "r");
    size_t n;

    fprintf(stderr, "what the ranks said (%s):\n", path);
    while (f != NULL && (n = fread(buf, 1, sizeof(buf), f)) > 0)
        fwrite(buf, 1, n, stderr);
    if (f != NULL)
        fclose(f);
}

/* Waits up to `ms` after `since` for child `pid`; 0 when it did not end
 * (then killed). */
static inline int reap(pid_t pid, int *status, double since, double ms)
{
    pid_t got;

    while ((got = waitpid(pid, status, WNOHANG)) == 0 && now_ms() - since < ms)
        usleep(5000);
    if (got == pid)
        return 1;
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return 0;
}

/* Runs this program again with the fake runtime `cudart` preloaded, and
 * `also` (NULL: nothing) after it, so that a plugin linked against the
 * real libraries calls the fakes. An ASan build's runtime then does not
 * come first in the library list, which is harmless here: the fakes
 * define no function ASan intercepts. Returns once preloaded. */
static inline void preload(char **argv, const char *cudart, const char *also)
{
    const char *have = getenv("LD_PRELOAD"), *asan = getenv("ASAN_OPTIONS");
    char list[4096], options[1024];

    if (have != NULL && strstr(have, also ? also : cudart) != NULL)
        return;
    snprintf(list, sizeof(list), "%s%s%s%s%s", cudart, also ? ":" : "",
             also ? also : "", have ? ":" : "", have ? have : "");
    snprintf(options, sizeof(options), "%s%sverify_asan_link_order=0",
             asan ? asan : "", asan ? ":" : "");
    setenv("LD_PRELOAD", list, 1);
    setenv("ASAN_OPTIONS", options, 1);
    execv("/proc/self/exe", argv);
    fprintf(stderr, "running %s again with the fakes preloaded: %m\n", argv[0]);
    exit(1);
}

#endif /* WEX_TEST_DEVICE_RANKS_H */
