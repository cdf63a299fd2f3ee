/*
 * Fencing over ucx: a source that a destination gave up on never writes
 * into it again for that try.
 *
 * Active messages carry their try's epoch, and the destination's handler
 * places only those of the try it has open (ucx_am.c): a message that
 * arrives once the try is closed, from a source that stalled and ran
 * again, is dropped, and that source's flush fails saying it was fenced.
 * What the handler let in before the close may still be arriving: a
 * rendezvous receive places its fragments as the source sends them.
 * CLOSE waits up to the grace for those receives to finish, then closes
 * by force the endpoints of the ones still in flight (a source stopped
 * in the middle of one), which fails them: no byte of theirs lands
 * later.
 *
 * One-sided puts (where a lane does RMA natively) bypass the handler.
 * They are fenced by their keys: after a try it gave up on, a
 * destination registers its memory again and drops the old
 * registrations, which revokes the remote keys a stale source holds
 * (an RDMA write with one fails at the destination's NIC); the host
 * publishes the new keys, and live sources attach them before the next
 * try. UCX's shared-memory lanes (posix, sysv, cma) write by address
 * and ignore revocation: error_handling "none" with them is not fenced.
 */
#include <string.h>
#include <time.h>

#include "ucx_internal.h"

/* How long endpoints closed by force may take to fail their receives. */
#define CUT_WAIT_MS 5000

static void nap_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static uint64_t receiving(wex_transport_ctx *ctx)
{
    uint64_t n;

    pthread_mutex_lock(&ctx->lock);
    n = ucx_am_receiving(ctx);
    pthread_mutex_unlock(&ctx->lock);
    return n;
}

static wex_status fence_close(wex_transport_ctx *ctx, uint32_t grace_ms)
{
    const wex_host_services *h = ctx->host;
    int64_t deadline = ucx_now_ms() + grace_ms;
    unsigned cut;
    uint64_t n;

    pthread_mutex_lock(&ctx->lock);
    ctx->open_epoch = 0;
    pthread_mutex_unlock(&ctx->lock);
    while ((n = receiving(ctx)) > 0 && ucx_now_ms() < deadline)
        nap_ms(1);
    if (n == 0)
        return WEX_OK;
    pthread_mutex_lock(&ctx->lock);
    cut = ucx_am_cut_receiving(ctx);
    pthread_mutex_unlock(&ctx->lock);
    WEX_WARN(h,
             "destination rank %llu closed %u source endpoint%s: %llu "
             "receive%s of a try it gave up on still in flight when its "
             "grace ran out (%u ms left of timeouts.fence_seconds)",
             (unsigned long long)ctx->rank, cut, cut == 1 ? "" : "s",
             (unsigned long long)n, n == 1 ? "" : "s", grace_ms);
    deadline = ucx_now_ms() + CUT_WAIT_MS;
    while ((n = receiving(ctx)) > 0 && ucx_now_ms() < deadline)
        nap_ms(1);
    if (n > 0)
        return WP_FAIL(h, WEX_ERR_PEER,
                       "%llu receive%s of a try destination rank %llu gave up "
                       "on did not end within %d ms of closing their "
                       "endpoints: it takes no writes until they have",
                       (unsigned long long)n, n == 1 ? "" : "s",
                       (unsigned long long)ctx->rank, CUT_WAIT_MS);
    return WEX_OK;
}

static wex_status fence_open(wex_transport_ctx *ctx, uint64_t epoch)
{
    uint64_t n;

    pthread_mutex_lock(&ctx->lock);
    n = ucx_am_receiving(ctx);
    if (n == 0) {
        ctx->open_epoch = epoch;
        ctx->fencing = 1;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (n > 0)
        return WP_FAIL(ctx->host, WEX_ERR_PEER,
                       "%llu receive%s of a try destination rank %llu gave up "
                       "on still in flight: it takes no writes until they end",
                       (unsigned long long)n, n == 1 ? "" : "s",
                       (unsigned long long)ctx->rank);
    return WEX_OK;
}

wex_status ucx_fence(wex_transport_ctx *ctx, wex_transport_fence *f)
{
    const wex_host_services *h = ctx->host;
    int destination = ctx->side == WEX_SIDE_DESTINATION;

    if (f == NULL || f->struct_size < WEX_TRANSPORT_FENCE_SIZE_1_4)
        return WP_FAIL(h, WEX_ERR_ABI,
                       "fence: a wex_transport_fence smaller "
                       "than ABI 1.4's");
    if (f->op == WEX_FENCE_WRITE && !destination && f->epoch != 0) {
        /* answers count the dropped bytes of their flush's epoch: a new
         * one starts from none told */
        if (f->epoch != ctx->epoch)
            for (ucx_conn *c = ctx->conns; c != NULL; c = c->next)
                c->am_fenced = c->am_fenced_told = 0;
        ctx->epoch = f->epoch;
        return WEX_OK;
    }
    if (f->op == WEX_FENCE_OPEN && destination && f->epoch != 0)
        return fence_open(ctx, f->epoch);
    if (f->op == WEX_FENCE_CLOSE && destination) {
        wex_status st = fence_close(ctx, f->grace_ms);
        int rekeyed = 0;

        /* Puts bypass the handler: revoke their keys after a try given
         * up on, unless every source sends messages. */
        if (f->abandoned && ctx->data_path != UCX_PATH_AM &&
            (rekeyed = ucx_mem_rekey(ctx)) < 0)
            return WEX_ERR_SYSTEM;
        f->rekeyed = rekeyed > 0;
        return st;
    }
    return WP_FAIL(h, WEX_ERR_INVALID, "fence: op %u%s on a %s", f->op,
                   f->epoch == 0 ? " with epoch 0" : "",
                   destination ? "destination" : "source");
}
