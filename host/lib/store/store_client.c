/* The rendezvous store's client (store.h). Its socket helpers, which the
 * server shares, are store_socket.c. */
#include "store.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "store_proto.h"

/* The server answers a wait that ran out itself, with a message naming
 * the key; the client's own guard on the socket is this much later, so
 * it only fires when the server is gone or stuck. */
#define WEX__STORE_GRACE_S 2.0
/* Any request other than a wait, and the rest of a reply once it has
 * started, must complete this soon. */
#define WEX__STORE_IO_S 30.0
#define WEX__STORE_BYE_S 2.0 /* (plus the grace, for its reply) */
/* Waits longer than a year are taken as "forever, in practice". */
#define WEX__STORE_WAIT_MAX_MS (365ull * 24 * 3600 * 1000)

struct wex__store_client {
    int fd;
    int broken; /* an I/O failure left the stream out of step */
    int missed; /* the last ARRIVE's barrier had passed without it */
    char address[300];
};

/* ---- connecting ------------------------------------------------------- */

static wex_status connect_fd(int fd, const struct addrinfo *ai, double deadline)
{
    socklen_t len = sizeof(int);
    int err = 0;
    wex_status st;

    if (connect(fd, ai->ai_addr, ai->ai_addrlen) == 0)
        return WEX_OK;
    if (errno != EINPROGRESS)
        return wex__error(WEX_ERR_SYSTEM, "%s", strerror(errno));
    st = wex__store_wait_fd(fd, POLLOUT, deadline);
    if (st != WEX_OK)
        return st;
    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
        err = errno;
    return err ? wex__error(WEX_ERR_SYSTEM, "%s", strerror(err)) : WEX_OK;
}

/* One attempt at every address the host resolves to, each bounded by the
 * deadline (a non-blocking connect, so an unreachable host cannot
 * overrun it). */
static wex_status connect_once(const char *host, const char *port,
                               double deadline, int *fd_p)
{
    struct addrinfo hints = {0}, *list, *ai;
    wex_status st;
    int rc, one = 1;

    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &list);
    if (rc != 0)
        return wex__error(WEX_ERR_SYSTEM, "cannot resolve '%s': %s", host,
                          gai_strerror(rc));
    st = wex__error(WEX_ERR_SYSTEM, "no address to connect to");
    for (ai = list; ai != NULL; ai = ai->ai_next) {
        int fd = socket(ai->ai_family,
                        ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK,
                        ai->ai_protocol);
        if (fd < 0) {
            st = wex__error(WEX_ERR_SYSTEM, "socket: %s", strerror(errno));
            continue;
        }
        st = connect_fd(fd, ai, deadline);
        if (st == WEX_OK) {
            /* Requests are small and each waits for its reply. */
            setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
            *fd_p = fd;
            break;
        }
        close(fd);
    }
    freeaddrinfo(list);
    return st;
}

static void sleep_for(double seconds)
{
    struct timespec ts;

    if (seconds <= 0)
        return;
    ts.tv_sec = (time_t)seconds;
    ts.tv_nsec = (long)((seconds - (double)ts.tv_sec) * 1e9);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* ---- requests --------------------------------------------------------- */

static uint64_t timeout_ms(double seconds)
{
    if (!(seconds > 0)) /* also NaN */
        return 0;
    if (seconds * 1000.0 >= (double)WEX__STORE_WAIT_MAX_MS)
        return WEX__STORE_WAIT_MAX_MS;
    return (uint64_t)(seconds * 1000.0 + 0.5);
}

/* Reads one reply into *msg_p (the caller frees it). `wait_s` is how long
 * the server may legitimately take before it starts answering. */
static wex_status read_reply(int fd, double wait_s, uint8_t **msg_p,
                             wex__store_response *resp)
{
    uint8_t header[WEX__STORE_HEADER], *msg;
    uint32_t n;
    wex_status st;

    st = wex__store_read_full(fd, header, sizeof(header),
                              wex__now() + wait_s + WEX__STORE_GRACE_S);
    if (st == WEX_OK)
        st = wex__store_frame_length(header, WEX__STORE_RESPONSE_MIN,
                                     WEX__STORE_RESPONSE_MAX, &n);
    if (st != WEX_OK)
        return st;
    msg = malloc(WEX__STORE_HEADER + n);
    if (msg == NULL)
        return wex__error(WEX_ERR_NOMEM,
                          "out of memory for a %u-byte "
                          "reply",
                          n);
    memcpy(msg, header, sizeof(header));
    st = wex__store_read_full(fd, msg + WEX__STORE_HEADER, n,
                              wex__now() + WEX__STORE_IO_S);
    if (st == WEX_OK)
        st = wex__store_decode_response(msg, WEX__STORE_HEADER + n, resp);
    if (st != WEX_OK) {
        free(msg);
        return st;
    }
    *msg_p = msg;
    return WEX_OK;
}

/* Sends one request and reads its reply. On success *msg_p holds the
 * reply that *resp points into; the status in it is the caller's to map
 * (reply_status). */
static wex_status call(wex__store_client *c, uint8_t op, const char *key,
                       const void *value, size_t len, double wait_s,
                       uint8_t **msg_p, wex__store_response *resp)
{
    uint8_t *req;
    size_t req_len;
    wex_status st;

    if (c->broken)
        return wex__error(WEX_ERR_PEER,
                          "rendezvous %s: the connection "
                          "was lost earlier",
                          c->address);
    st = wex__store_encode_request(op, key, strlen(key), value, len, &req,
                                   &req_len);
    if (st != WEX_OK)
        return wex__error_prefix(st, "rendezvous %s", c->address);
    st = wex__store_write_full(c->fd, req, req_len,
                               wex__now() + WEX__STORE_IO_S);
    free(req);
    if (st == WEX_OK)
        st = read_reply(c->fd, wait_s, msg_p, resp);
    if (st != WEX_OK) {
        c->broken = 1;
        return wex__error_prefix(st, "rendezvous %s: %s '%.200s'", c->address,
                                 wex__store_op_name(op), key);
    }
    return WEX_OK;
}

/* The server's word on a request, as a status and last error. */
static wex_status reply_status(const wex__store_client *c,
                               const wex__store_response *r)
{
    int n = r->len > 900 ? 900 : (int)r->len;
    const char *text = (const char *)r->payload;

    switch (r->status) {
    case WEX__STORE_R_OK: return WEX_OK;
    case WEX__STORE_R_TIMEOUT:
    case WEX__STORE_R_FEW: return wex__error(WEX_ERR_TIMEOUT, "%.*s", n, text);
    case WEX__STORE_R_PEER_DEAD:
        return wex__error(WEX_ERR_PEER, "%.*s", n, text);
    case WEX__STORE_R_PASSED: return wex__error(WEX_ERR_PEER, "%.*s", n, text);
    case WEX__STORE_R_REFUSED:
        return wex__error(WEX_ERR_INVALID, "rendezvous %s refused the token",
                          c->address);
    default:
        return wex__error(WEX_ERR_INVALID, "rendezvous %s: %.*s", c->address, n,
                          text);
    }
}

/* A call whose OK reply carries an i64 (ADD, WAIT_GE). */
static wex_status call_i64(wex__store_client *c, uint8_t op, const char *key,
                           const uint8_t *value, size_t len, double wait_s,
                           int64_t *out)
{
    wex__store_response resp;
    uint8_t *msg;
    wex_status st = call(c, op, key, value, len, wait_s, &msg, &resp);

    if (st != WEX_OK)
        return st;
    st = reply_status(c, &resp);
    if (st == WEX_OK && resp.len != 8) {
        c->broken = 1;
        st = wex__error(WEX_ERR_PEER,
                        "rendezvous %s: %s '%.200s': a "
                        "%zu-byte reply, expected 8",
                        c->address, wex__store_op_name(op), key, resp.len);
    }
    if (st == WEX_OK && out != NULL)
        *out = (int64_t)wex__store_get_u64(resp.payload);
    free(msg);
    return st;
}

/* ---- the API ---------------------------------------------------------- */

/* One HELLO exchange on `fd`: WEX_ERR_PEER when the server closed or
 * reset the connection instead of answering. */
static wex_status say_hello(wex__store_client *c, int fd, const uint8_t *hello,
                            size_t hello_len)
{
    wex__store_response resp;
    uint8_t *msg;
    wex_status st;

    st = wex__store_write_full(fd, hello, hello_len,
                               wex__now() + WEX__STORE_IO_S);
    if (st == WEX_OK)
        st = read_reply(fd, WEX__STORE_IO_S, &msg, &resp);
    if (st != WEX_OK)
        return wex__error_prefix(st, "rendezvous %s: HELLO", c->address);
    st = reply_status(c, &resp);
    free(msg);
    return st;
}

wex_status wex__store_connect(const char *address, const char *token,
                              const char *who, double timeout_s,
                              wex__store_client **client_p)
{
    char host[256], port[8];
    double start = wex__now(), deadline, backoff = 0.05;
    wex__store_client *c;
    uint8_t *hello;
    size_t hello_len;
    wex_status st;
    int fd = -1;

    if (token == NULL || who == NULL || client_p == NULL)
        return wex__error(WEX_ERR_INTERNAL, "wex__store_connect: NULL "
                                            "argument");
    st = wex__store_split_address(address, host, sizeof(host), port,
                                  sizeof(port));
    if (st != WEX_OK)
        return st;
    if (strcmp(port, "0") == 0)
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous address '%s': port 0 "
                          "only makes sense for a server",
                          address);
    st = wex__store_encode_request(WEX__STORE_HELLO, who, strlen(who), token,
                                   strlen(token), &hello, &hello_len);
    if (st != WEX_OK)
        return wex__error_prefix(st, "rendezvous %s", address);
    deadline = start + (timeout_s > 0 ? timeout_s : 0);
    /* The server may not be up yet: retry refused connections until the
     * deadline, backing off so a few hundred waiting ranks stay quiet. */
    while ((st = connect_once(host, port, deadline, &fd)) != WEX_OK) {
        double left = deadline - wex__now();
        if (left <= 0) {
            st = wex__error(WEX_ERR_TIMEOUT,
                            "rendezvous %s: no server after "
                            "%.1f s (%s)",
                            address, wex__now() - start, wex__last_error());
            free(hello);
            return st;
        }
        sleep_for(backoff < left ? backoff : left);
        backoff = backoff * 2 > 0.5 ? 0.5 : backoff * 2;
    }
    c = calloc(1, sizeof(*c));
    if (c == NULL) {
        free(hello);
        close(fd);
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    }
    snprintf(c->address, sizeof(c->address), "%s", address);
    /* A server that closes before answering HELLO had no room for us
     * (or dropped us from its pending pool): try again until the
     * deadline. Its word, such as a wrong token, is final. */
    for (;;) {
        st = say_hello(c, fd, hello, hello_len);
        if (st != WEX_ERR_PEER || wex__now() >= deadline)
            break;
        close(fd);
        fd = -1;
        sleep_for(backoff);
        backoff = backoff * 2 > 0.5 ? 0.5 : backoff * 2;
        if (connect_once(host, port, deadline, &fd) != WEX_OK) {
            fd = -1;
            st = wex__error(WEX_ERR_TIMEOUT,
                            "rendezvous %s: no room after "
                            "%.1f s",
                            address, wex__now() - start);
            break;
        }
    }
    free(hello);
    if (st != WEX_OK) {
        if (fd >= 0)
            close(fd);
        free(c);
        return st;
    }
    c->fd = fd;
    *client_p = c;
    return WEX_OK;
}

wex_status wex__store_set(wex__store_client *c, const char *key,
                          const void *value, size_t len)
{
    wex__store_response resp;
    uint8_t *msg;
    wex_status st;

    st = call(c, WEX__STORE_SET, key, value, len, WEX__STORE_IO_S, &msg, &resp);
    if (st != WEX_OK)
        return st;
    st = reply_status(c, &resp);
    free(msg);
    return st;
}

wex_status wex__store_get(wex__store_client *c, const char *key,
                          double timeout_s, void **value_p, size_t *len_p)
{
    uint64_t ms = timeout_ms(timeout_s);
    uint8_t arg[8], *msg, *copy;
    wex__store_response resp;
    wex_status st;

    wex__store_put_u64(arg, ms);
    st = call(c, WEX__STORE_GET, key, arg, sizeof(arg), (double)ms / 1000.0,
              &msg, &resp);
    if (st != WEX_OK)
        return st;
    st = reply_status(c, &resp);
    if (st == WEX_OK) {
        copy = malloc(resp.len + 1);
        if (copy == NULL) {
            st = wex__error(WEX_ERR_NOMEM,
                            "out of memory for a %zu-byte "
                            "value",
                            resp.len);
        } else {
            if (resp.len)
                memcpy(copy, resp.payload, resp.len);
            copy[resp.len] = '\0';
            *value_p = copy;
            if (len_p != NULL)
                *len_p = resp.len;
        }
    }
    free(msg);
    return st;
}

wex_status wex__store_add(wex__store_client *c, const char *key, int64_t delta,
                          int64_t *result_p)
{
    uint8_t arg[8];

    wex__store_put_u64(arg, (uint64_t)delta);
    return call_i64(c, WEX__STORE_ADD, key, arg, sizeof(arg), WEX__STORE_IO_S,
                    result_p);
}

wex_status wex__store_drop(wex__store_client *c, const char *prefix,
                           int64_t *dropped_p)
{
    return call_i64(c, WEX__STORE_DROP, prefix, NULL, 0, WEX__STORE_IO_S,
                    dropped_p);
}

wex_status wex__store_wait_ge(wex__store_client *c, const char *key,
                              int64_t target, double timeout_s)
{
    uint64_t ms = timeout_ms(timeout_s);
    uint8_t arg[16];

    wex__store_put_u64(arg, (uint64_t)target);
    wex__store_put_u64(arg + 8, ms);
    return call_i64(c, WEX__STORE_WAIT_GE, key, arg, sizeof(arg),
                    (double)ms / 1000.0, NULL);
}

wex_status wex__store_barrier(wex__store_client *c, const char *key, int64_t n,
                              double timeout_s)
{
    int64_t arrived;
    wex_status st = wex__store_add(c, key, 1, &arrived);

    if (st != WEX_OK || arrived >= n)
        return st;
    return wex__store_wait_ge(c, key, n, timeout_s);
}

wex_status wex__store_arrive(wex__store_client *c, const char *key,
                             int fail_fast, uint64_t sources,
                             uint64_t destinations, const uint8_t *optional,
                             double timeout_s, uint64_t **dead_p,
                             uint64_t *dead_count_p)
{
    wex__store_elastic none = {0, 0, NULL, 0, 0};
    wex_status st = wex__store_arrive_elastic(c, key, fail_fast, sources,
                                              destinations, optional, &none,
                                              timeout_s, dead_p, dead_count_p);
    free(none.absent);
    return st;
}

/* The u64 list at reply offset *at: its count (at most `most`) and its
 * items, malloc'd; -1 when it runs past the reply. */
static int read_list(const wex__store_response *resp, size_t *at, uint64_t most,
                     uint64_t **items_p, uint64_t *n_p)
{
    uint64_t n;

    if (resp->len < *at + 8)
        return -1;
    n = wex__store_get_u64(resp->payload + *at);
    if (n > most || resp->len < *at + 8 + 8 * n)
        return -1;
    if ((*items_p = malloc(n ? n * 8 : 1)) == NULL)
        return -1;
    for (uint64_t i = 0; i < n; i++)
        (*items_p)[i] = wex__store_get_u64(resp->payload + *at + 8 + 8 * i);
    *n_p = n;
    *at += 8 + 8 * n;
    return 0;
}

wex_status wex__store_arrive_elastic(
    wex__store_client *c, const char *key, int fail_fast, uint64_t sources,
    uint64_t destinations, const uint8_t *optional, wex__store_elastic *elastic,
    double timeout_s, uint64_t **dead_p, uint64_t *dead_count_p)
{
    uint64_t ms = timeout_ms(timeout_s), n = 0;
    size_t bitmap = (size_t)(sources + 7) / 8, at = 8;
    size_t size = 32 + bitmap + (elastic->replica_ranks ? 16 : 0);
    uint8_t *arg = calloc(1, size), *msg = NULL;
    uint64_t *dead = NULL;
    wex__store_response resp;
    wex_status st;

    elastic->absent = NULL;
    elastic->absent_count = 0;
    elastic->too_few = 0;
    if (arg == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    wex__store_put_u64(arg, ms);
    wex__store_put_u64(arg + 8,
                       (fail_fast ? WEX__ARRIVE_FAIL_FAST : 0) |
                           (elastic->replica_ranks ? WEX__ARRIVE_ELASTIC : 0));
    wex__store_put_u64(arg + 16, sources);
    wex__store_put_u64(arg + 24, destinations);
    if (optional != NULL && bitmap)
        memcpy(arg + 32, optional, bitmap);
    if (elastic->replica_ranks) {
        wex__store_put_u64(arg + 32 + bitmap, elastic->replica_ranks);
        wex__store_put_u64(arg + 40 + bitmap, elastic->min_replicas);
    }
    c->missed = 0;
    st = call(c, WEX__STORE_ARRIVE, key, arg, size, (double)ms / 1000.0, &msg,
              &resp);
    free(arg);
    if (st != WEX_OK)
        return st;
    c->missed = resp.status == WEX__STORE_R_PASSED;
    elastic->too_few = resp.status == WEX__STORE_R_FEW;
    st = reply_status(c, &resp);
    if (st == WEX_OK && (read_list(&resp, &at, sources, &dead, &n) != 0 ||
                         (elastic->replica_ranks &&
                          read_list(&resp, &at, destinations, &elastic->absent,
                                    &elastic->absent_count) != 0) ||
                         at != resp.len)) {
        c->broken = 1;
        st = wex__error(WEX_ERR_PEER,
                        "rendezvous %s: ARRIVE '%.200s': "
                        "a malformed %zu-byte reply",
                        c->address, key, resp.len);
    }
    free(msg);
    if (st != WEX_OK) {
        free(dead);
        free(elastic->absent);
        elastic->absent = NULL;
        elastic->absent_count = 0;
        return st;
    }
    *dead_p = dead;
    *dead_count_p = n;
    return WEX_OK;
}

int wex__store_missed(const wex__store_client *c)
{
    return c->missed;
}

wex_status wex__store_gather(wex__store_client *c, const char *prefix,
                             uint64_t n, const char *owner_prefix,
                             double timeout_s, wex__store_gathered **items_p)
{
    uint64_t ms = timeout_ms(timeout_s);
    size_t owner_len = strlen(owner_prefix), at = 0;
    uint8_t *arg = malloc(16 + owner_len), *msg = NULL, *bytes;
    wex__store_gathered *items = NULL;
    wex__store_response resp;
    wex_status st;

    if (arg == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    wex__store_put_u64(arg, ms);
    wex__store_put_u64(arg + 8, n);
    memcpy(arg + 16, owner_prefix, owner_len);
    st = call(c, WEX__STORE_GATHER, prefix, arg, 16 + owner_len,
              (double)ms / 1000.0, &msg, &resp);
    free(arg);
    if (st != WEX_OK)
        return st;
    st = reply_status(c, &resp);
    /* One block: the records, then every value, each NUL-terminated. */
    if (st == WEX_OK &&
        (items = malloc(n * sizeof(*items) + resp.len + n + 1)) == NULL)
        st = wex__error(WEX_ERR_NOMEM, "out of memory");
    bytes = items != NULL ? (uint8_t *)(items + n) : NULL;
    for (uint64_t i = 0; st == WEX_OK && i < n; i++) {
        size_t len;
        if (resp.len - at < 5 ||
            (len = wex__store_get_u32(resp.payload + at + 1)) >
                resp.len - at - 5) {
            c->broken = 1;
            st = wex__error(WEX_ERR_PEER,
                            "rendezvous %s: GATHER '%.200s': "
                            "a malformed reply",
                            c->address, prefix);
            break;
        }
        items[i].present = resp.payload[at] != 0;
        items[i].len = len;
        items[i].value = (const char *)bytes;
        memcpy(bytes, resp.payload + at + 5, len);
        bytes[len] = '\0';
        bytes += len + 1;
        at += 5 + len;
    }
    free(msg);
    if (st != WEX_OK) {
        free(items);
        return st;
    }
    *items_p = items;
    return WEX_OK;
}

void wex__store_close(wex__store_client *c)
{
    uint8_t *req, *msg;
    size_t len;
    wex__store_response resp;

    if (c == NULL)
        return;
    /* Wait for the server's answer, so the goodbye is read before the
     * connection closes, whatever is left unread on either side. */
    if (!c->broken && wex__store_encode_request(WEX__STORE_BYE, "", 0, NULL, 0,
                                                &req, &len) == WEX_OK) {
        double deadline = wex__now() + WEX__STORE_BYE_S;
        if (wex__store_write_full(c->fd, req, len, deadline) == WEX_OK &&
            read_reply(c->fd, 0, &msg, &resp) == WEX_OK)
            free(msg);
        free(req);
    }
    wex__store_abandon(c);
}

void wex__store_abandon(wex__store_client *c)
{
    if (c == NULL)
        return;
    close(c->fd);
    free(c);
}
