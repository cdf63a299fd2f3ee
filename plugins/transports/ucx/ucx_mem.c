/*
 * Destination memory: buffers mapped with ucp_mem_map (fresh pages, UCX's
 * own shared memory, or the caller's) and the keys that let sources
 * write into them.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ucx_internal.h"

/* ---- memory -------------------------------------------------------- */

/* Puts `m` on the context's list, which ctx_destroy empties. */
static void link_mem(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    pthread_mutex_lock(&ctx->lock);
    wt_list_push(&ctx->mems, &m->link);
    pthread_mutex_unlock(&ctx->lock);
}

static wex_status map_memory(wex_transport_ctx *ctx, void *address,
                             uint64_t bytes, ucp_mem_h *memh_p)
{
    ucp_mem_map_params_t mp;
    ucs_status_t us;

    memset(&mp, 0, sizeof(mp));
    mp.field_mask =
        UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = address;
    mp.length = (size_t)bytes;
    pthread_mutex_lock(&ctx->lock);
    us = ucp_mem_map(ctx->context, &mp, memh_p);
    pthread_mutex_unlock(&ctx->lock);
    if (us != UCS_OK)
        return WP_FAIL(
            ctx->host, us == UCS_ERR_NO_MEMORY ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
            "ucp_mem_map of %llu bytes at %p: %s", (unsigned long long)bytes,
            address, ucs_status_string(us));
    return WEX_OK;
}

static wex_status mem_new(wex_transport_ctx *ctx, void *address, uint64_t bytes,
                          uint64_t map_bytes, wex_transport_mem **mem_p)
{
    wex_transport_mem *m = calloc(1, sizeof(*m));
    wex_status st;

    if (m == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
    st = map_memory(ctx, address, bytes, &m->memh);
    if (st != WEX_OK) {
        free(m);
        return st;
    }
    m->address = address;
    m->bytes = bytes;
    m->map_bytes = map_bytes;
    link_mem(ctx, m);
    *mem_p = m;
    return WEX_OK;
}

/* Memory UCX allocates itself (UCX_ALLOC_PRIO: SysV or POSIX shared
 * memory first), which its shared-memory transports can write into
 * directly, where caller memory needs puts emulated over active messages.
 * Those transports only serve endpoints without peer error handling, so
 * only error_handling "none" asks for it. NULL when UCX cannot oblige
 * with zeroed, page-aligned memory. */
static wex_transport_mem *ucx_allocated(wex_transport_ctx *ctx, uint64_t bytes,
                                        uint64_t page)
{
    ucp_mem_map_params_t mp;
    ucp_mem_attr_t attr;
    wex_transport_mem *m = calloc(1, sizeof(*m));
    ucs_status_t us;

    if (m == NULL)
        return NULL;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = NULL;
    mp.length = (size_t)bytes;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    pthread_mutex_lock(&ctx->lock);
    us = ucp_mem_map(ctx->context, &mp, &m->memh);
    if (us == UCS_OK &&
        (ucp_mem_query(m->memh, &attr) != UCS_OK || attr.length < bytes ||
         (uintptr_t)attr.address % page != 0)) {
        ucp_mem_unmap(ctx->context, m->memh);
        us = UCS_ERR_UNSUPPORTED;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (us != UCS_OK) {
        WEX_DEBUG(ctx->host,
                  "UCX could not allocate %llu bytes (%s): "
                  "using anonymous memory",
                  (unsigned long long)bytes, ucs_status_string(us));
        free(m);
        return NULL;
    }
    /* The last of UCX's methods is the heap, which is not zeroed. */
    memset(attr.address, 0, (size_t)bytes);
    m->address = attr.address;
    m->bytes = bytes;
    m->ucx_owned = 1;
    link_mem(ctx, m);
    return m;
}

wex_status ucx_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                         void **address_p, wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_bytes = (bytes + page - 1) / page * page;
    void *address;
    wex_status st;

    if (bytes == 0 || map_bytes < bytes || map_bytes > (uint64_t)SIZE_MAX / 2)
        return WP_FAIL(h, WEX_ERR_INVALID, "mem_alloc of %llu bytes",
                       (unsigned long long)bytes);
    if (ctx->err_mode == UCP_ERR_HANDLING_MODE_NONE &&
        (*mem_p = ucx_allocated(ctx, bytes, page)) != NULL) {
        *address_p = (*mem_p)->address;
        return WEX_OK;
    }
    /* Fresh anonymous pages: zeroed, page aligned, faulted in now so the
     * first step does not pay for it (UCX pins them itself where a
     * transport needs it). */
    address = mmap(NULL, (size_t)map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (address == MAP_FAILED)
        return WP_FAIL(h, errno == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                       "mmap of %llu bytes: %s", (unsigned long long)map_bytes,
                       strerror(errno));
    st = mem_new(ctx, address, bytes, map_bytes, mem_p);
    if (st != WEX_OK) {
        munmap(address, (size_t)map_bytes);
        return st;
    }
    *address_p = address;
    return WEX_OK;
}

wex_status ucx_mem_register(wex_transport_ctx *ctx, void *address,
                            uint64_t bytes, uint32_t memory_kind,
                            wex_transport_mem **mem_p)
{
    wex_status st = wt_check_register(ctx->host, "ucx", WEX_MEMORY_HOST,
                                      address, bytes, memory_kind);

    if (st != WEX_OK)
        return st;
    return mem_new(ctx, address, bytes, 0, mem_p);
}

void ucx_mem_free(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    pthread_mutex_lock(&ctx->lock); /* against the progress thread */
    ucp_mem_unmap(ctx->context, m->memh);
    pthread_mutex_unlock(&ctx->lock);
    if (m->map_bytes != 0)
        munmap(m->address, (size_t)m->map_bytes);
    free(m);
}

int ucx_mem_rekey(wex_transport_ctx *ctx)
{
    int n = 0;

    for (wt_link *l = ctx->mems; l != NULL; l = l->next) {
        wex_transport_mem *m = WT_MEM_OF(l);
        ucp_mem_h fresh;

        if (m->ucx_owned)
            continue;
        if (map_memory(ctx, m->address, m->bytes, &fresh) != WEX_OK)
            return -1;
        pthread_mutex_lock(&ctx->lock);
        ucp_mem_unmap(ctx->context, m->memh);
        m->memh = fresh;
        pthread_mutex_unlock(&ctx->lock);
        n++;
    }
    return n;
}

ucp_mem_h ucx_source_memh(wex_transport_ctx *ctx, const void *src,
                          uint64_t bytes)
{
    uintptr_t at = (uintptr_t)src;
    const wex_transport_mem *m = ctx->last_source_mem;

    /* A source puts from one tensor run after run: the last one first.
     * Only the source's own thread walks or changes a source's list. */
    if (m != NULL && at >= (uintptr_t)m->address &&
        at + bytes <= (uintptr_t)m->address + m->bytes)
        return m->memh;
    for (wt_link *l = ctx->mems; l != NULL; l = l->next) {
        m = (const wex_transport_mem *)l;
        if (at >= (uintptr_t)m->address &&
            at + bytes <= (uintptr_t)m->address + m->bytes) {
            ctx->last_source_mem = m;
            return m->memh;
        }
    }
    return NULL;
}

void ucx_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m == NULL)
        return;
    if (ctx->last_source_mem == m)
        ctx->last_source_mem = NULL;
    wt_list_unlink_locked(&ctx->lock, &ctx->mems, &m->link);
    ucx_mem_free(ctx, m);
}

wex_status ucx_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m, void *key,
                       uint64_t *key_len)
{
    const wex_host_services *h = ctx->host;
    wex_status st = wt_check_mem_key(h, ctx->side, ctx->rank, m, key, key_len);
    void *rkey = NULL;
    size_t rkey_len = 0, len, cap;
    ucs_status_t us;
    ucx_key k;

    if (st != WEX_OK)
        return st;
    pthread_mutex_lock(&ctx->lock);
    us = ucp_rkey_pack(ctx->context, m->memh, &rkey, &rkey_len);
    pthread_mutex_unlock(&ctx->lock);
    if (us != UCS_OK)
        return WP_FAIL(h, WEX_ERR_SYSTEM, "ucp_rkey_pack: %s",
                       ucs_status_string(us));
    memset(&k, 0, sizeof(k));
    k.pid = (uint32_t)getpid();
    k.rank = ctx->rank;
    k.address = (uint64_t)(uintptr_t)m->address;
    k.size = m->bytes;
    k.worker_address = (const uint8_t *)ctx->address;
    k.worker_address_len = (uint32_t)ctx->address_len;
    k.rkey = rkey;
    k.rkey_len = (uint32_t)rkey_len;
    k.host_len = (uint32_t)strlen(ctx->host_name);
    memcpy(k.host, ctx->host_name, k.host_len);
    cap = (size_t)(*key_len < WEX_TRANSPORT_KEY_MAX ? *key_len
                                                    : WEX_TRANSPORT_KEY_MAX);
    len = ucx_key_encode(&k, key, cap);
    ucp_rkey_buffer_release(rkey);
    if (len == 0)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "mem_key: a %llu-byte key buffer is too small (%zu "
                       "bytes needed: a %zu-byte worker address, a %zu-byte "
                       "rkey)",
                       (unsigned long long)*key_len, ucx_key_length(&k),
                       ctx->address_len, rkey_len);
    *key_len = len;
    return WEX_OK;
}
