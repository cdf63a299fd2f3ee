/*
 * wex between processes on one GPU, with the cuda-ipc transport.
 *
 *   gpu_sync test    every rank of two jobs as its own process (Qwen3-0.6B
 *                    hf -> hf; Megatron TP2 -> vLLM TP2, whose fused and
 *                    strided boxes take many runs per operation), tensors in
 *                    device memory from wex_job_alloc_memory, three steps
 *                    with digests; every destination element is checked
 *                    against the synthetic weights after every step.
 *   gpu_sync bench   Qwen3-8B hf -> hf (16 GB of bf16), verify none: wex's
 *                    device-to-device sync throughput, and cudaMemcpy device
 *                    to device of the same bytes in this process, from the
 *                    same run, with their ratio.
 *
 * Exits 77 (ctest's skip) with "skipped: no CUDA device" where there is
 * none. Ranks are started with fork + exec, so none inherits this
 * process's CUDA state; they meet at a rendezvous this process serves.
 */
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "synth_weights.h"
#include "store.h"

#define TOKEN "wex-gpu-test"
#define SKIP 77

extern char **environ;

typedef struct gpu_job {
    const char *what;
    const char *model, *source, *destination;
    uint64_t source_ranks, destination_ranks;
    uint64_t steps;
    int verify; /* digests, and every element checked */
} gpu_job;

static const gpu_job test_jobs[] = {
    {"Qwen3-0.6B hf -> hf", "Qwen3-0.6B", "{\"engine\": \"hf\"}",
     "{\"engine\": \"hf\"}", 1, 1, 3, 1},
    {"Qwen3-0.6B megatron tp2 -> vllm tp2", "Qwen3-0.6B",
     "{\"engine\": \"megatron\", \"parallel\": {\"tp\": 2}}",
     "{\"engine\": \"vllm\", \"parallel\": {\"tp\": 2}}", 2, 2, 3, 1},
};
static const gpu_job bench_job = {"Qwen3-8B hf -> hf",
                                  "Qwen3-8B",
                                  "{\"engine\": \"hf\"}",
                                  "{\"engine\": \"hf\"}",
                                  1,
                                  1,
                                  10,
                                  0};

static char *job_text(const gpu_job *j, const char *address)
{
    char *text = malloc(2048);

    snprintf(text, 2048,
             "{\"model\": \"%s/%s.config.json\", \"source\": %s, "
             "\"destination\": %s, \"transport\": \"cuda-ipc\", "
             "\"verify\": \"%s\", \"rendezvous\": {\"address\": \"%s\", "
             "\"token\": \"" TOKEN "\"}}",
             WEX_MODELS_DIR, j->model, j->source, j->destination,
             j->verify ? "digest" : "none", address);
    return text;
}

/* ---- one rank ------------------------------------------------------ */

/* Host copies of the rank's tensors, as a shallow copy of the job whose
 * bindings point at them: the synthetic weights are written and checked
 * there, and moved to and from the device around them. */
typedef struct mirror {
    wex_job view;
    wex__binding *bind;
} mirror;

static int mirror_open(wex_job *job, mirror *m)
{
    m->view = *job;
    m->bind = calloc(job->layout->tensor_count, sizeof(*m->bind));
    for (size_t t = 0; t < job->layout->tensor_count; t++) {
        m->bind[t].bytes = job->layout->tensors[t].bytes;
        if (cudaMallocHost(&m->bind[t].address,
                           m->bind[t].bytes ? m->bind[t].bytes : 1) !=
            cudaSuccess)
            return -1;
    }
    m->view.bind = m->bind;
    return 0;
}

static int mirror_move(wex_job *job, mirror *m, int to_device)
{
    for (size_t t = 0; t < job->layout->tensor_count; t++) {
        void *dev = job->bind[t].address, *host = m->bind[t].address;
        if (cudaMemcpy(to_device ? dev : host, to_device ? host : dev,
                       m->bind[t].bytes,
                       to_device ? cudaMemcpyHostToDevice
                                 : cudaMemcpyDeviceToHost) != cudaSuccess)
            return -1;
    }
    return 0;
}

static int worker(const gpu_job *j, const char *address, uint32_t side,
                  uint64_t rank)
{
    const char *who = side == WEX_SIDE_SOURCE ? "source" : "destination";
    char *text = job_text(j, address);
    double best = 1e30;
    uint64_t bytes = 0;
    wex_job *job = NULL;
    mirror m;

    if (cudaSetDevice(0) != cudaSuccess ||
        wex_job_open(text, side, rank, NULL, &job) != WEX_OK ||
        (j->verify && wex__synth_prepare(job) != WEX_OK))
        goto fail;
    for (uint64_t t = 0; t < wex_job_tensor_count(job); t++) {
        void *p;
        if (wex_job_alloc_memory(job, t, WEX_MEMORY_CUDA, &p) != WEX_OK)
            goto fail;
    }
    if (j->verify && mirror_open(job, &m) != 0)
        goto fail;
    for (uint64_t step = 1; step <= j->steps; step++) {
        wex_sync_report r;
        if (j->verify && side == WEX_SIDE_SOURCE) {
            wex__synth_fill(&m.view, step);
            if (mirror_move(job, &m, 1) != 0)
                goto fail;
        }
        memset(&r, 0, sizeof(r));
        r.struct_size = sizeof(r);
        if (wex_sync(job, step, &r) != WEX_OK)
            goto fail;
        if (j->verify && side == WEX_SIDE_DESTINATION) {
            uint64_t bad;
            if (mirror_move(job, &m, 0) != 0)
                goto fail;
            bad = wex__synth_check(&m.view, step);
            if (bad != 0) {
                fprintf(stderr,
                        "%s rank %llu step %llu: %llu elements "
                        "differ from the synthetic weights\n",
                        who, (unsigned long long)rank, (unsigned long long)step,
                        (unsigned long long)bad);
                return 1;
            }
        }
        /* the first step also pays for first touches: not timed */
        if (step > 1 && r.seconds < best)
            best = r.seconds;
        bytes = r.bytes;
    }
    if (!j->verify && side == WEX_SIDE_SOURCE && rank == 0) {
        char result[96];
        int n = snprintf(result, sizeof(result), "%llu %.9f",
                         (unsigned long long)bytes, best);
        if (wex__store_set(job->rendezvous.store, "bench/result", result,
                           (size_t)n) != WEX_OK)
            goto fail;
    }
    printf("%s rank %llu: %llu steps of %llu bytes%s\n", who,
           (unsigned long long)rank, (unsigned long long)j->steps,
           (unsigned long long)bytes,
           j->verify ? ", digests matched, every element checked" : "");
    wex_job_close(job);
    free(text);
    return 0;
fail:
    fprintf(stderr, "%s rank %llu: %s (CUDA: %s)\n", who,
            (unsigned long long)rank, wex_last_error(),
            cudaGetErrorString(cudaGetLastError()));
    return 1;
}

/* ---- the launcher -------------------------------------------------- */

static pid_t spawn(const char *self, const char *mode, uint32_t side,
                   uint64_t rank, const char *address)
{
    char side_s[4], rank_s[24];
    char *argv[] = {(char *)self, "--worker",      (char *)mode, side_s,
                    rank_s,       (char *)address, NULL};
    pid_t pid;

    snprintf(side_s, sizeof(side_s), "%u", side);
    snprintf(rank_s, sizeof(rank_s), "%llu", (unsigned long long)rank);
    return posix_spawn(&pid, self, NULL, NULL, argv, environ) == 0 ? pid : -1;
}

/* Every rank of the job, each a process; 0 when all of them succeed. */
static int run_job(const char *self, const char *mode, const gpu_job *j,
                   const char *address)
{
    pid_t pids[16];
    size_t n = 0;
    int failed = 0;

    printf("%s: %llu source + %llu destination processes on GPU 0\n", j->what,
           (unsigned long long)j->source_ranks,
           (unsigned long long)j->destination_ranks);
    fflush(stdout);
    for (uint64_t r = 0; r < j->source_ranks; r++)
        pids[n++] = spawn(self, mode, WEX_SIDE_SOURCE, r, address);
    for (uint64_t r = 0; r < j->destination_ranks; r++)
        pids[n++] = spawn(self, mode, WEX_SIDE_DESTINATION, r, address);
    for (size_t i = 0; i < n; i++) {
        int status = 0;
        if (pids[i] < 0 || waitpid(pids[i], &status, 0) < 0 ||
            !WIFEXITED(status) || WEXITSTATUS(status) != 0)
            failed++;
    }
    printf("%s: %s\n", j->what, failed ? "FAILED" : "ok");
    return failed != 0;
}

/* Best of several cudaMemcpy device-to-device copies of `bytes`, GB/s. */
static double memcpy_gbps(uint64_t bytes)
{
    cudaEvent_t a, b;
    void *src, *dst;
    float ms, best = 1e30f;

    if (cudaMalloc(&src, bytes) != cudaSuccess ||
        cudaMalloc(&dst, bytes) != cudaSuccess)
        return 0;
    cudaMemset(src, 1, bytes);
    cudaEventCreate(&a);
    cudaEventCreate(&b);
    for (int i = 0; i < 6; i++) {
        cudaEventRecord(a, 0);
        cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, 0);
        cudaEventRecord(b, 0);
        cudaEventSynchronize(b);
        cudaEventElapsedTime(&ms, a, b);
        if (i > 0 && ms < best)
            best = ms;
    }
    cudaFree(src);
    cudaFree(dst);
    return (double)bytes / ((double)best * 1e-3) / 1e9;
}

static int bench(const char *self, const char *address,
                 wex__store_client *client)
{
    char *result = NULL;
    size_t len = 0;
    unsigned long long bytes = 0;
    double seconds = 0, wex_gbps, cuda_gbps;

    if (run_job(self, "bench", &bench_job, address) != 0)
        return 1;
    if (wex__store_get(client, "bench/result", 10, (void **)&result, &len) !=
            WEX_OK ||
        sscanf(result, "%llu %lf", &bytes, &seconds) != 2 || seconds <= 0) {
        fprintf(stderr, "bench: no result from source rank 0: %s\n",
                wex_last_error());
        return 1;
    }
    free(result);
    wex_gbps = (double)bytes / seconds / 1e9;
    cuda_gbps = memcpy_gbps(bytes);
    printf("wex cuda-ipc D2D sync: %.1f GB/s (%llu bytes, best step %.3f ms, "
           "from the step barrier to the destination's commit)\n",
           wex_gbps, bytes, seconds * 1e3);
    printf("cudaMemcpy D2D:        %.1f GB/s (the same bytes, one copy, "
           "best of 5)\n",
           cuda_gbps);
    printf("ratio wex / cudaMemcpy: %.2f\n",
           cuda_gbps > 0 ? wex_gbps / cuda_gbps : 0.0);
    return 0;
}

int main(int argc, char **argv)
{
    wex__store_server *server = NULL;
    wex__store_client *client = NULL;
    int count = 0, failed = 0;
    cudaError_t e;

    setvbuf(stdout, NULL, _IOLBF, 0);
    if (argc == 6 && strcmp(argv[1], "--worker") == 0) {
        const gpu_job *j = strcmp(argv[2], "bench") == 0
                               ? &bench_job
                               : &test_jobs[strtoul(argv[2], NULL, 10)];
        return worker(j, argv[5], (uint32_t)strtoul(argv[3], NULL, 10),
                      strtoull(argv[4], NULL, 10));
    }
    if (argc != 2 || (strcmp(argv[1], "test") && strcmp(argv[1], "bench"))) {
        fprintf(stderr, "usage: %s test|bench\n", argv[0]);
        return 2;
    }
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return SKIP;
    }
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    if (wex__store_serve("127.0.0.1:0", TOKEN, &server) != WEX_OK ||
        wex__store_connect(wex__store_address(server), TOKEN, "launcher", 10,
                           &client) != WEX_OK) {
        fprintf(stderr, "rendezvous: %s\n", wex_last_error());
        return 1;
    }
    if (strcmp(argv[1], "bench") == 0) {
        failed = bench(argv[0], wex__store_address(server), client);
    } else {
        for (size_t i = 0; i < sizeof(test_jobs) / sizeof(test_jobs[0]); i++) {
            char mode[8];
            wex__store_server *s = NULL;
            /* a fresh rendezvous per job: step keys start over */
            if (wex__store_serve("127.0.0.1:0", TOKEN, &s) != WEX_OK)
                return 1;
            snprintf(mode, sizeof(mode), "%zu", i);
            failed +=
                run_job(argv[0], mode, &test_jobs[i], wex__store_address(s));
            wex__store_stop(s);
        }
    }
    wex__store_close(client);
    wex__store_stop(server);
    return failed ? 1 : 0;
}
