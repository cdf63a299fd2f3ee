/*
 * The source's side: attaching a destination's buffer from its key, puts
 * bounded by max_outstanding, and flush with a deadline.
 */
#include <stdlib.h>
#include <string.h>

#include "ucx_internal.h"

/* ---- peers --------------------------------------------------------- */

wex_status ucx_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                           const void *key, uint64_t key_len,
                           wex_transport_peer **peer_p)
{
    const wex_host_services *h = ctx->host;
    wex_transport_peer *p;
    ucx_conn *c;
    ucs_status_t us;
    wex_status st;
    char why[200];
    ucx_key k;
    int rc = -1;

    if (ctx->side != WEX_SIDE_SOURCE)
        return WP_FAIL(h, WEX_ERR_UNSUPPORTED,
                       "peer_attach on destination rank %llu: only source "
                       "ranks write",
                       (unsigned long long)ctx->rank);
    if (key_len <= WEX_TRANSPORT_KEY_MAX)
        rc = ucx_key_decode(key, (size_t)key_len, &k, why, sizeof(why));
    st = wt_key_check(h, "ucx", peer_rank, key_len, rc, why, &k.rank);
    if (st != WEX_OK)
        return st;
    c = ucx_find_conn(ctx, &k);
    if (c != NULL && c->rank != k.rank)
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "the key names the worker of destination rank %llu, "
                       "already attached as rank %llu",
                       (unsigned long long)k.rank, (unsigned long long)c->rank);
    if (c != NULL && c->failure != UCS_OK)
        return ucx_peer_failed(ctx, c);
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    if (c == NULL) {
        if ((st = ucx_conn_open(ctx, &k, &c)) != WEX_OK) {
            free(p);
            return st;
        }
        ucx_am_choose(ctx, c); /* its lanes are known from here on */
    }
    us = ucp_ep_rkey_unpack(c->ep, k.rkey, &p->rkey);
    if (us != UCS_OK) {
        free(p);
        ucx_close_conns(ctx, 0);
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "destination rank %llu's rkey does not unpack: %s (a "
                       "key from another UCX version or configuration?)",
                       (unsigned long long)k.rank, ucs_status_string(us));
    }
    c->peers++;
    p->conn = c;
    p->rank = k.rank;
    p->address = k.address;
    p->bytes = k.size;
    wt_list_push(&ctx->peers, &p->link);
    *peer_p = p;
    return WEX_OK;
}

void ucx_peer_free(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    wt_list_unlink(&ctx->peers, &p->link);
    ucp_rkey_destroy(p->rkey);
    p->conn->peers--;
    free(p);
}

void ucx_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    if (p == NULL)
        return;
    ucx_peer_free(ctx, p);
    ucx_close_conns(ctx, 0);
}

/* ---- data path ----------------------------------------------------- */

const char *ucx_peer_path(wex_transport_ctx *ctx, const wex_transport_peer *p)
{
    (void)ctx;
    return p->conn->am ? "am" : "put";
}

static void put_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_conn *c = user_data;

    c->ctx->outstanding--;
    if (status != UCS_OK && status != UCS_ERR_CANCELED && c->failure == UCS_OK)
        c->failure = status;
    ucp_request_free(request);
}

/* A source that gives up on a try (a put or a flush failed) still lets
 * what it has sent finish: its destinations are receiving it, and wait
 * for the rest before they close the try, closing by force the
 * endpoints of whatever is still arriving then (ucx_fence.c). So it
 * progresses until every send has completed, for DRAIN_MS at most. */
static wex_status drained(wex_transport_ctx *ctx, wex_status st)
{
    int64_t deadline =
        ucx_now_ms() +
        (ctx->flush_timeout_ms < DRAIN_MS ? ctx->flush_timeout_ms : DRAIN_MS);
    unsigned idle = 0;

    while (st != WEX_OK && ctx->outstanding > 0 && ucx_now_ms() < deadline)
        ucx_source_progress(ctx, &idle);
    return st;
}

static wex_status put_once(wex_transport_ctx *ctx, wex_transport_peer *p,
                           uint64_t offset, const void *src, uint64_t bytes)
{
    wex_status st = wt_check_put(ctx->host, p->rank, p->bytes, offset, bytes);
    ucx_conn *c = p->conn;
    ucp_request_param_t param;
    void *req;

    if (st != WEX_OK)
        return st;
    if (bytes == 0)
        return WEX_OK;
    if (c->failure != UCS_OK)
        return ucx_peer_failed(ctx, c);
    if (ctx->outstanding >= ctx->max_outstanding) {
        int64_t deadline = ucx_now_ms() + ctx->flush_timeout_ms;
        unsigned idle = 0;

        while (ctx->outstanding >= ctx->max_outstanding) {
            if (c->failure != UCS_OK)
                return ucx_peer_failed(ctx, c);
            if (ucx_now_ms() >= deadline) {
                c->stuck = 1;
                return WP_FAIL(ctx->host, WEX_ERR_TIMEOUT,
                               "put to destination rank %llu: %llu puts still "
                               "in flight after %d ms (flush_timeout_ms)",
                               (unsigned long long)p->rank,
                               (unsigned long long)ctx->outstanding,
                               ctx->flush_timeout_ms);
            }
            ucx_source_progress(ctx, &idle);
        }
    }
    if (c->am)
        return ucx_am_put(ctx, p, offset, src, bytes);
    memset(&param, 0, sizeof(param));
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = put_done;
    param.user_data = c;
    if ((param.memh = ucx_source_memh(ctx, src, bytes)) != NULL)
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
    req = ucp_put_nbx(c->ep, src, (size_t)bytes, p->address + offset, p->rkey,
                      &param);
    if (UCS_PTR_IS_ERR(req)) {
        if (c->failure == UCS_OK)
            c->failure = UCS_PTR_STATUS(req);
        return ucx_peer_failed(ctx, c);
    }
    if (req != NULL)
        ctx->outstanding++;
    return WEX_OK;
}

wex_status ucx_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                   uint64_t offset, const void *src, uint64_t bytes)
{
    return drained(ctx, put_once(ctx, p, offset, src, bytes));
}

static wex_status flush_once(wex_transport_ctx *ctx)
{
    const wex_host_services *h = ctx->host;
    int64_t deadline = ucx_now_ms() + ctx->flush_timeout_ms;
    ucx_conn *failed = NULL;
    const ucx_conn *late = NULL, *refused = NULL, *fenced = NULL;
    uint64_t pending = 0;
    unsigned idle = 0;

    if (ctx->side != WEX_SIDE_SOURCE)
        return WEX_OK;
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next)
        if (c->ep != NULL && c->failure == UCS_OK) {
            if (c->am)
                ucx_am_flush_start(c);
            else
                ucx_flush_start(c);
        }
    for (;;) {
        pending = 0;
        late = NULL;
        for (ucx_conn *c = ctx->conns; c != NULL && failed == NULL;
             c = c->next) {
            /* a dropped endpoint stays failed while a peer uses it */
            if (c->ep == NULL && !(c->dropped && c->peers > 0))
                continue;
            if (c->failure == UCS_OK && c->flush_done &&
                c->flush_status != UCS_OK)
                c->failure = c->flush_status;
            if (c->failure != UCS_OK)
                failed = c;
            else if (c->am && c->am_answered &&
                     c->am_fenced != c->am_fenced_told)
                fenced = c;
            else if (c->am && c->am_answered &&
                     c->am_refused != c->am_refused_told)
                refused = c;
            else if (!(c->am ? c->am_answered : c->flush_done) &&
                     pending++ == 0)
                late = c;
        }
        if (refused != NULL || fenced != NULL)
            break;
        if (failed != NULL || pending == 0 || ucx_now_ms() >= deadline)
            break;
        ucx_source_progress(ctx, &idle);
    }
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next) {
        if (c->ep != NULL && failed == NULL && refused == NULL &&
            fenced == NULL && !(c->am ? c->am_answered : c->flush_done))
            c->stuck = 1; /* timed out */
        if (c->ep != NULL)
            ucx_flush_abandon(c);
    }
    if (failed != NULL)
        return ucx_peer_failed(ctx, failed);
    if (fenced != NULL) {
        ucx_conn *r = (ucx_conn *)fenced;
        uint64_t n = r->am_fenced - r->am_fenced_told;

        r->am_fenced_told = r->am_fenced;
        return WP_FAIL(h, WEX_ERR_PEER,
                       "fenced: destination rank %llu (host %s, pid %u) takes "
                       "no more writes of this try (it gave up on the step) "
                       "and dropped %llu bytes this source sent",
                       (unsigned long long)r->rank, r->host, r->pid,
                       (unsigned long long)n);
    }
    if (refused != NULL) {
        ucx_conn *r = (ucx_conn *)refused;
        uint64_t n = r->am_refused - r->am_refused_told;

        r->am_refused_told = r->am_refused;
        return WP_FAIL(h, WEX_ERR_INVALID,
                       "flush: destination rank %llu (host %s, pid %u) did not "
                       "place %llu bytes: aimed outside every buffer it maps "
                       "(a buffer deregistered while a source still wrote to "
                       "it?), or lost to a failed receive",
                       (unsigned long long)r->rank, r->host, r->pid,
                       (unsigned long long)n);
    }
    if (pending != 0)
        return WP_FAIL(h, WEX_ERR_TIMEOUT,
                       "flush: destination rank %llu (host %s, pid %u)%s did "
                       "not confirm its puts within %d ms (flush_timeout_ms)",
                       (unsigned long long)late->rank, late->host, late->pid,
                       pending > 1 ? " and others" : "", ctx->flush_timeout_ms);
    return WEX_OK;
}

wex_status ucx_flush(wex_transport_ctx *ctx)
{
    return drained(ctx, flush_once(ctx));
}
