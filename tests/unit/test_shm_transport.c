/*
 * The `shm` transport, loaded through the host's registry like any
 * plugin, between real processes: a forked destination exposes 64 MiB
 * (a memfd from mem_alloc, or private memory through mem_register), the
 * test process attaches it from its key and puts a pattern at many
 * offsets, and the destination checks every byte. Also: bad keys,
 * destinations that vanish before or after attaching, options, bounds,
 * a clean /dev/shm, and an informative throughput line.
 */
#include <check.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_run.h"
#include "error.h"
#include "clock.h"
#include "fd_io.h"
#include "transport_harness.h"

#define BUF_BYTES (64ull << 20)
#define DEST_RANK TH_DEST_RANK
#define NOBODY 65534

/* How a destination exposes its buffer. */
#define DEST_PRIVATE 1    /* mem_register on its own memory, not mem_alloc */
#define DEST_UNDUMPABLE 2 /* nobody may ptrace it (and it drops root) */

static const wex_transport_ops *ops;
static char job[64];

static void setup(void)
{
    static unsigned seq;

    ops = th_load("shm");
    /* a job id no other test process uses */
    snprintf(job, sizeof(job), "shm-test-%ld-%u", (long)getpid(), seq++);
}

static void teardown(void)
{
    th_unload();
}

static wex_status open_ctx(uint32_t side, uint64_t rank, const char *options,
                           wex_transport_ctx **ctx_p)
{
    return th_open_ctx(job, side, rank, options, ctx_p);
}

static wex_transport_ctx *must_open(uint32_t side, uint64_t rank,
                                    const char *options)
{
    return th_must_open(job, side, rank, options);
}

/* ---- the destination process ------------------------------------------ */

/* Nobody may ptrace it, and it drops root (root could ptrace anyone). */
static int undumpable(void)
{
    if (geteuid() == 0 && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0))
        return -1;
    prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
    return 0;
}

/* A destination process exposing one 64 MiB buffer as `mode` says. */
static void spawn_destination(th_dest *d, int mode)
{
    th_dest_spec spec;

    memset(&spec, 0, sizeof(spec));
    spec.job_id = job;
    spec.buffers[0].bytes = BUF_BYTES;
    spec.buffers[0].registered = (mode & DEST_PRIVATE) != 0;
    spec.count = 1;
    spec.prepare = mode & DEST_UNDUMPABLE ? undumpable : NULL;
    th_spawn_destination(d, &spec);
}

/* ---- /dev/shm stays clean ---------------------------------------------- */

typedef struct names {
    char **v;
    size_t n;
} names;

static names dev_shm(void)
{
    names s = {NULL, 0};
    DIR *dir = opendir("/dev/shm");
    struct dirent *e;

    if (dir == NULL)
        return s;
    while ((e = readdir(dir)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        s.v = realloc(s.v, (s.n + 1) * sizeof(*s.v));
        s.v[s.n++] = strdup(e->d_name);
    }
    closedir(dir);
    return s;
}

static void free_names(names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* Entries of `after` not in `before`: their count, the first in *first. */
static size_t new_entries(const names *before, const names *after,
                          const char **first)
{
    size_t count = 0;

    for (size_t i = 0; i < after->n; i++) {
        int seen = 0;
        for (size_t j = 0; j < before->n && !seen; j++)
            seen = strcmp(after->v[i], before->v[j]) == 0;
        if (!seen && count++ == 0)
            *first = after->v[i];
    }
    return count;
}

/* Nothing new in /dev/shm. Other programs on the machine may create
 * short-lived entries there (Python's multiprocessing semaphores), so an
 * entry counts only if it is still there after a short while: whatever
 * this transport left behind would stay. */
static void assert_no_new_entries(names before)
{
    for (int attempt = 0;; attempt++) {
        names after = dev_shm();
        const char *first = NULL;
        size_t count = new_entries(&before, &after, &first);

        if (count == 0 || attempt == 30) {
            ck_assert_msg(count == 0, "/dev/shm/%s (and %zu more) appeared",
                          first, count - 1);
            free_names(&after);
            break;
        }
        free_names(&after);
        usleep(100000);
    }
    free_names(&before);
}

/* Process `pid` maps nothing from /dev/shm and, when `memfd_at` is not 0,
 * maps that address from one of this transport's memfds. */
static void assert_maps(pid_t pid, uint64_t memfd_at)
{
    char path[64], line[1024];
    int found = memfd_at == 0;
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%ld/maps", (long)pid);
    f = fopen(path, "r");
    ck_assert_msg(f != NULL, "%s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f) != NULL) {
        unsigned long long lo, hi;
        ck_assert_msg(strstr(line, "/dev/shm/") == NULL, "pid %ld maps %s",
                      (long)pid, line);
        if (sscanf(line, "%llx-%llx", &lo, &hi) == 2 && memfd_at >= lo &&
            memfd_at < hi) {
            ck_assert_msg(strstr(line, "/memfd:wex-shm") != NULL,
                          "the buffer is mapped from %s", line);
            found = 1;
        }
    }
    fclose(f);
    ck_assert_msg(found, "pid %ld does not map 0x%llx", (long)pid,
                  (unsigned long long)memfd_at);
}

/* The destination's buffer address inside its key (see shm_key.h). */
static uint64_t key_address(const th_dest *d)
{
    uint64_t v = 0;

    for (int i = 7; i >= 0; i--)
        v = v << 8 | d->key[0][40 + i];
    return v;
}

/* ---- across processes ---------------------------------------------------- */

static void put_pattern_across_processes(int private_memory)
{
    names before = dev_shm();
    wex_transport_ctx *ctx;
    wex_transport_peer *peer = NULL;
    uint8_t *src;
    size_t n;
    th_op *v;
    th_dest d;

    spawn_destination(&d, private_memory);
    ctx = must_open(WEX_SIDE_SOURCE, 0, "{\"connect_timeout_ms\": 5000}");
    ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0],
                                   &peer) == WEX_OK,
                  "%s", wex__last_error());
    /* memfds and anonymous memory only, on both ends */
    assert_maps(d.pid, private_memory ? 0 : key_address(&d));
    assert_maps(getpid(), 0);
    src = th_pattern_buffer(BUF_BYTES, 0);
    v = th_make_ops(BUF_BYTES, &n);
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ops->put(ctx, peer, v[i].offset, src + v[i].offset,
                               v[i].bytes) == WEX_OK,
                      "put %zu: %s", i, wex__last_error());
    ck_assert_int_eq(ops->flush(ctx), WEX_OK);
    ops->peer_detach(ctx, peer);
    ops->ctx_destroy(ctx);
    free(v);
    free(src);
    ck_assert_msg(th_finish_destination(&d, 'v') == 0,
                  "the destination found wrong bytes");
    assert_no_new_entries(before);
}

START_TEST(memfd_buffer_across_processes)
{
    put_pattern_across_processes(0);
}
END_TEST

START_TEST(registered_buffer_across_processes)
{
    put_pattern_across_processes(1);
}
END_TEST

/* ---- destinations that go away ------------------------------------------ */

static void gone_before_attach(int private_memory)
{
    wex_transport_ctx *ctx;
    wex_transport_peer *peer = NULL;
    double t0, took;
    wex_status st;
    th_dest d;

    spawn_destination(&d, private_memory);
    ck_assert_int_eq(th_finish_destination(&d, 'x'), 0); /* exited, reaped */
    ctx = must_open(WEX_SIDE_SOURCE, 0, "{\"connect_timeout_ms\": 3000}");
    t0 = wex__now();
    st = ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0], &peer);
    took = wex__now() - t0;
    ck_assert_msg(st == WEX_ERR_PEER, "status %d: %s", st, wex__last_error());
    ck_assert_msg(strstr(wex__last_error(), "is gone") != NULL &&
                      strstr(wex__last_error(), "destination rank 3") != NULL,
                  "%s", wex__last_error());
    ck_assert_msg(took < 2.5, "took %.2f s", took); /* not the timeout */
    ops->ctx_destroy(ctx);
}

START_TEST(destination_gone_before_attach)
{
    gone_before_attach(0);
    gone_before_attach(1);
}
END_TEST

/* The process lives on but its transport is closed: nothing listens, and
 * the source gives up after connect_timeout_ms. */
START_TEST(destination_closed_before_attach)
{
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 1, NULL);
    wex_transport_ctx *src;
    wex_transport_mem *mem;
    wex_transport_peer *peer = NULL;
    uint8_t key[WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len = sizeof(key);
    double t0, took;
    wex_status st;
    void *buf;

    ck_assert_int_eq(ops->mem_alloc(dst, 4096, &buf, &mem), WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &key_len), WEX_OK);
    ops->mem_deregister(dst, mem);
    ops->ctx_destroy(dst);
    src = must_open(WEX_SIDE_SOURCE, 0, "{\"connect_timeout_ms\": 300}");
    t0 = wex__now();
    st = ops->peer_attach(src, 1, key, key_len, &peer);
    took = wex__now() - t0;
    ck_assert_msg(st == WEX_ERR_TIMEOUT, "status %d: %s", st,
                  wex__last_error());
    ck_assert_msg(strstr(wex__last_error(), "300 ms") != NULL, "%s",
                  wex__last_error());
    ck_assert_msg(took >= 0.29 && took < 5.0, "took %.2f s", took);
    ops->ctx_destroy(src);
}
END_TEST

START_TEST(destination_gone_after_attach)
{
    uint8_t bytes[4096];
    int private_memory;

    memset(bytes, 7, sizeof(bytes));
    for (private_memory = 0; private_memory < 2; private_memory++) {
        wex_transport_ctx *ctx = must_open(WEX_SIDE_SOURCE, 0, NULL);
        wex_transport_peer *peer = NULL;
        wex_status st;
        th_dest d;

        spawn_destination(&d, private_memory);
        ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0],
                                       &peer) == WEX_OK,
                      "%s", wex__last_error());
        ck_assert_int_eq(th_finish_destination(&d, 'x'), 0);
        st = ops->put(ctx, peer, 0, bytes, sizeof(bytes));
        if (private_memory) {
            char want[96];
            snprintf(want, sizeof(want), "destination rank 3 (pid %ld) is gone",
                     (long)d.pid);
            ck_assert_msg(st == WEX_ERR_PEER, "status %d", st);
            ck_assert_msg(strstr(wex__last_error(), want) != NULL, "%s",
                          wex__last_error());
        } else {
            /* the memfd outlives its creator in our mapping: harmless */
            ck_assert_msg(st == WEX_OK, "%s", wex__last_error());
            ck_assert_int_eq(ops->flush(ctx), WEX_OK);
        }
        ops->peer_detach(ctx, peer);
        ops->ctx_destroy(ctx);
    }
}
END_TEST

/* A destination the source may not ptrace: attaching its registered
 * buffer fails at once, naming the cause. Both ends run as the same
 * unprivileged user (root could ptrace anyone). */
START_TEST(ptrace_refusal_is_explained)
{
    int result[2];
    int32_t st = 0;
    char msg[512];
    pid_t pid;
    th_dest d;

    spawn_destination(&d, DEST_PRIVATE | DEST_UNDUMPABLE);
    ck_assert_int_eq(pipe(result), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        wex_transport_ctx *ctx = NULL;
        wex_transport_peer *peer = NULL;

        close(result[0]);
        memset(msg, 0, sizeof(msg));
        if (geteuid() == 0 && (setgid(NOBODY) != 0 || setuid(NOBODY) != 0)) {
            st = 99;
            snprintf(msg, sizeof(msg), "cannot drop root: %s", strerror(errno));
        } else if ((st = open_ctx(WEX_SIDE_SOURCE, 0, NULL, &ctx)) == WEX_OK) {
            st =
                ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0], &peer);
            snprintf(msg, sizeof(msg), "%s", wex__last_error());
            if (st == WEX_OK)
                ops->peer_detach(ctx, peer);
            ops->ctx_destroy(ctx);
        }
        (void)wex__write_all(result[1], &st, sizeof(st));
        (void)wex__write_all(result[1], msg, sizeof(msg));
        _exit(0);
    }
    close(result[1]);
    ck_assert_int_eq(wex__read_all(result[0], &st, sizeof(st)), 0);
    ck_assert_int_eq(wex__read_all(result[0], msg, sizeof(msg)), 0);
    close(result[0]);
    msg[sizeof(msg) - 1] = '\0';
    ck_assert_int_eq(waitpid(pid, NULL, 0), pid);
    ck_assert_int_eq(th_finish_destination(&d, 'x'), 0);
    ck_assert_msg(st == WEX_ERR_SYSTEM, "status %d: %s", st, msg);
    ck_assert_msg(strstr(msg, "EPERM") != NULL &&
                      strstr(msg, "ptrace_scope") != NULL &&
                      strstr(msg, "destination rank 3") != NULL,
                  "%s", msg);
}
END_TEST

/* ---- keys ------------------------------------------------------------------ */

START_TEST(bad_keys_are_invalid)
{
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 2, NULL);
    wex_transport_ctx *src =
        must_open(WEX_SIDE_SOURCE, 0, "{\"connect_timeout_ms\": 2000}");
    wex_transport_mem *mem;
    uint8_t key[WEX_TRANSPORT_KEY_MAX + 16], bad[sizeof(key)];
    uint64_t len = WEX_TRANSPORT_KEY_MAX;
    unsigned seed = 12345;
    void *buf;

    ck_assert_int_eq(ops->mem_alloc(dst, 1 << 20, &buf, &mem), WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_OK);
    ck_assert_uint_le(len, WEX_TRANSPORT_KEY_MAX);
    /* the real one */
    ck_assert_int_eq(th_attach_key(src, 2, key, len), WEX_OK);

    th_expect_invalid(src, NULL, 0, "empty", "shorter than");
    for (uint64_t cut = 0; cut < len; cut++)
        th_expect_invalid(src, key, cut, "truncated", "not a valid shm key");
    memcpy(bad, key, len);
    bad[len] = 'x';
    th_expect_invalid(src, bad, len + 1, "one byte longer", "expected");
    th_expect_invalid(src, bad, WEX_TRANSPORT_KEY_MAX + 1, "too long",
                      "more than any shm key");
#define MUTATE(what, says, index, value)                                       \
    do {                                                                       \
        memcpy(bad, key, len);                                                 \
        bad[index] = (uint8_t)(value);                                         \
        th_expect_invalid(src, bad, len, what, says);                          \
    } while (0)
    MUTATE("magic", "bad magic", 0, key[0] ^ 0xff);
    MUTATE("version", "key version", 4, 9);
    MUTATE("kind", "unknown buffer kind", 6, 7);
    MUTATE("name length 0", "socket name length", 7, 0);
    MUTATE("name length 200", "socket name length", 7, 200);
    MUTATE("name length off by one", "expected", 7, key[7] - 1);
    MUTATE("reserved", "reserved", 12, 1);
    MUTATE("rank", "not rank 2's", 16, 5);
    MUTATE("unprintable name", "printable", len - 1, 0x01);
    MUTATE("size off by one", "stale or corrupt", 32, key[32] ^ 1);
    /* structurally fine, but the destination has no such buffer */
    MUTATE("buffer id", "has no buffer", 24, key[24] + 40);
    MUTATE("size", "stale or corrupt", 33, key[33] ^ 0x10);
#undef MUTATE
    /* pid 0 needs all four bytes cleared */
    memcpy(bad, key, len);
    memset(bad + 8, 0, 4);
    th_expect_invalid(src, bad, len, "pid 0", "bad destination pid");
    /* garbage of every length never crashes and is refused */
    for (int i = 0; i < 3000; i++) {
        uint64_t n = (uint64_t)rand_r(&seed) % (WEX_TRANSPORT_KEY_MAX + 1);
        for (uint64_t b = 0; b < n; b++)
            bad[b] = (uint8_t)rand_r(&seed);
        th_expect_invalid(src, bad, n, "garbage", "not a valid shm key");
    }
    /* corrupt rank, buffer id, size or address (pid and socket name
     * intact, so each answer is immediate): refused, never trusted */
    for (int i = 0; i < 300; i++) {
        memcpy(bad, key, len);
        for (uint64_t b = 12; b < 48; b++)
            if (rand_r(&seed) % 4 == 0)
                bad[b] = (uint8_t)rand_r(&seed);
        if (memcmp(bad, key, len) == 0)
            bad[16] ^= 1;
        ck_assert_int_ne(th_attach_key(src, 2, bad, len), WEX_OK);
    }
    ck_assert_int_eq(th_attach_key(src, 2, key, len), WEX_OK); /* still fine */

    ops->ctx_destroy(src);
    ops->mem_deregister(dst, mem);
    ops->ctx_destroy(dst);
}
END_TEST

/* ---- contexts, options, argument checks ---------------------------------- */

START_TEST(socket_is_released_on_destroy)
{
    wex_transport_ctx *a = must_open(WEX_SIDE_DESTINATION, 0, NULL), *b = NULL;

    ck_assert_int_eq(open_ctx(WEX_SIDE_DESTINATION, 0, NULL, &b),
                     WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "is in use") != NULL, "%s",
                  wex__last_error());
    ops->ctx_destroy(a);
    b = must_open(WEX_SIDE_DESTINATION, 0, NULL); /* the name is free again */
    ops->ctx_destroy(b);
}
END_TEST

/* Socket names come from job ids of any length and alphabet, or none. */
START_TEST(job_ids_of_any_shape)
{
    char long_id[300], odd_id[96];
    const char *ids[3];

    memset(long_id, 'j', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    snprintf(odd_id, sizeof(odd_id), "%s with spaces/slashes:\xc3\xa9", job);
    ids[0] = long_id;
    ids[1] = odd_id;
    ids[2] = NULL;
    for (size_t i = 0; i < 3; i++) {
        wex_transport_ctx *dst = NULL, *dst2 = NULL, *src;
        wex_transport_mem *mem;
        wex_transport_peer *peer = NULL;
        uint8_t key[WEX_TRANSPORT_KEY_MAX];
        uint64_t len = sizeof(key);
        void *buf;

        ck_assert_msg(
            th_open_ctx(ids[i], WEX_SIDE_DESTINATION, 1, NULL, &dst) == WEX_OK,
            "%s", wex__last_error());
        /* a second rank of the same job gets its own name */
        ck_assert_msg(
            th_open_ctx(ids[i], WEX_SIDE_DESTINATION, 2, NULL, &dst2) == WEX_OK,
            "%s", wex__last_error());
        ck_assert_int_eq(ops->mem_alloc(dst, 8192, &buf, &mem), WEX_OK);
        ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_OK);
        src = must_open(WEX_SIDE_SOURCE, 0, NULL);
        ck_assert_msg(ops->peer_attach(src, 1, key, len, &peer) == WEX_OK, "%s",
                      wex__last_error());
        ck_assert_int_eq(ops->put(src, peer, 8191, "z", 1), WEX_OK);
        ck_assert_int_eq(ops->flush(src), WEX_OK);
        ck_assert_uint_eq(((uint8_t *)buf)[8191], 'z');
        ops->peer_detach(src, peer);
        ops->ctx_destroy(src);
        ops->mem_deregister(dst, mem);
        ops->ctx_destroy(dst);
        ops->ctx_destroy(dst2);
    }
}
END_TEST

START_TEST(options_are_checked)
{
    static const char *const bad[] = {"{\"connect_timeout_ms\": -1}",
                                      "{\"connect_timeout_ms\": 1.5}",
                                      "{\"connect_timeout_ms\": \"10\"}",
                                      "{\"connect_timeout_ms\": 3600001}"};
    wex_transport_ctx *ctx = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(open_ctx(WEX_SIDE_SOURCE, 0, bad[i], &ctx),
                         WEX_ERR_INVALID);
        ck_assert_msg(strstr(wex__last_error(), "/connect_timeout_ms") != NULL,
                      "%s", wex__last_error());
    }
    ctx = must_open(WEX_SIDE_SOURCE, 0, "{\"connect_timeout_ms\": 0}");
    ops->ctx_destroy(ctx);
    ctx = must_open(WEX_SIDE_SOURCE, 0, "{}");
    ops->ctx_destroy(ctx);
}
END_TEST

START_TEST(arguments_are_checked)
{
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 0, NULL);
    wex_transport_ctx *src = must_open(WEX_SIDE_SOURCE, 0, NULL);
    wex_transport_mem *mem = NULL, *reg = NULL;
    wex_transport_peer *peer = NULL;
    uint8_t key[WEX_TRANSPORT_KEY_MAX], local[64] = {0};
    uint64_t len = sizeof(key);
    void *buf;

    ck_assert_int_eq(ops->mem_alloc(dst, 0, &buf, &mem), WEX_ERR_INVALID);
    ck_assert_int_eq(
        ops->mem_register(dst, local, sizeof(local), WEX_MEMORY_CUDA, &reg),
        WEX_ERR_UNSUPPORTED);
    ck_assert_int_eq(ops->mem_alloc(dst, 100, &buf, &mem), WEX_OK);
    ck_assert_uint_eq((uintptr_t)buf % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_uint_eq(((uint8_t *)buf)[i], 0);
    len = 10;
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_ERR_INVALID);
    len = sizeof(key);
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_OK);
    /* sources expose nothing */
    ck_assert_int_eq(
        ops->mem_register(src, local, sizeof(local), WEX_MEMORY_HOST, &reg),
        WEX_OK);
    {
        uint64_t l2 = sizeof(key);
        uint8_t k2[WEX_TRANSPORT_KEY_MAX];
        ck_assert_int_eq(ops->mem_key(src, reg, k2, &l2), WEX_ERR_UNSUPPORTED);
    }
    ops->mem_deregister(src, reg);
    ck_assert_msg(ops->peer_attach(src, 0, key, len, &peer) == WEX_OK, "%s",
                  wex__last_error());
    ck_assert_int_eq(ops->put(src, peer, 0, local, 64), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 36, local, 64), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 37, local, 64), WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "overruns") != NULL, "%s",
                  wex__last_error());
    ck_assert_int_eq(ops->put(src, peer, UINT64_MAX, local, 2),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(ops->put(src, peer, 100, local, 0), WEX_OK);
    ops->peer_detach(src, peer);
    /* left registered: ctx_destroy frees it */
    (void)mem;
    ops->ctx_destroy(src);
    ops->ctx_destroy(dst);
}
END_TEST

/* ---- same process: both kinds, and how fast ---------------------------- */

/* Puts the whole source buffer `reps` times; returns GB/s. */
static double time_puts(wex_transport_ctx *src, wex_transport_peer *peer,
                        const uint8_t *data, int reps)
{
    double t0 = wex__now();

    for (int r = 0; r < reps; r++)
        ck_assert_msg(ops->put(src, peer, 0, data, BUF_BYTES) == WEX_OK, "%s",
                      wex__last_error());
    ck_assert_int_eq(ops->flush(src), WEX_OK);
    return th_gbps(BUF_BYTES * (uint64_t)reps, wex__now() - t0);
}

START_TEST(same_process_and_throughput)
{
    enum { REPS = 8 };
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 0, NULL);
    wex_transport_ctx *src = must_open(WEX_SIDE_SOURCE, 0, NULL);
    wex_transport_mem *shared, *priv;
    wex_transport_peer *to_shared = NULL, *to_priv = NULL;
    uint8_t key[WEX_TRANSPORT_KEY_MAX];
    uint64_t len;
    uint8_t *data = th_pattern_buffer(BUF_BYTES, 0);
    uint8_t *plain = malloc(BUF_BYTES);
    uint8_t *target = malloc(BUF_BYTES);
    void *shared_buf;
    double put_memfd, put_vm, copy, t0;

    ck_assert_ptr_nonnull(plain);
    ck_assert_ptr_nonnull(target);
    memset(plain, 0, BUF_BYTES);
    memset(target, 0, BUF_BYTES);
    ck_assert_int_eq(ops->mem_alloc(dst, BUF_BYTES, &shared_buf, &shared),
                     WEX_OK);
    ck_assert_int_eq(
        ops->mem_register(dst, target, BUF_BYTES, WEX_MEMORY_HOST, &priv),
        WEX_OK);
    len = sizeof(key);
    ck_assert_int_eq(ops->mem_key(dst, shared, key, &len), WEX_OK);
    ck_assert_msg(ops->peer_attach(src, 0, key, len, &to_shared) == WEX_OK,
                  "%s", wex__last_error());
    len = sizeof(key);
    ck_assert_int_eq(ops->mem_key(dst, priv, key, &len), WEX_OK);
    ck_assert_msg(ops->peer_attach(src, 0, key, len, &to_priv) == WEX_OK, "%s",
                  wex__last_error());

    put_memfd = time_puts(src, to_shared, data, REPS);
    put_vm = time_puts(src, to_priv, data, REPS);
    ck_assert(memcmp(shared_buf, data, BUF_BYTES) == 0);
    ck_assert(memcmp(target, data, BUF_BYTES) == 0);
    t0 = wex__now();
    for (int r = 0; r < REPS; r++) {
        memcpy(plain, data, BUF_BYTES);
        __asm__ __volatile__("" : : "r"(plain) : "memory");
    }
    copy = th_gbps(BUF_BYTES * REPS, wex__now() - t0);
    printf("shm throughput, 64 MiB x %d in one process (informative): "
           "put into memfd %.2f GB/s, put via process_vm_writev %.2f GB/s, "
           "memcpy %.2f GB/s\n",
           REPS, put_memfd, put_vm, copy);
    fflush(stdout);

    ops->peer_detach(src, to_shared);
    ops->peer_detach(src, to_priv);
    ops->ctx_destroy(src);
    ops->mem_deregister(dst, shared);
    ops->mem_deregister(dst, priv);
    ops->ctx_destroy(dst);
    free(data);
    free(plain);
    free(target);
}
END_TEST

static Suite *shm_suite(void)
{
    Suite *s = suite_create("shm transport");
    TCase *tc = tcase_create("shm");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, memfd_buffer_across_processes);
    tcase_add_test(tc, registered_buffer_across_processes);
    tcase_add_test(tc, destination_gone_before_attach);
    tcase_add_test(tc, destination_closed_before_attach);
    tcase_add_test(tc, destination_gone_after_attach);
    tcase_add_test(tc, ptrace_refusal_is_explained);
    tcase_add_test(tc, bad_keys_are_invalid);
    tcase_add_test(tc, socket_is_released_on_destroy);
    tcase_add_test(tc, job_ids_of_any_shape);
    tcase_add_test(tc, options_are_checked);
    tcase_add_test(tc, arguments_are_checked);
    tcase_add_test(tc, same_process_and_throughput);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(shm_suite());
}
