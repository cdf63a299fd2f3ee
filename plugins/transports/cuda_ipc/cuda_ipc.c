/*
 * The `cuda-ipc` transport: trainer and inference processes on the same
 * GPUs (the colocated profile), device to device with no host copy.
 *
 * A destination registers device buffers; each buffer's allocation is
 * found (cuMemGetAddressRange) and exported once per job with
 * cudaIpcGetMemHandle, whatever the number of tensors inside it. A source
 * opens each peer allocation once (cudaIpcOpenMemHandle) and every put is
 * a cudaMemcpyAsync straight into the destination's live buffer on this
 * context's stream, except that the equal rows of a strided box at a
 * constant pitch go as one cudaMemcpy2DAsync (row_batch.h): a put may
 * wait in the batch until the next one that does not continue it, or
 * the flush. Flush records an event and polls it against a
 * deadline, so a wedged copy is a timeout, never a hang. A destination
 * that dies leaves its memory mapped here until detach: later puts land
 * harmlessly.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cuda_runtime_api.h>

#include <wex/plugin.h>

#include "cuda_ipc_allocs.h"
#include "cuda_ipc_key.h"
#include "cuda_device.h"
#include "plugin_fail.h"
#include "plugin_options.h"
#include "plugin_state.h"
#include "row_batch.h"
#include "transport_common.h"

#define FLUSH_TIMEOUT_DEFAULT_MS 60000
#define TIMEOUT_MAX_MS 3600000

/* cuMemGetAddressRange (driver API v2), fetched through the runtime so
 * the plugin needs no libcuda at link time. */
typedef int (*address_range_fn)(unsigned long long *base, size_t *size,
                                unsigned long long ptr);

struct wex_transport_mem {
    ipc_alloc *alloc;
    uint64_t address, bytes;
};

struct wex_transport_peer {
    ipc_alloc *alloc;
    unsigned char *dst; /* the buffer, in our mapping */
    uint64_t rank, bytes;
};

struct wex_transport_ctx {
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank;
    int device;
    int64_t flush_timeout_ms;
    cudaStream_t stream;
    cudaEvent_t done;
    address_range_fn address_range;
    ipc_allocs exported, opened;
    wt_rows rows; /* puts not issued yet */
};

static wex_status cuda_fail(const wex_host_services *h, cudaError_t e,
                            const char *what)
{
    return WP_FAIL(
        h, e == cudaErrorMemoryAllocation ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
        "%s: %s", what, cudaGetErrorString(e));
}

static void ipc_ctx_destroy(wex_transport_ctx *ctx);

static wex_status ipc_ctx_create(wex_plugin_state *state,
                                 const wex_transport_args *args,
                                 wex_transport_ctx **ctx_p)
{
    const wex_host_services *h = state->host;
    int64_t timeout = FLUSH_TIMEOUT_DEFAULT_MS;
    enum cudaDriverEntryPointQueryResult found;
    wex_transport_ctx *ctx;
    cudaError_t e;
    int device = 0;
    wex_status st;

    st = wt_check_args(h, args);
    if (st == WEX_OK)
        st = wp_option_i64(h, args->options, "/flush_timeout_ms", 1,
                           TIMEOUT_MAX_MS, &timeout);
    if (st == WEX_OK)
        st = wt_cuda_device(h, args->options, &device);
    if (st != WEX_OK)
        return st;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    ctx->host = h;
    ctx->side = args->side;
    ctx->rank = args->rank;
    ctx->flush_timeout_ms = timeout;
    ctx->device = device;
    e = cudaSetDevice(device);
    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming);
    if (e == cudaSuccess)
        e = cudaGetDriverEntryPointByVersion("cuMemGetAddressRange",
                                             (void **)&ctx->address_range,
                                             12000, cudaEnableDefault, &found);
    if (e == cudaSuccess && found != cudaDriverEntryPointSuccess)
        e = cudaErrorSymbolNotFound;
    if (e != cudaSuccess) {
        st = cuda_fail(h, e, "setting up the CUDA stream");
        ipc_ctx_destroy(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static void ipc_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    if (ctx->stream != NULL)
        cudaStreamSynchronize(ctx->stream);
    while (ctx->opened.head != NULL) {
        ipc_alloc *a = ctx->opened.head;
        ctx->opened.head = a->next;
        cudaIpcCloseMemHandle(a->mapped);
        free(a);
    }
    while (ctx->exported.head != NULL) {
        ipc_alloc *a = ctx->exported.head;
        ctx->exported.head = a->next;
        free(a);
    }
    if (ctx->done != NULL)
        cudaEventDestroy(ctx->done);
    if (ctx->stream != NULL)
        cudaStreamDestroy(ctx->stream);
    free(ctx);
}

/* ---- memory -------------------------------------------------------- */

static wex_status ipc_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                                void **address_p, wex_transport_mem **mem_p)
{
    (void)bytes;
    (void)address_p;
    (void)mem_p;
    return WP_FAIL(ctx->host, WEX_ERR_UNSUPPORTED,
                   "cuda-ipc does not allocate: register device memory (wex "
                   "allocates it with cudaMalloc)");
}

/* The allocation holding the buffer, exported once. */
static wex_status export_alloc(wex_transport_ctx *ctx, uint64_t address,
                               uint64_t bytes, ipc_alloc **alloc_p)
{
    const wex_host_services *h = ctx->host;
    unsigned long long base = 0;
    cudaIpcMemHandle_t handle;
    size_t size = 0;
    ipc_alloc *a;
    cudaError_t e;

    a = ipc_allocs_containing(&ctx->exported, 0, address, bytes);
    if (a != NULL) {
        a->refs++;
        *alloc_p = a;
        return WEX_OK;
    }
    if (ctx->address_range(&base, &size, address) != 0)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "0x%llx is not device memory of a "
                       "CUDA allocation",
                       (unsigned long long)address);
    if (address + bytes > base + size)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "buffer 0x%llx + %llu bytes runs past its allocation "
                       "0x%llx + %zu bytes",
                       (unsigned long long)address, (unsigned long long)bytes,
                       base, size);
    e = cudaIpcGetMemHandle(&handle, (void *)(uintptr_t)base);
    if (e != cudaSuccess)
        return cuda_fail(h, e,
                         "cudaIpcGetMemHandle (memory from cudaMalloc "
                         "can be shared; from cudaMallocAsync pools or VMM "
                         "it cannot)");
    a = ipc_allocs_add(&ctx->exported, 0, base, size);
    if (a == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    memcpy(a->handle, &handle, sizeof(a->handle));
    *alloc_p = a;
    return WEX_OK;
}

static wex_status ipc_mem_register(wex_transport_ctx *ctx, void *address,
                                   uint64_t bytes, uint32_t memory_kind,
                                   wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    wex_status st = wt_check_register(h, "cuda-ipc", WEX_MEMORY_CUDA, address,
                                      bytes, memory_kind);
    wex_transport_mem *m;

    if (st != WEX_OK)
        return st;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    m->address = (uint64_t)(uintptr_t)address;
    m->bytes = bytes;
    st = export_alloc(ctx, m->address, bytes, &m->alloc);
    if (st != WEX_OK) {
        free(m);
        return st;
    }
    *mem_p = m;
    return WEX_OK;
}

static void ipc_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m == NULL)
        return;
    if (ipc_allocs_release(&ctx->exported, m->alloc))
        free(m->alloc);
    free(m);
}

static wex_status ipc_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m,
                              void *key, uint64_t *key_len)
{
    cuda_ipc_key k;
    size_t len;

    if (m == NULL || key == NULL || key_len == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID, "mem_key: NULL argument");
    memset(&k, 0, sizeof(k));
    k.pid = (uint32_t)getpid();
    k.device = (uint32_t)ctx->device;
    k.rank = ctx->rank;
    k.alloc_base = m->alloc->base;
    k.alloc_size = m->alloc->size;
    k.offset = m->address - m->alloc->base;
    k.bytes = m->bytes;
    memcpy(k.handle, m->alloc->handle, sizeof(k.handle));
    len = cuda_ipc_key_encode(&k, key, (size_t)*key_len);
    if (len == 0)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "mem_key: a %llu-byte key "
                       "buffer is too small (%u bytes needed)",
                       (unsigned long long)*key_len, CUDA_IPC_KEY_BYTES);
    *key_len = len;
    return WEX_OK;
}

/* ---- peers --------------------------------------------------------- */

static wex_status open_alloc(wex_transport_ctx *ctx, const cuda_ipc_key *k,
                             ipc_alloc **alloc_p)
{
    const wex_host_services *h = ctx->host;
    cudaIpcMemHandle_t handle;
    ipc_alloc *a = ipc_allocs_find(&ctx->opened, k->pid, k->alloc_base);
    void *mapped = NULL;
    cudaError_t e;

    if (a != NULL) {
        a->refs++;
        *alloc_p = a;
        return WEX_OK;
    }
    if (k->pid == (uint32_t)getpid())
        return WP_FAIL(h, WEX_ERR_UNSUPPORTED,
                       "destination rank %llu is this "
                       "process: CUDA IPC shares memory between processes only",
                       (unsigned long long)k->rank);
    memcpy(&handle, k->handle, sizeof(handle));
    e = cudaIpcOpenMemHandle(&mapped, handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess)
        return WP_FAIL(h, WEX_ERR_PEER,
                       "opening destination rank %llu's (pid "
                       "%u, device %u) memory: cudaIpcOpenMemHandle: %s",
                       (unsigned long long)k->rank, k->pid, k->device,
                       cudaGetErrorString(e));
    a = ipc_allocs_add(&ctx->opened, k->pid, k->alloc_base, k->alloc_size);
    if (a == NULL) {
        cudaIpcCloseMemHandle(mapped);
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    }
    a->mapped = mapped;
    *alloc_p = a;
    return WEX_OK;
}

static wex_status ipc_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                                  const void *key, uint64_t key_len,
                                  wex_transport_peer **peer_p)
{
    const wex_host_services *h = ctx->host;
    wex_transport_peer *p;
    cuda_ipc_key k;
    char why[160];
    wex_status st;
    int rc = -1;

    if (key_len <= WEX_TRANSPORT_KEY_MAX)
        rc = cuda_ipc_key_decode(key, (size_t)key_len, &k, why, sizeof(why));
    st = wt_key_check(h, "cuda-ipc", peer_rank, key_len, rc, why, &k.rank);
    if (st != WEX_OK)
        return st;
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    st = open_alloc(ctx, &k, &p->alloc);
    if (st != WEX_OK) {
        free(p);
        return st;
    }
    p->dst = (unsigned char *)p->alloc->mapped + k.offset;
    p->rank = k.rank;
    p->bytes = k.bytes;
    *peer_p = p;
    return WEX_OK;
}

static void ipc_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    if (p == NULL)
        return;
    if (ctx->rows.height > 0 && ctx->rows.peer == p) {
        wt_rows dropped; /* no flush asked for them; p goes */
        wt_rows_take(&ctx->rows, &dropped);
    }
    if (ipc_allocs_release(&ctx->opened, p->alloc)) {
        /* no copy may still target the mapping */
        cudaStreamSynchronize(ctx->stream);
        cudaIpcCloseMemHandle(p->alloc->mapped);
        free(p->alloc);
    }
    free(p);
}

/* ---- data path ----------------------------------------------------- */

/* Issues a batch of rows: one copy, or one 2-D copy. Default: the source
 * may be device or (pinned) host memory. */
static wex_status issue(wex_transport_ctx *ctx, const wt_rows *r)
{
    const wex_transport_peer *p = r->peer;
    cudaError_t e;

    if (r->height == 0)
        return WEX_OK;
    if (r->height == 1)
        e = cudaMemcpyAsync(p->dst + r->dst, r->src, r->width,
                            cudaMemcpyDefault, ctx->stream);
    else
        e = cudaMemcpy2DAsync(p->dst + r->dst, r->dst_pitch, r->src,
                              r->src_pitch, r->width, r->height,
                              cudaMemcpyDefault, ctx->stream);
    if (e != cudaSuccess)
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM,
                       "copy of %llu rows of %llu "
                       "bytes into destination rank %llu: %s",
                       (unsigned long long)r->height,
                       (unsigned long long)r->width,
                       (unsigned long long)p->rank, cudaGetErrorString(e));
    return WEX_OK;
}

static wex_status ipc_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                          uint64_t offset, const void *src, uint64_t bytes)
{
    wex_status st = wt_check_put(ctx->host, p->rank, p->bytes, offset, bytes);
    wt_rows ready;

    if (st != WEX_OK)
        return st;
    if (bytes == 0)
        return WEX_OK;
    wt_rows_put(&ctx->rows, p, offset, src, bytes, &ready);
    return issue(ctx, &ready);
}

static wex_status ipc_flush(wex_transport_ctx *ctx)
{
    double deadline = wt_now_ms() + (double)ctx->flush_timeout_ms;
    struct timespec nap = {0, 20000};
    wt_rows ready;
    cudaError_t e;
    wex_status st;

    wt_rows_take(&ctx->rows, &ready);
    st = issue(ctx, &ready);
    if (st != WEX_OK)
        return st;
    e = cudaEventRecord(ctx->done, ctx->stream);

    while (e == cudaSuccess &&
           (e = cudaEventQuery(ctx->done)) == cudaErrorNotReady) {
        if (wt_now_ms() > deadline)
            return WP_FAIL(ctx->host, WEX_ERR_TIMEOUT,
                           "device copies did not "
                           "complete within flush_timeout_ms (%lld ms)",
                           (long long)ctx->flush_timeout_ms);
        nanosleep(&nap, NULL);
        e = cudaSuccess;
    }
    if (e != cudaSuccess)
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM, "device copies failed: %s",
                       cudaGetErrorString(e));
    return WEX_OK;
}

/* ---- descriptor ---------------------------------------------------- */

static const wex_transport_ops ipc_ops = {
    .struct_size = sizeof(wex_transport_ops),
    .caps = WEX_TRANSPORT_CAP_CUDA_MEMORY | WEX_TRANSPORT_CAP_ONE_SIDED |
            WEX_TRANSPORT_CAP_SAME_HOST,
    .ctx_create = ipc_ctx_create,
    .ctx_destroy = ipc_ctx_destroy,
    .mem_alloc = ipc_mem_alloc,
    .mem_register = ipc_mem_register,
    .mem_deregister = ipc_mem_deregister,
    .mem_key = ipc_mem_key,
    .peer_attach = ipc_peer_attach,
    .peer_detach = ipc_peer_detach,
    .put = ipc_put,
    .flush = ipc_flush,
    .recv = NULL, /* one-sided */
};

static const wex_plugin_desc ipc_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_0,
    .kind = WEX_KIND_TRANSPORT,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "cuda-ipc",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &ipc_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_0, ipc_desc)
