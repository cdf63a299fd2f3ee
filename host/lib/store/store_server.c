/*
 * The rendezvous store's server: an accept thread, one thread per
 * connection (a job has at most a few hundred ranks), and one mutex and
 * condition variable over a hash map of keys (store_map.c). Waits (GET, WAIT_GE) block
 * here, server-side, so a waiting rank costs no traffic.
 */
#include "store.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "store_proto.h"
#include "store_server.h"

/* ---- helpers ---------------------------------------------------------- */

static int token_matches(const wex__store_server *s, const uint8_t *given,
                         size_t len)
{
    volatile uint8_t diff = (uint8_t)(len != s->token_len);

    for (size_t i = 0; i < s->token_len; i++)
        diff |= (uint8_t)((uint8_t)s->token[i] ^ (i < len ? given[i] : 0));
    return diff == 0;
}

/* ---- requests --------------------------------------------------------- */

static int on_hello(wex__store_conn *c, const char *who,
                    const wex__store_request *req)
{
    char name[WEX__STORE_WHO_MAX];

    wex__store_printable(who, name, sizeof(name));
    if (c->hello) {
        wex__store_replyf(c, WEX__STORE_R_ERROR, "HELLO twice");
        return 0;
    }
    if (!token_matches(c->server, req->value, req->value_len)) {
        wex__log(WEX_LOG_WARN, "rendezvous", "refused %s: wrong token", name);
        wex__store_replyf(c, WEX__STORE_R_REFUSED, "wrong token");
        return 0;
    }
    /* Deaths before this client came are not its concern: it may be the
     * dead rank, rejoining. Under the lock: the barrier reads who is
     * alive from the connections. */
    pthread_mutex_lock(&c->server->mu);
    /* Dropped from the pending pool, or no room: closing without a reply
     * makes the client retry within its connect_seconds. */
    if (!c->pending || c->server->hello_count >= WEX__STORE_MAX_CONNS) {
        pthread_mutex_unlock(&c->server->mu);
        wex__log(WEX_LOG_WARN, "rendezvous", "no room for %s; closing", name);
        return 0;
    }
    c->pending = 0;
    c->server->pending_count--;
    c->server->hello_count++;
    memcpy(c->who, name, sizeof(name));
    c->acked = c->server->dead_count;
    c->step_acked = c->acked;
    c->hello = 1;
    pthread_cond_broadcast(&c->server->changed);
    pthread_mutex_unlock(&c->server->mu);
    wex__log(WEX_LOG_DEBUG, "rendezvous", "%s connected", name);
    return wex__store_reply(c, WEX__STORE_R_OK, NULL, 0);
}

static int serve_request(wex__store_conn *c, const wex__store_request *req)
{
    char key[WEX__STORE_KEY_MAX + 1], shown[256];

    memcpy(key, req->key, req->key_len);
    key[req->key_len] = '\0';
    wex__store_printable(key, shown, sizeof(shown));
    if (!c->hello && req->op != WEX__STORE_HELLO) {
        wex__store_replyf(c, WEX__STORE_R_ERROR, "expected HELLO first, got %s",
                          wex__store_op_name(req->op));
        return 0;
    }
    switch (req->op) {
    case WEX__STORE_HELLO: return on_hello(c, key, req);
    case WEX__STORE_SET: return wex__store_on_set(c, key, req);
    case WEX__STORE_GET: return wex__store_on_get(c, key, shown, req);
    case WEX__STORE_ADD: return wex__store_on_add(c, key, shown, req);
    case WEX__STORE_WAIT_GE: return wex__store_on_wait_ge(c, key, shown, req);
    case WEX__STORE_ARRIVE: return wex__store_on_arrive(c, key, shown, req);
    case WEX__STORE_GATHER: return wex__store_on_gather(c, key, shown, req);
    case WEX__STORE_DROP: return wex__store_on_drop(c, key);
    default: /* BYE: the decoder lets nothing else through */
        c->bye = 1;
        wex__store_reply(c, WEX__STORE_R_OK, NULL, 0);
        return 0;
    }
}

/* ---- connections ------------------------------------------------------ */

/* Reads one whole request into *msg_p. A malformed or oversized length
 * is WEX_ERR_INVALID (the caller says why, then closes); a client that
 * starts a message and stalls is dropped after WEX__STORE_MESSAGE_S. */
static wex_status read_request(wex__store_conn *c, uint8_t **msg_p,
                               size_t *len_p, double idle_deadline)
{
    uint8_t header[WEX__STORE_HEADER], *msg;
    uint32_t n, max = c->hello ? WEX__STORE_REQUEST_MAX : WEX__STORE_HELLO_MAX;
    wex_status st;

    st = wex__store_read_full(c->fd, header, 1, idle_deadline);
    if (st == WEX_OK)
        st = wex__store_read_full(c->fd, header + 1, sizeof(header) - 1,
                                  wex__now() + WEX__STORE_MESSAGE_S);
    if (st == WEX_OK)
        st = wex__store_frame_length(header, WEX__STORE_REQUEST_MIN, max, &n);
    if (st != WEX_OK)
        return st;
    msg = malloc(WEX__STORE_HEADER + n);
    if (msg == NULL) /* INVALID, so the client is told why it is dropped */
        return wex__error(WEX_ERR_INVALID,
                          "out of memory for a %u-byte "
                          "message",
                          n);
    memcpy(msg, header, sizeof(header));
    st = wex__store_read_full(c->fd, msg + WEX__STORE_HEADER, n,
                              wex__now() + WEX__STORE_MESSAGE_S);
    if (st != WEX_OK) {
        free(msg);
        return st;
    }
    *msg_p = msg;
    *len_p = WEX__STORE_HEADER + n;
    return WEX_OK;
}

static void *conn_main(void *arg)
{
    wex__store_conn *c = arg;
    wex__store_server *s = c->server;
    double hello_deadline = wex__now() + WEX__STORE_HELLO_S;

    for (;;) {
        wex__store_request req;
        uint8_t *msg = NULL;
        size_t len = 0;
        wex_status st;
        int keep;

        /* Idle between requests for as long as the client likes, once it
         * has said who it is. */
        st = read_request(c, &msg, &len, c->hello ? -1 : hello_deadline);
        if (st == WEX_OK) {
            st = wex__store_decode_request(msg, len, &req);
            keep = st == WEX_OK && serve_request(c, &req);
            free(msg);
        } else {
            keep = 0;
        }
        if (st == WEX_ERR_INVALID) {
            wex__log(WEX_LOG_DEBUG, "rendezvous", "%s: %s",
                     c->hello ? c->who : "a client", wex__last_error());
            wex__store_replyf(c, WEX__STORE_R_ERROR, "%s", wex__last_error());
        }
        if (!keep)
            break;
    }
    /* The client sees the close now; the descriptor itself stays open
     * until the thread is joined, so stop can never shut down a reused
     * one. */
    shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_lock(&s->mu);
    if (c->hello && !c->bye && !s->stopping)
        wex__store_record_death(s, c->who);
    if (c->hello)
        s->hello_count--;
    if (c->pending)
        s->pending_count--;
    c->pending = 0;
    c->done = 1;
    /* a member gone, even with a goodbye, may be what a barrier waits
     * on (an elastic replica that left) */
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Joins and frees connections whose thread has finished. Only the
 * accept thread calls this, so the list it walks is its own. */
static void reap(wex__store_server *s)
{
    wex__store_conn *done = NULL, **pp, *c;

    pthread_mutex_lock(&s->mu);
    for (pp = &s->conns; (c = *pp) != NULL;) {
        if (c->done) {
            *pp = c->next;
            c->next = done;
            done = c;
            s->conn_count--;
        } else {
            pp = &c->next;
        }
    }
    pthread_mutex_unlock(&s->mu);
    while ((c = done) != NULL) {
        done = c->next;
        pthread_join(c->thread, NULL);
        close(c->fd);
        free(c);
    }
}

/* With s->mu held: drops the oldest connection still waiting to say
 * HELLO. The list is newest first, so that is the last pending one. Its
 * thread sees the shutdown and ends; it leaves the pool now. */
static void drop_oldest_pending(wex__store_server *s)
{
    wex__store_conn *oldest = NULL;

    for (wex__store_conn *c = s->conns; c != NULL; c = c->next)
        if (c->pending)
            oldest = c;
    if (oldest == NULL)
        return;
    oldest->pending = 0;
    s->pending_count--;
    shutdown(oldest->fd, SHUT_RDWR);
}

static void start_conn(wex__store_server *s, int fd)
{
    wex__store_conn *c = calloc(1, sizeof(*c));
    pthread_attr_t attr;
    int one = 1, rc;

    if (c == NULL) {
        close(fd);
        return;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    c->server = s;
    c->fd = fd;
    c->pending = 1;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, WEX__STORE_STACK);
    /* Under the lock, so the new thread cannot reach HELLO before it is
     * counted in the pending pool. */
    pthread_mutex_lock(&s->mu);
    if (s->pending_count >= WEX__STORE_MAX_PENDING)
        drop_oldest_pending(s);
    rc = pthread_create(&c->thread, &attr, conn_main, c);
    if (rc == 0) {
        c->serial = ++s->next_serial;
        s->pending_count++;
        c->next = s->conns;
        s->conns = c;
        s->conn_count++;
    }
    pthread_mutex_unlock(&s->mu);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        wex__log(WEX_LOG_WARN, "rendezvous",
                 "cannot start a thread for a "
                 "connection: %s",
                 strerror(rc));
        close(fd);
        free(c);
    }
}

static void *accept_main(void *arg)
{
    wex__store_server *s = arg;

    for (;;) {
        struct pollfd p[2] = {{s->listen_fd, POLLIN, 0},
                              {s->wake[0], POLLIN, 0}};
        int fd;

        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents != 0)
            break;
        if (p[0].revents == 0)
            continue;
        fd = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0) {
            /* Out of descriptors or memory: pause rather than spin, but
             * still answer stop at once. */
            if (errno != EINTR && errno != EAGAIN && errno != ECONNABORTED)
                poll(&p[1], 1, 100);
            continue;
        }
        reap(s);
        start_conn(s, fd);
    }
    return NULL;
}

/* ---- serve / stop ----------------------------------------------------- */

static void server_free(wex__store_server *s)
{
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    for (int i = 0; i < 2; i++)
        if (s->wake[i] >= 0)
            close(s->wake[i]);
    wex__store_map_free(s);
    for (size_t i = 0; i < s->dead_count; i++)
        free(s->dead[i]);
    free(s->dead);
    free(s->token);
    pthread_cond_destroy(&s->changed);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

/* Binds and listens on the first address `host` resolves to that works,
 * and writes the bound address into s->address. */
static wex_status listen_on(wex__store_server *s, const char *address,
                            const char *host, const char *port)
{
    struct addrinfo hints = {0}, *list, *ai;
    struct sockaddr_storage bound;
    socklen_t len = sizeof(bound);
    char h[NI_MAXHOST], p[NI_MAXSERV];
    int rc, one = 1, err = 0;

    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    rc = getaddrinfo(host, port, &hints, &list);
    if (rc != 0)
        return wex__error(WEX_ERR_INVALID, "rendezvous address '%s': %s",
                          address, gai_strerror(rc));
    for (ai = list; ai != NULL && s->listen_fd < 0; ai = ai->ai_next) {
        int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC,
                        ai->ai_protocol);
        if (fd < 0) {
            err = errno;
            continue;
        }
        /* A restarted server must not wait out TIME_WAIT on its port. */
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, 1024) == 0)
            s->listen_fd = fd;
        else {
            err = errno;
            close(fd);
        }
    }
    freeaddrinfo(list);
    if (s->listen_fd < 0)
        return wex__error(WEX_ERR_SYSTEM,
                          "rendezvous: cannot listen on %s: "
                          "%s",
                          address, strerror(err));
    if (getsockname(s->listen_fd, (struct sockaddr *)&bound, &len) < 0 ||
        getnameinfo((struct sockaddr *)&bound, len, h, sizeof(h), p, sizeof(p),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
        return wex__error(WEX_ERR_SYSTEM,
                          "rendezvous: cannot read the "
                          "address bound for %s",
                          address);
    snprintf(s->address, sizeof(s->address),
             bound.ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
    return WEX_OK;
}

wex_status wex__store_serve(const char *address, const char *token,
                            wex__store_server **server_p)
{
    char host[256], port[8];
    pthread_condattr_t attr;
    wex__store_server *s;
    wex_status st;
    int rc;

    if (token == NULL || token[0] == '\0')
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous: a token is "
                          "required; every client must present it");
    if (strlen(token) > WEX__STORE_TOKEN_MAX)
        return wex__error(WEX_ERR_INVALID,
                          "rendezvous: token of %zu bytes "
                          "is over the %u-byte limit",
                          strlen(token), WEX__STORE_TOKEN_MAX);
    st = wex__store_split_address(address, host, sizeof(host), port,
                                  sizeof(port));
    if (st != WEX_OK)
        return st;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    s->listen_fd = s->wake[0] = s->wake[1] = -1;
    pthread_mutex_init(&s->mu, NULL);
    /* Waits are measured on the monotonic clock, like every deadline. */
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->changed, &attr);
    pthread_condattr_destroy(&attr);
    s->token = strdup(token);
    s->token_len = strlen(token);
    s->bucket_count = 64;
    s->buckets = calloc(s->bucket_count, sizeof(*s->buckets));
    if (s->token == NULL || s->buckets == NULL) {
        server_free(s);
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    }
    st = listen_on(s, address, host, port);
    if (st == WEX_OK && pipe2(s->wake, O_CLOEXEC) < 0)
        st = wex__error(WEX_ERR_SYSTEM, "pipe: %s", strerror(errno));
    if (st == WEX_OK &&
        (rc = pthread_create(&s->acceptor, NULL, accept_main, s)) != 0)
        st = wex__error(WEX_ERR_SYSTEM,
                        "rendezvous: cannot start a "
                        "thread: %s",
                        strerror(rc));
    if (st != WEX_OK) {
        server_free(s);
        return st;
    }
    wex__log(WEX_LOG_INFO, "rendezvous", "listening on %s", s->address);
    *server_p = s;
    return WEX_OK;
}

size_t wex__store_key_count(wex__store_server *s)
{
    size_t n;

    pthread_mutex_lock(&s->mu);
    n = s->entry_count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

size_t wex__store_death_count(wex__store_server *s)
{
    size_t n;

    pthread_mutex_lock(&s->mu);
    n = s->dead_count;
    pthread_mutex_unlock(&s->mu);
    return n;
}

const char *wex__store_address(const wex__store_server *s)
{
    return s->address;
}

void wex__store_stop(wex__store_server *s)
{
    wex__store_conn *c, *next;

    if (s == NULL)
        return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    if (write(s->wake[1], "x", 1) < 0)
        wex__log(WEX_LOG_WARN, "rendezvous", "waking the accept thread: %s",
                 strerror(errno));
    pthread_join(s->acceptor, NULL);
    /* Wakes every connection thread blocked reading or writing; waiting
     * ones see `stopping` within a slice. */
    pthread_mutex_lock(&s->mu);
    for (c = s->conns; c != NULL; c = c->next)
        shutdown(c->fd, SHUT_RDWR);
    pthread_mutex_unlock(&s->mu);
    for (c = s->conns; c != NULL; c = next) {
        next = c->next;
        pthread_join(c->thread, NULL);
        close(c->fd);
        free(c);
    }
    server_free(s);
}
