#include "shm_fdpass.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "shm_key.h"

/* How long the server gives one client to send its request. */
#define SERVER_IO_MS 2000
/* Pause between connection attempts while nothing listens yet. */
#define RETRY_MS 10

struct shm_server {
    const wex_host_services *host;
    int listen_fd;
    int wake[2]; /* self-pipe: a byte in wake[1] stops the thread */
    pthread_t thread;
    shm_lookup_fn lookup;
    void *arg;
    char name[SHM_NAME_MAX + 1];
};

static socklen_t abstract_addr(struct sockaddr_un *addr, const char *name,
                               size_t name_len)
{
    memset(addr, 0, sizeof(*addr));
    addr->sun_family = AF_UNIX;
    memcpy(addr->sun_path + 1, name, name_len); /* sun_path[0] = '\0' */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + name_len);
}

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Reads exactly n bytes, waiting at most until `deadline` (now_ms) and,
 * when wake_fd >= 0, giving up as soon as it becomes readable. Collects
 * at most one SCM_RIGHTS descriptor into *fd_p (when fd_p is not NULL;
 * extras are closed). 0 on success; -1 with errno (ETIMEDOUT, ECANCELED
 * when woken, EPIPE on end of stream). */
static int read_full(int fd, void *buf, size_t n, int64_t deadline, int wake_fd,
                     int *fd_p)
{
    size_t got = 0;

    while (got < n) {
        struct pollfd pfd[2] = {{fd, POLLIN, 0}, {wake_fd, POLLIN, 0}};
        int64_t left = deadline - now_ms();
        union {
            struct cmsghdr align;
            char buf[CMSG_SPACE(4 * sizeof(int))];
        } control;
        struct iovec iov = {(char *)buf + got, n - got};
        struct msghdr msg;
        ssize_t r;
        int rc;

        if (left <= 0) {
            errno = ETIMEDOUT;
            return -1;
        }
        rc =
            poll(pfd, wake_fd >= 0 ? 2 : 1, (int)(left > 60000 ? 60000 : left));
        if (rc < 0 && errno == EINTR)
            continue;
        if (rc < 0)
            return -1;
        if (wake_fd >= 0 && pfd[1].revents) {
            errno = ECANCELED;
            return -1;
        }
        if (rc == 0)
            continue;
        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.buf;
        msg.msg_controllen = sizeof(control.buf);
        r = recvmsg(fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (r < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (r < 0)
            return -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c != NULL;
             c = CMSG_NXTHDR(&msg, c)) {
            if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                continue;
            size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (size_t i = 0; i < count; i++) {
                int passed;
                memcpy(&passed, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
                if (fd_p != NULL && *fd_p < 0)
                    *fd_p = passed;
                else
                    close(passed);
            }
        }
        if (r == 0) {
            errno = EPIPE;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* Sends the whole buffer and, when fd >= 0, the descriptor with it. */
static int send_full(int sock, const void *buf, size_t n, int fd)
{
    union {
        struct cmsghdr align;
        char buf[CMSG_SPACE(sizeof(int))];
    } control;
    size_t sent = 0;

    while (sent < n) {
        struct iovec iov = {(char *)buf + sent, n - sent};
        struct msghdr msg;
        ssize_t r;

        memset(&msg, 0, sizeof(msg));
        msg.msg_iov = &iov;
        msg.msg_iovlen = 1;
        if (fd >= 0 && sent == 0) {
            struct cmsghdr *c;
            memset(&control, 0, sizeof(control));
            msg.msg_control = control.buf;
            msg.msg_controllen = sizeof(control.buf);
            c = CMSG_FIRSTHDR(&msg);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        r = sendmsg(sock, &msg, MSG_NOSIGNAL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        sent += (size_t)r;
    }
    return 0;
}

/* The other end runs as this user, or as root. */
static int same_user(uid_t uid)
{
    return uid == geteuid() || uid == 0;
}

/* ---- server ------------------------------------------------------- */

/* Serves one connection; nonzero when the lookup kept it open. */
static int serve_one(shm_server *s, int client)
{
    const wex_host_services *h = s->host;
    struct ucred cred;
    socklen_t cred_len = sizeof(cred);
    shm_request req;
    shm_reply reply;
    shm_asked asked;
    int fd = -1;

    if (getsockopt(client, SOL_SOCKET, SO_PEERCRED, &cred, &cred_len) != 0) {
        WEX_WARN(h, "@%s: SO_PEERCRED: %s; dropping the connection", s->name,
                 strerror(errno));
        return 0;
    }
    if (!same_user(cred.uid)) {
        WEX_WARN(h,
                 "@%s: refusing pid %ld of uid %ld: only uid %ld and root "
                 "may attach this rank's buffers",
                 s->name, (long)cred.pid, (long)cred.uid, (long)geteuid());
        return 0;
    }
    if (read_full(client, &req, sizeof(req), now_ms() + SERVER_IO_MS,
                  s->wake[0], NULL) != 0) {
        if (errno != ECANCELED)
            WEX_WARN(h, "@%s: no request from pid %ld: %s", s->name,
                     (long)cred.pid, strerror(errno));
        return 0;
    }
    memset(&reply, 0, sizeof(reply));
    reply.magic = SHM_WIRE_MAGIC;
    asked.request = &req;
    asked.pid = cred.pid;
    asked.client = client;
    asked.keep_client = 0;
    if (req.magic != SHM_WIRE_MAGIC)
        reply.status = SHM_REPLY_FAILED;
    else
        reply.status = s->lookup(s->arg, &asked, &reply, &fd);
    if (send_full(client, &reply, sizeof(reply),
                  reply.status == SHM_REPLY_OK ? fd : -1) != 0)
        WEX_WARN(h, "@%s: reply to pid %ld: %s", s->name, (long)cred.pid,
                 strerror(errno));
    if (fd >= 0)
        close(fd);
    return asked.keep_client;
}

static void *server_main(void *arg)
{
    shm_server *s = arg;

    for (;;) {
        struct pollfd pfd[2] = {{s->listen_fd, POLLIN, 0},
                                {s->wake[0], POLLIN, 0}};
        int client;

        if (poll(pfd, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            WEX_WARN(s->host, "@%s: poll: %s; the server stops", s->name,
                     strerror(errno));
            break;
        }
        if (pfd[1].revents)
            break;
        client = accept4(s->listen_fd, NULL, NULL, SOCK_CLOEXEC);
        if (client < 0)
            continue; /* EAGAIN, ECONNABORTED, EINTR, a transient EMFILE */
        if (!serve_one(s, client))
            close(client);
    }
    return NULL;
}

wex_status shm_server_start(const wex_host_services *h, const char *name,
                            size_t name_len, shm_lookup_fn lookup, void *arg,
                            shm_server **server_p)
{
    shm_server *s = calloc(1, sizeof(*s));
    struct sockaddr_un addr;
    socklen_t addr_len;
    sigset_t all, old;
    wex_status st = WEX_ERR_SYSTEM;
    int err;

    if (s == NULL) {
        h->set_error(h->ctx, WEX_ERR_NOMEM, "out of memory");
        return WEX_ERR_NOMEM;
    }
    s->host = h;
    s->lookup = lookup;
    s->arg = arg;
    s->wake[0] = s->wake[1] = -1;
    memcpy(s->name, name, name_len);
    addr_len = abstract_addr(&addr, name, name_len);
    s->listen_fd =
        socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (s->listen_fd < 0) {
        h->set_error(h->ctx, st, "socket(AF_UNIX): %s", strerror(errno));
        goto fail;
    }
    if (bind(s->listen_fd, (struct sockaddr *)&addr, addr_len) != 0) {
        if (errno == EADDRINUSE) {
            st = WEX_ERR_INVALID;
            h->set_error(h->ctx, st,
                         "abstract socket @%s is in use: another destination "
                         "with the same job id and rank runs on this host",
                         s->name);
        } else {
            h->set_error(h->ctx, st, "bind @%s: %s", s->name, strerror(errno));
        }
        goto fail;
    }
    if (listen(s->listen_fd, 128) != 0) {
        h->set_error(h->ctx, st, "listen @%s: %s", s->name, strerror(errno));
        goto fail;
    }
    if (pipe2(s->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        h->set_error(h->ctx, st, "pipe2: %s", strerror(errno));
        goto fail;
    }
    /* The thread takes no signals: they stay with the application's. */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    err = pthread_create(&s->thread, NULL, server_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (err != 0) {
        h->set_error(h->ctx, st, "cannot start the server thread for @%s: %s",
                     s->name, strerror(err));
        goto fail;
    }
    *server_p = s;
    return WEX_OK;

fail:
    if (s->listen_fd >= 0)
        close(s->listen_fd);
    if (s->wake[0] >= 0) {
        close(s->wake[0]);
        close(s->wake[1]);
    }
    free(s);
    return st;
}

void shm_server_stop(shm_server *s)
{
    if (s == NULL)
        return;
    while (write(s->wake[1], "x", 1) < 0 && errno == EINTR) {
    }
    pthread_join(s->thread, NULL);
    close(s->listen_fd);
    close(s->wake[0]);
    close(s->wake[1]);
    free(s);
}

/* ---- client ------------------------------------------------------- */

static int process_gone(pid_t pid)
{
    return kill(pid, 0) != 0 && errno == ESRCH;
}

/* A connected socket to the destination, or -1 with the error set. */
static int connect_retrying(const wex_host_services *h, const shm_fetch *f,
                            int64_t deadline, wex_status *status_p)
{
    struct sockaddr_un addr;
    socklen_t addr_len = abstract_addr(&addr, f->name, f->name_len);

    for (;;) {
        int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int64_t left;
        int err;

        if (sock < 0) {
            *status_p = WEX_ERR_SYSTEM;
            h->set_error(h->ctx, *status_p, "socket(AF_UNIX): %s",
                         strerror(errno));
            return -1;
        }
        if (connect(sock, (struct sockaddr *)&addr, addr_len) == 0)
            return sock;
        err = errno;
        close(sock);
        if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT &&
            err != EINTR) {
            *status_p = WEX_ERR_SYSTEM;
            h->set_error(h->ctx, *status_p, "%s: connect to @%s: %s", f->who,
                         f->name, strerror(err));
            return -1;
        }
        if (process_gone(f->pid)) {
            *status_p = WEX_ERR_PEER;
            h->set_error(h->ctx, *status_p,
                         "%s is gone: nothing listens on @%s and the process "
                         "has exited",
                         f->who, f->name);
            return -1;
        }
        left = deadline - now_ms();
        if (left <= 0) {
            *status_p = WEX_ERR_TIMEOUT;
            h->set_error(h->ctx, *status_p,
                         "%s: nothing listened on @%s within %d ms "
                         "(connect_timeout_ms): its transport is closed or "
                         "was never opened",
                         f->who, f->name, f->timeout_ms);
            return -1;
        }
        sleep_ms(left < RETRY_MS ? left : RETRY_MS);
    }
}

/* The listening process is the one the key names, and runs as us. */
static wex_status check_server(const wex_host_services *h, const shm_fetch *f,
                               int sock)
{
    struct ucred cred;
    socklen_t len = sizeof(cred);

    if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        h->set_error(h->ctx, WEX_ERR_SYSTEM, "%s: SO_PEERCRED on @%s: %s",
                     f->who, f->name, strerror(errno));
        return WEX_ERR_SYSTEM;
    }
    if (!same_user(cred.uid)) {
        h->set_error(h->ctx, WEX_ERR_PEER,
                     "%s: @%s is served by uid %ld, not this user (uid %ld); "
                     "refusing to write into another user's memory",
                     f->who, f->name, (long)cred.uid, (long)geteuid());
        return WEX_ERR_PEER;
    }
    if (cred.pid == f->pid)
        return WEX_OK;
    if (cred.pid == 0) { /* the server is in a pid namespace we cannot see */
        if (f->request.kind != SHM_KIND_PRIVATE)
            return WEX_OK;
        h->set_error(h->ctx, WEX_ERR_UNSUPPORTED,
                     "%s runs in another pid namespace: process_vm_writev "
                     "into its registered (not shm-allocated) buffer needs "
                     "both ranks in one pid namespace; use mem_alloc buffers",
                     f->who);
        return WEX_ERR_UNSUPPORTED;
    }
    h->set_error(h->ctx, WEX_ERR_PEER,
                 "%s: @%s is served by pid %ld: the key is stale (the "
                 "destination restarted) or names another process",
                 f->who, f->name, (long)cred.pid);
    return WEX_ERR_PEER;
}

/* One request and its reply; the descriptor that came with an accepted
 * one in *fd_p, and the connection in *sock_p when sock_p is not NULL
 * (closed otherwise). */
static wex_status exchange(const wex_host_services *h, const shm_fetch *f,
                           int *fd_p, shm_reply *reply_p, int *sock_p)
{
    int64_t start = now_ms();
    int64_t deadline = start + (f->timeout_ms > 0 ? f->timeout_ms : 0);
    wex_status st = WEX_OK;
    shm_reply reply;
    int sock, fd = -1;

    *fd_p = -1;
    memset(&reply, 0, sizeof(reply));
    sock = connect_retrying(h, f, deadline, &st);
    if (sock < 0)
        return st;
    st = check_server(h, f, sock);
    if (st != WEX_OK)
        goto out;
    /* The exchange itself gets at least a second, even when connecting
     * used up the timeout. */
    if (deadline < now_ms() + 1000)
        deadline = now_ms() + 1000;
    if (send_full(sock, &f->request, sizeof(f->request), -1) != 0 ||
        read_full(sock, &reply, sizeof(reply), deadline, -1, &fd) != 0) {
        st = errno == ETIMEDOUT ? WEX_ERR_TIMEOUT : WEX_ERR_PEER;
        h->set_error(h->ctx, st, "%s: exchange on @%s failed: %s", f->who,
                     f->name,
                     errno == EPIPE ? "the destination closed the connection"
                                    : strerror(errno));
        goto out;
    }
    if (reply.magic != SHM_WIRE_MAGIC) {
        st = WEX_ERR_PEER;
        h->set_error(h->ctx, st, "%s: @%s answered with a malformed reply",
                     f->who, f->name);
        goto out;
    }
    switch (reply.status) {
    case SHM_REPLY_OK: break;
    case SHM_REPLY_UNKNOWN:
        st = WEX_ERR_INVALID;
        h->set_error(h->ctx, st,
                     "%s has no buffer %llu: the key is stale (the buffer "
                     "was deregistered) or corrupt",
                     f->who, (unsigned long long)f->request.buffer_id);
        goto out;
    case SHM_REPLY_MISMATCH:
        st = WEX_ERR_INVALID;
        h->set_error(h->ctx, st,
                     "%s: buffer %llu is %llu bytes of another kind or "
                     "address than the key says (%llu bytes): the key is "
                     "stale or corrupt",
                     f->who, (unsigned long long)f->request.buffer_id,
                     (unsigned long long)reply.size,
                     (unsigned long long)f->request.size);
        goto out;
    default:
        st = WEX_ERR_PEER;
        h->set_error(h->ctx, st,
                     "%s could not serve buffer %llu (status %u; its log "
                     "says why)",
                     f->who, (unsigned long long)f->request.buffer_id,
                     reply.status);
        goto out;
    }
    if (f->request.kind != SHM_KIND_PRIVATE && fd < 0) {
        st = WEX_ERR_PEER;
        h->set_error(h->ctx, st,
                     "%s accepted buffer %llu but passed no descriptor", f->who,
                     (unsigned long long)f->request.buffer_id);
        goto out;
    }
    if (f->request.kind == SHM_KIND_PRIVATE && fd >= 0) {
        close(fd);
        fd = -1;
    }
    *fd_p = fd;
    *reply_p = reply;
    fd = -1;
    if (sock_p != NULL) {
        *sock_p = sock;
        sock = -1;
    }
out:
    if (fd >= 0)
        close(fd);
    if (sock >= 0)
        close(sock);
    return st;
}

wex_status shm_fetch_buffer(const wex_host_services *h, const shm_fetch *f,
                            int *fd_p)
{
    shm_reply reply;

    return exchange(h, f, fd_p, &reply, NULL);
}

wex_status shm_fetch_fence(const wex_host_services *h, const shm_fetch *f,
                           int *fd_p, uint32_t *slot_p, int *sock_p)
{
    shm_reply reply;
    wex_status st = exchange(h, f, fd_p, &reply, sock_p);

    if (st == WEX_OK)
        *slot_p = reply.slot;
    return st;
}
