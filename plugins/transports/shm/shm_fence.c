/*
 * Fencing over shm: a source that a destination gave up on never writes
 * into it again for that try.
 *
 * Sources write a destination's pages directly (its memfd is mapped in
 * their address space), so nothing the destination does can take the
 * pages away from them. Instead each destination shares a fence page
 * with its sources: a word holding the epoch it takes writes of (0:
 * none), and one line per source, its slot, holding the epoch that
 * source is inside a write of (0: none). Around every put a source
 *   stores its epoch in its slot, then reads the destination's word:
 *   another epoch means it was fenced, and it clears its slot and fails;
 *   reads the word again before each chunk of 1 MiB, and clears its
 *   slot when the put is done.
 * A destination closing a try stores 0 in its word, then reads every
 * slot. Both sides store before they load (sequentially consistent), so
 * either the destination sees a source's slot set, or the source sees
 * the word closed and writes nothing: a source can be caught inside a
 * write, never slip past unseen. A caught source leaves within a chunk
 * once it runs; the destination waits for that up to the job's
 * fence_seconds, and then stops by force whoever is still inside: it
 * kills the process (pidfd_send_signal), which a stopped or hung source
 * is. So when CLOSE returns, no write of the try can land any more, and
 * OPEN refuses a new epoch while a source it could not stop lives.
 *
 * Slots are handed out by the destination's buffer server, one per
 * source context, over a connection the source keeps open: a slot is
 * free again once its connection closes or its process exits, which the
 * destination tells from the connection (it hangs up when the source
 * dies, in any pid namespace) and from a pidfd of the source's process.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "shm_internal.h"

/* How long a killed source may take to exit before CLOSE gives up. */
#define KILL_WAIT_MS 10000

static int64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static int pidfd_of(pid_t pid)
{
#ifdef SYS_pidfd_open
    return pid > 0 ? (int)syscall(SYS_pidfd_open, pid, 0) : -1;
#else
    (void)pid;
    return -1;
#endif
}

static int kill_by_pidfd(int pidfd)
{
#ifdef SYS_pidfd_send_signal
    return (int)syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
#else
    (void)pidfd;
    errno = ENOSYS;
    return -1;
#endif
}

static size_t page_bytes(void)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);

    return (sizeof(shm_fence_page) + page - 1) / page * page;
}

/* ---- the destination's page and slots ------------------------------- */

wex_status shm_fence_setup(wex_transport_ctx *ctx)
{
    const wex_host_services *h = ctx->host;
    size_t bytes = page_bytes();
    void *map;

    ctx->fence_fd = -1;
    ctx->writers = malloc(SHM_FENCE_SLOTS * sizeof(*ctx->writers));
    if (ctx->writers == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    for (uint32_t i = 0; i < SHM_FENCE_SLOTS; i++)
        ctx->writers[i] = (shm_writer){-1, 0, -1};
    ctx->fence_fd = memfd_create("wex-fence", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (ctx->fence_fd < 0)
        return WP_FAIL(h, WEX_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
    if (ftruncate(ctx->fence_fd, (off_t)bytes) != 0)
        return WP_FAIL(h, WEX_ERR_SYSTEM, "the fence page: ftruncate: %s",
                       strerror(errno));
    (void)fcntl(ctx->fence_fd, F_ADD_SEALS,
                F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL);
    map =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, ctx->fence_fd, 0);
    if (map == MAP_FAILED)
        return WP_FAIL(h, WEX_ERR_SYSTEM, "mapping the fence page: %s",
                       strerror(errno));
    ctx->fence = map;
    return WEX_OK;
}

static void free_slot(wex_transport_ctx *ctx, uint32_t i)
{
    shm_writer *w = &ctx->writers[i];

    if (w->conn >= 0)
        close(w->conn);
    if (w->pidfd >= 0)
        close(w->pidfd);
    *w = (shm_writer){-1, 0, -1};
    atomic_store(&ctx->fence->writing[i].word, 0);
}

void shm_fence_teardown(wex_transport_ctx *ctx)
{
    if (ctx->writers != NULL && ctx->fence != NULL)
        for (uint32_t i = 0; i < SHM_FENCE_SLOTS; i++)
            free_slot(ctx, i);
    free(ctx->writers);
    ctx->writers = NULL;
    if (ctx->fence != NULL)
        munmap(ctx->fence, page_bytes());
    ctx->fence = NULL;
    if (ctx->fence_fd >= 0)
        close(ctx->fence_fd);
    ctx->fence_fd = -1;
}

/* The slot's source is gone: its process exited or its connection hung
 * up (a source that closed its context, or died in any pid namespace). */
static int writer_gone(const shm_writer *w)
{
    struct pollfd pfd[2] = {{w->conn, POLLRDHUP, 0}, {w->pidfd, POLLIN, 0}};

    if (poll(pfd, w->pidfd >= 0 ? 2 : 1, 0) <= 0)
        return 0;
    return (pfd[0].revents & (POLLHUP | POLLRDHUP | POLLERR)) != 0 ||
           (w->pidfd >= 0 && (pfd[1].revents & POLLIN) != 0);
}

uint32_t shm_fence_serve(wex_transport_ctx *ctx, shm_asked *asked,
                         shm_reply *reply, int *fd_p)
{
    uint32_t status = SHM_REPLY_FAILED, slot = SHM_FENCE_SLOTS;

    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < SHM_FENCE_SLOTS && slot == SHM_FENCE_SLOTS; i++)
        if (ctx->writers[i].conn < 0)
            slot = i;
    for (uint32_t i = 0; i < SHM_FENCE_SLOTS && slot == SHM_FENCE_SLOTS; i++)
        if (writer_gone(&ctx->writers[i])) {
            free_slot(ctx, i);
            slot = i;
        }
    if (slot == SHM_FENCE_SLOTS) {
        WEX_WARN(ctx->host,
                 "@%s: all %u fence slots are held by live "
                 "sources: refusing pid %ld",
                 ctx->name, SHM_FENCE_SLOTS, (long)asked->pid);
    } else if ((*fd_p = fcntl(ctx->fence_fd, F_DUPFD_CLOEXEC, 0)) < 0) {
        WEX_WARN(ctx->host, "@%s: cannot pass the fence page: dup: %s",
                 ctx->name, strerror(errno));
    } else {
        ctx->writers[slot] =
            (shm_writer){asked->client, asked->pid, pidfd_of(asked->pid)};
        atomic_store(&ctx->fence->writing[slot].word, 0);
        asked->keep_client = 1;
        reply->slot = slot;
        reply->size = page_bytes();
        status = SHM_REPLY_OK;
    }
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

/* ---- opening and closing (the destination) --------------------------- */

/* The slots whose sources are inside a write: gone ones are freed, the
 * others listed in `inside` (at most SHM_FENCE_SLOTS); returns how many. */
static uint32_t writers_inside(wex_transport_ctx *ctx, uint32_t *inside)
{
    uint32_t n = 0;

    pthread_mutex_lock(&ctx->lock);
    for (uint32_t i = 0; i < SHM_FENCE_SLOTS; i++) {
        if (ctx->writers[i].conn < 0 ||
            atomic_load(&ctx->fence->writing[i].word) == 0)
            continue;
        if (writer_gone(&ctx->writers[i]))
            free_slot(ctx, i);
        else
            inside[n++] = i;
    }
    pthread_mutex_unlock(&ctx->lock);
    return n;
}

/* Kills the sources of the `n` slots in `inside` and waits for them to
 * exit; fails naming the first it could not stop. */
static wex_status stop_by_force(wex_transport_ctx *ctx, uint32_t *inside,
                                uint32_t n, uint32_t grace_ms)
{
    const wex_host_services *h = ctx->host;
    int64_t deadline = now_ms() + KILL_WAIT_MS;
    char why[160] = "";
    pid_t stuck = 0;
    int cannot = 0;

    pthread_mutex_lock(&ctx->lock);
    for (uint32_t k = 0; k < n && !cannot; k++) {
        shm_writer *w = &ctx->writers[inside[k]];
        stuck = w->pid;
        if (w->pidfd < 0 || w->pid == getpid()) {
            cannot = 1;
            snprintf(why, sizeof(why), "%s",
                     w->pid == 0    ? "it runs in a pid namespace this process "
                                      "cannot see"
                     : w->pidfd < 0 ? "no pidfd for it"
                                    : "it is this process");
        } else if (kill_by_pidfd(w->pidfd) != 0) {
            cannot = 1;
            snprintf(why, sizeof(why), "kill: %s", strerror(errno));
        } else {
            WEX_WARN(h,
                     "destination rank %llu killed source process pid %ld:"
                     " it was still inside a write of a try the destination "
                     "gave up on when its grace ran out (%u ms left of "
                     "timeouts.fence_seconds)",
                     (unsigned long long)ctx->rank, (long)w->pid, grace_ms);
        }
    }
    pthread_mutex_unlock(&ctx->lock);
    if (cannot)
        return WP_FAIL(h, WEX_ERR_PEER,
                       "source process pid %ld stayed inside a write of a try "
                       "this destination gave up on and cannot be stopped "
                       "(%s): destination rank %llu takes no writes until it "
                       "is gone",
                       (long)stuck, why, (unsigned long long)ctx->rank);
    while (writers_inside(ctx, inside) > 0) {
        if (now_ms() >= deadline)
            return WP_FAIL(h, WEX_ERR_PEER,
                           "a source process killed for staying inside a write "
                           "of an abandoned try had not exited after %d ms: "
                           "destination rank %llu takes no writes until it has",
                           KILL_WAIT_MS, (unsigned long long)ctx->rank);
        nap_ms(1);
    }
    return WEX_OK;
}

static wex_status fence_close(wex_transport_ctx *ctx, uint32_t grace_ms)
{
    uint32_t *inside = malloc(SHM_FENCE_SLOTS * sizeof(*inside));
    int64_t deadline = now_ms() + grace_ms;
    uint32_t n;
    wex_status st = WEX_OK;

    if (inside == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
    atomic_store(&ctx->fence->open.word, 0);
    while ((n = writers_inside(ctx, inside)) > 0 && now_ms() < deadline)
        nap_ms(1);
    if (n > 0)
        st = stop_by_force(ctx, inside, n, grace_ms);
    free(inside);
    return st;
}

static wex_status fence_open(wex_transport_ctx *ctx, uint64_t epoch)
{
    uint32_t *inside = malloc(SHM_FENCE_SLOTS * sizeof(*inside));
    uint32_t n;
    pid_t pid;

    if (inside == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
    n = writers_inside(ctx, inside);
    pid = n > 0 ? ctx->writers[inside[0]].pid : 0;
    free(inside);
    if (n > 0)
        return WP_FAIL(ctx->host, WEX_ERR_PEER,
                       "source process pid %ld is still inside a write of a "
                       "try destination rank %llu gave up on: it takes no "
                       "writes until that process is gone",
                       (long)pid, (unsigned long long)ctx->rank);
    atomic_store(&ctx->fence->open.word, epoch);
    return WEX_OK;
}

wex_status shm_fence(wex_transport_ctx *ctx, wex_transport_fence *f)
{
    const wex_host_services *h = ctx->host;
    int destination = ctx->side == WEX_SIDE_DESTINATION;

    if (f == NULL || f->struct_size < WEX_TRANSPORT_FENCE_SIZE_1_4)
        return WP_FAIL(h, WEX_ERR_ABI,
                       "fence: a wex_transport_fence smaller "
                       "than ABI 1.4's");
    if (f->op == WEX_FENCE_WRITE && !destination && f->epoch != 0) {
        ctx->epoch = f->epoch;
        return WEX_OK;
    }
    if (f->op == WEX_FENCE_OPEN && destination && f->epoch != 0)
        return fence_open(ctx, f->epoch);
    if (f->op == WEX_FENCE_CLOSE && destination) {
        f->rekeyed = 0; /* nothing to revoke: sources map the pages */
        return fence_close(ctx, f->grace_ms);
    }
    return WP_FAIL(h, WEX_ERR_INVALID, "fence: op %u%s on a %s", f->op,
                   f->epoch == 0 ? " with epoch 0" : "",
                   destination ? "destination" : "source");
}

/* ---- the source's side -------------------------------------------------- */

wex_status shm_fence_attach(wex_transport_ctx *ctx, wex_transport_peer *p,
                            const shm_fetch *f)
{
    const wex_host_services *h = ctx->host;
    shm_fetch ask = *f;
    shm_fence_ref *r;
    wex_status st;
    void *map;
    int fd = -1;

    for (r = ctx->fences; r != NULL; r = r->next)
        if (r->rank == p->rank && r->pid == p->pid) {
            r->refs++;
            p->fence = r;
            return WEX_OK;
        }
    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    memset(&ask.request, 0, sizeof(ask.request));
    ask.request.magic = SHM_WIRE_MAGIC;
    ask.request.kind = SHM_KIND_FENCE;
    st = shm_fetch_fence(h, &ask, &fd, &r->slot, &r->sock);
    if (st != WEX_OK) {
        free(r);
        return st;
    }
    map = mmap(NULL, page_bytes(), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (map == MAP_FAILED || r->slot >= SHM_FENCE_SLOTS) {
        st = map == MAP_FAILED
                 ? WP_FAIL(h, WEX_ERR_SYSTEM, "mapping %s's fence page: %s",
                           f->who, strerror(errno))
                 : WP_FAIL(h, WEX_ERR_PEER, "%s gave fence slot %u of %u",
                           f->who, r->slot, SHM_FENCE_SLOTS);
        if (map != MAP_FAILED)
            munmap(map, page_bytes());
        close(r->sock);
        free(r);
        return st;
    }
    r->page = map;
    r->rank = p->rank;
    r->pid = p->pid;
    r->refs = 1;
    r->next = ctx->fences;
    ctx->fences = r;
    p->fence = r;
    return WEX_OK;
}

void shm_fence_release(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    shm_fence_ref **at = &ctx->fences, *r = p->fence;

    p->fence = NULL;
    if (r == NULL || --r->refs > 0)
        return;
    while (*at != r)
        at = &(*at)->next;
    *at = r->next;
    atomic_store(&r->page->writing[r->slot].word, 0);
    munmap(r->page, page_bytes());
    close(r->sock); /* gives the slot back */
    free(r);
}

static wex_status fenced(wex_transport_ctx *ctx, const wex_transport_peer *p)
{
    atomic_store_explicit(&p->fence->page->writing[p->fence->slot].word, 0,
                          memory_order_release);
    return WP_FAIL(ctx->host, WEX_ERR_PEER,
                   "fenced: destination rank %llu (pid %ld) takes no more "
                   "writes of this try (it gave up on the step); this source "
                   "stopped before writing into it",
                   (unsigned long long)p->rank, (long)p->pid);
}

wex_status shm_fence_enter(wex_transport_ctx *ctx, const wex_transport_peer *p)
{
    shm_fence_page *page;

    if (ctx->epoch == 0 || p->fence == NULL)
        return WEX_OK;
    page = p->fence->page;
    atomic_store(&page->writing[p->fence->slot].word, ctx->epoch);
    if (atomic_load(&page->open.word) != ctx->epoch)
        return fenced(ctx, p);
    return WEX_OK;
}

wex_status shm_fence_still_open(wex_transport_ctx *ctx,
                                const wex_transport_peer *p)
{
    if (ctx->epoch == 0 || p->fence == NULL ||
        atomic_load_explicit(&p->fence->page->open.word,
                             memory_order_acquire) == ctx->epoch)
        return WEX_OK;
    return fenced(ctx, p);
}

void shm_fence_leave(wex_transport_ctx *ctx, const wex_transport_peer *p)
{
    if (ctx->epoch != 0 && p->fence != NULL)
        atomic_store_explicit(&p->fence->page->writing[p->fence->slot].word, 0,
                              memory_order_release);
}
