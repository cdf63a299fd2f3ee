/*
 * The `nccl` transport: GPUs on different ranks or hosts (the
 * disaggregated profile), with NCCL's matched sends and receives.
 *
 * Communicators: each destination rank owns one, with the source ranks
 * that send to it (it learns them from wex_transport_args.peer_ranks):
 * it draws the unique id and starts joining as rank 0 in ctx_create, and
 * its memory keys carry the id and the member list (nccl_key.h), so a
 * source joins when it attaches the destination's first buffer. One
 * communicator per destination keeps the bootstrap inside the existing
 * key exchange, at the price of one communicator per (source,
 * destination it feeds) on the source side.
 *
 * Every communicator is non-blocking (ncclCommInitRankConfig with
 * blocking = 0): puts and recvs are queued, and flush issues them as one
 * group in the order they came (the plan's order, the same on both
 * sides), then polls ncclCommGetAsyncError and an event against a
 * deadline. A peer that died or never came is a timeout, after which
 * every communicator of the context is aborted (ncclCommAbort): an error,
 * never a hang.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <wex/plugin.h>

#include "cuda_device.h"
#include "nccl_key.h"
#include "transport_common.h"
#include "transport_state.h"

#define TIMEOUT_DEFAULT_MS 60000
#define TIMEOUT_MAX_MS 3600000

/* A communicator, and which destination rank owns it. */
typedef struct comm {
    struct comm *next;
    ncclComm_t nccl;
    uint64_t owner;
    int rank, size;
    int ready; /* init completed */
} comm;

struct wex_transport_mem {
    unsigned char *address;
    uint64_t bytes;
};

struct wex_transport_peer {
    comm *c;
    uint64_t rank, bytes;
};

/* One queued send or receive. */
typedef struct transfer {
    comm *c;
    int peer; /* rank in c */
    int send;
    void *ptr;
    uint64_t bytes;
} transfer;

struct wex_transport_ctx {
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank, source_ranks;
    uint64_t *peers; /* other-side ranks, ascending */
    uint64_t peer_count;
    int device;
    int64_t timeout_ms;
    int broken; /* communicators aborted: every call fails */
    cudaStream_t stream;
    cudaEvent_t done;
    ncclUniqueId id; /* destination: its communicator's */
    comm *comms;     /* destination: its own; source: one per destination */
    transfer *queue; /* kept across steps: a step allocates nothing new */
    size_t queued, queue_cap;
};

static void nap(void)
{
    struct timespec ts = {0, 50000};

    nanosleep(&ts, NULL);
}

/* ---- communicators ------------------------------------------------- */

static wex_status comm_start(wex_transport_ctx *ctx, uint64_t owner,
                             const ncclUniqueId *id, int rank, int size,
                             comm **comm_p)
{
    const wex_host_services *h = ctx->host;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    comm *c = calloc(1, sizeof(*c));
    ncclResult_t r;

    if (c == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    config.blocking = 0;
    cudaSetDevice(ctx->device);
    r = ncclCommInitRankConfig(&c->nccl, size, *id, rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (c->nccl != NULL)
            ncclCommAbort(c->nccl);
        free(c);
        return FAIL(h, WEX_ERR_SYSTEM, "joining destination rank %llu's "
                    "communicator as rank %d of %d: %s",
                    (unsigned long long)owner, rank, size,
                    ncclGetErrorString(r));
    }
    c->owner = owner;
    c->rank = rank;
    c->size = size;
    c->next = ctx->comms;
    ctx->comms = c;
    *comm_p = c;
    return WEX_OK;
}

/* Aborts every communicator: what is in flight stops, and no later call
 * touches them. */
static void abort_all(wex_transport_ctx *ctx)
{
    for (comm *c = ctx->comms; c != NULL; c = c->next)
        if (c->nccl != NULL) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
        }
    ctx->broken = 1;
}

static const char *who(const wex_transport_ctx *ctx, const comm *c,
                       char *buf, size_t cap)
{
    if (ctx->side == WEX_SIDE_SOURCE)
        snprintf(buf, cap, "destination rank %llu",
                 (unsigned long long)c->owner);
    else
        snprintf(buf, cap, "source ranks of destination rank %llu",
                 (unsigned long long)c->owner);
    return buf;
}

/* Polls every communicator until none is in progress; an error or the
 * deadline aborts them all. `what` names the wait in messages. */
static wex_status settle(wex_transport_ctx *ctx, double deadline,
                         const char *what)
{
    const wex_host_services *h = ctx->host;
    char name[96];

    for (comm *c = ctx->comms; c != NULL; c = c->next) {
        ncclResult_t state = ncclInProgress;
        while (ncclCommGetAsyncError(c->nccl, &state) == ncclSuccess &&
               state == ncclInProgress && wt_now_ms() < deadline)
            nap();
        if (state == ncclSuccess) {
            c->ready = 1;
            continue;
        }
        who(ctx, c, name, sizeof(name));
        abort_all(ctx);
        if (state == ncclInProgress)
            return FAIL(h, WEX_ERR_TIMEOUT, "%s: %s did not answer within "
                        "timeout_ms (%lld ms); communicators aborted", what,
                        name, (long long)ctx->timeout_ms);
        return FAIL(h, WEX_ERR_PEER, "%s with %s: %s; communicators aborted",
                    what, name, ncclGetErrorString(state));
    }
    return WEX_OK;
}

/* ---- context ------------------------------------------------------- */

static void nccl_ctx_destroy(wex_transport_ctx *ctx);

static wex_status ctx_setup(wex_transport_ctx *ctx)
{
    const wex_host_services *h = ctx->host;
    cudaError_t e = cudaSetDevice(ctx->device);
    ncclResult_t r;
    comm *c;

    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return FAIL(h, WEX_ERR_SYSTEM, "setting up the CUDA stream: %s",
                    cudaGetErrorString(e));
    if (ctx->side != WEX_SIDE_DESTINATION || ctx->peer_count == 0)
        return WEX_OK;
    r = ncclGetUniqueId(&ctx->id);
    if (r != ncclSuccess)
        return FAIL(h, WEX_ERR_SYSTEM, "ncclGetUniqueId: %s",
                    ncclGetErrorString(r));
    return comm_start(ctx, ctx->rank, &ctx->id, 0,
                      (int)(1 + ctx->peer_count), &c);
}

static wex_status nccl_ctx_create(wex_plugin_state *state,
                                  const wex_transport_args *args,
                                  wex_transport_ctx **ctx_p)
{
    const wex_host_services *h = state->host;
    int64_t timeout = TIMEOUT_DEFAULT_MS;
    wex_transport_ctx *ctx;
    int device = 0;
    wex_status st;

    if (args == NULL ||
        !WEX_HAS_MEMBER(wex_transport_args, options, args->struct_size))
        return FAIL(h, WEX_ERR_ABI, "transport args too small");
    if (!WEX_HAS_MEMBER(wex_transport_args, peer_count, args->struct_size))
        return FAIL(h, WEX_ERR_UNSUPPORTED, "this host passes no peer ranks "
                    "(wex_transport_args.peer_ranks): nccl needs them to "
                    "size its communicators");
    if (args->side != WEX_SIDE_SOURCE && args->side != WEX_SIDE_DESTINATION)
        return FAIL(h, WEX_ERR_INVALID, "side %u is neither source nor "
                    "destination", args->side);
    if (args->peer_count > 0 && args->peer_ranks == NULL)
        return FAIL(h, WEX_ERR_INVALID, "%llu peer ranks but no list",
                    (unsigned long long)args->peer_count);
    if (args->side == WEX_SIDE_DESTINATION &&
        args->peer_count >= (uint64_t)INT32_MAX)
        return FAIL(h, WEX_ERR_INVALID, "too many peers");
    st = wt_option_i64(h, args->options, "/timeout_ms", 1, TIMEOUT_MAX_MS,
                       &timeout);
    if (st == WEX_OK)
        st = wt_cuda_device(h, args->options, &device);
    if (st != WEX_OK)
        return st;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    ctx->host = h;
    ctx->side = args->side;
    ctx->rank = args->rank;
    ctx->source_ranks = args->source_ranks;
    ctx->timeout_ms = timeout;
    ctx->peer_count = args->peer_count;
    ctx->peers = calloc(args->peer_count ? args->peer_count : 1,
                        sizeof(uint64_t));
    if (ctx->peers == NULL) {
        free(ctx);
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    }
    if (args->peer_count > 0)
        memcpy(ctx->peers, args->peer_ranks,
               args->peer_count * sizeof(uint64_t));
    ctx->device = device;
    st = ctx_setup(ctx);
    if (st != WEX_OK) {
        nccl_ctx_destroy(ctx);
        return st;
    }
    *ctx_p = ctx;
    return WEX_OK;
}

/* A healthy communicator says goodbye to its peers (within the deadline);
 * any other is aborted. */
static void comm_close(wex_transport_ctx *ctx, comm *c)
{
    double deadline = wt_now_ms() + (double)ctx->timeout_ms;
    ncclResult_t state = ncclInProgress;

    if (c->nccl == NULL)
        return;
    if (!c->ready || ctx->broken ||
        (ncclCommFinalize(c->nccl) != ncclSuccess &&
         ncclCommGetAsyncError(c->nccl, &state) != ncclSuccess)) {
        ncclCommAbort(c->nccl);
        return;
    }
    while (ncclCommGetAsyncError(c->nccl, &state) == ncclSuccess &&
           state == ncclInProgress && wt_now_ms() < deadline)
        nap();
    if (state == ncclSuccess)
        ncclCommDestroy(c->nccl);
    else
        ncclCommAbort(c->nccl);
}

static void nccl_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    while (ctx->comms != NULL) {
        comm *c = ctx->comms;
        ctx->comms = c->next;
        comm_close(ctx, c);
        free(c);
    }
    if (ctx->done != NULL)
        cudaEventDestroy(ctx->done);
    if (ctx->stream != NULL)
        cudaStreamDestroy(ctx->stream);
    free(ctx->queue);
    free(ctx->peers);
    free(ctx);
}

/* ---- memory -------------------------------------------------------- */

static wex_status nccl_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                                 void **address_p, wex_transport_mem **mem_p)
{
    (void)bytes;
    (void)address_p;
    (void)mem_p;
    return FAIL(ctx->host, WEX_ERR_UNSUPPORTED, "nccl does not allocate: "
                "register device memory (wex allocates it with cudaMalloc)");
}

static wex_status nccl_mem_register(wex_transport_ctx *ctx, void *address,
                                    uint64_t bytes, uint32_t memory_kind,
                                    wex_transport_mem **mem_p)
{
    wex_transport_mem *m;

    if (memory_kind != WEX_MEMORY_CUDA)
        return FAIL(ctx->host, WEX_ERR_UNSUPPORTED, "memory kind %u: nccl "
                    "moves CUDA device memory only", memory_kind);
    if (address == NULL || bytes == 0)
        return FAIL(ctx->host, WEX_ERR_INVALID, "mem_register of %p + %llu "
                    "bytes", address, (unsigned long long)bytes);
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
    m->address = address;
    m->bytes = bytes;
    *mem_p = m;
    return WEX_OK;
}

static void nccl_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    (void)ctx;
    free(m);
}

static wex_status nccl_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m,
                               void *key, uint64_t *key_len)
{
    nccl_key k;
    size_t len;

    if (ctx->side != WEX_SIDE_DESTINATION)
        return FAIL(ctx->host, WEX_ERR_UNSUPPORTED, "mem_key on source rank "
                    "%llu: only destination ranks expose buffers",
                    (unsigned long long)ctx->rank);
    if (m == NULL || key == NULL || key_len == NULL)
        return FAIL(ctx->host, WEX_ERR_INVALID, "mem_key: NULL argument");
    memset(&k, 0, sizeof(k));
    k.rank = ctx->rank;
    k.bytes = m->bytes;
    k.source_ranks = ctx->source_ranks ? ctx->source_ranks : 1;
    memcpy(k.id, &ctx->id, sizeof(k.id) < sizeof(ctx->id) ? sizeof(k.id)
                                                          : sizeof(ctx->id));
    len = nccl_key_encode(&k, ctx->peers, ctx->peer_count, key,
                          (size_t)*key_len);
    if (len == 0)
        return FAIL(ctx->host, WEX_ERR_INVALID, "mem_key: %llu source ranks "
                    "do not fit a %llu-byte key",
                    (unsigned long long)k.source_ranks,
                    (unsigned long long)*key_len);
    *key_len = len;
    return WEX_OK;
}

/* ---- peers --------------------------------------------------------- */

static wex_status nccl_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                                   const void *key, uint64_t key_len,
                                   wex_transport_peer **peer_p)
{
    const wex_host_services *h = ctx->host;
    wex_transport_peer *p;
    ncclUniqueId id;
    int rank, size;
    char why[160];
    nccl_key k;
    comm *c;
    wex_status st;
    int rc = -1;

    if (ctx->broken)
        return FAIL(h, WEX_ERR_PEER, "communicators were aborted");
    if (key_len <= WEX_TRANSPORT_KEY_MAX)
        rc = nccl_key_decode(key, (size_t)key_len, &k, why, sizeof(why));
    if ((st = wt_key_decoded(h, "nccl", peer_rank, key_len, rc, why)) !=
            WEX_OK ||
        (st = wt_key_rank(h, k.rank, peer_rank)) != WEX_OK)
        return st;
    if (nccl_key_member(&k, ctx->rank, &rank, &size) != 0)
        return FAIL(h, WEX_ERR_INVALID, "source rank %llu is not among "
                    "destination rank %llu's senders: the ranks disagree "
                    "on the plan", (unsigned long long)ctx->rank,
                    (unsigned long long)peer_rank);
    for (c = ctx->comms; c != NULL && c->owner != peer_rank; c = c->next)
        ;
    if (c == NULL) {
        memcpy(&id, k.id, sizeof(id) < sizeof(k.id) ? sizeof(id)
                                                    : sizeof(k.id));
        st = comm_start(ctx, peer_rank, &id, rank, size, &c);
        if (st != WEX_OK)
            return st;
    }
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    p->c = c;
    p->rank = peer_rank;
    p->bytes = k.bytes;
    *peer_p = p;
    return WEX_OK;
}

static void nccl_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    (void)ctx;
    free(p); /* the communicator lives until ctx_destroy */
}

/* ---- data path ----------------------------------------------------- */

static wex_status enqueue(wex_transport_ctx *ctx, comm *c, int peer,
                          int send, void *ptr, uint64_t bytes)
{
    if (ctx->broken)
        return FAIL(ctx->host, WEX_ERR_PEER, "communicators were aborted "
                    "after an earlier failure");
    if (ctx->queued == ctx->queue_cap) {
        size_t cap = ctx->queue_cap ? ctx->queue_cap * 2 : 256;
        transfer *q = realloc(ctx->queue, cap * sizeof(*q));
        if (q == NULL)
            return FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
        ctx->queue = q;
        ctx->queue_cap = cap;
    }
    ctx->queue[ctx->queued++] = (transfer){c, peer, send, ptr, bytes};
    return WEX_OK;
}

static wex_status nccl_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                           uint64_t offset, const void *src, uint64_t bytes)
{
    /* The offset is the destination's business (its matching recv); it
     * is still checked, so both sides fail the same plan the same way. */
    if (offset > p->bytes || bytes > p->bytes - offset)
        return FAIL(ctx->host, WEX_ERR_INVALID, "put of %llu bytes at offset "
                    "%llu overruns destination rank %llu's %llu-byte buffer",
                    (unsigned long long)bytes, (unsigned long long)offset,
                    (unsigned long long)p->rank,
                    (unsigned long long)p->bytes);
    if (bytes == 0)
        return WEX_OK;
    return enqueue(ctx, p->c, 0, 1, (void *)(uintptr_t)src, bytes);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

static wex_status nccl_recv(wex_transport_ctx *ctx, uint64_t peer_rank,
                            wex_transport_mem *m, uint64_t offset,
                            uint64_t bytes)
{
    const uint64_t *at;

    if (ctx->side != WEX_SIDE_DESTINATION || ctx->comms == NULL || m == NULL)
        return FAIL(ctx->host, WEX_ERR_INVALID, "recv from source rank %llu: "
                    "not a destination with senders",
                    (unsigned long long)peer_rank);
    at = bsearch(&peer_rank, ctx->peers, ctx->peer_count, sizeof(uint64_t),
                 cmp_u64);
    if (at == NULL)
        return FAIL(ctx->host, WEX_ERR_INVALID, "recv from source rank %llu, "
                    "which is not among this rank's peers",
                    (unsigned long long)peer_rank);
    if (offset > m->bytes || bytes > m->bytes - offset)
        return FAIL(ctx->host, WEX_ERR_INVALID, "recv of %llu bytes at offset "
                    "%llu overruns a %llu-byte buffer",
                    (unsigned long long)bytes, (unsigned long long)offset,
                    (unsigned long long)m->bytes);
    if (bytes == 0)
        return WEX_OK;
    return enqueue(ctx, ctx->comms, (int)(1 + (at - ctx->peers)), 0,
                   m->address + offset, bytes);
}

static wex_status issue(wex_transport_ctx *ctx)
{
    ncclResult_t r = ncclGroupStart();

    for (size_t i = 0; i < ctx->queued && r == ncclSuccess; i++) {
        const transfer *t = &ctx->queue[i];
        r = t->send ? ncclSend(t->ptr, t->bytes, ncclUint8, t->peer,
                               t->c->nccl, ctx->stream)
                    : ncclRecv(t->ptr, t->bytes, ncclUint8, t->peer,
                               t->c->nccl, ctx->stream);
    }
    if (r == ncclSuccess || r == ncclInProgress)
        r = ncclGroupEnd();
    else
        ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress) {
        abort_all(ctx);
        return FAIL(ctx->host, WEX_ERR_SYSTEM, "issuing %zu transfers: %s; "
                    "communicators aborted", ctx->queued,
                    ncclGetErrorString(r));
    }
    return WEX_OK;
}

static wex_status nccl_flush(wex_transport_ctx *ctx)
{
    double deadline = wt_now_ms() + (double)ctx->timeout_ms;
    cudaError_t e;
    wex_status st;

    if (ctx->broken)
        return FAIL(ctx->host, WEX_ERR_PEER, "communicators were aborted "
                    "after an earlier failure");
    if (ctx->queued == 0)
        return WEX_OK;
    st = settle(ctx, deadline, "connecting");
    if (st == WEX_OK)
        st = issue(ctx);
    if (st == WEX_OK)
        st = settle(ctx, deadline, "posting transfers");
    ctx->queued = 0;
    if (st != WEX_OK)
        return st;
    e = cudaEventRecord(ctx->done, ctx->stream);
    while (e == cudaSuccess &&
           (e = cudaEventQuery(ctx->done)) == cudaErrorNotReady) {
        for (comm *c = ctx->comms; c != NULL; c = c->next) {
            ncclResult_t state = ncclSuccess;
            ncclCommGetAsyncError(c->nccl, &state);
            if (state != ncclSuccess && state != ncclInProgress) {
                char name[96];
                who(ctx, c, name, sizeof(name));
                abort_all(ctx);
                return FAIL(ctx->host, WEX_ERR_PEER, "transfers with %s "
                            "failed: %s; communicators aborted", name,
                            ncclGetErrorString(state));
            }
        }
        if (wt_now_ms() > deadline) {
            abort_all(ctx);
            return FAIL(ctx->host, WEX_ERR_TIMEOUT, "transfers did not "
                        "complete within timeout_ms (%lld ms): a peer is "
                        "gone or stuck; communicators aborted",
                        (long long)ctx->timeout_ms);
        }
        nap();
        e = cudaSuccess;
    }
    if (e != cudaSuccess) {
        abort_all(ctx);
        return FAIL(ctx->host, WEX_ERR_SYSTEM, "transfers failed: %s",
                    cudaGetErrorString(e));
    }
    return WEX_OK;
}

/* ---- descriptor ---------------------------------------------------- */

static const wex_transport_ops nccl_ops = {
    sizeof(wex_transport_ops),
    0,
    WEX_TRANSPORT_CAP_CUDA_MEMORY | WEX_TRANSPORT_CAP_TWO_SIDED |
        WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_NETWORK,
    nccl_ctx_create,
    nccl_ctx_destroy,
    nccl_mem_alloc,
    nccl_mem_register,
    nccl_mem_deregister,
    nccl_mem_key,
    nccl_peer_attach,
    nccl_peer_detach,
    nccl_put,
    nccl_flush,
    nccl_recv,
};

static const wex_plugin_desc nccl_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_TRANSPORT,
    WEX_PLUGIN_THREAD_PER_CTX, "nccl", "0.1.0", wt_plugin_init, wt_plugin_fini,
    &nccl_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out)
{
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
    out->abi_version = WEX_ABI_1_0;
    out->desc = &nccl_desc;
    return WEX_OK;
}
