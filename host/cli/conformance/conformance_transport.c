/*
 * Transports (C19, C20), between real processes as in a job: both ends
 * connect first when the transport has the ABI 1.3 connect op (through a
 * stand-in rendezvous, conformance_exchange.c), then a forked
 * destination exposes 4 MiB (mem_alloc when the transport can allocate,
 * else mem_register on its own memory) and sends its key over a pipe; the
 * tester attaches it, puts a pattern, flushes, and the destination checks
 * every byte. Then the destination is killed (SIGKILL) and a put + flush
 * towards it must fail, or succeed harmlessly, within the deadline, and so
 * must tearing down; the watchdog turns a hang into a FAIL.
 */
#include <errno.h>
#include <signal.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <wex/wex.h>

#include "conformance.h"
#include "tool_base.h"
#include "tool_json.h"

#define BUF_BYTES (4ull << 20)
#define MSG_MAX 400

typedef struct tport {
    const conf_ctx *ctx;
    const wex_transport_ops *ops;
    wex_plugin_state *state;
    const wex_options *options; /* the --options every ctx gets */
    char job_id[64];
    conf_exchange *exchange; /* for connect (ABI 1.3) */
} tport;

typedef struct span {
    uint64_t offset, bytes;
} span;

/* Large, unaligned, at the very end, and many small strided writes. */
static size_t make_spans(span *v)
{
    size_t n = 0;

    v[n++] = (span){0, 1u << 20};
    v[n++] = (span){(1u << 20) + 7, (2u << 20) + 13};
    v[n++] = (span){BUF_BYTES - 4096, 4096};
    for (uint64_t k = 0; k < 64; k++)
        v[n++] = (span){(7u << 19) + k * 997, 61};
    return n;
}

#define SPAN_MAX 80

/* Never zero, so a missed write shows. */
static uint8_t pattern(uint64_t i)
{
    return (uint8_t)((((i + 17) * 0x9e3779b97f4a7c15ull) >> 56) | 1u);
}

/* A length-prefixed message: the key (len > 0), or an error text. */
static void send_msg(int fd, uint32_t tag, const void *data, uint32_t len)
{
    (void)(wex_tool_write_all(fd, &tag, sizeof(tag)) == 0 &&
           wex_tool_write_all(fd, &len, sizeof(len)) == 0 &&
           wex_tool_write_all(fd, data, len) == 0);
}

static int recv_msg(int fd, uint32_t *tag, void *data, uint32_t cap,
                    uint32_t *len)
{
    if (wex_tool_read_all(fd, tag, sizeof(*tag)) != 0 ||
        wex_tool_read_all(fd, len, sizeof(*len)) != 0 || *len > cap ||
        wex_tool_read_all(fd, data, *len) != 0)
        return -1;
    return 0;
}

#define TAG_KEY 1u
#define TAG_ERROR 2u
#define TAG_VERIFIED 3u

static void send_error(int fd, const char *fmt, ...) WEX_PRINTF(2, 3);

static void send_error(int fd, const char *fmt, ...)
{
    char msg[MSG_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    send_msg(fd, TAG_ERROR, msg, (uint32_t)strlen(msg) + 1);
}

static wex_status open_ctx(const tport *t, uint32_t side,
                           wex_transport_ctx **ctx_p)
{
    wex_transport_args args;

    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.side = side;
    args.rank = 0;
    args.source_ranks = 1;
    args.destination_ranks = 1;
    args.options = t->options;
    args.job_id = t->job_id;
    wex_tool_error_clear();
    return t->ops->ctx_create(t->state, &args, ctx_p);
}

/* The transport's connect, as a job calls it on every rank before any
 * memory key: nothing to do for a transport without one. */
static wex_status connect_ctx(const tport *t, wex_transport_ctx *ctx)
{
    wex_transport_exchange ex;
    wex_status st;

    if (t->ops->connect == NULL)
        return WEX_OK;
    conf_exchange_lend(t->exchange, &ex);
    wex_tool_error_clear();
    st = t->ops->connect(ctx, &ex);
    if (st != WEX_OK && wex_last_error()[0] == '\0')
        wex_tool_error(st, "failed without a message");
    return st;
}

/* Every written byte holds the pattern, every other byte is still 0. */
static int verify(const uint8_t *buf, char *why, size_t cap)
{
    span v[SPAN_MAX];
    size_t n = make_spans(v);
    uint8_t *want = calloc(1, BUF_BYTES);

    if (want == NULL) {
        snprintf(why, cap, "destination: out of memory");
        return -1;
    }
    for (size_t i = 0; i < n; i++)
        for (uint64_t b = v[i].offset; b < v[i].offset + v[i].bytes; b++)
            want[b] = pattern(b);
    for (uint64_t b = 0; b < BUF_BYTES; b++)
        if (buf[b] != want[b]) {
            snprintf(why, cap,
                     "byte %llu of the destination's buffer is "
                     "0x%02x, expected 0x%02x%s",
                     (unsigned long long)b, buf[b], want[b],
                     want[b] ? "" : " (nothing was put there)");
            free(want);
            return -1;
        }
    free(want);
    return 0;
}

/* The destination process: expose, send the key, verify on request. */
static void destination_main(const tport *t, int to_tester, int from_tester)
{
    wex_transport_ctx *ctx = NULL;
    wex_transport_mem *mem = NULL;
    uint8_t key[WEX_TRANSPORT_KEY_MAX];
    uint64_t key_len = sizeof(key);
    char cmd = 0, why[MSG_MAX];
    void *buf = NULL;
    int alloc = (t->ops->caps & WEX_TRANSPORT_CAP_ALLOC) != 0;

    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (conf_report_fd() >= 0)
        close(conf_report_fd()); /* only the tester reports */
    if (open_ctx(t, WEX_SIDE_DESTINATION, &ctx) != WEX_OK) {
        send_error(to_tester, "destination ctx_create: %s", wex_last_error());
        return;
    }
    if (connect_ctx(t, ctx) != WEX_OK) {
        send_error(to_tester, "destination connect: %s", wex_last_error());
        return;
    }
    if (alloc) {
        if (t->ops->mem_alloc(ctx, BUF_BYTES, &buf, &mem) != WEX_OK) {
            send_error(to_tester, "destination mem_alloc of 4 MiB: %s",
                       wex_last_error());
            return;
        }
    } else {
        buf = mmap(NULL, BUF_BYTES, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (buf == MAP_FAILED ||
            t->ops->mem_register(ctx, buf, BUF_BYTES, WEX_MEMORY_HOST, &mem) !=
                WEX_OK) {
            send_error(to_tester, "destination mem_register of 4 MiB: %s",
                       wex_last_error());
            return;
        }
    }
    if (t->ops->mem_key(ctx, mem, key, &key_len) != WEX_OK) {
        send_error(to_tester, "destination mem_key: %s", wex_last_error());
        return;
    }
    if (key_len == 0 || key_len > WEX_TRANSPORT_KEY_MAX) {
        send_error(to_tester, "mem_key gave a key of %llu bytes (1..%u)",
                   (unsigned long long)key_len, WEX_TRANSPORT_KEY_MAX);
        return;
    }
    send_msg(to_tester, TAG_KEY, key, (uint32_t)key_len);
    while (wex_tool_read_all(from_tester, &cmd, 1) == 0 && cmd == 'v') {
        if (verify(buf, why, sizeof(why)) == 0)
            send_msg(to_tester, TAG_VERIFIED, "", 1);
        else
            send_msg(to_tester, TAG_ERROR, why, (uint32_t)strlen(why) + 1);
    }
    /* the tester kills this process; nothing to tear down politely */
}

/* C19. Returns 1 when the pair is set up for C20. */
static int round_trip(const tport *t, pid_t *dest_p, int *to_dest,
                      int *from_dest, wex_transport_ctx **src_p,
                      wex_transport_peer **peer_p)
{
    uint8_t key[WEX_TRANSPORT_KEY_MAX], *data;
    int down[2], up[2];
    uint32_t tag, len;
    span v[SPAN_MAX];
    wex_status st;
    size_t n;
    pid_t pid;

    if (pipe(down) != 0 || pipe(up) != 0) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "kit: pipe: %s",
                    strerror(errno));
        return 0;
    }
    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "kit: fork: %s",
                    strerror(errno));
        return 0;
    }
    if (pid == 0) {
        close(down[1]);
        close(up[0]);
        destination_main(t, up[1], down[0]);
        fflush(NULL);
        _exit(0);
    }
    close(down[0]);
    close(up[1]);
    *dest_p = pid;
    *to_dest = down[1];
    *from_dest = up[0];
    /* before the key: a transport's connect may wait for every rank */
    if (open_ctx(t, WEX_SIDE_SOURCE, src_p) != WEX_OK) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "source ctx_create: %s", wex_last_error());
        return 0;
    }
    if (connect_ctx(t, *src_p) != WEX_OK) {
        char why[MSG_MAX];
        struct pollfd pfd = {up[0], POLLIN, 0};

        /* A destination that failed says why, and that is the cause. One
         * still connecting fails by the same deadline or sends its key. */
        snprintf(why, sizeof(why), "source connect: %s", wex_last_error());
        if (poll(&pfd, 1, (int)(t->exchange->deadline_s * 1000)) == 1 &&
            recv_msg(up[0], &tag, key, sizeof(key), &len) == 0 &&
            tag == TAG_ERROR) {
            key[sizeof(key) - 1] = '\0';
            snprintf(why, sizeof(why), "%.*s", (int)sizeof(why) - 1,
                     (const char *)key);
        }
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "%s", why);
        return 0;
    }
    if (recv_msg(up[0], &tag, key, sizeof(key), &len) != 0) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "the destination process died before sending its key");
        return 0;
    }
    if (tag != TAG_KEY) {
        key[sizeof(key) - 1] = '\0';
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "%s",
                    (const char *)key);
        return 0;
    }
    wex_tool_error_clear();
    if (t->ops->peer_attach(*src_p, 0, key, len, peer_p) != WEX_OK) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "peer_attach with the destination's %u-byte key: %s", len,
                    wex_last_error());
        return 0;
    }
    data = malloc(BUF_BYTES);
    if (data == NULL) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "kit: out of memory");
        return 0;
    }
    for (uint64_t b = 0; b < BUF_BYTES; b++)
        data[b] = pattern(b);
    n = make_spans(v);
    for (size_t i = 0; i < n; i++) {
        st = t->ops->put(*src_p, *peer_p, v[i].offset, data + v[i].offset,
                         v[i].bytes);
        if (st < 0) {
            conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                        "put of %llu bytes at offset %llu: %s",
                        (unsigned long long)v[i].bytes,
                        (unsigned long long)v[i].offset, wex_last_error());
            free(data);
            return 0;
        }
    }
    /* the source bytes must stay put until flush returns */
    while ((st = t->ops->flush(*src_p)) > 0)
        ;
    free(data);
    if (st != WEX_OK) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "flush: %s",
                    wex_last_error());
        return 0;
    }
    if (wex_tool_write_all(down[1], "v", 1) != 0 ||
        recv_msg(up[0], &tag, key, sizeof(key), &len) != 0) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "the destination process died while checking its "
                    "buffer");
        return 0;
    }
    if (tag != TAG_VERIFIED) {
        key[sizeof(key) - 1] = '\0';
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "after put and flush: %s", (const char *)key);
        return 0;
    }
    conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_PASS,
                "%s%zu puts into a %s 4 MiB buffer of another process "
                "landed byte for byte after flush",
                t->ops->connect != NULL ? "both ends connected; " : "", n,
                (t->ops->caps & WEX_TRANSPORT_CAP_ALLOC) ? "mem_alloc'd"
                                                         : "mem_registered");
    return 1;
}

/* C20. */
static void dead_peer(const tport *t, pid_t dest, wex_transport_ctx *src,
                      wex_transport_peer *peer)
{
    unsigned deadline = (unsigned)(t->ctx->deadline_s + 0.5);
    uint8_t bytes[4096];
    wex_status st;
    double t0, took;
    char msg[MSG_MAX];

    if (deadline == 0)
        deadline = 1;
    memset(bytes, 0x5a, sizeof(bytes));
    kill(dest, SIGKILL);
    waitpid(dest, NULL, 0);
    conf_watchdog(deadline, CONF_TRANSPORT_DEAD_PEER,
                  "put + flush towards a killed destination did not return "
                  "within %u s",
                  deadline);
    t0 = wex_tool_now();
    wex_tool_error_clear();
    st = t->ops->put(src, peer, 0, bytes, sizeof(bytes));
    if (st >= 0)
        while ((st = t->ops->flush(src)) > 0)
            ;
    took = wex_tool_now() - t0;
    snprintf(msg, sizeof(msg), "%s", wex_last_error());
    conf_watchdog(deadline, CONF_TRANSPORT_DEAD_PEER,
                  "put + flush towards a killed destination returned, but "
                  "peer_detach or ctx_destroy then hung for %u s",
                  deadline);
    t->ops->peer_detach(src, peer);
    t->ops->ctx_destroy(src);
    conf_watchdog(0, 0, "%s", "");
    if (st < 0 && msg[0] == '\0')
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_FAIL,
                    "put + flush towards a killed destination failed (%s) "
                    "without a message",
                    wex_status_string(st));
    else if (st < 0)
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_PASS,
                    "put + flush towards a killed destination failed in "
                    "%.1f s (%s): %s",
                    took, wex_status_string(st), msg);
    else
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_PASS,
                    "put + flush towards a killed destination succeeded "
                    "harmlessly in %.1f s",
                    took);
}

/* C19 for a transport of device memory only: the kit moves host
 * buffers, so it only says whether this host could run one at all. */
static void device_only_skip(const tport *t)
{
    wex_transport_ctx *ctx = NULL;
    wex_status st = open_ctx(t, WEX_SIDE_DESTINATION, &ctx);

    if (st == WEX_OK) {
        t->ops->ctx_destroy(ctx);
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_SKIP,
                    "the transport moves device memory only (no "
                    "WEX_TRANSPORT_CAP_HOST_MEMORY) and the kit moves host "
                    "buffers; tests/gpu checks device memory");
    } else {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_SKIP,
                    "the transport moves device memory only, and here "
                    "ctx_create says: %s",
                    wex_last_error()[0] ? wex_last_error()
                                        : wex_status_string(st));
    }
}

static void transport_child(conf_ctx *ctx, void *arg)
{
    wex_transport_ctx *src = NULL;
    wex_transport_peer *peer = NULL;
    wex_tool_registry *r;
    wex_tool_plugin *p;
    int to_dest = -1, from_dest = -1;
    pid_t dest = -1;
    conf_exchange exchange = {{0}, 0};
    tport t;

    (void)arg;
    conf_begin(CONF_TRANSPORT_ROUNDTRIP);
    p = conf_load_plugin(ctx, ctx->manifest_path, &r);
    if (p == NULL) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "the host's loader: %s", wex_last_error());
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_SKIP, "needs C19");
        return;
    }
    memset(&t, 0, sizeof(t));
    t.ctx = ctx;
    t.ops = wex_tool_plugin_transport_ops(p);
    t.state = wex_tool_plugin_state(p);
    /* lent to every ctx_create; the child's exit frees it */
    t.options = wex_tool_options_make(ctx->options);
    if (t.options == NULL) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL, "kit: out of memory");
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_SKIP, "needs C19");
        return;
    }
    snprintf(t.job_id, sizeof(t.job_id), "wex-conformance-%ld", (long)getpid());
    t.exchange = &exchange;
    if (!(t.ops->caps & WEX_TRANSPORT_CAP_HOST_MEMORY)) {
        device_only_skip(&t);
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_SKIP,
                    "the transport does not handle host memory");
        return;
    }
    if (t.ops->connect != NULL &&
        conf_exchange_open(&exchange, ctx->deadline_s) != 0) {
        conf_report(CONF_TRANSPORT_ROUNDTRIP, CONF_FAIL,
                    "kit: a directory for connect's rendezvous in %s: %s",
                    exchange.dir, strerror(errno));
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_SKIP, "needs C19");
        return;
    }
    if (!round_trip(&t, &dest, &to_dest, &from_dest, &src, &peer)) {
        conf_exchange_close(&exchange);
        conf_report(CONF_TRANSPORT_DEAD_PEER, CONF_SKIP, "needs C19");
        return;
    }
    conf_exchange_close(&exchange);
    conf_begin(CONF_TRANSPORT_DEAD_PEER);
    dead_peer(&t, dest, src, peer);
    /* the registry's fini runs when the process exits: not needed */
}

void conf_check_transport(conf_ctx *ctx)
{
    static const int ids[] = {CONF_TRANSPORT_ROUNDTRIP,
                              CONF_TRANSPORT_DEAD_PEER};

    conf_run_child(ctx, "transport", ids, 2, transport_child, NULL);
}
