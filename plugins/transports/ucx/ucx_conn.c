/*
 * Endpoints: one per destination worker a source writes to, opened with
 * UCX's peer-failure mode (an error callback marks it failed), flushed
 * with a deadline, closed once no attached buffer uses it.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ucx_internal.h"

int64_t ucx_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};

    nanosleep(&ts, NULL);
}

/* One progress pass on a source's worker; after a run of idle passes it
 * naps briefly so a long wait does not spin a core flat out. */
void ucx_source_progress(wex_transport_ctx *ctx, unsigned *idle)
{
    if (ucp_worker_progress(ctx->worker) != 0)
        *idle = 0;
    else if (++*idle > 1024)
        nap_us(20);
}

/* ---- endpoints ----------------------------------------------------- */

static void ep_failed(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    ucx_conn *c = arg;

    (void)ep;
    if (c->failure == UCS_OK)
        c->failure = status != UCS_OK ? status : UCS_ERR_ENDPOINT_TIMEOUT;
    WEX_DEBUG(c->ctx->host, "endpoint to destination rank %llu failed: %s",
              (unsigned long long)c->rank, ucs_status_string(status));
}

/* Closes a failed endpoint by force at once, as UCX asks of an endpoint
 * its error callback named: its requests are purged now, instead of the
 * worker progressing them for as long as a peer stays attached through
 * it (UCX 1.13 could then complete one twice and abort). The conn stays,
 * with its failure, for the peers attached through it. */
static void drop_failed_ep(wex_transport_ctx *ctx, ucx_conn *c)
{
    int64_t deadline = ucx_now_ms() + CLOSE_TIMEOUT_MS;
    ucp_request_param_t param;
    unsigned idle = 0;
    void *req;

    if (c->ep == NULL || ctx->side != WEX_SIDE_SOURCE)
        return;
    ucx_flush_abandon(c);
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    req = ucp_ep_close_nbx(c->ep, &param);
    c->ep = NULL;
    c->dropped = 1;
    if (!UCS_PTR_IS_PTR(req))
        return;
    while (ucp_request_check_status(req) == UCS_INPROGRESS &&
           ucx_now_ms() < deadline)
        ucx_source_progress(ctx, &idle);
    ucp_request_free(req);
}

wex_status ucx_peer_failed(wex_transport_ctx *ctx, ucx_conn *c)
{
    drop_failed_ep(ctx, c);
    return WP_FAIL(ctx->host, WEX_ERR_PEER,
                   "destination rank %llu unreachable: %s (host %s, pid %u)%s",
                   (unsigned long long)c->rank, ucs_status_string(c->failure),
                   c->host, c->pid,
                   ctx->epoch != 0 ? ": it died, the network failed, or it "
                                     "fenced this source out of a step it gave "
                                     "up on (closing its connection)"
                                   : "");
}

/* Closes endpoints: those without buffers (all = 0) or every one. They
 * get CLOSE_TIMEOUT_MS together to close gracefully (a failed or stuck
 * one is closed by force); after that they are left to
 * ucp_worker_destroy. */
void ucx_close_conns(wex_transport_ctx *ctx, int all)
{
    enum { BATCH = 64 };
    int64_t deadline = ucx_now_ms() + CLOSE_TIMEOUT_MS;
    unsigned idle = 0;
    void *reqs[BATCH];
    size_t n;

    do {
        n = 0;
        for (ucx_conn *c = ctx->conns; c != NULL && n < BATCH; c = c->next) {
            ucp_request_param_t param;
            void *req;

            if (c->ep == NULL || (!all && c->peers != 0))
                continue;
            memset(&param, 0, sizeof(param));
            param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
            param.flags =
                c->failure != UCS_OK || c->stuck ? UCP_EP_CLOSE_FLAG_FORCE : 0;
            req = ucp_ep_close_nbx(c->ep, &param);
            c->ep = NULL;
            if (UCS_PTR_IS_PTR(req))
                reqs[n++] = req;
        }
        for (size_t i = 0; i < n; i++) {
            while (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS &&
                   ucx_now_ms() < deadline)
                ucx_source_progress(ctx, &idle);
            ucp_request_free(reqs[i]);
        }
    } while (n == BATCH);
}

ucx_conn *ucx_find_conn(wex_transport_ctx *ctx, const ucx_key *k)
{
    /* a dropped one still answers for its worker: attaching to it fails
     * at once instead of connecting to a dead worker again */
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next)
        if ((c->ep != NULL || c->dropped) &&
            c->address_len == k->worker_address_len &&
            memcmp(c->address, k->worker_address, c->address_len) == 0)
            return c;
    return NULL;
}

static void flush_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_conn *c = user_data;

    c->flush_done = 1;
    c->flush_status = status;
    c->flush_req = NULL;
    ucp_request_free(request);
}

/* Starts flushing endpoint c. */
void ucx_flush_start(ucx_conn *c)
{
    ucp_request_param_t param;
    void *req;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = flush_done;
    param.user_data = c;
    c->flush_done = 0;
    c->flush_status = UCS_OK;
    c->flush_req = NULL;
    req = ucp_ep_flush_nbx(c->ep, &param);
    if (req == NULL) {
        c->flush_done = 1;
    } else if (UCS_PTR_IS_ERR(req)) {
        c->flush_done = 1;
        c->flush_status = UCS_PTR_STATUS(req);
    } else {
        c->flush_req = req;
    }
}

/* Abandons a flush still in flight: no callback will name c. */
void ucx_flush_abandon(ucx_conn *c)
{
    if (c->flush_req != NULL) {
        ucp_request_free(c->flush_req);
        c->flush_req = NULL;
    }
    c->flush_done = 1;
}

/* Logs which UCX transports an endpoint uses, at debug level. */
char *ucx_ep_info(ucp_ep_h ep)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);

    if (f == NULL)
        return NULL;
    ucp_ep_print_info(ep, f);
    fclose(f);
    return text;
}

static void log_ep_info(wex_transport_ctx *ctx, const ucx_conn *c)
{
    const wex_host_services *h = ctx->host;
    char *text, *line, *save = NULL;

    if (!h->log_enabled(h->ctx, WEX_LOG_DEBUG) ||
        (text = ucx_ep_info(c->ep)) == NULL)
        return;
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save))
        if (line[0] != '\0' && strspn(line, "#= ") != strlen(line))
            WEX_DEBUG(h, "destination rank %llu: %s",
                      (unsigned long long)c->rank, line);
    free(text);
}

/* An endpoint to the worker in key k, connected (unless
 * connect_timeout_ms is 0). */
wex_status ucx_conn_open(wex_transport_ctx *ctx, const ucx_key *k,
                         ucx_conn **conn_p)
{
    const wex_host_services *h = ctx->host;
    ucp_ep_params_t ep_params;
    unsigned idle = 0;
    int64_t deadline;
    ucs_status_t us;
    ucx_conn *c;

    c = calloc(1, sizeof(*c));
    if (c == NULL || (c->address = malloc(k->worker_address_len)) == NULL) {
        free(c);
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    }
    c->ctx = ctx;
    memcpy(c->address, k->worker_address, k->worker_address_len);
    c->address_len = k->worker_address_len;
    c->rank = k->rank;
    c->pid = k->pid;
    memcpy(c->host, k->host, sizeof(c->host));
    c->failure = UCS_OK;
    c->flush_done = 1;
    /* Linked at once: from here on it lives as long as the worker. */
    c->next = ctx->conns;
    ctx->conns = c;

    memset(&ep_params, 0, sizeof(ep_params));
    ep_params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                           UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                           UCP_EP_PARAM_FIELD_ERR_HANDLER;
    ep_params.address = (const ucp_address_t *)c->address;
    ep_params.err_mode = ctx->err_mode;
    if (ctx->err_mode == UCP_ERR_HANDLING_MODE_PEER) {
        ep_params.err_handler.cb = ep_failed;
        ep_params.err_handler.arg = c;
    } else {
        ep_params.field_mask &= ~(uint64_t)UCP_EP_PARAM_FIELD_ERR_HANDLER;
    }
    us = ucp_ep_create(ctx->worker, &ep_params, &c->ep);
    if (us != UCS_OK) {
        c->ep = NULL;
        c->failure = us;
        return ucx_peer_failed(ctx, c);
    }
    if (ctx->connect_timeout_ms == 0) {
        *conn_p = c;
        return WEX_OK;
    }
    /* Flushing a new endpoint completes its wireup: a destination that
     * cannot be reached fails now, not on the first step. */
    deadline = ucx_now_ms() + ctx->connect_timeout_ms;
    ucx_flush_start(c);
    while (!c->flush_done && c->failure == UCS_OK && ucx_now_ms() < deadline)
        ucx_source_progress(ctx, &idle);
    if (c->failure == UCS_OK && c->flush_status != UCS_OK)
        c->failure = c->flush_status;
    if (c->failure != UCS_OK || !c->flush_done) {
        wex_status st = c->failure != UCS_OK
                            ? ucx_peer_failed(ctx, c)
                            : WP_FAIL(h, WEX_ERR_TIMEOUT,
                                      "destination rank %llu (host %s, pid "
                                      "%u): no connection within %d ms "
                                      "(connect_timeout_ms)",
                                      (unsigned long long)c->rank, c->host,
                                      c->pid, ctx->connect_timeout_ms);
        ucx_flush_abandon(c);
        if (c->failure == UCS_OK)
            c->failure = UCS_ERR_TIMED_OUT;
        ucx_close_conns(ctx, 0);
        return st;
    }
    log_ep_info(ctx, c);
    *conn_p = c;
    return WEX_OK;
}
