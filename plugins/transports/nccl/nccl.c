/*
 * The `nccl` transport: GPUs on different ranks or hosts (the
 * disaggregated profile), with NCCL's matched sends and receives.
 *
 * One communicator per job: every rank of both sides is a member
 * (nccl_key.h numbers them), so each rank holds one communicator however
 * many peers it has. Every sample's traffic is one connected group (each
 * rank reaches every other through the plan's pairs), so a communicator
 * per connected group would be this one. Destination rank 0 draws the
 * unique id and publishes it through the job's rendezvous in connect
 * (ABI 1.3); every other rank fetches it there, and each starts joining
 * without blocking. Before ABI 1.3 each destination owned a communicator
 * with its senders and the id rode in its keys: a source joined one per
 * destination it fed (Kimi-K2: 30,956 memberships in 128 communicators,
 * 384 here).
 *
 * Every call is non-blocking (ncclCommInitRankConfig with blocking = 0):
 * puts and recvs are queued, and flush issues them as one group in the
 * order they came (the plan's order, the same on both sides), then polls
 * ncclCommGetAsyncError and an event against a deadline. A peer that died
 * or never came is a timeout, after which the communicator is aborted
 * (ncclCommAbort): an error, never a hang, and every later call fails.
 *
 * This file: contexts, connect, memory registration and the descriptor;
 * the rest is listed in nccl_internal.h.
 */
#include <stdlib.h>
#include <string.h>

#include "cuda_device.h"
#include "nccl_internal.h"
#include "plugin_options.h"
#include "plugin_state.h"

/* ---- context ------------------------------------------------------- */

static void nccl_ctx_destroy(wex_transport_ctx *ctx);

static wex_status ctx_setup(wex_transport_ctx *ctx)
{
    cudaError_t e = cudaSetDevice(ctx->device);

    if (e == cudaSuccess)
        e = cudaStreamCreateWithFlags(&ctx->stream, cudaStreamNonBlocking);
    if (e == cudaSuccess)
        e = cudaEventCreateWithFlags(&ctx->done, cudaEventDisableTiming);
    if (e != cudaSuccess)
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM,
                       "setting up the CUDA stream: "
                       "%s",
                       cudaGetErrorString(e));
    return WEX_OK;
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

    /* The peer ranks that size the communicators are part of ABI 1.0's
     * args, which wt_check_args requires. */
    if ((st = wt_check_args(h, args)) != WEX_OK)
        return st;
    if (nccl_group_rank(args->side, args->rank, args->source_ranks,
                        args->destination_ranks) < 0)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "%llu source and %llu destination "
                       "ranks do not make one communicator with this rank in "
                       "it",
                       (unsigned long long)args->source_ranks,
                       (unsigned long long)args->destination_ranks);
    st = wp_option_i64(h, args->options, "/timeout_ms", 1, TIMEOUT_MAX_MS,
                       &timeout);
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
    ctx->source_ranks = args->source_ranks;
    ctx->destination_ranks = args->destination_ranks;
    ctx->group_rank = (int)nccl_group_rank(
        args->side, args->rank, args->source_ranks, args->destination_ranks);
    ctx->group_size =
        (int)nccl_group_size(args->source_ranks, args->destination_ranks);
    ctx->timeout_ms = timeout;
    ctx->peer_count = args->peer_count;
    ctx->peers =
        calloc(args->peer_count ? args->peer_count : 1, sizeof(uint64_t));
    if (ctx->peers == NULL) {
        free(ctx);
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
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

static void nccl_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    nccl_close(ctx);
    if (ctx->done != NULL)
        cudaEventDestroy(ctx->done);
    if (ctx->stream != NULL)
        cudaStreamDestroy(ctx->stream);
    free(ctx->queue);
    free(ctx->peers);
    free(ctx);
}

/* ---- connect ------------------------------------------------------- */

/* Destination rank 0 draws the id and publishes it; the others wait for
 * it. Every rank then starts joining; flush waits for the join. */
static wex_status nccl_connect(wex_transport_ctx *ctx,
                               const wex_transport_exchange *ex)
{
    const wex_host_services *h = ctx->host;
    ncclUniqueId id;
    uint64_t len = 0;
    ncclResult_t r;
    wex_status st;

    if (ctx->comm != NULL || ctx->broken)
        return WP_FAIL(h, WEX_ERR_INVALID, "connect: called twice");
    if (ex == NULL || ex->struct_size < WEX_TRANSPORT_EXCHANGE_SIZE_1_3)
        return WP_FAIL(h, WEX_ERR_ABI, "connect: no exchange of ABI 1.3");
    memset(&id, 0, sizeof(id));
    if (ctx->group_rank == 0) {
        cudaSetDevice(ctx->device);
        r = ncclGetUniqueId(&id);
        if (r != ncclSuccess)
            return WP_FAIL(h, WEX_ERR_SYSTEM, "ncclGetUniqueId: %s",
                           ncclGetErrorString(r));
        st = ex->publish(ex->ctx, NCCL_ID_NAME, &id, sizeof(id));
    } else {
        st = ex->fetch(ex->ctx, NCCL_ID_NAME, &id, sizeof(id), &len);
        if (st == WEX_OK && len != sizeof(id))
            return WP_FAIL(h, WEX_ERR_INVALID,
                           "connect: the unique id "
                           "destination rank 0 published has %llu bytes, not "
                           "%zu",
                           (unsigned long long)len, sizeof(id));
    }
    if (st != WEX_OK)
        return st; /* the host's message */
    return nccl_join(ctx, &id);
}

/* ---- memory -------------------------------------------------------- */

static wex_status nccl_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                                 void **address_p, wex_transport_mem **mem_p)
{
    (void)bytes;
    (void)address_p;
    (void)mem_p;
    return WP_FAIL(ctx->host, WEX_ERR_UNSUPPORTED,
                   "nccl does not allocate: "
                   "register device memory (wex allocates it with cudaMalloc)");
}

static wex_status nccl_mem_register(wex_transport_ctx *ctx, void *address,
                                    uint64_t bytes, uint32_t memory_kind,
                                    wex_transport_mem **mem_p)
{
    wex_status st = wt_check_register(ctx->host, "nccl", WEX_MEMORY_CUDA,
                                      address, bytes, memory_kind);
    wex_transport_mem *m;

    if (st != WEX_OK)
        return st;
    m = calloc(1, sizeof(*m));
    if (m == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
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
    wex_status st =
        wt_check_mem_key(ctx->host, ctx->side, ctx->rank, m, key, key_len);
    nccl_key k;
    size_t len;

    if (st != WEX_OK)
        return st;
    memset(&k, 0, sizeof(k));
    k.rank = ctx->rank;
    k.bytes = m->bytes;
    k.group_size = (uint64_t)ctx->group_size;
    len = nccl_key_encode(&k, key, (size_t)*key_len);
    if (len == 0)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "mem_key: %u bytes do not fit %llu", NCCL_KEY_BYTES,
                       (unsigned long long)*key_len);
    *key_len = len;
    return WEX_OK;
}

/* ---- descriptor ---------------------------------------------------- */

static const wex_transport_ops nccl_ops = {
    .struct_size = sizeof(wex_transport_ops),
    .caps = WEX_TRANSPORT_CAP_CUDA_MEMORY | WEX_TRANSPORT_CAP_TWO_SIDED |
            WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_NETWORK,
    .ctx_create = nccl_ctx_create,
    .ctx_destroy = nccl_ctx_destroy,
    .mem_alloc = nccl_mem_alloc,
    .mem_register = nccl_mem_register,
    .mem_deregister = nccl_mem_deregister,
    .mem_key = nccl_mem_key,
    .peer_attach = nccl_peer_attach,
    .peer_detach = nccl_peer_detach,
    .put = nccl_put,
    .flush = nccl_flush,
    .recv = nccl_recv,
    .peer_path = NULL,
    .connect = nccl_connect,
    .fence = nccl_fence,
};

static const wex_plugin_desc nccl_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_4,
    .kind = WEX_KIND_TRANSPORT,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "nccl",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &nccl_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_4, nccl_desc)
