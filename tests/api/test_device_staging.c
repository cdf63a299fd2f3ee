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
 * Every step verifies, and what every destination holds after the last
 * (read back with cudaMemcpy) is byte for byte what it holds when both
 * sides hold host memory.
 *
 *   test_device_staging FAKE_CUDART.so
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wex/wex.h>

#include "api_check.h"

#define TOKEN "device-staging-test"
#define STEPS 3

typedef int (*memcpy_fn)(void *, const void *, size_t, int);

static memcpy_fn cuda_memcpy;

static const char *job_text(void)
{
    static char text[1024];

    snprintf(text, sizeof(text),
             "{\"model\": \"%s/models/DeepSeek-V3-tiny-fp8.config.json\", "
             "\"source\": {\"engine\": \"hf\"}, "
             "\"destination\": {\"engine\": \"vllm\", \"parallel\": "
             "{\"tp\": 2}}, \"transport\": \"shm\", \"verify\": \"digest\"}",
             WEX_TEST_DATA);
    return text;
}

/* One rank, its tensors in memory of `kind`; a destination writes an
 * FNV hash of everything it holds after the last step to `out`. */
static int rank_main(uint32_t side, uint64_t rank, const char *address,
                     uint32_t kind, int out)
{
    wex_job_options opts = {sizeof(opts), 0, address, TOKEN, NULL};
    unsigned char **mem = NULL, *host = NULL;
    wex_job *job = NULL;
    uint64_t count, most = 0, held = 1469598103934665603ull;
    int rc = 1;

    if (wex_job_open(job_text(), side, rank, &opts, &job) != WEX_OK) {
        fprintf(stderr, "open: %s\n", wex_last_error());
        return 1;
    }
    count = wex_job_tensor_count(job);
    mem = calloc(count, sizeof(*mem));
    for (uint64_t i = 0; i < count; i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        wex_job_tensor(job, i, &t);
        most = t.bytes > most ? t.bytes : most;
        if (wex_job_alloc_memory(job, i, kind, (void **)&mem[i]) != WEX_OK) {
            fprintf(stderr, "alloc %llu: %s\n", (unsigned long long)i,
                    wex_last_error());
            goto out;
        }
    }
    host = malloc(most ? most : 1);
    for (uint64_t step = 1; step <= STEPS; step++) {
        wex_sync_report report;

        for (uint64_t i = 0; i < count && side == WEX_SIDE_SOURCE; i++) {
            wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
            wex_job_tensor(job, i, &t);
            for (uint64_t b = 0; b < t.bytes; b++)
                host[b] = expected(t.name, b, step);
            if (kind == WEX_MEMORY_HOST)
                memcpy(mem[i], host, t.bytes);
            else if (cuda_memcpy(mem[i], host, t.bytes, 1) != 0)
                goto out;
        }
        memset(&report, 0, sizeof(report));
        report.struct_size = sizeof(report);
        if (wex_sync(job, step, &report) != WEX_OK) {
            fprintf(stderr, "%s %llu: step %llu: %s\n",
                    side == WEX_SIDE_SOURCE ? "source" : "destination",
                    (unsigned long long)rank, (unsigned long long)step,
                    wex_last_error());
            goto out;
        }
        if (report.verified != 1 || report.attempts != 1)
            goto out;
    }
    for (uint64_t i = 0; i < count && side == WEX_SIDE_DESTINATION; i++) {
        wex_tensor t = {sizeof(t), 0, 0, 0, NULL, NULL, 0};
        const unsigned char *bytes = mem[i];
        wex_job_tensor(job, i, &t);
        if (kind == WEX_MEMORY_CUDA) {
            if (cuda_memcpy(host, mem[i], t.bytes, 2) != 0)
                goto out;
            bytes = host;
        }
        for (uint64_t b = 0; b < t.bytes; b++)
            held = (held ^ bytes[b]) * 1099511628211ull;
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

/* One source and two destinations as processes, each side's tensors in
 * memory of its kind; held[d]: what destination d holds after the last
 * step. */
static void run_job(uint32_t source_kind, uint32_t destination_kind,
                    uint64_t held[2])
{
    wex_store *store = NULL;
    pid_t ranks[3];
    int status, fds[3][2];

    EXPECT(wex_store_open("127.0.0.1:0", TOKEN, &store) == WEX_OK,
           "wex_store_open: %s", wex_last_error());
    if (store == NULL)
        return;
    for (int i = 0; i < 3; i++) {
        if (pipe(fds[i]) != 0)
            return;
        ranks[i] = fork();
        if (ranks[i] == 0) {
            close(fds[i][0]);
            _exit(rank_main(i == 0 ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                            i == 0 ? 0 : (uint64_t)i - 1,
                            wex_store_address(store),
                            i == 0 ? source_kind : destination_kind,
                            fds[i][1]));
        }
        close(fds[i][1]);
    }
    for (int i = 1; i < 3; i++) {
        EXPECT(read(fds[i][0], &held[i - 1], sizeof(held[0])) ==
                   sizeof(held[0]),
               "destination %d reported nothing", i - 1);
        close(fds[i][0]);
    }
    close(fds[0][0]);
    for (int i = 0; i < 3; i++) {
        EXPECT(waitpid(ranks[i], &status, 0) == ranks[i] &&
                   WIFEXITED(status) && WEXITSTATUS(status) == 0,
               "%s %d: %s %d", i == 0 ? "source" : "destination",
               i == 0 ? 0 : i - 1,
               WIFSIGNALED(status) ? "killed by signal" : "exit status",
               WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    }
    wex_store_close(store);
}

int main(int argc, char **argv)
{
    void *dl;

    if (argc != 2) {
        fprintf(stderr, "usage: test_device_staging FAKE_CUDART.so\n");
        return 2;
    }
    dl = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (dl == NULL || (cuda_memcpy = (memcpy_fn)dlsym(dl, "cudaMemcpy")) ==
                          NULL) {
        fprintf(stderr, "%s: %s\n", argv[1], dlerror());
        return 1;
    }
    setenv("WEX_CUDA_RUNTIME", argv[1], 1);
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    {
        static const char *const what[] = {"the source's", "the "
                                           "destinations'", "both sides'"};
        const uint32_t kinds[3][2] = {{WEX_MEMORY_CUDA, WEX_MEMORY_HOST},
                                      {WEX_MEMORY_HOST, WEX_MEMORY_CUDA},
                                      {WEX_MEMORY_CUDA, WEX_MEMORY_CUDA}};
        uint64_t host[2] = {1, 2};
        run_job(WEX_MEMORY_HOST, WEX_MEMORY_HOST, host);
        for (int k = 0; k < 3; k++) {
            uint64_t cuda[2] = {3, 4};
            run_job(kinds[k][0], kinds[k][1], cuda);
            for (int d = 0; d < 2; d++)
                EXPECT(host[d] == cuda[d], "destination %d holds other "
                       "bytes when %s memory is CUDA", d, what[k]);
        }
    }
    if (failures == 0)
        printf("CUDA sources, destinations and both over shm, through "
               "pinned host memory: %d steps verified, every byte as with "
               "host memory\n", STEPS);
    return failures ? 1 : 0;
}
