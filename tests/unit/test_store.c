/* The rendezvous store: its codec alone, then a real server with real
 * clients over loopback sockets, several of them in forked processes. */
#include <arpa/inet.h>
#include <check.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "error.h"
#include "store.h"
#include "store_proto.h"

#define TOKEN "s3cret-token"
#include "store_fixture.h"

/* ---- the codec ---------------------------------------------------------- */

static void decode_req(const uint8_t *msg, size_t len, wex__store_request *r)
{
    ck_assert_msg(wex__store_decode_request(msg, len, r) == WEX_OK, "%s",
                  wex__last_error());
}

START_TEST(codec_round_trips)
{
    uint8_t *msg, arg[16];
    size_t len;
    wex__store_request r;
    wex__store_response resp;

    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_SET, "layout/0", 8,
                                               "\x00\x01payload", 9, &msg,
                                               &len),
                     WEX_OK);
    ck_assert_uint_eq(len, 4 + 5 + 8 + 9);
    ck_assert_uint_eq(wex__store_get_u32(msg), len - 4);
    decode_req(msg, len, &r);
    ck_assert_uint_eq(r.op, WEX__STORE_SET);
    ck_assert_uint_eq(r.key_len, 8);
    ck_assert_mem_eq(r.key, "layout/0", 8);
    ck_assert_uint_eq(r.value_len, 9);
    ck_assert_mem_eq(r.value, "\x00\x01payload", 9);
    free(msg);

    wex__store_put_u64(arg, (uint64_t)-42);
    wex__store_put_u64(arg + 8, 1500);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_WAIT_GE, "c", 1, arg,
                                               16, &msg, &len),
                     WEX_OK);
    decode_req(msg, len, &r);
    ck_assert_uint_eq(r.op, WEX__STORE_WAIT_GE);
    ck_assert_int_eq((int64_t)wex__store_get_u64(r.value), -42);
    ck_assert_uint_eq(wex__store_get_u64(r.value + 8), 1500);
    free(msg);

    ck_assert_int_eq(
        wex__store_encode_request(WEX__STORE_BYE, "", 0, NULL, 0, &msg, &len),
        WEX_OK);
    decode_req(msg, len, &r);
    ck_assert_uint_eq(r.op, WEX__STORE_BYE);
    ck_assert_uint_eq(r.key_len + r.value_len, 0);
    free(msg);

    ck_assert_int_eq(wex__store_encode_response(WEX__STORE_R_PEER_DEAD, "why",
                                                3, &msg, &len),
                     WEX_OK);
    ck_assert_int_eq(wex__store_decode_response(msg, len, &resp), WEX_OK);
    ck_assert_uint_eq(resp.status, WEX__STORE_R_PEER_DEAD);
    ck_assert_uint_eq(resp.len, 3);
    ck_assert_mem_eq(resp.payload, "why", 3);
    free(msg);
    ck_assert_int_eq(
        wex__store_encode_response(WEX__STORE_R_OK, NULL, 0, &msg, &len),
        WEX_OK);
    ck_assert_int_eq(wex__store_decode_response(msg, len, &resp), WEX_OK);
    ck_assert_uint_eq(resp.len, 0);
    free(msg);
}
END_TEST

START_TEST(codec_refuses_truncated_input)
{
    uint8_t *msg, *longer;
    size_t len;
    wex__store_request r;
    wex__store_response resp;

    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_SET, "key", 3,
                                               "value", 5, &msg, &len),
                     WEX_OK);
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(wex__store_decode_request(msg, n, &r),
                         WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "truncated"));
    longer = malloc(len + 1);
    memcpy(longer, msg, len);
    longer[len] = 0;
    ck_assert_int_eq(wex__store_decode_request(longer, len + 1, &r),
                     WEX_ERR_INVALID);
    free(longer);
    free(msg);

    ck_assert_int_eq(
        wex__store_encode_response(WEX__STORE_R_OK, "v", 1, &msg, &len),
        WEX_OK);
    for (size_t n = 0; n < len; n++)
        ck_assert_int_eq(wex__store_decode_response(msg, n, &resp),
                         WEX_ERR_INVALID);
    msg[4] = 99; /* unknown status */
    ck_assert_int_eq(wex__store_decode_response(msg, len, &resp),
                     WEX_ERR_INVALID);
    free(msg);
}
END_TEST

START_TEST(codec_refuses_oversize_and_malformed)
{
    size_t big = WEX__STORE_VALUE_MAX + 1, len;
    char key[WEX__STORE_KEY_MAX + 1];
    uint8_t *value = calloc(1, big), *msg, hdr[4], raw[32];
    uint32_t n;
    wex__store_request r;

    memset(key, 'k', sizeof(key));
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_SET, key, sizeof(key),
                                               "v", 1, &msg, &len),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "key of 1025 bytes is over "
                                                    "the 1024-byte limit"));
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_SET, "k", 1, value,
                                               big, &msg, &len),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "over the 67108864-byte"));
    /* Exactly at the limits is fine. */
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_SET, key,
                                               WEX__STORE_KEY_MAX, value,
                                               big - 1, &msg, &len),
                     WEX_OK);
    ck_assert_uint_eq(len, 4 + WEX__STORE_REQUEST_MAX);
    decode_req(msg, len, &r);
    free(msg);
    free(value);

    wex__store_put_u32(hdr, 0xffffffffu);
    ck_assert_int_eq(wex__store_frame_length(hdr, WEX__STORE_REQUEST_MIN,
                                             WEX__STORE_REQUEST_MAX, &n),
                     WEX_ERR_INVALID);
    wex__store_put_u32(hdr, 4);
    ck_assert_int_eq(wex__store_frame_length(hdr, WEX__STORE_REQUEST_MIN,
                                             WEX__STORE_REQUEST_MAX, &n),
                     WEX_ERR_INVALID);

    /* A key length running past the message. */
    wex__store_put_u32(raw, 9);
    raw[4] = WEX__STORE_SET;
    wex__store_put_u32(raw + 5, 0xfffffff0u);
    memcpy(raw + 9, "abcd", 4);
    ck_assert_int_eq(wex__store_decode_request(raw, 13, &r), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "runs past"));
    /* Unknown opcode, NUL in a key, wrong value size, empty key. */
    wex__store_put_u32(raw + 5, 4);
    raw[4] = 0x7f;
    ck_assert_int_eq(wex__store_decode_request(raw, 13, &r), WEX_ERR_INVALID);
    raw[4] = WEX__STORE_SET;
    raw[10] = '\0';
    ck_assert_int_eq(wex__store_decode_request(raw, 13, &r), WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_GET, "k", 1,
                                               "1234567", 7, &msg, &len),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(
        wex__store_encode_request(WEX__STORE_SET, "", 0, "v", 1, &msg, &len),
        WEX_ERR_INVALID);
    ck_assert_int_eq(
        wex__store_encode_request(WEX__STORE_BYE, "k", 1, NULL, 0, &msg, &len),
        WEX_ERR_INVALID);
}
END_TEST

/* ---- helpers for the socket tests -------------------------------------- */

/* Children report through their exit status and stderr; they must not
 * use ck_assert (that belongs to the test process). */
static int child_failed(const char *what)
{
    fprintf(stderr, "child %d: %s: %s\n", (int)getpid(), what,
            wex__last_error());
    return 1;
}

static pid_t spawn(int (*fn)(int), int arg)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(fn(arg));
    return pid;
}

static int reap(pid_t pid)
{
    int status;

    while (waitpid(pid, &status, 0) < 0)
        ck_assert_int_eq(errno, EINTR);
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

static int raw_connect(void)
{
    struct sockaddr_in sa = {0};
    char host[64], port[8];
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    ck_assert_int_eq(wex__store_split_address(address, host, sizeof(host), port,
                                              sizeof(port)),
                     WEX_OK);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)atoi(port));
    inet_pton(AF_INET, host, &sa.sin_addr);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    return fd;
}

/* Sends bytes the server may refuse half-way: errors are ignored. */
static void raw_send(int fd, const void *p, size_t n)
{
    (void)wex__store_write_full(fd, p, n, wex__now() + 2.0);
}

/* One reply's status, with its text in `text`. */
static int raw_reply(int fd, char *text, size_t cap)
{
    uint8_t hdr[4], body[1024];
    uint32_t n = 0;

    ck_assert_int_eq(wex__store_read_full(fd, hdr, 4, wex__now() + 2.0),
                     WEX_OK);
    n = wex__store_get_u32(hdr);
    ck_assert_uint_ge(n, 1);
    ck_assert_uint_le(n, sizeof(body));
    ck_assert_int_eq(wex__store_read_full(fd, body, n, wex__now() + 2.0),
                     WEX_OK);
    snprintf(text, cap, "%.*s", (int)n - 1, (const char *)body + 1);
    return body[0];
}

static void raw_request(int fd, uint8_t op, const char *key, const void *value,
                        size_t len)
{
    uint8_t *msg;
    size_t n;

    ck_assert_int_eq(
        wex__store_encode_request(op, key, strlen(key), value, len, &msg, &n),
        WEX_OK);
    raw_send(fd, msg, n);
    free(msg);
}

static void raw_hello(int fd)
{
    char text[256];

    raw_request(fd, WEX__STORE_HELLO, "raw", TOKEN, strlen(TOKEN));
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_OK);
}

/* The server closes the connection (after any reply already read). */
static void ck_closed(int fd)
{
    char byte;

    ck_assert_int_eq(wex__store_read_full(fd, &byte, 1, wex__now() + 2.0),
                     WEX_ERR_PEER);
}

/* ---- set, get, add, barriers --------------------------------------------- */

static int child_setter(int delay_ms)
{
    wex__store_client *c;

    pause_s(delay_ms / 1000.0);
    if (wex__store_connect(address, TOKEN, "source/0", 2.0, &c) != WEX_OK)
        return child_failed("connect");
    if (wex__store_set(c, "layout/source/0", "digest-123", 10) != WEX_OK)
        return child_failed("set");
    wex__store_close(c);
    return 0;
}

static int child_getter(int unused)
{
    wex__store_client *c;
    void *value;
    size_t len;

    (void)unused;
    if (wex__store_connect(address, TOKEN, "destination/0", 2.0, &c) != WEX_OK)
        return child_failed("connect");
    if (wex__store_get(c, "layout/source/0", 3.0, &value, &len) != WEX_OK)
        return child_failed("get");
    if (len != 10 || strcmp(value, "digest-123") != 0)
        return 2;
    free(value);
    wex__store_close(c);
    return 0;
}

START_TEST(set_and_get_across_processes)
{
    pid_t getter = spawn(child_getter, 0);
    pid_t setter = spawn(child_setter, 100);

    ck_assert_int_eq(reap(setter), 0);
    ck_assert_int_eq(reap(getter), 0);
}
END_TEST

START_TEST(get_waits_for_a_later_set)
{
    wex__store_client *c = join("destination/0");
    pid_t setter = spawn(child_setter, 300);
    double t0 = wex__now();
    void *value;
    size_t len;

    ck_assert_msg(wex__store_get(c, "layout/source/0", 3.0, &value, &len) ==
                      WEX_OK,
                  "%s", wex__last_error());
    ck_assert_double_ge(wex__now() - t0, 0.25);
    ck_assert_str_eq(value, "digest-123");
    free(value);
    ck_assert_int_eq(reap(setter), 0);
    /* An empty value is a value. */
    ck_assert_int_eq(wex__store_set(c, "empty", "", 0), WEX_OK);
    ck_assert_int_eq(wex__store_get(c, "empty", 0, &value, &len), WEX_OK);
    ck_assert_uint_eq(len, 0);
    free(value);
    wex__store_close(c);
}
END_TEST

START_TEST(timeouts_are_kept)
{
    wex__store_client *c = join("source/0");
    void *value = NULL;
    size_t len;
    double t0 = wex__now(), took;

    ck_assert_int_eq(wex__store_get(c, "never", 0.3, &value, &len),
                     WEX_ERR_TIMEOUT);
    took = wex__now() - t0;
    ck_assert_msg(took >= 0.28 && took < 1.0, "get took %.3f s", took);
    ck_assert_str_eq(wex__last_error(),
                     "rendezvous: key 'never' not set within 0.3 s");
    t0 = wex__now();
    ck_assert_int_eq(wex__store_add(c, "count", 2, NULL), WEX_OK);
    ck_assert_int_eq(wex__store_wait_ge(c, "count", 3, 0.3), WEX_ERR_TIMEOUT);
    took = wex__now() - t0;
    ck_assert_msg(took >= 0.28 && took < 1.0, "wait_ge took %.3f s", took);
    ck_assert_str_eq(wex__last_error(),
                     "rendezvous: counter 'count' is 2, not 3, after 0.3 s");
    /* Zero means "only if it is already there". */
    ck_assert_int_eq(wex__store_get(c, "never", 0, &value, &len),
                     WEX_ERR_TIMEOUT);
    ck_assert_int_eq(wex__store_wait_ge(c, "count", 2, 0), WEX_OK);
    wex__store_close(c);
}
END_TEST

START_TEST(add_counts_atomically)
{
    wex__store_client *c = join("source/0");
    int64_t v = 0;
    void *value;
    size_t len;

    ck_assert_int_eq(wex__store_add(c, "n", 5, &v), WEX_OK);
    ck_assert_int_eq(v, 5);
    ck_assert_int_eq(wex__store_add(c, "n", -7, &v), WEX_OK);
    ck_assert_int_eq(v, -2);
    ck_assert_int_eq(wex__store_get(c, "n", 0, &value, &len), WEX_OK);
    ck_assert_uint_eq(len, 8);
    ck_assert_int_eq((int64_t)wex__store_get_u64(value), -2);
    free(value);
    ck_assert_int_eq(wex__store_set(c, "text", "abc", 3), WEX_OK);
    ck_assert_int_eq(wex__store_add(c, "text", 1, &v), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "key 'text' holds 3 bytes, "
                                                    "not a counter"));
    ck_assert_int_eq(wex__store_wait_ge(c, "text", 1, 0.1), WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_add(c, "n", INT64_MAX, &v), WEX_OK);
    ck_assert_int_eq(wex__store_add(c, "n", 3, &v), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "overflows"));
    /* Refusals do not break the connection. */
    ck_assert_int_eq(wex__store_add(c, "n", 2, &v), WEX_OK);
    ck_assert_int_eq(v, INT64_MAX);
    wex__store_close(c);
}
END_TEST

#define RANKS 8

static int child_rank(int rank)
{
    wex__store_client *c;
    char who[32], key[32];
    void *value;
    size_t len;

    snprintf(who, sizeof(who), "source/%d", rank);
    pause_s(0.02 * rank); /* arrive one by one */
    if (wex__store_connect(address, TOKEN, who, 2.0, &c) != WEX_OK)
        return child_failed("connect");
    snprintf(key, sizeof(key), "rank/%d", rank);
    if (wex__store_set(c, key, who, strlen(who)) != WEX_OK)
        return child_failed("set");
    if (wex__store_barrier(c, "step/1", RANKS, 5.0) != WEX_OK)
        return child_failed("barrier");
    /* Past the barrier, everyone's key must be there already. */
    for (int r = 0; r < RANKS; r++) {
        snprintf(key, sizeof(key), "rank/%d", r);
        if (wex__store_get(c, key, 0, &value, &len) != WEX_OK)
            return child_failed(key);
        free(value);
    }
    wex__store_close(c);
    return 0;
}

START_TEST(barrier_of_forked_processes)
{
    pid_t pids[RANKS];
    wex__store_client *c = join("observer");

    for (int r = 0; r < RANKS; r++)
        pids[r] = spawn(child_rank, r);
    for (int r = 0; r < RANKS; r++)
        ck_assert_int_eq(reap(pids[r]), 0);
    ck_assert_int_eq(wex__store_wait_ge(c, "step/1", RANKS, 0), WEX_OK);
    wex__store_close(c);
}
END_TEST

/* ---- tokens, limits, garbage --------------------------------------------- */

START_TEST(wrong_token_is_refused)
{
    wex__store_client *c = NULL;
    char want[128];

    ck_assert_int_eq(wex__store_connect(address, "guess", "source/9", 2.0, &c),
                     WEX_ERR_INVALID);
    snprintf(want, sizeof(want), "rendezvous %s refused the token", address);
    ck_assert_str_eq(wex__last_error(), want);
    ck_assert_ptr_null(c);
    ck_assert_int_eq(wex__store_connect(address, "", "source/9", 2.0, &c),
                     WEX_ERR_INVALID);
    /* A refused client is not a dead one. */
    c = join("source/0");
    ck_assert_int_eq(wex__store_wait_ge(c, "nothing", 1, 0.2), WEX_ERR_TIMEOUT);
    wex__store_close(c);
}
END_TEST

START_TEST(oversized_keys_and_values_are_refused)
{
    wex__store_client *c = join("source/0");
    size_t max = WEX__STORE_VALUE_MAX, len;
    char key[WEX__STORE_KEY_MAX + 2], text[256];
    uint8_t *big = malloc(max + 1), hdr[4], raw[64];
    void *value;
    int fd;

    memset(key, 'k', sizeof(key) - 1);
    key[sizeof(key) - 1] = '\0';
    ck_assert_int_eq(wex__store_set(c, key, "v", 1), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), "over the 1024-byte limit"));
    ck_assert_int_eq(wex__store_set(c, "big", big, max + 1), WEX_ERR_INVALID);
    /* The client is still fine, and the largest value goes through whole. */
    for (size_t i = 0; i < max; i++)
        big[i] = (uint8_t)(i * 7 + (i >> 13));
    ck_assert_int_eq(wex__store_set(c, "big", big, max), WEX_OK);
    ck_assert_int_eq(wex__store_get(c, "big", 1.0, &value, &len), WEX_OK);
    ck_assert_uint_eq(len, max);
    ck_assert_int_eq(memcmp(value, big, max), 0);
    free(value);
    free(big);
    wex__store_close(c);

    /* The server refuses what a raw peer sends past the limits, says why
     * and closes. A length over the limit: */
    fd = raw_connect();
    raw_hello(fd);
    wex__store_put_u32(hdr, WEX__STORE_REQUEST_MAX + 1);
    raw_send(fd, hdr, 4);
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_ERROR);
    ck_assert_ptr_nonnull(strstr(text, "outside"));
    ck_closed(fd);
    close(fd);
    /* A key over the limit inside a message that fits: */
    fd = raw_connect();
    raw_hello(fd);
    wex__store_put_u32(hdr, 5 + 2000);
    raw_send(fd, hdr, 4);
    raw[0] = WEX__STORE_SET;
    wex__store_put_u32(raw + 1, 2000);
    raw_send(fd, raw, 5);
    memset(key, 'x', WEX__STORE_KEY_MAX);
    raw_send(fd, key, 1000);
    raw_send(fd, key, 1000);
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_ERROR);
    ck_assert_ptr_nonnull(strstr(text, "key of 2000 bytes is over"));
    ck_closed(fd);
    close(fd);
    /* Before HELLO, nothing bigger than a HELLO is read at all. */
    fd = raw_connect();
    wex__store_put_u32(hdr, WEX__STORE_HELLO_MAX + 1);
    raw_send(fd, hdr, 4);
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_ERROR);
    ck_closed(fd);
    close(fd);
}
END_TEST

START_TEST(garbage_does_not_stop_the_server)
{
    uint8_t junk[4096], hdr[4];
    char text[256];
    wex__store_client *c;
    void *value;
    size_t len;
    int fd;

    srand(42);
    for (int i = 0; i < 60; i++) {
        size_t n = 1 + (size_t)rand() % sizeof(junk);
        for (size_t j = 0; j < n; j++)
            junk[j] = (uint8_t)rand();
        fd = raw_connect();
        if (i % 3 == 1)
            raw_hello(fd); /* garbage from an authenticated peer too */
        raw_send(fd, junk, i % 5 == 0 ? 3 : n); /* or half a header */
        close(fd);
    }
    /* A request before HELLO is refused with a reason. */
    fd = raw_connect();
    raw_request(fd, WEX__STORE_SET, "k", "v", 1);
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_ERROR);
    ck_assert_str_eq(text, "expected HELLO first, got SET");
    ck_closed(fd);
    close(fd);
    /* A zero length is malformed. */
    fd = raw_connect();
    raw_hello(fd);
    memset(hdr, 0, sizeof(hdr));
    raw_send(fd, hdr, 4);
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_ERROR);
    ck_closed(fd);
    close(fd);

    c = join("source/0");
    ck_assert_int_eq(wex__store_set(c, "still", "here", 4), WEX_OK);
    ck_assert_int_eq(wex__store_get(c, "still", 1.0, &value, &len), WEX_OK);
    ck_assert_str_eq(value, "here");
    free(value);
    /* The garbage came from peers that said HELLO and then no BYE: they
     * count as dead, which fails waits but not what is already there. */
    ck_assert_int_eq(wex__store_get(c, "dead/raw", 1.0, &value, &len), WEX_OK);
    free(value);
    wex__store_close(c);
}
END_TEST

START_TEST(unknown_message_types_are_refused)
{
    uint8_t msg[4 + 5 + 1];
    char text[256];
    int fd = raw_connect();

    raw_hello(fd);
    /* Built by hand: the encoder itself refuses unknown opcodes. */
    wex__store_put_u32(msg, 5 + 1);
    msg[4] = 99;
    wex__store_put_u32(msg + 5, 1);
    msg[9] = 'k';
    raw_send(fd, msg, sizeof(msg));
    ck_assert_int_eq(raw_reply(fd, text, sizeof(text)), WEX__STORE_R_ERROR);
    ck_assert_msg(strstr(text, "99") != NULL, "reply '%s' names no opcode",
                  text);
    ck_closed(fd);
    close(fd);
}
END_TEST

/* A connection that never says HELLO, and one that stops half-way through
 * a message, are dropped on their deadlines while others are served. */
START_TEST(stalled_connections_are_dropped)
{
    uint8_t hdr[4];
    wex__store_client *c;
    double t0 = wex__now();
    int silent = raw_connect(), half = raw_connect();
    char byte;

    raw_hello(half);
    wex__store_put_u32(hdr, 64);
    raw_send(half, hdr, 4); /* promises 64 bytes, sends none */
    c = join("source/0");
    ck_assert_int_eq(wex__store_set(c, "served", "yes", 3), WEX_OK);
    ck_assert_int_eq(wex__store_read_full(silent, &byte, 1, t0 + 15.0),
                     WEX_ERR_PEER);
    ck_assert_double_ge(wex__now() - t0, 1.5);
    wex__store_close(c);
    close(silent);
    close(half);
}
END_TEST

/* ---- dead peers ------------------------------------------------------------ */

START_TEST(abandoned_client_fails_pending_waits)
{
    wex__store_client *gone = join("source/1"), *c = join("destination/0");
    double t0 = wex__now();
    void *value;
    size_t len;

    ck_assert_int_eq(wex__store_set(c, "before", "x", 1), WEX_OK);
    wex__store_abandon(gone);
    ck_assert_int_eq(wex__store_get(c, "never", 5.0, &value, &len),
                     WEX_ERR_PEER);
    ck_assert_str_eq(wex__last_error(), "rendezvous: source/1 disconnected "
                                        "without saying goodbye");
    ck_assert_double_lt(wex__now() - t0, 1.0);
    /* Every later unsatisfied wait fails the same way... */
    ck_assert_int_eq(wex__store_wait_ge(c, "nothing", 1, 5.0), WEX_ERR_PEER);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "source/1"));
    /* ...but what is already there is still served. */
    ck_assert_int_eq(wex__store_get(c, "before", 5.0, &value, &len), WEX_OK);
    free(value);
    ck_assert_int_eq(wex__store_get(c, "dead/source/1", 0, &value, &len),
                     WEX_OK);
    ck_assert_str_eq(value, "source/1");
    free(value);
    wex__store_close(c);
}
END_TEST

static int child_in_barrier(int unused)
{
    wex__store_client *c;

    (void)unused;
    if (wex__store_connect(address, TOKEN, "destination/2", 2.0, &c) != WEX_OK)
        return child_failed("connect");
    wex__store_barrier(c, "step/7", 3, 10.0); /* killed in here */
    return 3;
}

START_TEST(killed_process_fails_the_others_waits)
{
    wex__store_client *c = join("source/0");
    pid_t child = spawn(child_in_barrier, 0);
    double t0;

    /* Once the child is in the barrier, kill it there. */
    ck_assert_int_eq(wex__store_wait_ge(c, "step/7", 1, 3.0), WEX_OK);
    pause_s(0.05);
    kill(child, SIGKILL);
    ck_assert_int_eq(reap(child), 128 + SIGKILL);
    t0 = wex__now();
    ck_assert_int_eq(wex__store_barrier(c, "step/7", 3, 5.0), WEX_ERR_PEER);
    ck_assert_double_lt(wex__now() - t0, 1.0);
    ck_assert_str_eq(wex__last_error(), "rendezvous: destination/2 "
                                        "disconnected without saying goodbye");
    wex__store_close(c);
}
END_TEST

static int child_says_goodbye(int unused)
{
    wex__store_client *c;

    (void)unused;
    if (wex__store_connect(address, TOKEN, "source/3", 2.0, &c) != WEX_OK)
        return child_failed("connect");
    wex__store_close(c);
    return 0;
}

START_TEST(clean_close_is_not_a_death)
{
    wex__store_client *c = join("source/0");
    void *value;
    size_t len;

    ck_assert_int_eq(reap(spawn(child_says_goodbye, 0)), 0);
    ck_assert_int_eq(wex__store_get(c, "never", 0.3, &value, &len),
                     WEX_ERR_TIMEOUT);
    wex__store_close(c);
}
END_TEST

/* ---- lifecycle ------------------------------------------------------------- */

static int child_waits_for_stop(int unused)
{
    wex__store_client *c;
    void *value;
    size_t len;
    double t0;
    wex_status st;

    (void)unused;
    if (wex__store_connect(address, TOKEN, "destination/1", 2.0, &c) != WEX_OK)
        return child_failed("connect");
    if (wex__store_set(c, "waiting", "1", 1) != WEX_OK)
        return child_failed("set");
    t0 = wex__now();
    st = wex__store_get(c, "never", 10.0, &value, &len);
    if (st != WEX_ERR_PEER || wex__now() - t0 > 3.0)
        return child_failed("get during stop");
    wex__store_close(c);
    return 0;
}

START_TEST(stop_with_clients_connected_does_not_hang)
{
    wex__store_client *idle = join("source/0");
    pid_t child = spawn(child_waits_for_stop, 0);
    int raw = raw_connect(); /* connected, never said HELLO */
    void *value;
    size_t len;
    double t0;

    ck_assert_int_eq(wex__store_get(idle, "waiting", 2.0, &value, &len),
                     WEX_OK);
    free(value);
    pause_s(0.1);
    t0 = wex__now();
    wex__store_stop(server);
    server = NULL;
    ck_assert_double_lt(wex__now() - t0, 1.0);
    ck_assert_int_eq(reap(child), 0);
    ck_assert_int_eq(wex__store_set(idle, "k", "v", 1), WEX_ERR_PEER);
    t0 = wex__now();
    wex__store_close(idle);
    ck_assert_double_lt(wex__now() - t0, 1.0);
    close(raw);
}
END_TEST

static int child_connects_early(int port)
{
    wex__store_client *c;

    snprintf(address, sizeof(address), "127.0.0.1:%d", port);
    if (wex__store_connect(address, TOKEN, "source/0", 3.0, &c) != WEX_OK)
        return child_failed("connect");
    if (wex__store_set(c, "early", "bird", 4) != WEX_OK)
        return child_failed("set");
    wex__store_close(c);
    return 0;
}

START_TEST(connect_retries_until_the_server_starts)
{
    struct sockaddr_in sa = {0};
    socklen_t sl = sizeof(sa);
    wex__store_client *c = NULL;
    char where[64];
    int fd = socket(AF_INET, SOCK_STREAM, 0), port;
    pid_t child;
    double t0;
    void *value;
    size_t len;

    /* Nothing listens on a port just freed. */
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ck_assert_int_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    ck_assert_int_eq(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    snprintf(where, sizeof(where), "127.0.0.1:%d", port);
    t0 = wex__now();
    ck_assert_int_eq(wex__store_connect(where, TOKEN, "x", 0.2, &c),
                     WEX_ERR_TIMEOUT);
    ck_assert_double_lt(wex__now() - t0, 0.6);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "no server after"));

    child = spawn(child_connects_early, port);
    pause_s(0.3);
    snprintf(where, sizeof(where), ":%d", port); /* loopback by default */
    ck_assert_msg(wex__store_serve(where, TOKEN, &server) == WEX_OK, "%s",
                  wex__last_error());
    snprintf(address, sizeof(address), "%s", wex__store_address(server));
    c = join("destination/0");
    ck_assert_int_eq(wex__store_get(c, "early", 3.0, &value, &len), WEX_OK);
    free(value);
    ck_assert_int_eq(reap(child), 0);
    wex__store_close(c);
    wex__store_stop(server);
    server = NULL;
}
END_TEST

/* The store's cap on clients is 4,096 connections; an attacker who opens
 * more idle sockets than that, without ever saying HELLO, must not keep a
 * real rank out: pending connections have their own pool, and a rank
 * that is turned away retries within its connect_seconds. */
#define IDLE_FLOOD 4100

/* Raises the descriptor limit to `want`; says whether it could. */
static int raise_nofile(rlim_t want)
{
    struct rlimit r;

    if (getrlimit(RLIMIT_NOFILE, &r) != 0)
        return 0;
    if (r.rlim_cur >= want)
        return 1;
    if (r.rlim_max < want)
        return 0;
    r.rlim_cur = want;
    return setrlimit(RLIMIT_NOFILE, &r) == 0;
}

START_TEST(idle_connections_do_not_starve_ranks)
{
    static int idle[IDLE_FLOOD];
    wex__store_client *c;
    void *value = NULL;
    size_t len = 0;

    /* Both ends of every idle socket live in this process. */
    if (!raise_nofile(2 * IDLE_FLOOD + 256)) {
        printf("skipped idle_connections_do_not_starve_ranks: the hard "
               "RLIMIT_NOFILE is under %d\n",
               2 * IDLE_FLOOD + 256);
        return;
    }
    for (int i = 0; i < IDLE_FLOOD; i++)
        idle[i] = raw_connect();
    c = join("dest/0");
    ck_assert_int_eq(wex__store_set(c, "after-flood", "ok", 2), WEX_OK);
    ck_assert_int_eq(wex__store_get(c, "after-flood", 1.0, &value, &len),
                     WEX_OK);
    ck_assert_int_eq((int)len, 2);
    free(value);
    wex__store_close(c);
    for (int i = 0; i < IDLE_FLOOD; i++)
        close(idle[i]);
}
END_TEST

/* A connection that never says HELLO is closed on the HELLO deadline. */
START_TEST(idle_connection_is_closed_after_the_hello_deadline)
{
    double t0 = wex__now();
    int fd = raw_connect();
    char byte;

    ck_assert_int_eq(wex__store_read_full(fd, &byte, 1, t0 + 5.0),
                     WEX_ERR_PEER);
    ck_assert_double_lt(wex__now() - t0, 4.0);
    close(fd);
}
END_TEST

START_TEST(bad_arguments_are_refused)
{
    wex__store_client *c;

    ck_assert_int_eq(wex__store_serve("127.0.0.1:0", "", &server),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_serve("127.0.0.1", TOKEN, &server),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_serve("127.0.0.1:99999", TOKEN, &server),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_serve("::1:5", TOKEN, &server),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_connect("127.0.0.1:0", TOKEN, "x", 0.1, &c),
                     WEX_ERR_INVALID);
    server = NULL;
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store");
    TCase *codec = tcase_create("codec");
    TCase *net = tcase_create("sockets");
    TCase *life = tcase_create("lifecycle");

    tcase_add_test(codec, codec_round_trips);
    tcase_add_test(codec, codec_refuses_truncated_input);
    tcase_add_test(codec, codec_refuses_oversize_and_malformed);
    suite_add_tcase(s, codec);

    tcase_add_checked_fixture(net, setup, teardown);
    tcase_set_timeout(net, 10);
    tcase_add_test(net, set_and_get_across_processes);
    tcase_add_test(net, get_waits_for_a_later_set);
    tcase_add_test(net, timeouts_are_kept);
    tcase_add_test(net, add_counts_atomically);
    tcase_add_test(net, barrier_of_forked_processes);
    tcase_add_test(net, wrong_token_is_refused);
    tcase_add_test(net, oversized_keys_and_values_are_refused);
    tcase_add_test(net, garbage_does_not_stop_the_server);
    tcase_add_test(net, unknown_message_types_are_refused);
    tcase_add_test(net, abandoned_client_fails_pending_waits);
    tcase_add_test(net, killed_process_fails_the_others_waits);
    tcase_add_test(net, clean_close_is_not_a_death);
    tcase_add_test(net, stop_with_clients_connected_does_not_hang);
    tcase_add_test(net, idle_connections_do_not_starve_ranks);
    tcase_add_test(net, idle_connection_is_closed_after_the_hello_deadline);
    suite_add_tcase(s, net);

    tcase_set_timeout(life, 10);
    {
        /* the server's HELLO deadline is 2 s */
        TCase *stall = tcase_create("stalls");
        tcase_add_checked_fixture(stall, setup, teardown);
        tcase_set_timeout(stall, 30);
        tcase_add_test(stall, stalled_connections_are_dropped);
        suite_add_tcase(s, stall);
    }
    tcase_add_test(life, connect_retries_until_the_server_starts);
    tcase_add_test(life, bad_arguments_are_refused);
    suite_add_tcase(s, life);
    return wex_test_run(s);
}
