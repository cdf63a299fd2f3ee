/*
 * The data path: attaching a destination's buffer (joining its
 * communicator on the first), puts and recvs queued in the plan's order,
 * and flush, which issues them as one group and waits for them against
 * timeout_ms.
 */
#include <stdlib.h>
#include <string.h>

#include "nccl_internal.h"

/* ---- peers --------------------------------------------------------- */

wex_status nccl_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                            const void *key, uint64_t key_len,
                            wex_transport_peer **peer_p)
{
    const wex_host_services *h = ctx->host;
    wex_transport_peer *p;
    ncclUniqueId id;
    int rank, size;
    char why[160];
    nccl_key k;
    nccl_comm *c;
    wex_status st;
    int rc = -1;

    if (ctx->broken)
        return FAIL(h, WEX_ERR_PEER, "communicators were aborted");
    if (key_len <= WEX_TRANSPORT_KEY_MAX)
        rc = nccl_key_decode(key, (size_t)key_len, &k, why, sizeof(why));
    st = wt_key_check(h, "nccl", peer_rank, key_len, rc, why, &k.rank);
    if (st != WEX_OK)
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
        st = nccl_comm_start(ctx, peer_rank, &id, rank, size, &c);
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

void nccl_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    (void)ctx;
    free(p); /* the communicator lives until ctx_destroy */
}

/* ---- data path ----------------------------------------------------- */

static wex_status enqueue(wex_transport_ctx *ctx, nccl_comm *c, int peer,
                          int send, void *ptr, uint64_t bytes)
{
    if (ctx->broken)
        return FAIL(ctx->host, WEX_ERR_PEER, "communicators were aborted "
                    "after an earlier failure");
    if (ctx->queued == ctx->queue_cap) {
        size_t cap = ctx->queue_cap ? ctx->queue_cap * 2 : 256;
        nccl_transfer *q = realloc(ctx->queue, cap * sizeof(*q));
        if (q == NULL)
            return FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
        ctx->queue = q;
        ctx->queue_cap = cap;
    }
    ctx->queue[ctx->queued++] = (nccl_transfer){c, peer, send, ptr, bytes};
    return WEX_OK;
}

wex_status nccl_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                    uint64_t offset, const void *src, uint64_t bytes)
{
    /* The offset is the destination's business (its matching recv); it
     * is still checked, so both sides fail the same plan the same way. */
    wex_status st = wt_check_put(ctx->host, p->rank, p->bytes, offset,
                                 bytes);

    if (st != WEX_OK)
        return st;
    if (bytes == 0)
        return WEX_OK;
    return enqueue(ctx, p->c, 0, 1, (void *)(uintptr_t)src, bytes);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

wex_status nccl_recv(wex_transport_ctx *ctx, uint64_t peer_rank,
                     wex_transport_mem *m, uint64_t offset, uint64_t bytes)
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
    if (!wt_span_inside(offset, bytes, m->bytes))
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
        const nccl_transfer *t = &ctx->queue[i];
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
        nccl_abort_all(ctx);
        return FAIL(ctx->host, WEX_ERR_SYSTEM, "issuing %zu transfers: %s; "
                    "communicators aborted", ctx->queued,
                    ncclGetErrorString(r));
    }
    return WEX_OK;
}

wex_status nccl_flush(wex_transport_ctx *ctx)
{
    double deadline = wt_now_ms() + (double)ctx->timeout_ms;
    cudaError_t e;
    wex_status st;

    if (ctx->broken)
        return FAIL(ctx->host, WEX_ERR_PEER, "communicators were aborted "
                    "after an earlier failure");
    if (ctx->queued == 0)
        return WEX_OK;
    st = nccl_settle(ctx, deadline, "connecting");
    if (st == WEX_OK)
        st = issue(ctx);
    if (st == WEX_OK)
        st = nccl_settle(ctx, deadline, "posting transfers");
    ctx->queued = 0;
    if (st != WEX_OK)
        return st;
    e = cudaEventRecord(ctx->done, ctx->stream);
    while (e == cudaSuccess &&
           (e = cudaEventQuery(ctx->done)) == cudaErrorNotReady) {
        for (nccl_comm *c = ctx->comms; c != NULL; c = c->next) {
            ncclResult_t state = ncclSuccess;
            ncclCommGetAsyncError(c->nccl, &state);
            if (state != ncclSuccess && state != ncclInProgress) {
                char name[96];
                nccl_comm_who(ctx, c, name, sizeof(name));
                nccl_abort_all(ctx);
                return FAIL(ctx->host, WEX_ERR_PEER, "transfers with %s "
                            "failed: %s; communicators aborted", name,
                            ncclGetErrorString(state));
            }
        }
        if (wt_now_ms() > deadline) {
            nccl_abort_all(ctx);
            return FAIL(ctx->host, WEX_ERR_TIMEOUT, "transfers did not "
                        "complete within timeout_ms (%lld ms): a peer is "
                        "gone or stuck; communicators aborted",
                        (long long)ctx->timeout_ms);
        }
        nccl_nap();
        e = cudaSuccess;
    }
    if (e != cudaSuccess) {
        nccl_abort_all(ctx);
        return FAIL(ctx->host, WEX_ERR_SYSTEM, "transfers failed: %s",
                    cudaGetErrorString(e));
    }
    return WEX_OK;
}
