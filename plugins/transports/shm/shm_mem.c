/*
 * Destination memory: sealed memfds the sources map (mem_alloc), caller
 * memory they write with process_vm_writev (mem_register), and the keys
 * that name either. Registered memory is what needs the ptracer
 * exception shm.c describes, counted here per process.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "shm_internal.h"

/* ---- the ptracer exception ----------------------------------------- */

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

/* ---- memory -------------------------------------------------------- */

/* Numbers `m` and puts it where the server thread finds it. */
static void mem_link(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    pthread_mutex_lock(&ctx->lock);
    m->id = ++ctx->next_id;
    wt_list_push(&ctx->mems, &m->link);
    pthread_mutex_unlock(&ctx->lock);
}

wex_status shm_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                         void **address_p, wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_bytes = (bytes + page - 1) / page * page;
    wex_transport_mem *m;
    void *address;
    int fd, err;

    if (bytes == 0 || map_bytes < bytes || map_bytes > (uint64_t)INT64_MAX)
        return WP_FAIL(h, WEX_ERR_INVALID, "mem_alloc of %llu bytes",
                       (unsigned long long)bytes);
    fd = memfd_create("wex-shm", MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (fd < 0)
        return WP_FAIL(h, WEX_ERR_SYSTEM, "memfd_create: %s", strerror(errno));
    if (ftruncate(fd, (off_t)map_bytes) != 0) {
        err = errno;
        close(fd);
        return WP_FAIL(h,
                       err == ENOMEM || err == ENOSPC || err == EFBIG
                           ? WEX_ERR_NOMEM
                           : WEX_ERR_SYSTEM,
                       "memfd of %llu bytes: ftruncate: %s",
                       (unsigned long long)map_bytes, strerror(err));
    }
    /* Reserve the pages now: running out later would be a SIGBUS in
     * whichever process touched the page first. */
    if (fallocate(fd, 0, 0, (off_t)map_bytes) != 0 && errno != EOPNOTSUPP &&
        errno != ENOSYS) {
        err = errno;
        close(fd);
        return WP_FAIL(
            h, err == ENOSPC || err == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
            "cannot reserve %llu bytes of shared memory: %s",
            (unsigned long long)map_bytes, strerror(err));
    }
    /* Nobody, sources included, may resize it under a mapping. */
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0)
        WEX_DEBUG(h, "memfd seals: %s", strerror(errno));
    address = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (address == MAP_FAILED) {
        err = errno;
        close(fd);
        return WP_FAIL(h, err == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                       "mmap of a %llu-byte memfd: %s",
                       (unsigned long long)map_bytes, strerror(err));
    }
    m = calloc(1, sizeof(*m));
    if (m == NULL) {
        munmap(address, map_bytes);
        close(fd);
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
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

wex_status shm_mem_register(wex_transport_ctx *ctx, void *address,
                            uint64_t bytes, uint32_t memory_kind,
                            wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    wex_status st = wt_check_register(h, "shm", WEX_MEMORY_HOST, address, bytes,
                                      memory_kind);
    wex_transport_mem *m;

    if (st != WEX_OK)
        return st;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
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

void shm_mem_free(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m->kind == SHM_KIND_MEMFD) {
        munmap(m->address, m->map_bytes);
        close(m->fd);
    } else if (ctx->side == WEX_SIDE_DESTINATION) {
        ptracer_release(ctx->state);
    }
    free(m);
}

void shm_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m == NULL)
        return;
    wt_list_unlink_locked(&ctx->lock, &ctx->mems, &m->link);
    shm_mem_free(ctx, m);
}

wex_status shm_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m, void *key,
                       uint64_t *key_len)
{
    const wex_host_services *h = ctx->host;
    wex_status st = wt_check_mem_key(h, ctx->side, ctx->rank, m, key, key_len);
    shm_key k;
    size_t len;

    if (st != WEX_OK)
        return st;
    memset(&k, 0, sizeof(k));
    k.kind = m->kind;
    k.pid = (uint32_t)getpid();
    k.rank = ctx->rank;
    k.buffer_id = m->id;
    k.size = m->bytes;
    k.address = (uint64_t)(uintptr_t)m->address;
    k.name_len = (uint32_t)ctx->name_len;
    memcpy(k.name, ctx->name, ctx->name_len);
    len = shm_key_encode(&k, key,
                         (size_t)(*key_len < WEX_TRANSPORT_KEY_MAX
                                      ? *key_len
                                      : WEX_TRANSPORT_KEY_MAX));
    if (len == 0)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "mem_key: a %llu-byte key buffer is too small (%u bytes "
                       "needed)",
                       (unsigned long long)*key_len,
                       SHM_KEY_HEADER + k.name_len);
    *key_len = len;
    return WEX_OK;
}
