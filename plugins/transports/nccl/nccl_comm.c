/*
 * The job's communicator: joined without blocking
 * (ncclCommInitRankConfig with blocking = 0), polled against deadlines,
 * aborted on any failure, and closed gracefully when healthy.
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

wex_status nccl_join(wex_transport_ctx *ctx, const ncclUniqueId *id)
{
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    ncclResult_t r;

    config.blocking = 0;
    cudaSetDevice(ctx->device);
    r = ncclCommInitRankConfig(&ctx->comm, ctx->group_size, *id,
                               ctx->group_rank, &config);
    if (r != ncclSuccess && r != ncclInProgress) {
        if (ctx->comm != NULL)
            ncclCommAbort(ctx->comm);
        ctx->comm = NULL;
        ctx->broken = 1;
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM,
                       "joining the job's "
                       "communicator as rank %d of %d: %s",
                       ctx->group_rank, ctx->group_size, ncclGetErrorString(r));
    }
    return WEX_OK;
}

void nccl_abort(wex_transport_ctx *ctx)
{
    if (ctx->comm != NULL)
        ncclCommAbort(ctx->comm);
    ctx->comm = NULL;
    ctx->broken = 1;
}

wex_status nccl_settle(wex_transport_ctx *ctx, double deadline,
                       const char *what)
{
    ncclResult_t state = ncclInProgress;

    while (ncclCommGetAsyncError(ctx->comm, &state) == ncclSuccess &&
           state == ncclInProgress && wt_now_ms() < deadline)
        nccl_nap();
    if (state == ncclSuccess) {
        ctx->ready = 1;
        return WEX_OK;
    }
    nccl_abort(ctx);
    if (state == ncclInProgress)
        return WP_FAIL(ctx->host, WEX_ERR_TIMEOUT,
                       "%s: the job's %d ranks did "
                       "not all answer within timeout_ms (%lld ms); "
                       "communicator aborted",
                       what, ctx->group_size, (long long)ctx->timeout_ms);
    return WP_FAIL(ctx->host, WEX_ERR_PEER, "%s: %s; communicator aborted",
                   what, ncclGetErrorString(state));
}

void nccl_close(wex_transport_ctx *ctx)
{
    double deadline = wt_now_ms() + (double)ctx->timeout_ms;
    ncclResult_t state = ncclInProgress;

    if (ctx->comm == NULL)
        return;
    if (!ctx->ready || ctx->broken ||
        (ncclCommFinalize(ctx->comm) != ncclSuccess &&
         ncclCommGetAsyncError(ctx->comm, &state) != ncclSuccess)) {
        nccl_abort(ctx);
        return;
    }
    while (ncclCommGetAsyncError(ctx->comm, &state) == ncclSuccess &&
           state == ncclInProgress && wt_now_ms() < deadline)
        nccl_nap();
    if (state == ncclSuccess)
        ncclCommDestroy(ctx->comm);
    else
        ncclCommAbort(ctx->comm);
    ctx->comm = NULL;
}
