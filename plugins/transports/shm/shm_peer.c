/*
 * The source's side: attaching a destination's buffer from its key
 * (mapping its memfd, or checking that process_vm_writev may reach its
 * registered memory), puts, and flush.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "shm_internal.h"

/* process_vm_writev moves at most this much per call. */
#define VM_CHUNK (1ull << 30)

/* ---- peers --------------------------------------------------------- */

void shm_peer_free(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    shm_fence_release(ctx, p);
    if (p->map != NULL)
        munmap(p->map, p->bytes);
    if (p->pidfd >= 0)
        close(p->pidfd);
    free(p);
}

/* kernel.yama.ptrace_scope, or -1 without Yama. */
static int ptrace_scope(void)
{
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "re");
    int v = -1;

    if (f == NULL)
        return -1;
    if (fscanf(f, "%d", &v) != 1)
        v = -1;
    fclose(f);
    return v;
}

/* Explains a failed process_vm_{read,write}v into peer `p`. */
static wex_status vm_error(wex_transport_ctx *ctx, const wex_transport_peer *p,
                           int err, uint64_t offset, uint64_t bytes)
{
    const wex_host_services *h = ctx->host;
    unsigned long long rank = (unsigned long long)p->rank;
    long pid = (long)p->pid;
    int scope = err == EPERM ? ptrace_scope() : -1;

    switch (err) {
    case ESRCH:
        return WP_FAIL(h, WEX_ERR_PEER,
                       "destination rank %llu (pid %ld) is gone", rank, pid);
    case EPERM:
        if (scope >= 0)
            return WP_FAIL(h, WEX_ERR_SYSTEM,
                           "process_vm_writev into destination rank %llu (pid "
                           "%ld) was refused (EPERM): no ptrace access; "
                           "kernel.yama.ptrace_scope is %d (0, or 1 with the "
                           "destination's PR_SET_PTRACER, allow it; 2 and 3 do "
                           "not), and both ranks must run as the same user "
                           "with a dumpable destination and no seccomp profile "
                           "forbidding it; mem_alloc buffers need no ptrace "
                           "access",
                           rank, pid, scope);
        return WP_FAIL(h, WEX_ERR_SYSTEM,
                       "process_vm_writev into destination rank %llu (pid %ld) "
                       "was refused (EPERM): no ptrace access (no Yama LSM, so "
                       "kernel.yama.ptrace_scope plays no part: the ranks run "
                       "as different users, the destination is not dumpable, "
                       "or a seccomp profile forbids it); mem_alloc buffers "
                       "need no ptrace access",
                       rank, pid);
    case EFAULT:
        return WP_FAIL(h, WEX_ERR_PEER,
                       "destination rank %llu (pid %ld): bytes %llu..%llu of "
                       "its registered buffer at 0x%llx are not mapped there "
                       "any more (or the source memory is unreadable)",
                       rank, pid, (unsigned long long)offset,
                       (unsigned long long)(offset + bytes),
                       (unsigned long long)p->address);
    case ENOSYS:
        return WP_FAIL(h, WEX_ERR_UNSUPPORTED,
                       "process_vm_writev is not available here (kernel or "
                       "seccomp); destination buffers must come from "
                       "mem_alloc");
    default:
        return WP_FAIL(h, WEX_ERR_SYSTEM,
                       "process_vm_writev into destination rank %llu (pid "
                       "%ld): %s",
                       rank, pid, strerror(err));
    }
}

static int open_pidfd(pid_t pid)
{
#ifdef SYS_pidfd_open
    return (int)syscall(SYS_pidfd_open, pid, 0);
#else
    (void)pid;
    return -1;
#endif
}

/* The process behind a pidfd has exited (it may not be reaped yet). */
static int pidfd_exited(int pidfd)
{
    struct pollfd pfd = {pidfd, POLLIN, 0};

    return pidfd >= 0 && poll(&pfd, 1, 0) > 0;
}

static wex_status attach_memfd(wex_transport_ctx *ctx, wex_transport_peer *p,
                               int fd)
{
    const wex_host_services *h = ctx->host;
    struct stat st;
    void *map;

    if (fstat(fd, &st) != 0)
        return WP_FAIL(h, WEX_ERR_SYSTEM,
                       "fstat of destination rank %llu's "
                       "memfd: %s",
                       (unsigned long long)p->rank, strerror(errno));
    if ((uint64_t)st.st_size < p->bytes)
        return WP_FAIL(h, WEX_ERR_PEER,
                       "destination rank %llu (pid %ld) passed a memfd of %lld "
                       "bytes for a %llu-byte buffer",
                       (unsigned long long)p->rank, (long)p->pid,
                       (long long)st.st_size, (unsigned long long)p->bytes);
    /* Populated now, so no step pays for page faults. */
    map = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED)
        return WP_FAIL(h, errno == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                       "mapping destination rank %llu's %llu-byte buffer: %s",
                       (unsigned long long)p->rank,
                       (unsigned long long)p->bytes, strerror(errno));
    p->map = map;
    return WEX_OK;
}

/* Reads one byte of the destination's buffer: refused now, with a clear
 * reason, rather than on the first put. */
static wex_status probe_private(wex_transport_ctx *ctx,
                                const wex_transport_peer *p)
{
    char byte;
    struct iovec local = {&byte, 1};
    struct iovec remote = {(void *)(uintptr_t)p->address, 1};

    if (process_vm_readv(p->pid, &local, 1, &remote, 1, 0) == 1)
        return WEX_OK;
    return vm_error(ctx, p, errno, 0, 1);
}

wex_status shm_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                           const void *key, uint64_t key_len,
                           wex_transport_peer **peer_p)
{
    const wex_host_services *h = ctx->host;
    char why[160], who[96];
    wex_transport_peer *p;
    shm_fetch fetch;
    wex_status st;
    shm_key k;
    int fd = -1, rc = -1;

    if (key_len <= WEX_TRANSPORT_KEY_MAX)
        rc = shm_key_decode(key, (size_t)key_len, &k, why, sizeof(why));
    st = wt_key_check(h, "shm", peer_rank, key_len, rc, why, &k.rank);
    if (st != WEX_OK)
        return st;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    p->kind = k.kind;
    p->pid = (pid_t)k.pid;
    p->rank = k.rank;
    p->bytes = k.size;
    p->address = k.address;
    /* Opened before the server proves the pid is the key's process, so
     * it cannot refer to a later process that reused the pid. */
    p->pidfd = k.kind == SHM_KIND_PRIVATE ? open_pidfd(p->pid) : -1;

    snprintf(who, sizeof(who), "destination rank %llu (pid %ld)",
             (unsigned long long)k.rank, (long)k.pid);
    memset(&fetch, 0, sizeof(fetch));
    fetch.name = k.name;
    fetch.name_len = k.name_len;
    fetch.who = who;
    fetch.pid = p->pid;
    fetch.timeout_ms = ctx->connect_timeout_ms;
    fetch.request.magic = SHM_WIRE_MAGIC;
    fetch.request.kind = k.kind;
    fetch.request.buffer_id = k.buffer_id;
    fetch.request.size = k.size;
    fetch.request.address = k.address;
    st = shm_fetch_buffer(h, &fetch, &fd);
    if (st == WEX_OK && k.kind == SHM_KIND_MEMFD) {
        st = attach_memfd(ctx, p, fd);
        close(fd); /* the mapping keeps the memory */
    } else if (st == WEX_OK) {
        st = probe_private(ctx, p);
    }
    if (st == WEX_OK)
        st = shm_fence_attach(ctx, p, &fetch);
    if (st != WEX_OK) {
        shm_peer_free(ctx, p);
        return st;
    }
    wt_list_push(&ctx->peers, &p->link);
    *peer_p = p;
    return WEX_OK;
}

void shm_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    if (p == NULL)
        return;
    wt_list_unlink(&ctx->peers, &p->link);
    shm_peer_free(ctx, p);
}

/* ---- data path ----------------------------------------------------- */

/* process_vm_writev into a registered buffer, a chunk at a time, looking
 * at the fence before each. */
static wex_status private_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                              uint64_t offset, const void *src, uint64_t bytes)
{
    uint64_t chunk = ctx->epoch != 0 ? SHM_FENCE_CHUNK : VM_CHUNK;
    uint64_t done = 0;
    wex_status st;

    if (pidfd_exited(p->pidfd))
        return vm_error(ctx, p, ESRCH, offset, bytes);
    while (done < bytes) {
        uint64_t n = bytes - done < chunk ? bytes - done : chunk;
        struct iovec local = {(char *)(uintptr_t)src + done, (size_t)n};
        struct iovec remote = {(void *)(uintptr_t)(p->address + offset + done),
                               (size_t)n};
        ssize_t r;

        if (done > 0 && (st = shm_fence_still_open(ctx, p)) != WEX_OK)
            return st;
        r = process_vm_writev(p->pid, &local, 1, &remote, 1, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) /* 0: nothing moved, the first page faulted */
            return vm_error(ctx, p, r < 0 ? errno : EFAULT, offset + done, n);
        done += (uint64_t)r; /* partial: resume where it stopped */
    }
    return WEX_OK;
}

wex_status shm_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                   uint64_t offset, const void *src, uint64_t bytes)
{
    wex_status st = wt_check_put(ctx->host, p->rank, p->bytes, offset, bytes);
    uint64_t done = 0;

    if (st != WEX_OK)
        return st;
    if (bytes == 0)
        return WEX_OK;
    if ((st = shm_fence_enter(ctx, p)) != WEX_OK)
        return st;
    if (p->kind == SHM_KIND_MEMFD) {
        /* A dead destination's pages live on in our mapping: harmless. */
        for (; done < bytes; done += SHM_FENCE_CHUNK) {
            uint64_t n =
                bytes - done < SHM_FENCE_CHUNK ? bytes - done : SHM_FENCE_CHUNK;
            if (done > 0 && (st = shm_fence_still_open(ctx, p)) != WEX_OK)
                return st;
            memcpy(p->map + offset + done, (const char *)src + done, n);
        }
        shm_fence_leave(ctx, p);
        return WEX_OK;
    }
    st = private_put(ctx, p, offset, src, bytes);
    shm_fence_leave(ctx, p);
    return st;
}

wex_status shm_flush(wex_transport_ctx *ctx)
{
    (void)ctx;
    /* Every put has completed: memcpy'd bytes sit in the shared pages and
     * process_vm_writev returns once copied. The fence orders them before
     * whatever store tells the destination they are there. */
    atomic_thread_fence(memory_order_release);
    return WEX_OK;
}
