/*
 * The nccl transport on one GPU. NCCL puts each rank of a communicator
 * on its own GPU, so one GPU cannot carry a real two-rank transfer; what
 * fits is checked, every rank's connect given an exchange kept in files
 * (the job's rendezvous stands in for it in a job):
 *  1. a destination context: connect publishes the unique id, device
 *     memory registers, host memory and mem_alloc are refused, its key
 *     names it rank 0 of a group of 2; recvs from a stranger or past the
 *     buffer are refused, a second connect too; a source that never
 *     connected is refused a put;
 *  2. a destination process killed before its source joins: the source's
 *     put + flush fails within timeout_ms (the communicator aborted), and
 *     tearing down returns: an error, never a hang;
 *  3. both ranks in this process on the one GPU: either NCCL refuses the
 *     pair (reported, not a failure) or the bytes arrive and are checked;
 *     either way within the deadline.
 * Exits 77 (ctest's skip) with "skipped: no CUDA device" without a GPU.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include "error.h"
#include "clock.h"
#include "nccl_key.h"
#include "options.h"
#include "host_registry.h"
#include "registry.h"

#define SKIP 77
#define BYTES (1u << 20)
#define TIMEOUT_MS 4000
#define NCCL_ID_BYTES 128 /* sizeof(ncclUniqueId) */

extern char **environ;

static const wex_transport_ops *ops;
static wex_plugin_state *state;
static wex_options options;
static int failures;

#define CHECK(cond, ...)                                                       \
    do {                                                                       \
        if (!(cond)) {                                                         \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                        \
            printf(__VA_ARGS__);                                               \
            printf(" (%s)\n", wex__last_error());                              \
            failures++;                                                        \
        }                                                                      \
    } while (0)

/* ---- an exchange kept in files: dir/NAME ----------------------------- */

static char exchange_root[64];

static wex_status file_publish(void *ctx, const char *name, const void *value,
                               uint64_t len)
{
    char path[256], tmp[300];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", (const char *)ctx, name);
    snprintf(tmp, sizeof(tmp), "%s.%ld", path, (long)getpid());
    f = fopen(tmp, "wb");
    if (f == NULL || fwrite(value, 1, (size_t)len, f) != (size_t)len) {
        if (f != NULL)
            fclose(f);
        return WEX_ERR_SYSTEM;
    }
    fclose(f);
    return rename(tmp, path) == 0 ? WEX_OK : WEX_ERR_SYSTEM;
}

static wex_status file_fetch(void *ctx, const char *name, void *value,
                             uint64_t cap, uint64_t *len_p)
{
    char path[256];
    FILE *f = NULL;

    snprintf(path, sizeof(path), "%s/%s", (const char *)ctx, name);
    for (int i = 0; i < 1000 && (f = fopen(path, "rb")) == NULL; i++)
        usleep(10000);
    if (f == NULL)
        return WEX_ERR_TIMEOUT;
    *len_p = fread(value, 1, (size_t)cap, f);
    fclose(f);
    return WEX_OK;
}

/* The exchange of check `n`: a directory of its own. */
static wex_transport_exchange exchange_of(int n, char *dir, size_t cap)
{
    wex_transport_exchange ex;

    snprintf(dir, cap, "%s/%d", exchange_root, n);
    mkdir(dir, 0700);
    memset(&ex, 0, sizeof(ex));
    ex.struct_size = sizeof(ex);
    ex.ctx = dir;
    ex.publish = file_publish;
    ex.fetch = file_fetch;
    return ex;
}

static void remove_exchange(void)
{
    char path[256];

    for (int n = 1; n <= 3; n++) {
        snprintf(path, sizeof(path), "%s/%d/unique-id", exchange_root, n);
        unlink(path);
        snprintf(path, sizeof(path), "%s/%d", exchange_root, n);
        rmdir(path);
    }
    rmdir(exchange_root);
}

/* A job of one source and one destination. */
static wex_status open_ctx(uint32_t side, wex_transport_ctx **ctx_p)
{
    static const uint64_t other = 0;
    wex_transport_args a;

    memset(&a, 0, sizeof(a));
    a.struct_size = sizeof(a);
    a.side = side;
    a.source_ranks = 1;
    a.destination_ranks = 1;
    a.options = &options;
    a.job_id = "wex-gpu-nccl";
    a.peer_ranks = &other;
    a.peer_count = 1;
    wex__error_clear();
    return ops->ctx_create(state, &a, ctx_p);
}

/* A connected source, or NULL. */
static wex_transport_ctx *source(const wex_transport_exchange *ex)
{
    wex_transport_ctx *ctx = NULL;

    if (open_ctx(WEX_SIDE_SOURCE, &ctx) != WEX_OK)
        return NULL;
    if (ops->connect(ctx, ex) != WEX_OK) {
        ops->ctx_destroy(ctx);
        return NULL;
    }
    return ctx;
}

/* A connected destination with one device buffer and its key. */
static int destination(const wex_transport_exchange *ex,
                       wex_transport_ctx **ctx, wex_transport_mem **mem,
                       void **buf, unsigned char *key, uint64_t *key_len)
{
    if (open_ctx(WEX_SIDE_DESTINATION, ctx) != WEX_OK ||
        ops->connect(*ctx, ex) != WEX_OK ||
        cudaMalloc(buf, BYTES) != cudaSuccess ||
        cudaMemset(*buf, 0, BYTES) != cudaSuccess ||
        ops->mem_register(*ctx, *buf, BYTES, WEX_MEMORY_CUDA, mem) != WEX_OK)
        return -1;
    *key_len = WEX_TRANSPORT_KEY_MAX;
    return ops->mem_key(*ctx, *mem, key, key_len) == WEX_OK ? 0 : -1;
}

static void check_destination(void)
{
    unsigned char key[WEX_TRANSPORT_KEY_MAX], id[256];
    uint64_t key_len = 0, id_len = 0;
    wex_transport_ctx *ctx = NULL, *src = NULL;
    wex_transport_mem *mem = NULL, *host = NULL;
    wex_transport_peer *peer = NULL;
    void *buf = NULL, *abuf = NULL;
    char why[160], dir[128];
    wex_transport_exchange ex = exchange_of(1, dir, sizeof(dir));
    nccl_key k;

    CHECK(destination(&ex, &ctx, &mem, &buf, key, &key_len) == 0,
          "destination context, connect, registration and key");
    if (ctx == NULL)
        return;
    CHECK(file_fetch(dir, "unique-id", id, sizeof(id), &id_len) == WEX_OK &&
              id_len == NCCL_ID_BYTES,
          "connect published a %d-byte unique id (%llu)", NCCL_ID_BYTES,
          (unsigned long long)id_len);
    CHECK(ops->connect(ctx, &ex) == WEX_ERR_INVALID,
          "a second connect is refused");
    CHECK(ops->mem_register(ctx, key, 64, WEX_MEMORY_HOST, &host) ==
              WEX_ERR_UNSUPPORTED,
          "host memory is refused");
    CHECK(ops->mem_alloc(ctx, 4096, &abuf, &host) == WEX_ERR_UNSUPPORTED,
          "mem_alloc is refused");
    CHECK(nccl_key_decode(key, key_len, &k, why, sizeof(why)) == 0 &&
              k.rank == 0 && k.group_size == 2 && k.bytes == BYTES,
          "the key names destination 0 of a group of 2 (%s)", why);
    CHECK(ops->recv(ctx, 5, mem, 0, 16) == WEX_ERR_INVALID,
          "recv from a rank that is not a peer is refused");
    CHECK(ops->recv(ctx, 0, mem, BYTES - 8, 16) == WEX_ERR_INVALID,
          "recv past the buffer is refused");
    /* a source the host never connected */
    CHECK(open_ctx(WEX_SIDE_SOURCE, &src) == WEX_OK &&
              ops->peer_attach(src, 0, key, key_len, &peer) == WEX_OK &&
              ops->put(src, peer, 0, buf, 16) == WEX_ERR_INVALID &&
              strstr(wex__last_error(), "not connected") != NULL,
          "a put before connect is refused");
    if (peer != NULL)
        ops->peer_detach(src, peer);
    if (src != NULL)
        ops->ctx_destroy(src);
    ops->mem_deregister(ctx, mem);
    ops->ctx_destroy(ctx); /* its join never completes: aborted */
    cudaFree(buf);
    printf("1. destination context, connect, registration, key, refusals: "
           "checked\n");
}

/* --dest: a destination that publishes its key on stdout, then waits to
 * be killed. */
static int destination_process(void)
{
    unsigned char key[WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len = 0;
    wex_transport_ctx *ctx;
    wex_transport_mem *mem;
    char dir[128];
    wex_transport_exchange ex = exchange_of(2, dir, sizeof(dir));
    void *buf;

    if (destination(&ex, &ctx, &mem, &buf, key, &key_len) != 0)
        return 1;
    if (write(1, &key_len, sizeof(key_len)) < 0 ||
        write(1, key, (size_t)key_len) < 0)
        return 1;
    pause();
    return 0;
}

static int read_full(int fd, void *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r <= 0)
            return -1;
        p = (char *)p + r;
        n -= (size_t)r;
    }
    return 0;
}

static void check_dead_destination(const char *self)
{
    unsigned char key[WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len = 0;
    char *argv[] = {(char *)self, "--dest", exchange_root, NULL};
    posix_spawn_file_actions_t fa;
    wex_transport_ctx *src = NULL;
    wex_transport_peer *peer = NULL;
    wex_status st = WEX_OK;
    wex_transport_exchange ex;
    char dir[128];
    void *data = NULL;
    int fds[2];
    double t0, took;
    pid_t pid;

    if (pipe(fds) != 0)
        return;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    if (posix_spawn(&pid, self, &fa, NULL, argv, environ) != 0) {
        CHECK(0, "spawning the destination");
        return;
    }
    close(fds[1]);
    CHECK(read_full(fds[0], &key_len, sizeof(key_len)) == 0 &&
              key_len <= sizeof(key) && read_full(fds[0], key, key_len) == 0,
          "the destination process sends its key");
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    alarm(60); /* a hang is the failure this check is about */
    t0 = wex__now();
    ex = exchange_of(2, dir, sizeof(dir));
    src = source(&ex);
    CHECK(src != NULL, "source context and connect");
    cudaMalloc(&data, BYTES);
    if (src != NULL)
        st = ops->peer_attach(src, 0, key, key_len, &peer);
    if (src != NULL && st == WEX_OK)
        st = ops->put(src, peer, 0, data, BYTES);
    if (src != NULL && st == WEX_OK)
        st = ops->flush(src);
    took = wex__now() - t0;
    CHECK(st < 0, "put + flush towards a killed destination fails");
    CHECK(took < TIMEOUT_MS / 1000.0 + 10, "and within timeout_ms (%.1f s)",
          took);
    printf("2. killed destination: %s after %.1f s: %s\n",
           wex_status_string(st), took, wex__last_error());
    if (peer != NULL)
        ops->peer_detach(src, peer);
    if (src != NULL)
        ops->ctx_destroy(src);
    alarm(0);
    cudaFree(data);
    close(fds[0]);
}

typedef struct flusher {
    wex_transport_ctx *ctx;
    wex_status st;
    char error[512];
} flusher;

static void *flush_thread(void *arg)
{
    flusher *f = arg;

    f->st = f->ctx ? ops->flush(f->ctx) : WEX_ERR_INVALID;
    snprintf(f->error, sizeof(f->error), "%s", wex__last_error());
    return NULL;
}

static void check_pair_on_one_gpu(void)
{
    unsigned char key[WEX_TRANSPORT_KEY_MAX], *back;
    uint64_t key_len = 0;
    wex_transport_ctx *dst = NULL, *src = NULL;
    wex_transport_mem *mem = NULL;
    wex_transport_peer *peer = NULL;
    void *buf = NULL, *data = NULL;
    flusher fs = {0}, fd = {0};
    wex_transport_exchange ex;
    char dir[128];
    pthread_t ts, td;
    double t0;

    alarm(60);
    t0 = wex__now();
    ex = exchange_of(3, dir, sizeof(dir));
    if (destination(&ex, &dst, &mem, &buf, key, &key_len) != 0 ||
        (src = source(&ex)) == NULL ||
        ops->peer_attach(src, 0, key, key_len, &peer) != WEX_OK) {
        CHECK(0, "setting up both ranks in one process");
        return;
    }
    back = malloc(BYTES);
    for (unsigned i = 0; i < BYTES; i++)
        back[i] = (unsigned char)(i * 131 + 7);
    cudaMalloc(&data, BYTES);
    cudaMemcpy(data, back, BYTES, cudaMemcpyHostToDevice);
    CHECK(ops->put(src, peer, 4096, (char *)data + 4096, BYTES - 4096) ==
              WEX_OK,
          "queued put");
    CHECK(ops->recv(dst, 0, mem, 4096, BYTES - 4096) == WEX_OK, "queued recv");
    fs.ctx = src;
    fd.ctx = dst;
    pthread_create(&ts, NULL, flush_thread, &fs);
    pthread_create(&td, NULL, flush_thread, &fd);
    pthread_join(ts, NULL);
    pthread_join(td, NULL);
    if (fs.st == WEX_OK && fd.st == WEX_OK) {
        unsigned char *got = calloc(1, BYTES);
        cudaMemcpy(got, buf, BYTES, cudaMemcpyDeviceToHost);
        CHECK(memcmp(got + 4096, back + 4096, BYTES - 4096) == 0 &&
                  got[0] == 0 && got[4095] == 0,
              "the received bytes are the sent ones, nothing else written");
        printf("3. two ranks on one GPU: NCCL accepted; %u bytes sent, "
               "received and checked in %.1f s\n",
               BYTES - 4096, wex__now() - t0);
        free(got);
    } else {
        CHECK(fs.st < 0 && fd.st < 0, "both sides fail together");
        printf("3. two ranks on one GPU: NCCL refused the pair in %.1f s, "
               "as expected (not a failure): source: %s; destination: %s\n",
               wex__now() - t0, fs.error, fd.error);
    }
    ops->peer_detach(src, peer);
    ops->ctx_destroy(src);
    ops->mem_deregister(dst, mem);
    ops->ctx_destroy(dst);
    alarm(0);
    cudaFree(buf);
    cudaFree(data);
    free(back);
}

int main(int argc, char **argv)
{
    cJSON *opts = cJSON_Parse("{\"timeout_ms\": 4000}");
    wex__registry *registry = NULL;
    wex__plugin *plugin;
    int count = 0;
    cudaError_t e;

    setvbuf(stdout, NULL, _IOLBF, 0);
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    if (wex__registry_scan(&registry) != WEX_OK ||
        (plugin = wex__registry_find(registry, WEX_KIND_TRANSPORT, "nccl")) ==
            NULL ||
        wex__plugin_load(registry, plugin) != WEX_OK) {
        printf("FAIL: loading the nccl transport: %s\n", wex__last_error());
        return 1;
    }
    ops = &plugin->ops.transport;
    state = plugin->plugin_state;
    options = wex__options_view(opts);
    if (argc == 3 && strcmp(argv[1], "--dest") == 0) {
        snprintf(exchange_root, sizeof(exchange_root), "%s", argv[2]);
        return destination_process();
    }
    e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device (cudaGetDeviceCount: %s)\n",
               e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
        return SKIP;
    }
    snprintf(exchange_root, sizeof(exchange_root), "/tmp/wex-nccl-XXXXXX");
    if (mkdtemp(exchange_root) == NULL) {
        printf("FAIL: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    check_destination();
    check_dead_destination(argv[0]);
    check_pair_on_one_gpu();
    printf("not exercised here: a two-rank transfer across two GPUs (needs "
           "two devices), multi-host NCCL\n");
    remove_exchange();
    printf("%s\n", failures ? "FAILED" : "ok");
    wex__registry_free(registry);
    cJSON_Delete(opts);
    return failures ? 1 : 0;
}
