/*
 * The fake NCCL's progress thread (fake_nccl.c says how the fake works):
 * connecting a communicator's ranks, then moving its queued ops' bytes
 * over non-blocking sockets in one poll loop, and completing the stream
 * work of each group as its last op finishes.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fake_nccl.h"

/* Bytes this process may still move before it sends itself `doom_signal`
 * (0: never): a test's way to make a rank die (SIGKILL) or stall
 * (SIGSTOP) in the middle of a transfer. */
static int64_t doom;
static int doom_signal;
/* Bytes its communicators moved, both ways, frames included. */
static uint64_t total;

uint64_t fake_nccl_moved(void)
{
    return __atomic_load_n(&total, __ATOMIC_SEQ_CST);
}

void fake_nccl_signal_after(uint64_t bytes, int sig)
{
    __atomic_store_n(&doom_signal, sig, __ATOMIC_SEQ_CST);
    __atomic_store_n(&doom, (int64_t)(bytes < INT64_MAX ? bytes : INT64_MAX),
                     __ATOMIC_SEQ_CST);
}

static void moved(size_t n)
{
    __atomic_add_fetch(&total, n, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&doom, __ATOMIC_SEQ_CST) > 0 &&
        __atomic_sub_fetch(&doom, (int64_t)n, __ATOMIC_SEQ_CST) <= 0)
        raise(__atomic_load_n(&doom_signal, __ATOMIC_SEQ_CST));
}

static double now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

void fake_nccl_fail(ncclComm_t c, ncclResult_t r, const char *fmt, ...)
{
    va_list ap;

    pthread_mutex_lock(&c->lock);
    if (c->state == ncclSuccess || c->state == ncclInProgress) {
        c->state = r;
        va_start(ap, fmt);
        vsnprintf(c->why, sizeof(c->why), fmt, ap);
        va_end(ap);
        if (getenv("NCCL_DEBUG") != NULL)
            fprintf(stderr, "fake NCCL WARN rank %d: %s\n", c->rank, c->why);
    }
    pthread_mutex_unlock(&c->lock);
}

static int failed(ncclComm_t c)
{
    int bad;

    pthread_mutex_lock(&c->lock);
    bad = c->state != ncclSuccess && c->state != ncclInProgress;
    pthread_mutex_unlock(&c->lock);
    return bad;
}

void fake_nccl_wake(ncclComm_t c)
{
    char byte = 1;

    if (write(c->wake[1], &byte, 1) < 0) {
        /* full: the thread has a wake-up pending anyway */
    }
}

/* "NAME.rank" (to < 0), where a rank listens, or "NAME.rank.to", where
 * it calls rank `to` from; abstract, so nothing is left behind. */
socklen_t fake_nccl_address(struct sockaddr_un *a, const char *name, int rank,
                            int to)
{
    size_t cap = sizeof(a->sun_path) - 1;
    int n;

    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    n = to < 0 ? snprintf(a->sun_path + 1, cap, "%s.%d", name, rank)
               : snprintf(a->sun_path + 1, cap, "%s.%d.%d", name, rank, to);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* The rank that called, from the address it called from; -1 if it is
 * none of this communicator's higher ranks. */
static int caller(ncclComm_t c, const struct sockaddr_un *a, socklen_t len)
{
    size_t n = strlen(c->name), off = offsetof(struct sockaddr_un, sun_path);
    char text[sizeof(a->sun_path)];
    int from, to, end = 0;

    if (len <= off + 1 || a->sun_path[0] != '\0')
        return -1;
    memcpy(text, a->sun_path + 1, len - off - 1);
    text[len - off - 1] = '\0';
    if (strncmp(text, c->name, n) != 0 ||
        sscanf(text + n, ".%d.%d%n", &from, &to, &end) != 2 ||
        text[n + (size_t)end] != '\0' || to != c->rank || from <= c->rank ||
        from >= c->size)
        return -1;
    return from;
}

/* Accepts the higher ranks' calls and calls the lower ranks; a rank not
 * listening yet is tried again RETRY_MS later. */
static void join(ncclComm_t c)
{
    struct sockaddr_un a;
    socklen_t len = sizeof(a);
    int fd, from, err;

    while ((fd = accept4(c->listen_fd, (struct sockaddr *)&a, &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
        from = caller(c, &a, len);
        if (from >= 0 && c->peers[from].fd < 0) {
            c->peers[from].fd = fd;
            c->joined++;
        } else {
            close(fd);
        }
        len = sizeof(a);
    }
    for (int p = 0; p < c->rank && now_ms() >= c->retry_at; p++) {
        if (c->peers[p].fd >= 0)
            continue;
        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        len = fake_nccl_address(&a, c->name, c->rank, p);
        if (fd < 0 || bind(fd, (struct sockaddr *)&a, len) != 0) {
            err = errno;
            fake_nccl_fail(c, ncclSystemError,
                           "rank %d: a socket to call rank %d: %s", c->rank, p,
                           strerror(err));
            if (fd >= 0)
                close(fd);
            return;
        }
        len = fake_nccl_address(&a, c->name, p, -1);
        if (connect(fd, (struct sockaddr *)&a, len) == 0) {
            c->peers[p].fd = fd;
            c->joined++;
            continue;
        }
        err = errno;
        close(fd);
        if (err != ECONNREFUSED && err != EAGAIN && err != ENOENT)
            fake_nccl_fail(c, ncclSystemError, "rank %d: calling rank %d: %s",
                           c->rank, p, strerror(err));
    }
    if (now_ms() >= c->retry_at)
        c->retry_at = now_ms() + RETRY_MS;
    if (c->joined == c->size - 1) {
        close(c->listen_fd);
        c->listen_fd = -1;
    }
}

static void unlink_active(ncclComm_t c, launch *l)
{
    launch **at = &c->active;

    while (*at != NULL && *at != l)
        at = &(*at)->next;
    if (*at == l)
        *at = l->next;
}

static void finish(ncclComm_t c, launch *l)
{
    if (--l->left > 0)
        return;
    fake_cuda_work_end(l->work);
    unlink_active(c, l);
    free(l);
}

/* Puts posted groups on their streams and their ops on their peers. */
static void take(ncclComm_t c, launch *l)
{
    while (l != NULL) {
        launch *next = l->next;
        l->work = fake_cuda_work_begin(l->stream);
        l->next = c->active;
        c->active = l;
        if (l->work == NULL)
            fake_nccl_fail(c, ncclSystemError,
                           "rank %d: no memory for stream work", c->rank);
        for (size_t i = 0; i < l->count; i++) {
            op *o = &l->ops[i];
            peer *p = &c->peers[o->peer];
            op **head = o->send ? &p->sends : &p->recvs;
            op **tail = o->send ? &p->sends_tail : &p->recvs_tail;
            if (*head == NULL)
                *head = o;
            else
                (*tail)->next = o;
            *tail = o;
        }
        l->left++; /* held while queuing: an empty group ends here */
        finish(c, l);
        l = next;
    }
}

/* Checks a received frame: a receive of another size than the send it
 * pairs with is the caller's error, caught before any payload lands. */
static int frame_matches(ncclComm_t c, int from, const op *o)
{
    uint32_t magic;
    uint64_t bytes;

    memcpy(&magic, o->frame, sizeof(magic));
    memcpy(&bytes, o->frame + 8, sizeof(bytes));
    if (magic != FRAME_MAGIC)
        fake_nccl_fail(c, ncclInternalError,
                       "rank %d: a corrupt frame from rank %d", c->rank, from);
    else if (bytes != o->bytes)
        fake_nccl_fail(
            c, ncclInvalidUsage,
            "rank %d: rank %d sent %llu bytes to a receive of %zu: sends "
            "and receives do not pair up",
            c->rank, from, (unsigned long long)bytes, o->bytes);
    return magic == FRAME_MAGIC && bytes == o->bytes ? 0 : -1;
}

/* Moves peer i's ops of one direction as far as its socket lets them
 * now: 0, or -1 once the communicator failed. A peer that is gone fails
 * it only here, with an op for it queued. */
static int pump(ncclComm_t c, int i, int out)
{
    peer *p = &c->peers[i];
    op **head = out ? &p->sends : &p->recvs;
    op *o;

    while ((o = *head) != NULL) {
        int framing = o->framed < FRAME_BYTES;
        unsigned char *at = framing ? o->frame + o->framed : o->buf + o->done;
        size_t want = framing ? FRAME_BYTES - o->framed : o->bytes - o->done;
        ssize_t n;
        int err;

        if (want == 0) {
            *head = o->next;
            finish(c, o->launch);
            continue;
        }
        n = out ? send(p->fd, at, want, MSG_NOSIGNAL)
                : recv(p->fd, at, want, 0);
        err = n < 0 ? errno : 0;
        if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK || err == EINTR))
            return 0;
        if (n <= 0) {
            fake_nccl_fail(c,
                           n == 0 || err == EPIPE || err == ECONNRESET
                               ? ncclRemoteError
                               : ncclSystemError,
                           "rank %d: %s rank %d: %s (did it die or abort?)",
                           c->rank, out ? "sending to" : "receiving from", i,
                           n == 0 ? "connection closed" : strerror(err));
            return -1;
        }
        moved((size_t)n);
        if (!framing) {
            o->done += (size_t)n;
        } else if ((o->framed += (size_t)n) == FRAME_BYTES && !out &&
                   frame_matches(c, i, o) != 0) {
            return -1;
        }
    }
    return 0;
}

/* Sets the state once what it waits for is done: every peer joined,
 * every posted group taken, and when finalizing, every op finished. */
static void settle(ncclComm_t c)
{
    pthread_mutex_lock(&c->lock);
    if (c->joined == c->size - 1)
        c->ready = 1;
    if (c->state == ncclInProgress && c->ready && c->posted == NULL &&
        (!c->finalizing || c->active == NULL))
        c->state = ncclSuccess;
    pthread_mutex_unlock(&c->lock);
}

void *fake_nccl_progress(void *arg)
{
    ncclComm_t c = arg;
    /* the wake pipe, the listening socket, then one per peer */
    struct pollfd *fds = calloc((size_t)c->size + 2, sizeof(*fds));

    for (;;) {
        launch *taken;
        int broken, joining;
        char drain[64];

        pthread_mutex_lock(&c->lock);
        taken = c->stop ? NULL : c->posted;
        c->posted = c->posted_tail = NULL;
        broken = c->stop;
        pthread_mutex_unlock(&c->lock);
        if (broken || fds == NULL)
            break;
        take(c, taken);
        settle(c);
        broken = failed(c);
        joining = !broken && c->joined < c->size - 1;
        fds[0] = (struct pollfd){c->wake[0], POLLIN, 0};
        fds[1] = (struct pollfd){joining ? c->listen_fd : -1, POLLIN, 0};
        for (int i = 0; i < c->size; i++) {
            peer *p = &c->peers[i];
            short events =
                (short)((p->sends ? POLLOUT : 0) | (p->recvs ? POLLIN : 0));
            /* an idle peer is polled for its hang-up alone */
            int watch = !broken && p->fd >= 0 && (events || !p->hup);
            fds[i + 2] = (struct pollfd){watch ? p->fd : -1, events, 0};
        }
        if (poll(fds, (nfds_t)c->size + 2, joining ? RETRY_MS : -1) < 0 &&
            errno != EINTR)
            fake_nccl_fail(c, ncclSystemError, "rank %d: poll: %s", c->rank,
                           strerror(errno));
        while (read(c->wake[0], drain, sizeof(drain)) > 0)
            ;
        if (joining)
            join(c);
        for (int i = 0; i < c->size; i++) {
            peer *p = &c->peers[i];
            if (fds[i + 2].fd < 0 || fds[i + 2].revents == 0 ||
                (p->sends && pump(c, i, 1) != 0) ||
                (p->recvs && pump(c, i, 0) != 0))
                continue;
            if (!p->sends && !p->recvs &&
                (fds[i + 2].revents & (POLLHUP | POLLERR)))
                p->hup = 1;
        }
    }
    if (fds == NULL)
        fake_nccl_fail(c, ncclSystemError, "rank %d: out of memory", c->rank);
    free(fds);
    return NULL;
}
