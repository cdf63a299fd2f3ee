/*
 * The data path: attaching a destination's buffer, puts and recvs
 * queued in the plan's order, and flush, which issues them as one group
 * and waits for them against timeout_ms; and fencing.
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
    char why[160];
    nccl_key k;
    wex_status st;
    int rc = -1;

    if (ctx->broken)
        return WP_FAIL(h, WEX_ERR_PEER, "the job's communicator was aborted");
    if (key_len <= WEX_TRANSPORT_KEY_MAX)
        rc = nccl_key_decode(key, (size_t)key_len, &k, why, sizeof(why));
    st = wt_key_check(h, "nccl", peer_rank, key_len, rc, why, &k.rank);
    if (st != WEX_OK)
        return st;
    if (k.group_size != (uint64_t)ctx->group_size)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "destination rank %llu's key counts "
                       "%llu ranks in the job, this rank %d: the ranks "
                       "disagree "
                       "on the job",
                       (unsigned long long)peer_rank,
                       (unsigned long long)k.group_size, ctx->group_size);
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
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

static wex_status enqueue(wex_transport_ctx *ctx, int peer, int send, void *ptr,
                          uint64_t bytes)
{
    if (ctx->broken)
        return WP_FAIL(ctx->host, WEX_ERR_PEER,
                       "the job's communicator was "
                       "aborted after an earlier failure");
    if (ctx->comm == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "not connected: the host "
                       "calls connect (ABI 1.3) before any transfer");
    if (ctx->queued == ctx->queue_cap) {
        size_t cap = ctx->queue_cap ? ctx->queue_cap * 2 : 256;
        nccl_transfer *q = realloc(ctx->queue, cap * sizeof(*q));
        if (q == NULL)
            return WP_FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
        ctx->queue = q;
        ctx->queue_cap = cap;
    }
    ctx->queue[ctx->queued++] = (nccl_transfer){peer, send, ptr, bytes};
    return WEX_OK;
}

wex_status nccl_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                    uint64_t offset, const void *src, uint64_t bytes)
{
    /* The offset is the destination's business (its matching recv); it
     * is still checked, so both sides fail the same plan the same way. */
    wex_status st = wt_check_put(ctx->host, p->rank, p->bytes, offset, bytes);

    if (st != WEX_OK)
        return st;
    if (bytes == 0)
        return WEX_OK;
    return enqueue(ctx, (int)p->rank, 1, (void *)(uintptr_t)src, bytes);
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

    if (ctx->side != WEX_SIDE_DESTINATION || m == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "recv from source rank %llu: not a destination with "
                       "senders",
                       (unsigned long long)peer_rank);
    at = bsearch(&peer_rank, ctx->peers, ctx->peer_count, sizeof(uint64_t),
                 cmp_u64);
    if (at == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "recv from source rank %llu, which is not among this "
                       "rank's peers",
                       (unsigned long long)peer_rank);
    if (!wt_span_inside(offset, bytes, m->bytes))
        return WP_FAIL(ctx->host, WEX_ERR_INVALID,
                       "recv of %llu bytes at offset %llu overruns a "
                       "%llu-byte buffer",
                       (unsigned long long)bytes, (unsigned long long)offset,
                       (unsigned long long)m->bytes);
    if (bytes == 0)
        return WEX_OK;
    return enqueue(ctx,
                   (int)nccl_group_rank(WEX_SIDE_SOURCE, peer_rank,
                                        ctx->source_ranks,
                                        ctx->destination_ranks),
                   0, m->address + offset, bytes);
}

static wex_status issue(wex_transport_ctx *ctx)
{
    ncclResult_t r = ncclGroupStart();

    for (size_t i = 0; i < ctx->queued && r == ncclSuccess; i++) {
        const nccl_transfer *t = &ctx->queue[i];
        r = t->send ? ncclSend(t->ptr, t->bytes, ncclUint8, t->peer, ctx->comm,
                               ctx->stream)
                    : ncclRecv(t->ptr, t->bytes, ncclUint8, t->peer, ctx->comm,
                               ctx->stream);
    }
    if (r == ncclSuccess || r == ncclInProgress)
        r = ncclGroupEnd();
    else
        ncclGroupEnd();
    if (r != ncclSuccess && r != ncclInProgress) {
        nccl_abort(ctx);
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM,
                       "issuing %zu transfers: %s; "
                       "communicator aborted",
                       ctx->queued, ncclGetErrorString(r));
    }
    return WEX_OK;
}

wex_status nccl_flush(wex_transport_ctx *ctx)
{
    double deadline = wt_now_ms() + (double)ctx->timeout_ms;
    ncclResult_t state = ncclSuccess;
    cudaError_t e;
    wex_status st;

    if (ctx->broken)
        return WP_FAIL(ctx->host, WEX_ERR_PEER,
                       "the job's communicator was "
                       "aborted after an earlier failure");
    if (ctx->queued == 0)
        return WEX_OK;
    st = ctx->ready ? WEX_OK : nccl_settle(ctx, deadline, "connecting");
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
        ncclCommGetAsyncError(ctx->comm, &state);
        if (state != ncclSuccess && state != ncclInProgress) {
            nccl_abort(ctx);
            return WP_FAIL(ctx->host, WEX_ERR_PEER,
                           "transfers failed: %s; "
                           "communicator aborted",
                           ncclGetErrorString(state));
        }
        if (wt_now_ms() > deadline) {
            nccl_abort(ctx);
            return WP_FAIL(ctx->host, WEX_ERR_TIMEOUT,
                           "transfers did not "
                           "complete within timeout_ms (%lld ms): a peer is "
                           "gone or stuck; communicator aborted",
                           (long long)ctx->timeout_ms);
        }
        nccl_nap();
        e = cudaSuccess;
    }
    if (e != cudaSuccess) {
        nccl_abort(ctx);
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM, "transfers failed: %s",
                       cudaGetErrorString(e));
    }
    return WEX_OK;
}

/* ---- fencing (ABI 1.4) ----------------------------------------------- */

/* Matched sends cannot be refused one by one, and a send that a stalled
 * source posts late would match a receive of a later try. So a
 * destination that gives a try up aborts the communicator: nothing of
 * that try or a later one moves through it, and the job must be opened
 * again (nccl jobs do not fail over). A committed try leaves it alone:
 * every receive of it completed. */
wex_status nccl_fence(wex_transport_ctx *ctx, wex_transport_fence *f)
{
    const wex_host_services *h = ctx->host;
    int destination = ctx->side == WEX_SIDE_DESTINATION;

    if (f == NULL || f->struct_size < WEX_TRANSPORT_FENCE_SIZE_1_4)
        return WP_FAIL(h, WEX_ERR_ABI,
                       "fence: a wex_transport_fence smaller "
                       "than ABI 1.4's");
    if (f->op == WEX_FENCE_WRITE && !destination && f->epoch != 0)
        return WEX_OK;
    if (f->op == WEX_FENCE_OPEN && destination && f->epoch != 0)
        return ctx->broken ? WP_FAIL(h, WEX_ERR_PEER,
                                     "the job's communicator "
                                     "was aborted after an earlier failure: "
                                     "open the job again")
                           : WEX_OK;
    if (f->op == WEX_FENCE_CLOSE && destination) {
        f->rekeyed = 0;
        if (f->abandoned && !ctx->broken) {
            nccl_abort(ctx);
            WEX_WARN(h,
                     "destination rank %llu aborted the job's "
                     "communicator: it gave a try up, and a source's late "
                     "sends must not reach a later one",
                     (unsigned long long)ctx->rank);
        }
        return WEX_OK;
    }
    return WP_FAIL(h, WEX_ERR_INVALID, "fence: op %u%s on a %s", f->op,
                   f->epoch == 0 ? " with epoch 0" : "",
                   destination ? "destination" : "source");
}
