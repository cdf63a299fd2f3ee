/*
 * The `shm` transport: ranks on one host, in separate processes, with
 * one copy per byte.
 *
 * A destination rank's buffers come in two kinds:
 *  - mem_alloc: a sealed memfd mapped MAP_SHARED. A source attaching it
 *    connects to the destination context's abstract Unix socket, receives
 *    the memfd over SCM_RIGHTS (shm_fdpass.c) and maps it too; put is a
 *    memcpy straight into the destination's pages.
 *  - mem_register (caller memory, not shareable): the source writes with
 *    process_vm_writev into the destination's pid at the buffer's
 *    address, the kernel copying once between the two address spaces.
 * Neither leaves anything in /dev/shm or the filesystem: memfds and
 * abstract sockets vanish with their last user.
 *
 * process_vm_writev needs ptrace access to the destination. Under Yama's
 * ptrace_scope = 1 (the default on Ubuntu and others) only ancestors may
 * ptrace a process, and sources are never the destination's ancestors;
 * so while it has a registered buffer exposed, a destination declares
 * prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), which lets any process of
 * the same user write into it (the same user could already do so under
 * ptrace_scope = 0). It is cleared again when the last such buffer is
 * deregistered. memfd buffers need none of this: prefer mem_alloc.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <wex/plugin.h>

#include "shm_fdpass.h"
#include "shm_key.h"
#include "transport_common.h"

#define CONNECT_TIMEOUT_DEFAULT_MS 10000
#define CONNECT_TIMEOUT_MAX_MS 3600000
/* process_vm_writev moves at most this much per call. */
#define VM_CHUNK (1ull << 30)

struct wex_plugin_state {
    const wex_host_services *host;
    pthread_mutex_t lock;
    uint64_t ptracer_holders; /* private buffers exposed, process-wide */
    uint64_t anonymous_jobs;  /* contexts created without a job id */
};

struct wex_transport_mem {
    wex_transport_mem *prev, *next;
    uint64_t id;
    uint32_t kind; /* SHM_KIND_* */
    int fd;        /* the memfd; -1 for private memory */
    void *address;
    uint64_t bytes;
    uint64_t map_bytes; /* memfd: the mapping's length, whole pages */
};

struct wex_transport_peer {
    wex_transport_peer *prev, *next;
    uint32_t kind;
    pid_t pid;
    int pidfd; /* private: tells whether the process still runs; or -1 */
    uint64_t rank;
    uint64_t bytes;
    uint8_t *map;     /* memfd: our mapping of the destination's buffer */
    uint64_t address; /* private: the buffer in the destination */
};

struct wex_transport_ctx {
    wex_plugin_state *state;
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank;
    int connect_timeout_ms;
    char name[SHM_NAME_MAX + 1]; /* destination: the abstract socket */
    size_t name_len;
    shm_server *server; /* destination only */
    pthread_mutex_t lock; /* mems and next_id; the server thread reads them */
    wex_transport_mem *mems;
    uint64_t next_id;
    wex_transport_peer *peers;
};

/* ---- plugin -------------------------------------------------------- */

static wex_status shm_init(const wex_host_services *host,
                           wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    pthread_mutex_init(&state->lock, NULL);
    *state_p = state;
    return WEX_OK;
}

static void shm_fini(wex_plugin_state *state)
{
    if (state == NULL)
        return;
    pthread_mutex_destroy(&state->lock);
    free(state);
}

/* PR_SET_PTRACER is per process: count the private buffers that need it. */
static void ptracer_hold(wex_plugin_state *state)
{
    pthread_mutex_lock(&state->lock);
    if (state->ptracer_holders++ == 0 &&
        prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY, 0, 0, 0) != 0 &&
        errno != EINVAL) /* EINVAL: no Yama, nothing to relax */
        WEX_WARN(state->host,
                 "prctl(PR_SET_PTRACER): %s; sources may be refused "
                 "process_vm_writev into registered buffers",
                 strerror(errno));
    pthread_mutex_unlock(&state->lock);
}

static void ptracer_release(wex_plugin_state *state)
{
    pthread_mutex_lock(&state->lock);
    if (--state->ptracer_holders == 0)
        prctl(PR_SET_PTRACER, 0, 0, 0, 0);
    pthread_mutex_unlock(&state->lock);
}

/* ---- context ------------------------------------------------------- */

static int name_safe(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' ||
              *s == '.'))
            return 0;
    return 1;
}

/* "wex-<job_id>-d<rank>"; a job id too long or with other characters is
 * replaced by its hash, and a missing one by this process's pid. */
static void make_name(wex_transport_ctx *ctx, const char *job_id)
{
    unsigned long long rank = (unsigned long long)ctx->rank;
    int fits = 0;

    if (job_id != NULL && job_id[0] != '\0' && name_safe(job_id)) {
        int n = snprintf(ctx->name, sizeof(ctx->name), "wex-%s-d%llu",
                         job_id, rank);
        fits = n > 0 && (size_t)n <= SHM_NAME_MAX;
    }
    if (!fits && job_id != NULL && job_id[0] != '\0') {
        uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a */
        for (const char *p = job_id; *p; p++)
            hash = (hash ^ (unsigned char)*p) * 0x100000001b3ull;
        snprintf(ctx->name, sizeof(ctx->name), "wex-h%016llx-d%llu",
                 (unsigned long long)hash, rank);
    } else if (!fits) {
        uint64_t seq;
        pthread_mutex_lock(&ctx->state->lock);
        seq = ctx->state->anonymous_jobs++;
        pthread_mutex_unlock(&ctx->state->lock);
        snprintf(ctx->name, sizeof(ctx->name), "wex-p%ld.%llu-d%llu",
                 (long)getpid(), (unsigned long long)seq, rank);
    }
    ctx->name_len = strlen(ctx->name);
}

/* The server thread's view of the buffer table. */
static uint32_t lookup(void *arg, const shm_request *req, uint64_t *size_p,
                       int *fd_p)
{
    wex_transport_ctx *ctx = arg;
    uint32_t status = SHM_REPLY_UNKNOWN;

    pthread_mutex_lock(&ctx->lock);
    for (wex_transport_mem *m = ctx->mems; m != NULL; m = m->next) {
        if (m->id != req->buffer_id)
            continue;
        *size_p = m->bytes;
        if (m->kind != req->kind || m->bytes != req->size ||
            (uint64_t)(uintptr_t)m->address != req->address) {
            status = SHM_REPLY_MISMATCH;
        } else if (m->kind == SHM_KIND_MEMFD &&
                   (*fd_p = fcntl(m->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            WEX_WARN(ctx->host, "@%s: cannot pass buffer %llu: dup: %s",
                     ctx->name, (unsigned long long)m->id, strerror(errno));
            status = SHM_REPLY_FAILED;
        } else {
            status = SHM_REPLY_OK;
        }
        break;
    }
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

static void shm_ctx_destroy(wex_transport_ctx *ctx);

static wex_status shm_ctx_create(wex_plugin_state *state,
                                 const wex_transport_args *args,
                                 wex_transport_ctx **ctx_p)
{
    const wex_host_services *h = state->host;
    const char *job_id = NULL;
    int64_t timeout = CONNECT_TIMEOUT_DEFAULT_MS;
    wex_transport_ctx *ctx;
    wex_status st;

    if (args == NULL ||
        !WEX_HAS_MEMBER(wex_transport_args, options, args->struct_size))
        return FAIL(h, WEX_ERR_ABI, "transport args too small (%u bytes)",
                    args ? args->struct_size : 0u);
    if (WEX_HAS_MEMBER(wex_transport_args, job_id, args->struct_size))
        job_id = args->job_id;
    if (args->side != WEX_SIDE_SOURCE && args->side != WEX_SIDE_DESTINATION)
        return FAIL(h, WEX_ERR_INVALID, "side %u is neither source nor "
                    "destination", args->side);
    if (args->side == WEX_SIDE_DESTINATION && args->destination_ranks != 0 &&
        args->rank >= args->destination_ranks)
        return FAIL(h, WEX_ERR_INVALID,
                    "destination rank %llu is outside 0..%llu",
                    (unsigned long long)args->rank,
                    (unsigned long long)(args->destination_ranks - 1));
    if (args->options != NULL &&
        h->opt_type(args->options, "/connect_timeout_ms") !=
            WEX_JSON_MISSING &&
        (h->opt_get_i64(args->options, "/connect_timeout_ms", &timeout) !=
             WEX_OK ||
         timeout < 0 || timeout > CONNECT_TIMEOUT_MAX_MS))
        return FAIL(h, WEX_ERR_INVALID,
                    "/connect_timeout_ms: expected an integer in 0..%d",
                    CONNECT_TIMEOUT_MAX_MS);

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    ctx->state = state;
    ctx->host = h;
    ctx->side = args->side;
    ctx->rank = args->rank;
    ctx->connect_timeout_ms = (int)timeout;
    pthread_mutex_init(&ctx->lock, NULL);
    if (ctx->side == WEX_SIDE_DESTINATION) {
        make_name(ctx, job_id);
        st = shm_server_start(h, ctx->name, ctx->name_len, lookup, ctx,
                              &ctx->server);
        if (st != WEX_OK) {
            shm_ctx_destroy(ctx);
            return st;
        }
        WEX_DEBUG(h, "destination rank %llu serves its buffers on @%s",
                  (unsigned long long)ctx->rank, ctx->name);
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static void mem_free(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m->kind == SHM_KIND_MEMFD) {
        munmap(m->address, m->map_bytes);
        close(m->fd);
    } else if (ctx->side == WEX_SIDE_DESTINATION) {
        ptracer_release(ctx->state);
    }
    free(m);
}

static void peer_free(wex_transport_peer *p)
{
    if (p->map != NULL)
        munmap(p->map, p->bytes);
    if (p->pidfd >= 0)
        close(p->pidfd);
    free(p);
}

static void shm_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    /* First the server, so no thread reads the table any more. */
    shm_server_stop(ctx->server);
    while (ctx->peers != NULL) {
        wex_transport_peer *p = ctx->peers;
        ctx->peers = p->next;
        peer_free(p);
    }
    while (ctx->mems != NULL) {
        wex_transport_mem *m = ctx->mems;
        ctx->mems = m->next;
        mem_free(ctx, m);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---- memory -------------------------------------------------------- */

static void mem_link(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    pthread_mutex_lock(&ctx->lock);
    m->id = ++ctx->next_id;
    m->next = ctx->mems;
    if (ctx->mems != NULL)
        ctx->mems->prev = m;
    ctx->mems = m;
    pthread_mutex_unlock(&ctx->lock);
}

static wex_status shm_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                                void **address_p, wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_bytes = (bytes + page - 1) / page * page;
    wex_transport_mem *m;
    void *address;
    int fd, err;

    if (bytes == 0 || map_bytes < bytes || map_bytes > (uint64_t)INT64_MAX)
        return FAIL(h, WEX_ERR_INVALID, "mem_alloc of %llu bytes",
                    (unsigned long long)bytes);
    fd = memfd_create("wex-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return FAIL(h, WEX_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
    if (ftruncate(fd, (off_t)map_bytes) != 0) {
        err = errno;
        close(fd);
        return FAIL(h, err == ENOMEM || err == ENOSPC || err == EFBIG
                           ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                    "memfd of %llu bytes: ftruncate: %s",
                    (unsigned long long)map_bytes, strerror(err));
    }
    /* Reserve the pages now: running out later would be a SIGBUS in
     * whichever process touched the page first. */
    if (fallocate(fd, 0, 0, (off_t)map_bytes) != 0 && errno != EOPNOTSUPP &&
        errno != ENOSYS) {
        err = errno;
        close(fd);
        return FAIL(h, err == ENOSPC || err == ENOMEM ? WEX_ERR_NOMEM
                                                      : WEX_ERR_SYSTEM,
                    "cannot reserve %llu bytes of shared memory: %s",
                    (unsigned long long)map_bytes, strerror(err));
    }
    /* Nobody, sources included, may resize it under a mapping. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) !=
        0)
        WEX_DEBUG(h, "memfd seals: %s", strerror(errno));
    address = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) {
        err = errno;
        close(fd);
        return FAIL(h, err == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                    "mmap of a %llu-byte memfd: %s",
                    (unsigned long long)map_bytes, strerror(err));
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        munmap(address, map_bytes);
        close(fd);
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    }
    m->kind = SHM_KIND_MEMFD;
    m->fd = fd;
    m->address = address;
    m->bytes = bytes;
    m->map_bytes = map_bytes;
    mem_link(ctx, m);
    *address_p = address;
    *mem_p = m;
    return WEX_OK;
}

static wex_status shm_mem_register(wex_transport_ctx *ctx, void *address,
                                   uint64_t bytes, uint32_t memory_kind,
                                   wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    wex_transport_mem *m;

    if (memory_kind != WEX_MEMORY_HOST)
        return FAIL(h, WEX_ERR_UNSUPPORTED,
                    "memory kind %u: shm moves host memory only",
                    memory_kind);
    if (address == NULL || bytes == 0 ||
        (uint64_t)(uintptr_t)address + bytes < (uint64_t)(uintptr_t)address)
        return FAIL(h, WEX_ERR_INVALID, "mem_register of %p + %llu bytes",
                    address, (unsigned long long)bytes);
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    m->kind = SHM_KIND_PRIVATE;
    m->fd = -1;
    m->address = address;
    m->bytes = bytes;
    if (ctx->side == WEX_SIDE_DESTINATION)
        ptracer_hold(ctx->state);
    mem_link(ctx, m);
    *mem_p = m;
    return WEX_OK;
}

static void shm_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&ctx->lock);
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        ctx->mems = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    pthread_mutex_unlock(&ctx->lock);
    mem_free(ctx, m);
}

static wex_status shm_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m,
                              void *key, uint64_t *key_len)
{
    const wex_host_services *h = ctx->host;
    shm_key k;
    size_t len;

    if (ctx->server == NULL)
        return FAIL(h, WEX_ERR_UNSUPPORTED,
                    "mem_key on source rank %llu: only destination ranks "
                    "expose buffers",
                    (unsigned long long)ctx->rank);
    if (m == NULL || key == NULL || key_len == NULL)
        return FAIL(h, WEX_ERR_INVALID, "mem_key: NULL argument");
    memset(&k, 0, sizeof(k));
    k.kind = m->kind;
    k.pid = (uint32_t)getpid();
    k.rank = ctx->rank;
    k.buffer_id = m->id;
    k.size = m->bytes;
    k.address = (uint64_t)(uintptr_t)m->address;
    k.name_len = (uint32_t)ctx->name_len;
    memcpy(k.name, ctx->name, ctx->name_len);
    len = shm_key_encode(&k, key, (size_t)(*key_len < WEX_TRANSPORT_KEY_MAX
                                               ? *key_len
                                               : WEX_TRANSPORT_KEY_MAX));
    if (len == 0)
        return FAIL(h, WEX_ERR_INVALID,
                    "mem_key: a %llu-byte key buffer is too small (%u bytes "
                    "needed)",
                    (unsigned long long)*key_len,
                    SHM_KEY_HEADER + k.name_len);
    *key_len = len;
    return WEX_OK;
}

/* ---- peers --------------------------------------------------------- */

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
static wex_status vm_error(wex_transport_ctx *ctx,
                           const wex_transport_peer *p, int err,
                           uint64_t offset, uint64_t bytes)
{
    const wex_host_services *h = ctx->host;
    unsigned long long rank = (unsigned long long)p->rank;
    long pid = (long)p->pid;
    int scope = err == EPERM ? ptrace_scope() : -1;

    switch (err) {
    case ESRCH:
        return FAIL(h, WEX_ERR_PEER, "destination rank %llu (pid %ld) is gone",
                    rank, pid);
    case EPERM:
        if (scope >= 0)
            return FAIL(h, WEX_ERR_SYSTEM,
                        "process_vm_writev into destination rank %llu (pid "
                        "%ld) was refused (EPERM): no ptrace access; "
                        "kernel.yama.ptrace_scope is %d (0, or 1 with the "
                        "destination's PR_SET_PTRACER, allow it; 2 and 3 do "
                        "not), and both ranks must run as the same user with "
                        "a dumpable destination and no seccomp profile "
                        "forbidding it; mem_alloc buffers need no ptrace "
                        "access",
                        rank, pid, scope);
        return FAIL(h, WEX_ERR_SYSTEM,
                    "process_vm_writev into destination rank %llu (pid %ld) "
                    "was refused (EPERM): no ptrace access (no Yama LSM, so "
                    "kernel.yama.ptrace_scope plays no part: the ranks run "
                    "as different users, the destination is not dumpable, "
                    "or a seccomp profile forbids it); mem_alloc buffers "
                    "need no ptrace access",
                    rank, pid);
    case EFAULT:
        return FAIL(h, WEX_ERR_PEER,
                    "destination rank %llu (pid %ld): bytes %llu..%llu of its "
                    "registered buffer at 0x%llx are not mapped there any "
                    "more (or the source memory is unreadable)",
                    rank, pid, (unsigned long long)offset,
                    (unsigned long long)(offset + bytes),
                    (unsigned long long)p->address);
    case ENOSYS:
        return FAIL(h, WEX_ERR_UNSUPPORTED,
                    "process_vm_writev is not available here (kernel or "
                    "seccomp); destination buffers must come from mem_alloc");
    default:
        return FAIL(h, WEX_ERR_SYSTEM,
                    "process_vm_writev into destination rank %llu (pid %ld): "
                    "%s",
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
        return FAIL(h, WEX_ERR_SYSTEM, "fstat of destination rank %llu's "
                    "memfd: %s", (unsigned long long)p->rank,
                    strerror(errno));
    if ((uint64_t)st.st_size < p->bytes)
        return FAIL(h, WEX_ERR_PEER,
                    "destination rank %llu (pid %ld) passed a memfd of %lld "
                    "bytes for a %llu-byte buffer",
                    (unsigned long long)p->rank, (long)p->pid,
                    (long long)st.st_size, (unsigned long long)p->bytes);
    /* Populated now, so no step pays for page faults. */
    map = mmap(NULL, p->bytes, PROT_READ | PROT_WRITE,
               MAP_SHARED | MAP_POPULATE, fd, 0);
    if (map == MAP_FAILED)
        return FAIL(h, errno == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
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

static wex_status shm_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
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
    if ((st = wt_key_decoded(h, "shm", peer_rank, key_len, rc, why)) !=
            WEX_OK ||
        (st = wt_key_rank(h, k.rank, peer_rank)) != WEX_OK)
        return st;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
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
    if (st != WEX_OK) {
        peer_free(p);
        return st;
    }
    p->next = ctx->peers;
    if (ctx->peers != NULL)
        ctx->peers->prev = p;
    ctx->peers = p;
    *peer_p = p;
    return WEX_OK;
}

static void shm_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    if (p == NULL)
        return;
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        ctx->peers = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    peer_free(p);
}

/* ---- data path ----------------------------------------------------- */

static wex_status shm_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                          uint64_t offset, const void *src, uint64_t bytes)
{
    uint64_t done = 0;

    if (offset > p->bytes || bytes > p->bytes - offset)
        return FAIL(ctx->host, WEX_ERR_INVALID,
                    "put of %llu bytes at offset %llu overruns destination "
                    "rank %llu's %llu-byte buffer",
                    (unsigned long long)bytes, (unsigned long long)offset,
                    (unsigned long long)p->rank,
                    (unsigned long long)p->bytes);
    if (bytes == 0)
        return WEX_OK;
    if (p->kind == SHM_KIND_MEMFD) {
        /* A dead destination's pages live on in our mapping: harmless. */
        memcpy(p->map + offset, src, bytes);
        return WEX_OK;
    }
    if (pidfd_exited(p->pidfd))
        return vm_error(ctx, p, ESRCH, offset, bytes);
    while (done < bytes) {
        uint64_t n = bytes - done < VM_CHUNK ? bytes - done : VM_CHUNK;
        struct iovec local = {(char *)(uintptr_t)src + done, (size_t)n};
        struct iovec remote = {
            (void *)(uintptr_t)(p->address + offset + done), (size_t)n};
        ssize_t r = process_vm_writev(p->pid, &local, 1, &remote, 1, 0);

        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) /* 0: nothing moved, the first page faulted */
            return vm_error(ctx, p, r < 0 ? errno : EFAULT, offset + done,
                            n);
        done += (uint64_t)r; /* partial: resume where it stopped */
    }
    return WEX_OK;
}

static wex_status shm_flush(wex_transport_ctx *ctx)
{
    (void)ctx;
    /* Every put has completed: memcpy'd bytes sit in the shared pages and
     * process_vm_writev returns once copied. The fence orders them before
     * whatever store tells the destination they are there. */
    atomic_thread_fence(memory_order_release);
    return WEX_OK;
}

/* ---- descriptor ---------------------------------------------------- */

static const wex_transport_ops shm_ops = {
    sizeof(wex_transport_ops),
    0,
    WEX_TRANSPORT_CAP_HOST_MEMORY | WEX_TRANSPORT_CAP_ONE_SIDED |
        WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_ALLOC,
    shm_ctx_create,
    shm_ctx_destroy,
    shm_mem_alloc,
    shm_mem_register,
    shm_mem_deregister,
    shm_mem_key,
    shm_peer_attach,
    shm_peer_detach,
    shm_put,
    shm_flush,
    NULL, /* recv: one-sided */
};

static const wex_plugin_desc shm_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_TRANSPORT,
    WEX_PLUGIN_THREAD_PER_CTX, "shm", "0.1.0", shm_init, shm_fini, &shm_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out)
{
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
    out->abi_version = WEX_ABI_1_0;
    out->desc = &shm_desc;
    return WEX_OK;
}
