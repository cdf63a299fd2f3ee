/*
 * Fencing in the `shm` transport (shm_fence.c), between real processes:
 * the destination is this process, each source a forked child that puts
 * 32 MiB at a time into the destination's memfd for as long as it may.
 *  - a running source that the destination closes stops within a chunk,
 *    and its put fails saying it was fenced; CLOSE returns long before
 *    its grace;
 *  - a source stopped (SIGSTOP) inside a put is killed once the grace
 *    has passed, and nothing changes in the destination afterwards;
 *  - a source whose epoch is not the open one writes nothing;
 *  - OPEN takes a new epoch once the killed source is gone.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "check_run.h"
#include "clock.h"
#include "error.h"
#include "transport_harness.h"

#define BUF_BYTES (32ull << 20)
#define DEST 1u

static const wex_transport_ops *ops;
static char job[64];

static void setup(void)
{
    static unsigned seq;

    ops = th_load("shm");
    snprintf(job, sizeof(job), "shm-fence-%ld-%u", (long)getpid(), seq++);
}

static void teardown(void)
{
    th_unload();
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static wex_status fence(wex_transport_ctx *ctx, uint32_t op, uint64_t epoch,
                        uint32_t grace_ms)
{
    wex_transport_fence f;

    memset(&f, 0, sizeof(f));
    f.struct_size = sizeof(f);
    f.op = op;
    f.epoch = epoch;
    f.abandoned = op == WEX_FENCE_CLOSE;
    f.grace_ms = grace_ms;
    return ops->fence(ctx, &f);
}

/* The destination: this process, one memfd buffer. */
typedef struct dest {
    wex_transport_ctx *ctx;
    wex_transport_mem *mem;
    uint8_t *buf;
    uint8_t key[WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len;
} dest;

static void open_dest(dest *d)
{
    d->ctx = th_must_open(job, WEX_SIDE_DESTINATION, DEST, NULL);
    ck_assert_int_eq(
        ops->mem_alloc(d->ctx, BUF_BYTES, (void **)&d->buf, &d->mem), WEX_OK);
    d->key_len = sizeof(d->key);
    ck_assert_int_eq(ops->mem_key(d->ctx, d->mem, d->key, &d->key_len), WEX_OK);
}

static void close_dest(dest *d)
{
    ops->mem_deregister(d->ctx, d->mem);
    ops->ctx_destroy(d->ctx);
}

static uint64_t digest(const dest *d)
{
    return XXH3_64bits(d->buf, BUF_BYTES);
}

/* A source process: attaches, says `epoch` and puts the whole buffer
 * (filled with `fill`) again and again until a put fails; then sends the
 * failure's message up `report` and exits 0. A byte on `report` first
 * says it has attached. */
static pid_t spawn_source(const dest *d, uint64_t epoch, int fill, int *report)
{
    int fds[2];
    pid_t pid;

    ck_assert_int_eq(pipe(fds), 0);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        wex_transport_ctx *ctx = NULL;
        wex_transport_peer *peer = NULL;
        uint8_t *src = malloc(BUF_BYTES);
        const char *why;
        wex_transport_fence f;

        close(fds[0]);
        if (src == NULL ||
            th_open_ctx(job, WEX_SIDE_SOURCE, 0, NULL, &ctx) != WEX_OK ||
            ops->peer_attach(ctx, DEST, d->key, d->key_len, &peer) != WEX_OK)
            _exit(2);
        memset(src, fill, BUF_BYTES);
        memset(&f, 0, sizeof(f));
        f.struct_size = sizeof(f);
        f.op = WEX_FENCE_WRITE;
        f.epoch = epoch;
        if (ops->fence(ctx, &f) != WEX_OK || write(fds[1], "a", 1) != 1)
            _exit(3);
        while (ops->put(ctx, peer, 0, src, BUF_BYTES) == WEX_OK) {
        }
        why = wex__last_error();
        if (write(fds[1], why, strlen(why)) < 0)
            _exit(4);
        _exit(0);
    }
    close(fds[1]);
    *report = fds[0];
    return pid;
}

/* What a source sent after its "attached" byte; 1 if it had attached. */
static int read_report(int fd, char *why, size_t cap)
{
    size_t got = 0;
    char first;
    ssize_t r;

    if (read(fd, &first, 1) != 1)
        return 0;
    while (got + 1 < cap && (r = read(fd, why + got, cap - 1 - got)) > 0)
        got += (size_t)r;
    why[got] = '\0';
    close(fd);
    return 1;
}

static int wait_attached(int fd)
{
    char c;

    return read(fd, &c, 1) == 1;
}

START_TEST(running_source_stops_within_a_chunk)
{
    dest d;
    char why[512] = "";
    int report, status = 0;
    double t0, took;
    uint64_t before;
    pid_t src;

    open_dest(&d);
    ck_assert_int_eq(fence(d.ctx, WEX_FENCE_OPEN, 5, 0), WEX_OK);
    src = spawn_source(&d, 5, 0x5a, &report);
    ck_assert(wait_attached(report));
    nap_ms(60); /* it is putting */
    t0 = wex__now();
    ck_assert_msg(fence(d.ctx, WEX_FENCE_CLOSE, 0, 5000) == WEX_OK, "%s",
                  wex__last_error());
    took = wex__now() - t0;
    ck_assert_msg(took < 1.0, "CLOSE waited %.2f s for a running source", took);
    ck_assert_int_eq(waitpid(src, &status, 0), src);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the running source was not killed (status 0x%x)", status);
    {
        size_t got = 0;
        ssize_t r;
        while (got + 1 < sizeof(why) &&
               (r = read(report, why + got, sizeof(why) - 1 - got)) > 0)
            got += (size_t)r;
        why[got] = '\0';
        close(report);
    }
    ck_assert_msg(strstr(why, "fenced") != NULL &&
                      strstr(why, "destination rank 1") != NULL,
                  "its put says it was fenced: %s", why);
    ck_assert_msg(d.buf[0] == 0x5a, "it wrote before it was fenced");
    before = digest(&d);
    nap_ms(100);
    ck_assert(digest(&d) == before);
    close_dest(&d);
}
END_TEST

START_TEST(stopped_source_is_killed_after_the_grace)
{
    dest d;
    int killed = 0;

    open_dest(&d);
    /* A stop between two puts (a few instructions wide) leaves the
     * source outside a write: not killed, and fenced once it runs. */
    for (int attempt = 0; attempt < 4 && !killed; attempt++) {
        char why[512] = "";
        uint64_t epoch = 10 + (uint64_t)attempt, before;
        int report, status = 0;
        double t0, took;
        pid_t src;

        ck_assert_msg(fence(d.ctx, WEX_FENCE_OPEN, epoch, 0) == WEX_OK, "%s",
                      wex__last_error());
        src = spawn_source(&d, epoch, 0x30 + attempt, &report);
        ck_assert(wait_attached(report));
        nap_ms(40);
        kill(src, SIGSTOP);
        t0 = wex__now();
        ck_assert_msg(fence(d.ctx, WEX_FENCE_CLOSE, 0, 300) == WEX_OK, "%s",
                      wex__last_error());
        took = wex__now() - t0;
        before = digest(&d);
        kill(src, SIGCONT);
        ck_assert_int_eq(waitpid(src, &status, 0), src);
        killed = WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
        if (killed) {
            ck_assert_msg(took >= 0.29 && took < 5.0,
                          "killed after %.2f s, "
                          "not after the 300 ms grace",
                          took);
        } else {
            ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                          "status 0x%x", status);
            read_report(report, why, sizeof(why));
            ck_assert_msg(took < 0.29 && strstr(why, "fenced") != NULL,
                          "a source stopped outside a write is fenced, not "
                          "waited for (%.2f s): %s",
                          took, why);
        }
        nap_ms(50);
        ck_assert_msg(digest(&d) == before, "the destination changed after "
                                            "CLOSE returned");
        if (killed)
            close(report);
    }
    ck_assert_msg(killed, "no SIGSTOP landed inside a put in 4 tries");
    /* the killed source's slot is free: the next epoch opens */
    ck_assert_msg(fence(d.ctx, WEX_FENCE_OPEN, 20, 0) == WEX_OK, "%s",
                  wex__last_error());
    close_dest(&d);
}
END_TEST

START_TEST(other_epochs_write_nothing)
{
    dest d;
    char why[512] = "";
    int report, status = 0;
    pid_t src;

    open_dest(&d);
    ck_assert_int_eq(fence(d.ctx, WEX_FENCE_OPEN, 8, 0), WEX_OK);
    src = spawn_source(&d, 9, 0x77, &report);
    ck_assert(read_report(report, why, sizeof(why)));
    ck_assert_int_eq(waitpid(src, &status, 0), src);
    ck_assert_msg(strstr(why, "fenced") != NULL, "%s", why);
    for (uint64_t i = 0; i < BUF_BYTES; i += 4096)
        ck_assert_msg(d.buf[i] == 0, "byte %llu was written",
                      (unsigned long long)i);
    /* never opened at all: the same */
    ck_assert_int_eq(fence(d.ctx, WEX_FENCE_CLOSE, 0, 100), WEX_OK);
    src = spawn_source(&d, 8, 0x77, &report);
    ck_assert(read_report(report, why, sizeof(why)));
    ck_assert_int_eq(waitpid(src, &status, 0), src);
    ck_assert_msg(strstr(why, "fenced") != NULL && d.buf[0] == 0, "%s", why);
    close_dest(&d);
}
END_TEST

START_TEST(fence_ops_are_checked)
{
    dest d;
    wex_transport_ctx *src;
    wex_transport_fence f;

    open_dest(&d);
    src = th_must_open(job, WEX_SIDE_SOURCE, 0, NULL);
    ck_assert_int_eq(fence(src, WEX_FENCE_OPEN, 3, 0), WEX_ERR_INVALID);
    ck_assert_int_eq(fence(d.ctx, WEX_FENCE_WRITE, 3, 0), WEX_ERR_INVALID);
    ck_assert_int_eq(fence(d.ctx, WEX_FENCE_OPEN, 0, 0), WEX_ERR_INVALID);
    ck_assert_int_eq(fence(d.ctx, 42, 3, 0), WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "op 42") != NULL, "%s",
                  wex__last_error());
    memset(&f, 0, sizeof(f));
    f.struct_size = 8;
    f.op = WEX_FENCE_CLOSE;
    ck_assert_int_eq(ops->fence(d.ctx, &f), WEX_ERR_ABI);
    ops->ctx_destroy(src);
    close_dest(&d);
}
END_TEST

static Suite *fence_suite(void)
{
    Suite *s = suite_create("shm_fence");
    TCase *tc = tcase_create("fence");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, running_source_stops_within_a_chunk);
    tcase_add_test(tc, stopped_source_is_killed_after_the_grace);
    tcase_add_test(tc, other_epochs_write_nothing);
    tcase_add_test(tc, fence_ops_are_checked);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(fence_suite());
}
