/*
 * Communicators: one per destination rank, joined without blocking
 * (ncclCommInitRankConfig with blocking = 0), polled against deadlines,
 * aborted all together on any failure, and closed gracefully when
 * healthy.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "nccl_internal.h"

void nccl_nap(void)
{
    struct timespec ts = {0, 50000};

    nanosleep(&ts, NULL);
}

wex_status nccl_comm_start(wex_transport_ctx *ctx, uint64_t owner,
                           const ncclUniqueId *id, int rank, int size,
                           nccl_comm **comm_p)
{
    const wex_host_services *h = ctx->host;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    nccl_comm *c = calloc(1, sizeof(*c));
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

void nccl_abort_all(wex_transport_ctx *ctx)
{
    for (nccl_comm *c = ctx->comms; c != NULL; c = c->next)
        if (c->nccl != NULL) {
            ncclCommAbort(c->nccl);
            c->nccl = NULL;
        }
    ctx->broken = 1;
}

const char *nccl_comm_who(const wex_transport_ctx *ctx, const nccl_comm *c,
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

wex_status nccl_settle(wex_transport_ctx *ctx, double deadline,
                       const char *what)
{
    const wex_host_services *h = ctx->host;
    char name[96];

    for (nccl_comm *c = ctx->comms; c != NULL; c = c->next) {
        ncclResult_t state = ncclInProgress;
        while (ncclCommGetAsyncError(c->nccl, &state) == ncclSuccess &&
               state == ncclInProgress && wt_now_ms() < deadline)
            nccl_nap();
        if (state == ncclSuccess) {
            c->ready = 1;
            continue;
        }
        nccl_comm_who(ctx, c, name, sizeof(name));
        nccl_abort_all(ctx);
        if (state == ncclInProgress)
            return FAIL(h, WEX_ERR_TIMEOUT, "%s: %s did not answer within "
                        "timeout_ms (%lld ms); communicators aborted", what,
                        name, (long long)ctx->timeout_ms);
        return FAIL(h, WEX_ERR_PEER, "%s with %s: %s; communicators aborted",
                    what, name, ncclGetErrorString(state));
    }
    return WEX_OK;
}

void nccl_comm_close(wex_transport_ctx *ctx, nccl_comm *c)
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
        nccl_nap();
    if (state == ncclSuccess)
        ncclCommDestroy(c->nccl);
    else
        ncclCommAbort(c->nccl);
}
