/*
 * NCCL without a GPU, for the tests of the nccl transport on machines
 * that have none. The plugin links libnccl.so.2 and libcudart.so.13; the
 * test preloads this library and the fake CUDA runtime (LD_PRELOAD), so
 * the plugin's calls land here, with nccl.h's own types, and its buffers
 * are the fake runtime's device pointers (fake_cuda_reach gives their
 * host alias) or its pinned host memory, which a GPU reaches too;
 * pageable host memory is refused, as NCCL's kernels would fault on it.
 *
 * Every rank is a process. ncclGetUniqueId draws a random name; rank r
 * of a communicator listens on the abstract Unix socket "NAME.r" and
 * connects to each lower rank p from a socket bound to "NAME.r.p", so
 * the rank that accepts learns who called from the address alone. Init
 * completes once every pair is connected, as NCCL's init is collective
 * over all of a communicator's ranks: a rank that never comes keeps the
 * others in progress (the caller's deadline decides), never failed.
 *
 * Each communicator has a progress thread, which does all its socket work
 * in one poll loop over non-blocking sockets, so a group's sends and
 * receives to and from many peers move together. Ops queue per peer and
 * direction in issue order (FIFO, as NCCL matches them), each send framed
 * with its size so a receive of another size fails instead of reading
 * the wrong bytes. A group's ops on one stream are one piece of work on
 * it (fake_cuda_work_begin): an event recorded after the group completes
 * when they all have. The thread takes a posted group asynchronously,
 * so ncclGroupEnd on a non-blocking communicator returns ncclInProgress
 * and ncclCommGetAsyncError says when the group is on its stream, as
 * NCCL's does. A peer that closes its socket (it died, or aborted) while
 * an op with it is queued is ncclRemoteError; an idle peer that closes is
 * only noted. Abort and destroy stop the thread (it never blocks outside
 * poll, which the wake pipe interrupts) and finish the stream work left,
 * so nothing waits on a communicator that is gone.
 *
 * NCCL_DEBUG set (any level) prints each communicator's first error.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "fake_nccl.h"

/* Waits for a blocking communicator's call, as NCCL's blocking mode does
 * (it has no deadline either). */
static ncclResult_t wait_settled(ncclComm_t c)
{
    struct timespec nap = {0, 100000};
    ncclResult_t r;

    for (;;) {
        pthread_mutex_lock(&c->lock);
        r = c->state;
        pthread_mutex_unlock(&c->lock);
        if (r != ncclInProgress)
            return r;
        nanosleep(&nap, NULL);
    }
}

/* Stops the thread and frees everything; the stream work still queued
 * is finished, as aborting NCCL's kernels frees their streams. */
static void teardown(ncclComm_t c)
{
    pthread_mutex_lock(&c->lock);
    c->stop = 1;
    pthread_mutex_unlock(&c->lock);
    if (c->threaded) {
        fake_nccl_wake(c);
        pthread_join(c->thread, NULL);
    }
    while (c->active != NULL) {
        launch *l = c->active;
        c->active = l->next;
        fake_cuda_work_end(l->work);
        free(l);
    }
    while (c->posted != NULL) { /* never on a stream */
        launch *l = c->posted;
        c->posted = l->next;
        free(l);
    }
    for (int i = 0; i < c->size; i++)
        if (c->peers[i].fd >= 0)
            close(c->peers[i].fd);
    for (int i = 0; i < 2; i++)
        if (c->wake[i] >= 0)
            close(c->wake[i]);
    if (c->listen_fd >= 0)
        close(c->listen_fd);
    pthread_mutex_destroy(&c->lock);
    free(c->peers);
    free(c);
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id)
{
    unsigned char r[16];

    if (id == NULL)
        return ncclInvalidArgument;
    if (getrandom(r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return ncclSystemError;
    memset(id, 0, sizeof(*id));
    memcpy(id->internal, ID_PREFIX, strlen(ID_PREFIX));
    for (size_t i = 0; i < sizeof(r); i++)
        snprintf(id->internal + strlen(ID_PREFIX) + 2 * i, 3, "%02x", r[i]);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks,
                                    ncclUniqueId id, int rank,
                                    ncclConfig_t *config)
{
    ncclComm_t c = NULL;
    struct sockaddr_un a;
    ncclResult_t r = ncclSystemError;
    int err = 0;

    if (comm == NULL)
        return ncclInvalidArgument;
    *comm = NULL;
    if (nranks < 1 || rank < 0 || rank >= nranks ||
        strncmp(id.internal, ID_PREFIX, strlen(ID_PREFIX)) != 0 ||
        strnlen(id.internal, sizeof(id.internal)) >= NAME_MAX_LEN)
        return ncclInvalidArgument;
    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->peers = calloc((size_t)nranks, sizeof(peer))) == NULL)
        goto out;
    c->rank = rank;
    c->size = nranks;
    c->blocking = config == NULL || config->blocking != 0;
    strcpy(c->name, id.internal);
    c->listen_fd = c->wake[0] = c->wake[1] = -1;
    for (int i = 0; i < nranks; i++)
        c->peers[i].fd = -1;
    c->state = ncclInProgress;
    pthread_mutex_init(&c->lock, NULL);
    if (pipe2(c->wake, O_NONBLOCK | O_CLOEXEC) != 0 ||
        (c->listen_fd = socket(
             AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0)) < 0 ||
        bind(c->listen_fd, (struct sockaddr *)&a,
             fake_nccl_address(&a, c->name, rank, -1)) != 0 ||
        listen(c->listen_fd, nranks) != 0)
        err = errno;
    else if ((err = pthread_create(&c->thread, NULL, fake_nccl_progress, c)) ==
             0)
        c->threaded = 1;
    if (err != 0) {
        /* the same rank of one id twice: the caller's error */
        r = err == EADDRINUSE ? ncclInvalidUsage : ncclSystemError;
        goto out;
    }
    *comm = c;
    return c->blocking ? wait_settled(c) : ncclInProgress;
out:
    if (c != NULL && c->peers != NULL) {
        teardown(c);
    } else if (c != NULL) {
        free(c);
    }
    return r;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank)
{
    return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *state)
{
    if (c == NULL || state == NULL)
        return ncclInvalidArgument;
    pthread_mutex_lock(&c->lock);
    *state = c->state;
    pthread_mutex_unlock(&c->lock);
    return ncclSuccess;
}

/* Completes once every op issued has: then destroy is a clean goodbye. */
ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    ncclResult_t r;

    if (c == NULL)
        return ncclInvalidArgument;
    pthread_mutex_lock(&c->lock);
    r = c->state;
    if (r == ncclSuccess || r == ncclInProgress) {
        c->finalizing = 1;
        c->state = r = ncclInProgress;
    }
    pthread_mutex_unlock(&c->lock);
    if (r != ncclInProgress)
        return r;
    fake_nccl_wake(c);
    return c->blocking ? wait_settled(c) : ncclInProgress;
}

ncclResult_t ncclCommDestroy(ncclComm_t c)
{
    if (c == NULL)
        return ncclInvalidArgument;
    teardown(c);
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c)
{
    if (c != NULL)
        teardown(c);
    return ncclSuccess;
}

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (fake NCCL)";
    case ncclSystemError: return "unhandled system error (fake NCCL)";
    case ncclInternalError: return "internal error (fake NCCL)";
    case ncclInvalidArgument: return "invalid argument (fake NCCL)";
    case ncclInvalidUsage: return "invalid usage (fake NCCL)";
    case ncclRemoteError:
        return "remote process exited or there was a network error "
               "(fake NCCL)";
    case ncclInProgress: return "NCCL operation in progress (fake NCCL)";
    default: return "unknown result code (fake NCCL)";
    }
}

const char *ncclGetLastError(ncclComm_t c)
{
    static __thread char why[256];

    why[0] = '\0';
    if (c != NULL) {
        pthread_mutex_lock(&c->lock);
        memcpy(why, c->why, sizeof(why));
        pthread_mutex_unlock(&c->lock);
    }
    return why;
}

/* ---- groups, sends and receives ------------------------------------ */

/* An op issued in the calling thread's open group. */
typedef struct pending {
    ncclComm_t comm;
    void *stream;
    int peer, send;
    unsigned char *buf;
    size_t bytes;
} pending;

static __thread int depth;
static __thread ncclResult_t group_error;
static __thread pending *pend;
static __thread size_t npend, cap;

/* Posts pend[first] and every later op on its communicator and stream as
 * one launch; marks them posted (comm NULL). */
static ncclResult_t post(size_t first)
{
    ncclComm_t c = pend[first].comm;
    void *stream = pend[first].stream;
    size_t count = 0, k = 0;
    ncclResult_t r;
    launch *l;

    for (size_t i = first; i < npend; i++)
        count += pend[i].comm == c && pend[i].stream == stream;
    l = calloc(1, sizeof(*l) + count * sizeof(op));
    if (l == NULL)
        return ncclSystemError;
    l->stream = stream;
    l->count = l->left = count;
    for (size_t i = first; i < npend; i++) {
        pending *p = &pend[i];
        op *o = &l->ops[k];
        uint32_t magic = FRAME_MAGIC;
        uint64_t bytes = p->bytes;
        if (p->comm != c || p->stream != stream)
            continue;
        *o = (op){NULL, l, p->peer, p->send, p->buf, p->bytes, 0, {0}, 0};
        memcpy(o->frame, &magic, sizeof(magic));
        memcpy(o->frame + 8, &bytes, sizeof(bytes));
        p->comm = NULL;
        k++;
    }
    pthread_mutex_lock(&c->lock);
    r = c->state;
    if (r == ncclInProgress && !c->ready)
        r = ncclInvalidUsage; /* NCCL wants init complete first */
    else if (r == ncclSuccess || r == ncclInProgress) {
        if (c->posted_tail != NULL)
            c->posted_tail->next = l;
        else
            c->posted = l;
        c->posted_tail = l;
        c->state = r = ncclInProgress;
        l = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    free(l);
    if (r != ncclInProgress)
        return r;
    fake_nccl_wake(c);
    return c->blocking ? wait_settled(c) : ncclInProgress;
}

/* Ends the outermost group: its ops go to their communicators. */
static ncclResult_t submit(void)
{
    ncclResult_t r = group_error, any = ncclSuccess;

    group_error = ncclSuccess;
    for (size_t i = 0; i < npend && r == ncclSuccess; i++)
        if (pend[i].comm != NULL &&
            ((r = post(i)) == ncclSuccess || r == ncclInProgress)) {
            any = r == ncclInProgress ? r : any;
            r = ncclSuccess;
        }
    free(pend);
    pend = NULL;
    npend = cap = 0;
    return r != ncclSuccess ? r : any;
}

static size_t type_bytes(ncclDataType_t type)
{
    switch (type) {
    case ncclInt8:
    case ncclUint8:
    case ncclFloat8e4m3:
    case ncclFloat8e5m2: return 1;
    case ncclFloat16:
    case ncclBfloat16: return 2;
    case ncclInt32:
    case ncclUint32:
    case ncclFloat32: return 4;
    case ncclInt64:
    case ncclUint64:
    case ncclFloat64: return 8;
    default: return 0;
    }
}

static ncclResult_t queue(const void *buf, size_t count, ncclDataType_t type,
                          int peer, ncclComm_t c, cudaStream_t stream, int send)
{
    size_t size = type_bytes(type), left = 0;
    unsigned char *host = NULL;
    ncclResult_t r = ncclInvalidArgument;
    const char *why = NULL;

    if (c == NULL)
        return ncclInvalidArgument;
    if (size == 0 || count > SIZE_MAX / size)
        why = "a bad datatype or count";
    else if (peer < 0 || peer >= c->size || peer == c->rank)
        why = "no such peer (the fake sends to no rank itself)";
    else if (count > 0) {
        /* a GPU reaches device memory and pinned host memory, not
         * pageable host memory (NCCL's kernels would fault on it) */
        host = fake_cuda_reach(buf, &left);
        if (host == buf && !fake_cuda_pinned(buf, &left))
            why = "pageable host memory, which a GPU cannot read";
        else if (left < count * size)
            why = "the buffer overruns its allocation";
    }
    if (why == NULL && npend == cap) {
        size_t more = cap ? 2 * cap : 64;
        pending *p = realloc(pend, more * sizeof(*p));
        if (p == NULL) {
            why = "out of memory";
            r = ncclSystemError;
        } else {
            pend = p;
            cap = more;
        }
    }
    if (why != NULL) {
        fake_nccl_fail(c, r, "rank %d: %s rank %d, %zu elements at %p: %s",
                       c->rank, send ? "send to" : "receive from", peer, count,
                       buf, why);
        group_error = depth > 0 ? r : group_error;
        return r;
    }
    pend[npend++] = (pending){c, stream, peer, send, host, count * size};
    return depth > 0 ? ncclSuccess : submit();
}

ncclResult_t ncclSend(const void *sendbuff, size_t count,
                      ncclDataType_t datatype, int peer, ncclComm_t comm,
                      cudaStream_t stream)
{
    return queue(sendbuff, count, datatype, peer, comm, stream, 1);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype,
                      int peer, ncclComm_t comm, cudaStream_t stream)
{
    return queue(recvbuff, count, datatype, peer, comm, stream, 0);
}

ncclResult_t ncclGroupStart(void)
{
    depth++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (depth == 0)
        return ncclInvalidUsage;
    return --depth > 0 ? ncclSuccess : submit();
}
