/*
 * The `ucx` transport, loaded through the host's registry like any
 * plugin, between real processes over loopback: a forked destination
 * exposes 64 MiB from mem_alloc and a buffer of its own through
 * mem_register, sends both keys up a pipe and blocks reading the next
 * pipe (only its context's progress thread runs UCX); the test process
 * attaches both, puts contiguous runs and many small strided pieces,
 * flushes, and the destination checks every byte. With UCX's own
 * transport selection, with UCX_TLS=tcp (which lands puts only when the
 * destination's worker runs), and with error_handling "none" (which lets
 * UCX use shared memory). Also: bad keys, destinations killed before and
 * after attaching or stopped, sources killed while the destination
 * pulls their large messages, options, bounds, and informative
 * throughput lines. Keep it light: the whole file runs in seconds.
 */
#include <check.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wex/bytes.h>

#include "check_run.h"
#include "error.h"
#include "clock.h"
#include "transport_harness.h"

#define ALLOC_BYTES (64ull << 20) /* the mem_alloc buffer */
#define REG_BYTES (8ull << 20)    /* the registered one */
#define DEST_RANK TH_DEST_RANK
#define KEY_HEADER 56u /* plugins/transports/ucx/ucx_key.h */

#ifdef __SANITIZE_ADDRESS__
/* UCX 1.13's mm transport leaks 100 bytes when an endpoint to a process
 * that has died fails to connect (reproduced with UCX alone, no wex):
 * not ours to fix, and only UCX's own transport library is excused. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:libuct.so\n";
}
#endif

static const wex_transport_ops *ops;

static void setup(void)
{
    ops = th_load("ucx");
    ck_assert(ops->caps & WEX_TRANSPORT_CAP_ONE_SIDED);
    ck_assert(ops->caps & WEX_TRANSPORT_CAP_ALLOC);
}

/* For the tests where failures are the point: UCX reports them on
 * stderr as well (unless UCX_LOG_LEVEL says otherwise); it reads the
 * level when the plugin loads it. */
static void setup_quiet(void)
{
    setenv("UCX_LOG_LEVEL", "fatal", 0);
    setup();
}

static void teardown(void)
{
    th_unload();
}

static wex_status open_ctx(uint32_t side, uint64_t rank, const char *options,
                           wex_transport_ctx **ctx_p)
{
    return th_open_ctx("ucx-test", side, rank, options, ctx_p);
}

static wex_transport_ctx *must_open(uint32_t side, uint64_t rank,
                                    const char *options)
{
    return th_must_open("ucx-test", side, rank, options);
}

/* ---- the destination process ------------------------------------------ */

/* A destination process exposing ALLOC_BYTES from mem_alloc (key 0) and
 * REG_BYTES of its own memory through mem_register (key 1). */
static void spawn_destination(th_dest *d, const char *options)
{
    th_dest_spec spec;

    memset(&spec, 0, sizeof(spec));
    spec.job_id = "ucx-test";
    spec.options = options;
    spec.buffers[0].bytes = ALLOC_BYTES;
    spec.buffers[1].bytes = REG_BYTES;
    spec.buffers[1].registered = 1;
    spec.count = 2;
    th_spawn_destination(d, &spec);
}

/* ---- across processes ---------------------------------------------------- */

static void put_all(wex_transport_ctx *ctx, wex_transport_peer *peer,
                    const th_op *v, size_t n, const uint8_t *src)
{
    for (size_t i = 0; i < n; i++)
        ck_assert_msg(ops->put(ctx, peer, v[i].offset, src + v[i].offset,
                               v[i].bytes) == WEX_OK,
                      "put %zu: %s", i, wex__last_error());
}

/* Options for both ends: error_handling as given (NULL: the default). */
static const char *options_for(const char *error_handling, char *buf,
                               size_t cap, const char *more)
{
    snprintf(buf, cap, "{%s%s%s%s%s}",
             error_handling ? "\"error_handling\": \"" : "",
             error_handling ? error_handling : "", error_handling ? "\"" : "",
             error_handling && more ? ", " : "", more ? more : "");
    return buf;
}

static const char *tls_name(void)
{
    return getenv("UCX_TLS") ? getenv("UCX_TLS") : "default";
}

/* tls: UCX_TLS (NULL: UCX's choice); error_handling and path: the
 * options of both ends (NULL: their defaults); chosen: the path the
 * source must report for its peers (NULL: whichever UCX's lanes allow). */
static void put_pattern_across_processes(const char *tls,
                                         const char *error_handling,
                                         const char *path, const char *chosen)
{
    char dopt[160], sopt[200], dmore[64], smore[96];
    enum { REPS = 4 };
    wex_transport_ctx *ctx;
    wex_transport_peer *to_alloc = NULL, *to_reg = NULL;
    wex_transport_mem *src_mem = NULL;
    uint8_t *src_alloc, *src_reg, *zeros, *plain;
    double t0, big, small, copy;
    size_t na, nr;
    th_op *va, *vr;
    th_dest d;

    if (tls != NULL)
        setenv("UCX_TLS", tls, 1); /* before either side's ucp_init */
    snprintf(dmore, sizeof(dmore), "\"data_path\": \"%s\"",
             path ? path : "auto");
    snprintf(smore, sizeof(smore), "%s, \"connect_timeout_ms\": 5000", dmore);
    spawn_destination(&d,
                      options_for(error_handling, dopt, sizeof(dopt), dmore));
    ctx = must_open(WEX_SIDE_SOURCE, 0,
                    options_for(error_handling, sopt, sizeof(sopt), smore));
    ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0],
                                   &to_alloc) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[1], d.key_len[1],
                                   &to_reg) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_ptr_nonnull(ops->peer_path);
    ck_assert_ptr_nonnull(ops->peer_path(ctx, to_alloc));
    ck_assert_str_eq(ops->peer_path(ctx, to_alloc),
                     ops->peer_path(ctx, to_reg)); /* one endpoint */
    if (chosen != NULL)
        ck_assert_str_eq(ops->peer_path(ctx, to_alloc), chosen);

    /* Throughput first, with zeros, so the buffer stays as it was. */
    zeros = malloc(ALLOC_BYTES);
    plain = malloc(ALLOC_BYTES);
    ck_assert_ptr_nonnull(zeros);
    ck_assert_ptr_nonnull(plain);
    memset(zeros, 0, ALLOC_BYTES);
    memset(plain, 1, ALLOC_BYTES);
    ck_assert_int_eq(ops->put(ctx, to_alloc, 0, zeros, ALLOC_BYTES), WEX_OK);
    ck_assert_msg(ops->flush(ctx) == WEX_OK, "%s", wex__last_error());
    t0 = wex__now();
    for (int r = 0; r < REPS; r++)
        ck_assert_int_eq(ops->put(ctx, to_alloc, 0, zeros, ALLOC_BYTES),
                         WEX_OK);
    ck_assert_msg(ops->flush(ctx) == WEX_OK, "%s", wex__last_error());
    big = th_gbps(ALLOC_BYTES * REPS, wex__now() - t0);
    t0 = wex__now();
    for (int r = 0; r < REPS; r++) {
        memcpy(plain, zeros, ALLOC_BYTES);
        __asm__ __volatile__("" : : "r"(plain) : "memory");
    }
    copy = th_gbps(ALLOC_BYTES * REPS, wex__now() - t0);
    free(plain);

    src_alloc = th_pattern_buffer(ALLOC_BYTES, 0);
    src_reg = th_pattern_buffer(REG_BYTES, 1);
    /* A source registers what it puts from (the puts from src_alloc
     * carry its handle); src_reg's puts stay unregistered. */
    ck_assert(ops->caps & WEX_TRANSPORT_CAP_REGISTER_SOURCE);
    ck_assert_msg(ops->mem_register(ctx, src_alloc, ALLOC_BYTES,
                                    WEX_MEMORY_HOST, &src_mem) == WEX_OK,
                  "%s", wex__last_error());
    va = th_make_ops(ALLOC_BYTES, &na);
    vr = th_make_ops(REG_BYTES, &nr);
    /* the small pieces alone, timed, then everything else */
    t0 = wex__now();
    put_all(ctx, to_alloc, va + 3, na - 3, src_alloc);
    ck_assert_msg(ops->flush(ctx) == WEX_OK, "%s", wex__last_error());
    small = (double)(na - 3) / (wex__now() - t0);
    put_all(ctx, to_alloc, va, 3, src_alloc);
    put_all(ctx, to_reg, vr, nr, src_reg);
    ck_assert_msg(ops->flush(ctx) == WEX_OK, "%s", wex__last_error());
    printf("ucx (UCX_TLS=%s, error_handling %s, data_path %s: %s) across "
           "processes (informative): put 64 MiB x %d + flush %.2f GB/s, "
           "memcpy %.2f GB/s; %zu small puts (1-61 bytes) + flush %.0f "
           "puts/s\n",
           tls_name(), error_handling ? error_handling : "peer",
           path ? path : "auto", ops->peer_path(ctx, to_alloc), REPS, big, copy,
           na - 3, small);
    fflush(stdout);

    ops->peer_detach(ctx, to_alloc);
    ops->peer_detach(ctx, to_reg);
    ops->mem_deregister(ctx, src_mem);
    ops->ctx_destroy(ctx);
    free(va);
    free(vr);
    free(src_alloc);
    free(src_reg);
    free(zeros);
    ck_assert_msg(th_finish_destination(&d, 'v') == 0,
                  "the destination found wrong bytes");
}

START_TEST(buffers_across_processes_default)
{
    put_pattern_across_processes(NULL, NULL, NULL, NULL);
}
END_TEST

/* tcp has no native RMA: auto sends active messages. */
START_TEST(buffers_across_processes_tcp)
{
    put_pattern_across_processes("tcp", NULL, NULL, "am");
}
END_TEST

/* ... and data_path "put" the puts UCX emulates over them. */
START_TEST(buffers_across_processes_tcp_puts)
{
    put_pattern_across_processes("tcp", NULL, "put", "put");
}
END_TEST

/* Without peer error handling UCX may pick shared memory on one host. */
START_TEST(buffers_across_processes_no_error_handling)
{
    put_pattern_across_processes(NULL, "none", NULL, NULL);
}
END_TEST

/* Messages where shared memory could take puts: the path forced. */
START_TEST(buffers_across_processes_messages_over_shared_memory)
{
    put_pattern_across_processes(NULL, "none", "am", "am");
}
END_TEST

/* A destination places a message's bytes only inside a buffer it still
 * maps; bytes for a buffer it dropped are refused, and the source's next
 * flush fails saying so, once. */
START_TEST(messages_outside_every_buffer_are_refused)
{
    static const char *opt = "{\"data_path\": \"am\"}";
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 2, opt);
    wex_transport_ctx *src = must_open(WEX_SIDE_SOURCE, 0, opt);
    wex_transport_mem *kept, *dropped;
    wex_transport_peer *to_kept = NULL, *to_dropped = NULL;
    uint8_t key[2][WEX_TRANSPORT_KEY_MAX], bytes[100000];
    uint64_t len[2] = {sizeof(key[0]), sizeof(key[1])};
    uint8_t *kbuf, *dbuf;

    memset(bytes, 7, sizeof(bytes));
    ck_assert_int_eq(ops->mem_alloc(dst, 1 << 20, (void **)&kbuf, &kept),
                     WEX_OK);
    ck_assert_int_eq(ops->mem_alloc(dst, 1 << 20, (void **)&dbuf, &dropped),
                     WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, kept, key[0], &len[0]), WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, dropped, key[1], &len[1]), WEX_OK);
    ck_assert_msg(ops->peer_attach(src, 2, key[0], len[0], &to_kept) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_msg(ops->peer_attach(src, 2, key[1], len[1], &to_dropped) ==
                      WEX_OK,
                  "%s", wex__last_error());
    ops->mem_deregister(dst, dropped);
    /* an eager message and a rendezvous one, both refused */
    ck_assert_int_eq(ops->put(src, to_dropped, 0, bytes, 64), WEX_OK);
    ck_assert_int_eq(ops->put(src, to_dropped, 4096, bytes, sizeof(bytes)),
                     WEX_OK);
    ck_assert_int_eq(ops->put(src, to_kept, 8, bytes, sizeof(bytes)), WEX_OK);
    ck_assert_int_eq(ops->flush(src), WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "destination rank 2") != NULL, "%s",
                  wex__last_error());
    ck_assert_msg(strstr(wex__last_error(), "did not place 100064 bytes"), "%s",
                  wex__last_error());
    ck_assert_uint_eq(kbuf[8], 7); /* the kept buffer got its bytes */
    ck_assert_uint_eq(kbuf[8 + sizeof(bytes) - 1], 7);
    ck_assert_uint_eq(kbuf[8 + sizeof(bytes)], 0);
    /* told once: the next flush succeeds */
    ck_assert_int_eq(ops->put(src, to_kept, 0, bytes, 8), WEX_OK);
    ck_assert_msg(ops->flush(src) == WEX_OK, "%s", wex__last_error());
    ck_assert_uint_eq(kbuf[0], 7);
    ops->ctx_destroy(src);
    ops->ctx_destroy(dst);
}
END_TEST

/* ---- fencing -------------------------------------------------------------- */

static wex_status fence(wex_transport_ctx *ctx, uint32_t op, uint64_t epoch,
                        uint32_t *rekeyed)
{
    wex_transport_fence f;
    wex_status st;

    memset(&f, 0, sizeof(f));
    f.struct_size = sizeof(f);
    f.op = op;
    f.epoch = epoch;
    f.abandoned = op == WEX_FENCE_CLOSE;
    f.grace_ms = 200;
    st = ops->fence(ctx, &f);
    if (rekeyed != NULL)
        *rekeyed = f.rekeyed;
    return st;
}

/* A destination places only the messages of the try it has open: once
 * it closed the try, a source's messages of it are dropped and its
 * flush fails saying it was fenced; so do a source's of another try. */
START_TEST(messages_of_another_try_are_fenced)
{
    static const char *opt = "{\"data_path\": \"am\"}";
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 2, opt);
    wex_transport_ctx *src = must_open(WEX_SIDE_SOURCE, 0, opt);
    wex_transport_mem *mem;
    wex_transport_peer *peer = NULL;
    uint8_t key[WEX_TRANSPORT_KEY_MAX], bytes[100000];
    uint64_t len = sizeof(key);
    uint32_t rekeyed = 9;
    uint8_t *buf;

    ck_assert_int_eq(ops->mem_alloc(dst, 1 << 20, (void **)&buf, &mem), WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_OK);
    ck_assert_msg(ops->peer_attach(src, 2, key, len, &peer) == WEX_OK, "%s",
                  wex__last_error());
    ck_assert_int_eq(fence(dst, WEX_FENCE_OPEN, 5, NULL), WEX_OK);
    ck_assert_int_eq(fence(src, WEX_FENCE_WRITE, 5, NULL), WEX_OK);
    memset(bytes, 1, sizeof(bytes));
    ck_assert_int_eq(ops->put(src, peer, 0, bytes, 64), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 4096, bytes, sizeof(bytes)), WEX_OK);
    ck_assert_msg(ops->flush(src) == WEX_OK, "%s", wex__last_error());
    ck_assert(buf[0] == 1 && buf[4096 + sizeof(bytes) - 1] == 1);
    /* closed: messages-only keys are not revoked */
    ck_assert_int_eq(fence(dst, WEX_FENCE_CLOSE, 0, &rekeyed), WEX_OK);
    ck_assert_uint_eq(rekeyed, 0);
    memset(bytes, 2, sizeof(bytes));
    ck_assert_int_eq(ops->put(src, peer, 0, bytes, 64), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 4096, bytes, sizeof(bytes)), WEX_OK);
    ck_assert_int_eq(ops->flush(src), WEX_ERR_PEER);
    ck_assert_msg(strstr(wex__last_error(), "fenced") != NULL &&
                      strstr(wex__last_error(), "destination rank 2") &&
                      strstr(wex__last_error(), "dropped 100064 bytes"),
                  "%s", wex__last_error());
    ck_assert(buf[0] == 1 && buf[4096 + sizeof(bytes) - 1] == 1);
    /* the next try: its own messages land, another try's do not */
    ck_assert_int_eq(fence(dst, WEX_FENCE_OPEN, 6, NULL), WEX_OK);
    ck_assert_int_eq(fence(src, WEX_FENCE_WRITE, 7, NULL), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 0, bytes, 64), WEX_OK);
    ck_assert_int_eq(ops->flush(src), WEX_ERR_PEER);
    ck_assert(buf[0] == 1);
    ck_assert_int_eq(fence(src, WEX_FENCE_WRITE, 6, NULL), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 0, bytes, 64), WEX_OK);
    ck_assert_msg(ops->flush(src) == WEX_OK, "%s", wex__last_error());
    ck_assert(buf[0] == 2);
    ck_assert_int_eq(fence(dst, WEX_FENCE_WRITE, 6, NULL), WEX_ERR_INVALID);
    ck_assert_int_eq(fence(src, WEX_FENCE_OPEN, 6, NULL), WEX_ERR_INVALID);
    ops->ctx_destroy(src);
    ops->ctx_destroy(dst);
}
END_TEST

/* Where puts may bypass the handler, a try given up on revokes the
 * keys: a new registration and its key, which a source attaches and
 * writes through. */
START_TEST(puts_have_their_keys_revoked)
{
    static const char *opt = "{\"data_path\": \"put\", "
                             "\"error_handling\": \"none\"}";
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 2, opt);
    wex_transport_ctx *src = must_open(WEX_SIDE_SOURCE, 0, opt);
    uint8_t *buf = aligned_alloc(4096, 1 << 20), bytes[4096];
    uint8_t key[2][WEX_TRANSPORT_KEY_MAX];
    uint64_t len[2] = {sizeof(key[0]), sizeof(key[1])};
    wex_transport_peer *peer = NULL;
    wex_transport_mem *mem;
    uint32_t rekeyed = 0;

    memset(buf, 0, 1 << 20);
    ck_assert_int_eq(
        ops->mem_register(dst, buf, 1 << 20, WEX_MEMORY_HOST, &mem), WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, mem, key[0], &len[0]), WEX_OK);
    ck_assert_int_eq(fence(dst, WEX_FENCE_OPEN, 1, NULL), WEX_OK);
    ck_assert_int_eq(fence(dst, WEX_FENCE_CLOSE, 0, &rekeyed), WEX_OK);
    ck_assert_uint_eq(rekeyed, 1);
    /* Over RDMA the packed key changes with the registration; the
     * shared-memory lanes of one host may pack the same bytes (and
     * ignore revocation: docs/design.md) */
    ck_assert_int_eq(ops->mem_key(dst, mem, key[1], &len[1]), WEX_OK);
    ck_assert_int_eq(fence(dst, WEX_FENCE_OPEN, 2, NULL), WEX_OK);
    ck_assert_msg(ops->peer_attach(src, 2, key[1], len[1], &peer) == WEX_OK,
                  "%s", wex__last_error());
    memset(bytes, 3, sizeof(bytes));
    ck_assert_int_eq(fence(src, WEX_FENCE_WRITE, 2, NULL), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 8192, bytes, sizeof(bytes)), WEX_OK);
    ck_assert_msg(ops->flush(src) == WEX_OK, "%s", wex__last_error());
    ck_assert(buf[8192] == 3 && buf[8192 + sizeof(bytes) - 1] == 3);
    ops->peer_detach(src, peer);
    ops->ctx_destroy(src);
    ops->mem_deregister(dst, mem);
    ops->ctx_destroy(dst);
    free(buf);
}
END_TEST

/* ---- destinations killed before or after attaching --------------------- */

#define DEAD_OPTIONS "\"flush_timeout_ms\": 3000, \"connect_timeout_ms\": 3000"

/* A put + flush towards a dead destination fails (or attaching it
 * does), with WEX_ERR_PEER naming it or WEX_ERR_TIMEOUT, well within
 * the timeouts; so does destroying the context. Without peer error
 * handling (`lenient`), puts into shared memory the source still maps
 * may succeed instead, harmlessly; they must not hang either. */
static void expect_dead(wex_transport_ctx *ctx, wex_transport_peer *peer,
                        wex_status attach_status, double t0, const char *what,
                        int lenient)
{
    uint8_t bytes[4096];
    wex_status st = attach_status;
    double took, destroy;

    memset(bytes, 7, sizeof(bytes));
    if (st == WEX_OK) {
        st = ops->put(ctx, peer, 0, bytes, sizeof(bytes));
        if (st == WEX_OK)
            st = ops->flush(ctx);
    }
    took = wex__now() - t0;
    ck_assert_msg(st == WEX_ERR_PEER || st == WEX_ERR_TIMEOUT ||
                      (lenient && st == WEX_OK),
                  "%s: status %d: %s", what, st, wex__last_error());
    if (st == WEX_ERR_PEER)
        ck_assert_msg(strstr(wex__last_error(),
                             "destination rank 3 unreachable: ") != NULL,
                      "%s: %s", what, wex__last_error());
    ck_assert_msg(took < 6.0, "%s: took %.2f s", what, took);
    if (attach_status == WEX_OK && st != WEX_OK) {
        /* it stays failed, and says so at once */
        t0 = wex__now();
        ck_assert_int_ne(ops->flush(ctx), WEX_OK);
        ck_assert_int_ne(ops->put(ctx, peer, 0, bytes, sizeof(bytes)), WEX_OK);
        ck_assert_msg(wex__now() - t0 < 3.5, "%s: again took %.2f s", what,
                      wex__now() - t0);
    }
    printf("ucx (UCX_TLS=%s, error_handling %s): %s: %s after %.2f s: %s\n",
           tls_name(), lenient ? "none" : "peer", what,
           attach_status != WEX_OK ? "attach failed"
           : st != WEX_OK          ? "put+flush failed"
                                   : "put+flush succeeded",
           took,
           st != WEX_OK ? wex__last_error()
                        : "(into memory the "
                          "source still maps)");
    t0 = wex__now();
    if (peer != NULL)
        ops->peer_detach(ctx, peer);
    ops->ctx_destroy(ctx);
    destroy = wex__now() - t0;
    ck_assert_msg(destroy < 5.0, "%s: ctx_destroy took %.2f s", what, destroy);
    fflush(stdout);
}

static void killed_before_attach(const char *tls, const char *error_handling)
{
    char dopt[128], sopt[160];
    wex_transport_ctx *ctx;
    wex_transport_peer *peer = NULL;
    wex_status st;
    double t0;
    th_dest d;

    if (tls != NULL)
        setenv("UCX_TLS", tls, 1);
    spawn_destination(&d,
                      options_for(error_handling, dopt, sizeof(dopt), NULL));
    th_kill_destination(&d);
    ctx = must_open(
        WEX_SIDE_SOURCE, 0,
        options_for(error_handling, sopt, sizeof(sopt), DEAD_OPTIONS));
    t0 = wex__now();
    wex__error_clear();
    st = ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0], &peer);
    expect_dead(ctx, st == WEX_OK ? peer : NULL, st, t0, "killed before attach",
                error_handling != NULL);
}

static void killed_after_attach(const char *tls, const char *error_handling)
{
    char dopt[128], sopt[160];
    wex_transport_ctx *ctx;
    wex_transport_peer *peer = NULL;
    uint8_t bytes[4096];
    double t0;
    th_dest d;

    memset(bytes, 5, sizeof(bytes));
    if (tls != NULL)
        setenv("UCX_TLS", tls, 1);
    spawn_destination(&d,
                      options_for(error_handling, dopt, sizeof(dopt), NULL));
    ctx = must_open(
        WEX_SIDE_SOURCE, 0,
        options_for(error_handling, sopt, sizeof(sopt), DEAD_OPTIONS));
    ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0],
                                   &peer) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_int_eq(ops->put(ctx, peer, 0, bytes, sizeof(bytes)), WEX_OK);
    ck_assert_msg(ops->flush(ctx) == WEX_OK, "%s", wex__last_error());
    th_kill_destination(&d);
    t0 = wex__now();
    wex__error_clear();
    expect_dead(ctx, peer, WEX_OK, t0, "killed after attach",
                error_handling != NULL);
}

START_TEST(destination_killed_before_attach_default)
{
    killed_before_attach(NULL, NULL);
}
END_TEST

START_TEST(destination_killed_before_attach_tcp)
{
    killed_before_attach("tcp", NULL);
}
END_TEST

START_TEST(destination_killed_after_attach_default)
{
    killed_after_attach(NULL, NULL);
}
END_TEST

START_TEST(destination_killed_after_attach_tcp)
{
    killed_after_attach("tcp", NULL);
}
END_TEST

START_TEST(destination_killed_no_error_handling)
{
    killed_before_attach(NULL, "none");
    killed_after_attach(NULL, "none");
}
END_TEST

START_TEST(destination_killed_no_error_handling_tcp)
{
    killed_before_attach("tcp", "none");
    killed_after_attach("tcp", "none");
}
END_TEST

/* A source killed while its large messages are on the way (UCX's
 * rendezvous protocol: the destination pulls the bytes from the
 * source's memory, and the pull fails when the source dies) must leave
 * the destination alive and taking the next source's bytes. Each round,
 * a forked source puts the pattern's large runs over and over; once it
 * has flushed once, it is killed a few milliseconds into the next puts.
 * Then this process, as the source after it, puts every run, flushes,
 * and the destination checks every byte. The dead sources wrote the
 * same bytes, so a late landing of theirs changes nothing the check
 * sees: what is checked is that the destination survives and serves. */
static void source_process(const th_dest *d, const char *options, int ready_fd)
{
    wex_transport_ctx *ctx = NULL;
    wex_transport_peer *peer = NULL;
    uint8_t *src = th_pattern_buffer(ALLOC_BYTES, 0);
    size_t n;
    th_op *v = th_make_ops(ALLOC_BYTES, &n);
    char one = 1;

    if (open_ctx(WEX_SIDE_SOURCE, 0, options, &ctx) != WEX_OK ||
        ops->peer_attach(ctx, DEST_RANK, d->key[0], d->key_len[0], &peer) !=
            WEX_OK)
        _exit(3);
    for (int round = 0;; round++) {
        for (size_t i = 0; i < 3; i++) /* the large runs */
            if (ops->put(ctx, peer, v[i].offset, src + v[i].offset,
                         v[i].bytes) != WEX_OK)
                _exit(4);
        if (ops->flush(ctx) != WEX_OK)
            _exit(5);
        if (round == 0 && write(ready_fd, &one, 1) != 1)
            _exit(6);
    }
}

START_TEST(source_killed_mid_message_tcp)
{
    const char *options = "{\"connect_timeout_ms\": 5000, "
                          "\"flush_timeout_ms\": 20000}";
    wex_transport_ctx *ctx;
    wex_transport_peer *peer = NULL;
    uint8_t *src;
    size_t n;
    th_op *v;
    th_dest d;

    setenv("UCX_TLS", "tcp", 1); /* the active-message path */
    spawn_destination(&d, NULL);
    for (int round = 0; round < 3; round++) {
        int fds[2], status;
        char one;
        pid_t pid;
        ck_assert_int_eq(pipe(fds), 0);
        pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
            close(fds[0]);
            source_process(&d, options, fds[1]);
        }
        close(fds[1]);
        ck_assert_msg(read(fds[0], &one, 1) == 1,
                      "round %d: the source process failed before it "
                      "flushed once",
                      round);
        close(fds[0]);
        usleep(2000 + 7000 * (useconds_t)round); /* 2, 9, 16 ms */
        kill(pid, SIGKILL);
        ck_assert_int_eq(waitpid(pid, &status, 0), pid);
        ck_assert_msg(WIFSIGNALED(status),
                      "round %d: the source process exited (%d) before it "
                      "was killed",
                      round, WEXITSTATUS(status));
    }
    ctx = must_open(WEX_SIDE_SOURCE, 0, options);
    for (int k = 0; k < 2; k++) {
        uint64_t size = k == 0 ? ALLOC_BYTES : REG_BYTES;
        src = th_pattern_buffer(size, (unsigned)k);
        v = th_make_ops(size, &n);
        ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[k], d.key_len[k],
                                       &peer) == WEX_OK,
                      "%s", wex__last_error());
        put_all(ctx, peer, v, n, src);
        ck_assert_msg(ops->flush(ctx) == WEX_OK,
                      "after three sources died mid-message: %s",
                      wex__last_error());
        ops->peer_detach(ctx, peer);
        free(v);
        free(src);
    }
    ops->ctx_destroy(ctx);
    ck_assert_msg(th_finish_destination(&d, 'v') == 0,
                  "the destination died or found wrong bytes");
}
END_TEST

/* A destination that stops (SIGSTOP) but keeps its connections: over
 * tcp nothing fails, the puts just never land. A put waiting for room
 * (max_outstanding 1) or the flush gives up after flush_timeout_ms, and
 * ctx_destroy does not wait for it. */
START_TEST(destination_stopped)
{
    wex_transport_ctx *ctx;
    wex_transport_peer *peer = NULL;
    uint8_t *data = calloc(1, 16u << 20);
    double t0, took;
    wex_status st;
    th_dest d;

    ck_assert_ptr_nonnull(data);
    setenv("UCX_TLS", "tcp", 1);
    spawn_destination(&d, NULL);
    ctx = must_open(WEX_SIDE_SOURCE, 0,
                    "{\"flush_timeout_ms\": 1000, \"max_outstanding\": 1}");
    ck_assert_msg(ops->peer_attach(ctx, DEST_RANK, d.key[0], d.key_len[0],
                                   &peer) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_int_eq(ops->put(ctx, peer, 0, data, 4096), WEX_OK);
    ck_assert_msg(ops->flush(ctx) == WEX_OK, "%s", wex__last_error());
    ck_assert_int_eq(kill(d.pid, SIGSTOP), 0);
    t0 = wex__now();
    st = WEX_OK;
    for (int i = 0; i < 8 && st == WEX_OK; i++)
        st = ops->put(ctx, peer, 0, data, 16u << 20);
    if (st == WEX_OK)
        st = ops->flush(ctx);
    took = wex__now() - t0;
    ck_assert_msg(st == WEX_ERR_TIMEOUT, "status %d: %s", st,
                  wex__last_error());
    ck_assert_msg(strstr(wex__last_error(), "1000 ms") != NULL &&
                      strstr(wex__last_error(), "destination rank 3") != NULL,
                  "%s", wex__last_error());
    ck_assert_msg(took >= 0.9 && took < 4.0, "took %.2f s", took);
    printf("ucx (UCX_TLS=tcp): destination stopped: %.2f s: %s\n", took,
           wex__last_error());
    fflush(stdout);
    t0 = wex__now();
    ops->peer_detach(ctx, peer);
    ops->ctx_destroy(ctx);
    took = wex__now() - t0;
    ck_assert_msg(took < 3.0, "ctx_destroy took %.2f s", took);
    th_kill_destination(&d);
    free(data);
}
END_TEST

/* ---- keys ------------------------------------------------------------------ */

/* Recomputes the key's checksum (FNV-1a, the field read as zero), so a
 * deliberately wrong field reaches the check behind it. */
static void reseal(uint8_t *key, uint64_t len)
{
    uint64_t hash = 0xcbf29ce484222325ull;

    for (uint64_t i = 0; i < len; i++)
        hash = (hash ^ (i >= 48 && i < 56 ? 0 : key[i])) * 0x100000001b3ull;
    wex_put_le(key + 48, hash, 8);
}

START_TEST(bad_keys_are_invalid)
{
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 2, NULL);
    wex_transport_ctx *src = must_open(WEX_SIDE_SOURCE, 0, NULL);
    wex_transport_peer *peer = NULL;
    wex_transport_mem *mem;
    uint8_t key[WEX_TRANSPORT_KEY_MAX + 16], bad[sizeof(key)];
    uint64_t len = WEX_TRANSPORT_KEY_MAX, alen, rlen;
    unsigned seed = 12345;
    uint8_t *buf;

    ck_assert_int_eq(ops->mem_alloc(dst, 1 << 20, (void **)&buf, &mem), WEX_OK);
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_OK);
    ck_assert_uint_le(len, WEX_TRANSPORT_KEY_MAX);
    ck_assert_uint_eq(wex_get_le(key, 4), 0x43555857u); /* "WXUC" */
    alen = wex_get_le(key + 12, 4);
    rlen = wex_get_le(key + 16, 4);
    ck_assert_uint_gt(alen, 0);
    ck_assert_uint_gt(rlen, 0);
    ck_assert_uint_eq(wex_get_le(key + 24, 8), 2);
    ck_assert_uint_eq(wex_get_le(key + 32, 8), (uintptr_t)buf);
    ck_assert_uint_eq(wex_get_le(key + 40, 8), 1 << 20);
    /* the real one */
    ck_assert_int_eq(th_attach_key(src, 2, key, len), WEX_OK);

    /* the real one works, within this process too */
    ck_assert_msg(ops->peer_attach(src, 2, key, len, &peer) == WEX_OK, "%s",
                  wex__last_error());
    ck_assert_int_eq(ops->put(src, peer, (1 << 20) - 1, "z", 1), WEX_OK);
    ck_assert_int_eq(ops->put(src, peer, 4096, "wex", 3), WEX_OK);
    ck_assert_msg(ops->flush(src) == WEX_OK, "%s", wex__last_error());
    ck_assert_uint_eq(buf[(1 << 20) - 1], 'z');
    ck_assert(memcmp(buf + 4096, "wex", 3) == 0);
    ops->peer_detach(src, peer);

    th_expect_invalid(src, NULL, 0, "empty", "shorter than");
    for (uint64_t cut = 0; cut < len; cut++)
        th_expect_invalid(src, key, cut, "truncated", "not a valid ucx key");
    memcpy(bad, key, len);
    bad[len] = 'x';
    th_expect_invalid(src, bad, len + 1, "one byte longer", "expected");
    th_expect_invalid(src, bad, WEX_TRANSPORT_KEY_MAX + 1, "too long",
                      "more than any ucx key");
#define MUTATE(what, says, index, value, sealed)                               \
    do {                                                                       \
        memcpy(bad, key, len);                                                 \
        bad[index] = (uint8_t)(value);                                         \
        if (sealed)                                                            \
            reseal(bad, len);                                                  \
        th_expect_invalid(src, bad, len, what, says);                          \
    } while (0)
    MUTATE("magic", "bad magic", 0, key[0] ^ 0xff, 0);
    MUTATE("version", "key version", 4, 9, 0);
    MUTATE("host length", "expected", 6, key[6] + 1, 0);
    MUTATE("host length 200", "host name length", 6, 200, 0);
    MUTATE("address length", "expected", 12, key[12] + 1, 0);
    MUTATE("rkey length", "expected", 16, key[16] ^ 0x40, 0);
    MUTATE("rank", "checksum", 24, 5, 0);
    MUTATE("address", "checksum", 33, key[33] ^ 1, 0);
    MUTATE("size", "checksum", 40, key[40] ^ 1, 0);
    MUTATE("checksum", "checksum", 50, key[50] ^ 1, 0);
    MUTATE("worker address", "checksum", KEY_HEADER + 3,
           key[KEY_HEADER + 3] ^ 0x10, 0);
    MUTATE("rkey", "checksum", KEY_HEADER + alen + 1,
           key[KEY_HEADER + alen + 1] ^ 0x10, 0);
    /* checksummed, but still wrong */
    MUTATE("reserved", "reserved", 7, 1, 1);
    MUTATE("reserved 2", "reserved", 21, 1, 1);
    MUTATE("other rank", "the key is destination rank 5's, not rank 2's", 24, 5,
           1);
    if (len > KEY_HEADER + alen + rlen) /* a host name */
        MUTATE("unprintable host", "printable", len - 1, 0x01, 1);
    memcpy(bad, key, len);
    memset(bad + 8, 0, 4);
    reseal(bad, len);
    th_expect_invalid(src, bad, len, "pid 0", "bad destination pid");
    memcpy(bad, key, len);
    memset(bad + 40, 0, 8);
    reseal(bad, len);
    th_expect_invalid(src, bad, len, "size 0", "buffer size 0");
    memcpy(bad, key, len);
    memset(bad + 32, 0xff, 8);
    reseal(bad, len);
    th_expect_invalid(src, bad, len, "address wraps", "not a valid range");
#undef MUTATE
    /* garbage of every length never crashes and is refused */
    for (int i = 0; i < 3000; i++) {
        uint64_t n = (uint64_t)rand_r(&seed) % (WEX_TRANSPORT_KEY_MAX + 1);
        for (uint64_t b = 0; b < n; b++)
            bad[b] = (uint8_t)rand_r(&seed);
        if (i % 2 == 0 && n >= 8)
            memcpy(bad, key, 8); /* past the magic and version */
        th_expect_invalid(src, bad, n, "garbage", "not a valid ucx key");
    }
    /* corrupt blobs (what UCX itself would parse): refused before UCX
     * sees them */
    for (int i = 0; i < 300; i++) {
        memcpy(bad, key, len);
        for (uint64_t b = KEY_HEADER; b < len; b++)
            if (rand_r(&seed) % 8 == 0)
                bad[b] = (uint8_t)rand_r(&seed);
        if (memcmp(bad, key, len) == 0)
            bad[KEY_HEADER] ^= 1;
        th_expect_invalid(src, bad, len, "corrupt blob", "checksum");
    }
    ck_assert_int_eq(th_attach_key(src, 2, key, len), WEX_OK); /* still fine */

    ops->ctx_destroy(src);
    ops->mem_deregister(dst, mem);
    ops->ctx_destroy(dst);
}
END_TEST

/* ---- contexts, options, argument checks ---------------------------------- */

START_TEST(options_are_checked)
{
    static const char *const bad[][2] = {
        {"{\"flush_timeout_ms\": 0}", "/flush_timeout_ms"},
        {"{\"flush_timeout_ms\": 1.5}", "/flush_timeout_ms"},
        {"{\"flush_timeout_ms\": \"10\"}", "/flush_timeout_ms"},
        {"{\"flush_timeout_ms\": 3600001}", "/flush_timeout_ms"},
        {"{\"connect_timeout_ms\": -1}", "/connect_timeout_ms"},
        {"{\"max_outstanding\": 0}", "/max_outstanding"},
        {"{\"max_outstanding\": 1048577}", "/max_outstanding"},
        {"{\"error_handling\": \"abort\"}", "/error_handling"},
        {"{\"error_handling\": 1}", "/error_handling"},
        {"{\"data_path\": \"rdma\"}", "/data_path"},
        {"{\"data_path\": true}", "/data_path"},
        {"{\"tcp_segment_bytes\": 65535}", "/tcp_segment_bytes"},
        {"{\"tcp_segment_bytes\": 67108865}", "/tcp_segment_bytes"},
        {"{\"tcp_segment_bytes\": \"512K\"}", "/tcp_segment_bytes"},
    };
    wex_transport_ctx *ctx = NULL;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        ck_assert_int_eq(open_ctx(WEX_SIDE_SOURCE, 0, bad[i][0], &ctx),
                         WEX_ERR_INVALID);
        ck_assert_msg(strstr(wex__last_error(), bad[i][1]) != NULL, "%s",
                      wex__last_error());
    }
    ctx = must_open(WEX_SIDE_SOURCE, 0,
                    "{\"connect_timeout_ms\": 0, \"flush_timeout_ms\": 1, "
                    "\"max_outstanding\": 1, \"tcp_segment_bytes\": 65536}");
    ops->ctx_destroy(ctx);
    ctx = must_open(WEX_SIDE_SOURCE, 0, "{}");
    ops->ctx_destroy(ctx);
    ck_assert_int_eq(open_ctx(WEX_SIDE_DESTINATION, 4, NULL, &ctx),
                     WEX_ERR_INVALID);
}
END_TEST

/* What UCX logs (on stdout, unless UCX_LOG_FILE says otherwise) and
 * writes on stderr while a source context opens with UCX_TLS set to tls
 * and the options given. */
static void output_of_open(const char *tls, const char *options, char *text,
                           size_t cap)
{
    char path[] = "/tmp/wex-ucx-output-XXXXXX";
    int fd = mkstemp(path), out = dup(1), err = dup(2);
    wex_transport_ctx *ctx = NULL;
    ssize_t n;

    ck_assert_int_ge(fd, 0);
    ck_assert_int_ge(out, 0);
    ck_assert_int_ge(err, 0);
    setenv("UCX_TLS", tls, 1);
    fflush(stdout);
    fflush(stderr);
    dup2(fd, 1);
    dup2(fd, 2);
    if (open_ctx(WEX_SIDE_SOURCE, 0, options, &ctx) == WEX_OK)
        ops->ctx_destroy(ctx);
    fflush(stdout);
    fflush(stderr);
    dup2(out, 1);
    dup2(err, 2);
    close(out);
    close(err);
    n = pread(fd, text, cap - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
}

/* tcp_segment_bytes sets a parameter of UCX's tcp transport, which UCX
 * warns of as unused where no tcp interface opens: it is set only where
 * UCX_TLS lets tcp open. (UCX warns at the level this test case sets.) */
START_TEST(tcp_segment_set_only_where_tcp_opens)
{
    static const char *const no_tcp[] = {"self,sm", "^tcp"};
    char text[4096];

    /* the capture works: UCX names a bad tcp segment in the environment */
    setenv("UCX_TCP_RX_SEG_SIZE", "many", 1);
    output_of_open("tcp", NULL, text, sizeof(text));
    unsetenv("UCX_TCP_RX_SEG_SIZE");
    ck_assert_msg(strstr(text, "RX_SEG_SIZE") != NULL, "%s", text);
    for (size_t i = 0; i < sizeof(no_tcp) / sizeof(no_tcp[0]); i++) {
        output_of_open(no_tcp[i], "{\"tcp_segment_bytes\": 1048576}", text,
                       sizeof(text));
        ck_assert_msg(strstr(text, "RX_SEG_SIZE") == NULL, "UCX_TLS=%s: %s",
                      no_tcp[i], text);
    }
    output_of_open("tcp", "{\"tcp_segment_bytes\": 1048576}", text,
                   sizeof(text));
    ck_assert_msg(strstr(text, "RX_SEG_SIZE") == NULL, "%s", text);
}
END_TEST

/* Where this test case needs UCX's warnings whatever the environment. */
static void setup_warnings(void)
{
    setenv("UCX_LOG_LEVEL", "warn", 1);
    setup();
}

START_TEST(bad_ucx_environment_is_explained)
{
    wex_transport_ctx *ctx = NULL;
    wex_status st;

    setenv("UCX_TLS", "no-such-transport", 1);
    st = open_ctx(WEX_SIDE_SOURCE, 0, NULL, &ctx);
    if (st == WEX_OK) { /* this UCX only warns */
        ops->ctx_destroy(ctx);
        return;
    }
    ck_assert_msg(strstr(wex__last_error(), "UCX_TLS") != NULL, "%s",
                  wex__last_error());
}
END_TEST

/* A UCP setting UCX cannot parse fails the context at once, reading
 * UCX's configuration, and says where to look. */
START_TEST(unreadable_ucx_setting_is_explained)
{
    wex_transport_ctx *ctx = NULL;

    setenv("UCX_RNDV_THRESH", "many", 1);
    ck_assert_int_eq(open_ctx(WEX_SIDE_SOURCE, 0, NULL, &ctx), WEX_ERR_SYSTEM);
    ck_assert_ptr_null(ctx);
    ck_assert_msg(strstr(wex__last_error(), "ucp_config_read") != NULL &&
                      strstr(wex__last_error(), "UCX_* environment") != NULL,
                  "%s", wex__last_error());
}
END_TEST

START_TEST(arguments_are_checked)
{
    wex_transport_ctx *dst = must_open(WEX_SIDE_DESTINATION, 0, NULL);
    wex_transport_ctx *src =
        must_open(WEX_SIDE_SOURCE, 0, "{\"max_outstanding\": 2}");
    wex_transport_mem *mem = NULL, *reg = NULL;
    wex_transport_peer *peer = NULL;
    uint8_t key[WEX_TRANSPORT_KEY_MAX], local[64];
    uint64_t len = sizeof(key);
    uint8_t *buf;

    for (int i = 0; i < 64; i++)
        local[i] = (uint8_t)(i + 1);
    ck_assert_int_eq(ops->mem_alloc(dst, 0, (void **)&buf, &mem),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(
        ops->mem_register(dst, local, sizeof(local), WEX_MEMORY_CUDA, &reg),
        WEX_ERR_UNSUPPORTED);
    ck_assert_int_eq(ops->mem_register(dst, NULL, 64, WEX_MEMORY_HOST, &reg),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(ops->mem_alloc(dst, 100, (void **)&buf, &mem), WEX_OK);
    ck_assert_uint_eq((uintptr_t)buf % (uintptr_t)sysconf(_SC_PAGESIZE), 0);
    for (int i = 0; i < 100; i++)
        ck_assert_uint_eq(buf[i], 0);
    len = 10;
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "too small") != NULL, "%s",
                  wex__last_error());
    len = sizeof(key);
    ck_assert_int_eq(ops->mem_key(dst, mem, key, &len), WEX_OK);
    /* sources expose nothing, destinations attach nothing */
    ck_assert_int_eq(
        ops->mem_register(src, local, sizeof(local), WEX_MEMORY_HOST, &reg),
        WEX_OK);
    {
        uint64_t l2 = sizeof(key);
        uint8_t k2[WEX_TRANSPORT_KEY_MAX];
        ck_assert_int_eq(ops->mem_key(src, reg, k2, &l2), WEX_ERR_UNSUPPORTED);
    }
    ops->mem_deregister(src, reg);
    ck_assert_int_eq(ops->peer_attach(dst, 0, key, len, &peer),
                     WEX_ERR_UNSUPPORTED);
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
    ck_assert_msg(ops->flush(src) == WEX_OK, "%s", wex__last_error());
    ck_assert(memcmp(buf, local, 36) == 0);
    ck_assert(memcmp(buf + 36, local, 64) == 0);
    ck_assert_int_eq(ops->flush(dst), WEX_OK); /* nothing to flush */
    /* puts in flight, peer attached, memory registered: ctx_destroy
     * cleans everything up */
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(ops->put(src, peer, 0, local, 64), WEX_OK);
    ops->ctx_destroy(src);
    ops->ctx_destroy(dst);
}
END_TEST

static Suite *ucx_suite(void)
{
    Suite *s = suite_create("ucx transport");
    TCase *tc = tcase_create("ucx");
    TCase *fail = tcase_create("ucx failures");
    TCase *warn = tcase_create("ucx warnings");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, buffers_across_processes_default);
    tcase_add_test(tc, buffers_across_processes_tcp);
    tcase_add_test(tc, buffers_across_processes_tcp_puts);
    tcase_add_test(tc, buffers_across_processes_no_error_handling);
    tcase_add_test(tc, buffers_across_processes_messages_over_shared_memory);
    tcase_add_test(tc, messages_outside_every_buffer_are_refused);
    tcase_add_test(tc, messages_of_another_try_are_fenced);
    tcase_add_test(tc, puts_have_their_keys_revoked);
    tcase_add_test(tc, bad_keys_are_invalid);
    tcase_add_test(tc, options_are_checked);
    tcase_add_test(tc, arguments_are_checked);
    suite_add_tcase(s, tc);

    tcase_add_checked_fixture(warn, setup_warnings, teardown);
    tcase_set_timeout(warn, 60);
    tcase_add_test(warn, tcp_segment_set_only_where_tcp_opens);
    suite_add_tcase(s, warn);

    tcase_add_checked_fixture(fail, setup_quiet, teardown);
    tcase_set_timeout(fail, 60);
    tcase_add_test(fail, destination_killed_before_attach_default);
    tcase_add_test(fail, destination_killed_before_attach_tcp);
    tcase_add_test(fail, destination_killed_after_attach_default);
    tcase_add_test(fail, destination_killed_after_attach_tcp);
    tcase_add_test(fail, destination_killed_no_error_handling);
    tcase_add_test(fail, destination_killed_no_error_handling_tcp);
    tcase_add_test(fail, destination_stopped);
    tcase_add_test(fail, source_killed_mid_message_tcp);
    tcase_add_test(fail, bad_ucx_environment_is_explained);
    tcase_add_test(fail, unreadable_ucx_setting_is_explained);
    suite_add_tcase(s, fail);
    return s;
}

int main(void)
{
    return wex_test_run(ucx_suite());
}
