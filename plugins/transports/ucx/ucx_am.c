/*
 * The active-message data path: where an endpoint has no native RMA lane
 * (UCX 1.13 over TCP emulates puts in software, slowly, and aborts a
 * destination whose acknowledgement of an emulated put fails), a source
 * sends each put's bytes as an active message naming the destination
 * address, and the destination's handler places them: copied from an
 * eager message, or received by UCX's rendezvous protocol into the
 * buffer (over tcp on endpoints that handle peer failure, UCX 1.13
 * receives the fragments into its own segments and copies them out,
 * where without that handling it puts them straight into the buffer, as
 * profiles of ucx_perftest -t ucp_am_bw with and without -e show; hence
 * the larger segments of ucx.c's read_config). A
 * source's flush then asks each destination, by message,
 * to confirm the bytes it has placed; the destination answers once every
 * byte the source sent before that request is in its buffer.
 *
 * Messages (little-endian hosts; headers only, except DATA's payload):
 *   DATA   source -> destination  {nonce, source rank, address, epoch}
 *                                 + bytes
 *   FLUSH  source -> destination  {nonce, source rank, token, seq, sent,
 *                                  epoch}
 *   ACK    destination -> source  {token, seq, placed, refused, fenced}
 * `nonce` tells one source context from another (a restarted source
 * starts counting afresh), `sent` and `placed` count every byte since
 * that context's first, `token` names the source's endpoint and `seq`
 * its flush. Bytes aimed outside every buffer the destination has
 * mapped are refused (counted, never written), as are bytes a receive
 * failed to place, and the source's flush fails naming them. Bytes of
 * another try than the one the destination takes (`epoch`, ucx_fence.c)
 * are dropped and counted as fenced, per epoch (a source's messages
 * arrive in order, so those of one epoch come together): a flush's
 * answer counts the bytes of the flush's own epoch that were dropped,
 * and the source's flush fails saying it was fenced. A source that dies leaves its bytes half placed,
 * which is what a half-finished put leaves too: the host fails the try,
 * commits nothing, and the next try overwrites them.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ucx_internal.h"

enum { AM_DATA = 0x5758, AM_FLUSH = 0x5759, AM_ACK = 0x575a };

typedef struct {
    uint64_t nonce, rank, address, epoch;
} data_header;

typedef struct {
    uint64_t nonce, rank, token, seq, sent, epoch;
} flush_header;

typedef struct {
    uint64_t token, seq, placed, refused, fenced;
} ack_header;

/* A send in flight, with the header UCX may still read. */
typedef struct {
    ucx_conn *conn;
    union {
        data_header data;
        flush_header flush;
    } h;
} send_op;

/* What a destination knows of one source context. */
struct ucx_am_source {
    struct ucx_am_source *next;
    uint64_t nonce;
    uint64_t rank;
    uint64_t placed;
    uint64_t refused;
    uint64_t fenced_total; /* dropped: sent for another try */
    uint64_t fenced_epoch; /* the epoch of the last message dropped */
    uint64_t fenced;       /* ... and the bytes of that epoch dropped */
    uint32_t receiving;    /* rendezvous receives in flight */
    int failed;            /* a receive failed: the source is gone */
    /* the flush waiting for its answer */
    int flush_pending;
    flush_header flush;
    ucp_ep_h reply_ep;
};

/* A rendezvous receive in flight, on the context's list until it
 * completes. */
struct ucx_am_recv {
    ucx_am_recv *next, **prev;
    wex_transport_ctx *ctx;
    ucx_am_source *src;
    uint64_t bytes;
    ucp_ep_h ep; /* the endpoint it comes on: closed to cut it off */
};
typedef ucx_am_recv recv_op;

uint64_t ucx_am_new_nonce(void)
{
    uint64_t n = 0;
    struct timespec ts;

    if (getrandom(&n, sizeof(n), 0) != (ssize_t)sizeof(n) || n == 0) {
        clock_gettime(CLOCK_REALTIME, &ts);
        n = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^
            ((uint64_t)ts.tv_sec << 20) ^ 1;
    }
    return n;
}

/* ---- choosing the path ---------------------------------------------- */

/* Whether a lane UCX describes as "lane[0]:  1:tcp/lo.0 md[0] -> ...
 * rma_bw#0 am ..." serves RMA over a transport that does it in hardware
 * or shared memory: tcp's puts are the kernel's socket copies, and UCX
 * 1.13's tcp put protocol has crashed destinations here. */
static int lane_does_native_rma(const char *line)
{
    const char *tl = strstr(line, "lane[");

    if (tl == NULL ||
        (strstr(line, " rma#") == NULL && strstr(line, " rma_bw#") == NULL))
        return 0;
    tl = strchr(tl, ':'); /* "lane[0]:  1:tcp/..." */
    tl = tl != NULL ? strchr(tl + 1, ':') : NULL;
    return tl != NULL && strncmp(tl + 1, "tcp/", 4) != 0;
}

/* Whether one of the endpoint's lanes does RMA natively. */
static int ep_has_native_rma(ucp_ep_h ep)
{
    char *text = ucx_ep_info(ep), *line, *save = NULL;
    int native = 0;

    if (text == NULL)
        return 1; /* cannot tell: keep UCX's puts */
    for (line = strtok_r(text, "\n", &save); line != NULL && !native;
         line = strtok_r(NULL, "\n", &save))
        native = lane_does_native_rma(line);
    free(text);
    return native;
}

void ucx_am_choose(wex_transport_ctx *ctx, ucx_conn *c)
{
    const char *why;

    if (ctx->data_path == UCX_PATH_AM) {
        c->am = 1;
        why = "data_path \"am\"";
    } else if (ctx->data_path == UCX_PATH_PUT) {
        c->am = 0;
        why = "data_path \"put\"";
    } else {
        c->am = !ep_has_native_rma(c->ep);
        why = c->am ? "no lane does RMA natively" : "a lane does RMA natively";
    }
    WEX_DEBUG(ctx->host, "source rank %llu -> destination rank %llu: %s (%s)",
              (unsigned long long)ctx->rank, (unsigned long long)c->rank,
              c->am ? "active messages" : "one-sided puts", why);
}

/* ---- source -------------------------------------------------------- */

static void send_done(void *request, ucs_status_t status, void *user_data)
{
    send_op *op = user_data;
    ucx_conn *c = op->conn;

    c->ctx->outstanding--;
    if (status != UCS_OK && status != UCS_ERR_CANCELED && c->failure == UCS_OK)
        c->failure = status;
    free(op);
    ucp_request_free(request);
}

/* Sends one message on c; 0 or -1 (c->failure says why). */
static int send_message(ucx_conn *c, unsigned id, send_op *op,
                        size_t header_len, const void *data, uint64_t bytes,
                        uint32_t flags, ucp_mem_h memh)
{
    ucp_request_param_t param;
    void *req;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA | UCP_OP_ATTR_FIELD_FLAGS;
    param.cb.send = send_done;
    param.user_data = op;
    param.flags = flags;
    if (memh != NULL) { /* registered once, not on first use */
        param.op_attr_mask |= UCP_OP_ATTR_FIELD_MEMH;
        param.memh = memh;
    }
    req = ucp_am_send_nbx(c->ep, id, &op->h, header_len, data, (size_t)bytes,
                          &param);
    if (UCS_PTR_IS_ERR(req)) {
        if (c->failure == UCS_OK)
            c->failure = UCS_PTR_STATUS(req);
        free(op);
        return -1;
    }
    if (req == NULL)
        free(op);
    else
        c->ctx->outstanding++;
    return 0;
}

wex_status ucx_am_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                      uint64_t offset, const void *src, uint64_t bytes)
{
    ucx_conn *c = p->conn;
    send_op *op = malloc(sizeof(*op));

    if (op == NULL)
        return WP_FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
    op->conn = c;
    op->h.data.nonce = ctx->nonce;
    op->h.data.rank = ctx->rank;
    op->h.data.address = p->address + offset;
    op->h.data.epoch = ctx->epoch;
    /* REPLY: the destination learns the endpoint, to cut off a
     * rendezvous of a try it gave up on (ucx_fence.c) */
    if (send_message(c, AM_DATA, op, sizeof(data_header), src, bytes,
                     UCP_AM_SEND_FLAG_REPLY,
                     ucx_source_memh(ctx, src, bytes)) != 0)
        return ucx_peer_failed(ctx, c);
    c->am_sent += bytes;
    return WEX_OK;
}

void ucx_am_flush_start(ucx_conn *c)
{
    wex_transport_ctx *ctx = c->ctx;
    send_op *op = malloc(sizeof(*op));

    c->am_seq++;
    c->am_answered = 0;
    if (op == NULL) {
        c->failure = UCS_ERR_NO_MEMORY;
        return;
    }
    op->conn = c;
    op->h.flush.nonce = ctx->nonce;
    op->h.flush.rank = ctx->rank;
    op->h.flush.token = (uint64_t)(uintptr_t)c;
    op->h.flush.seq = c->am_seq;
    op->h.flush.sent = c->am_sent;
    op->h.flush.epoch = ctx->epoch;
    (void)send_message(c, AM_FLUSH, op, sizeof(flush_header), NULL, 0,
                       UCP_AM_SEND_FLAG_REPLY, NULL);
}

static ucs_status_t on_ack(void *arg, const void *header, size_t header_len,
                           void *data, size_t length,
                           const ucp_am_recv_param_t *param)
{
    wex_transport_ctx *ctx = arg;
    ack_header a;

    (void)data;
    (void)length;
    (void)param;
    if (header_len != sizeof(a))
        return UCS_OK;
    memcpy(&a, header, sizeof(a));
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next)
        if ((uint64_t)(uintptr_t)c == a.token && a.seq == c->am_seq) {
            c->am_answered = 1;
            c->am_placed = a.placed;
            c->am_refused = a.refused;
            c->am_fenced = a.fenced;
        }
    return UCS_OK;
}

/* ---- destination ---------------------------------------------------- */

static ucx_am_source *find_source(wex_transport_ctx *ctx, uint64_t nonce,
                                  uint64_t rank)
{
    ucx_am_source *s;

    for (s = ctx->am_sources; s != NULL; s = s->next)
        if (s->nonce == nonce)
            return s;
    s = calloc(1, sizeof(*s));
    if (s == NULL)
        return NULL;
    s->nonce = nonce;
    s->rank = rank;
    s->next = ctx->am_sources;
    ctx->am_sources = s;
    return s;
}

/* Whether [address, address + bytes) lies inside one mapped buffer. */
static int inside_a_buffer(wex_transport_ctx *ctx, uint64_t address,
                           uint64_t bytes)
{
    for (wt_link *l = ctx->mems; l != NULL; l = l->next) {
        const wex_transport_mem *m = WT_MEM_OF(l);
        uint64_t base = (uint64_t)(uintptr_t)m->address;

        if (address >= base && bytes <= m->bytes &&
            address - base <= m->bytes - bytes)
            return 1;
    }
    return 0;
}

static void ack_sent(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    free(user_data);
    ucp_request_free(request);
}

/* Answers the source's pending flush once every byte it had sent is
 * placed. A source that is gone gets no answer. */
static void maybe_answer(wex_transport_ctx *ctx, ucx_am_source *s)
{
    ucp_request_param_t param;
    ack_header *a;
    void *req;

    if (!s->flush_pending || s->failed || s->receiving != 0 ||
        s->placed + s->refused + s->fenced_total < s->flush.sent)
        return;
    s->flush_pending = 0;
    a = malloc(sizeof(*a));
    if (a == NULL)
        return; /* the source's flush times out */
    a->token = s->flush.token;
    a->seq = s->flush.seq;
    a->placed = s->placed;
    a->refused = s->refused;
    a->fenced = s->fenced_epoch == s->flush.epoch ? s->fenced : 0;
    memset(&param, 0, sizeof(param));
    param.op_attr_mask =
        UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = ack_sent;
    param.user_data = a;
    req = ucp_am_send_nbx(s->reply_ep, AM_ACK, a, sizeof(*a), NULL, 0, &param);
    if (!UCS_PTR_IS_PTR(req))
        free(a);
    if (UCS_PTR_IS_ERR(req))
        WEX_DEBUG(ctx->host,
                  "destination rank %llu: answering source rank "
                  "%llu's flush: %s",
                  (unsigned long long)ctx->rank, (unsigned long long)s->rank,
                  ucs_status_string(UCS_PTR_STATUS(req)));
}

static void received(void *request, ucs_status_t status, size_t length,
                     void *user_data)
{
    recv_op *op = user_data;
    ucx_am_source *s = op->src;

    (void)length;
    s->receiving--;
    *op->prev = op->next;
    if (op->next != NULL)
        op->next->prev = op->prev;
    if (status == UCS_OK) {
        s->placed += op->bytes;
        maybe_answer(op->ctx, s);
    } else {
        /* Most likely the source died: answer it no more. If it lives
         * on (a network fault), its next flush revives it and hears of
         * these bytes as not placed. */
        s->failed = 1;
        s->refused += op->bytes;
        WEX_DEBUG(op->ctx->host,
                  "destination rank %llu: receiving from "
                  "source rank %llu failed: %s",
                  (unsigned long long)op->ctx->rank,
                  (unsigned long long)s->rank, ucs_status_string(status));
    }
    free(op);
    ucp_request_free(request);
}

static ucs_status_t on_data(void *arg, const void *header, size_t header_len,
                            void *data, size_t length,
                            const ucp_am_recv_param_t *param)
{
    wex_transport_ctx *ctx = arg;
    int rndv = (param->recv_attr & UCP_AM_RECV_ATTR_FLAG_RNDV) != 0;
    ucp_request_param_t rp;
    ucx_am_source *s;
    data_header d;
    recv_op *op;
    void *req;

    if (header_len != sizeof(d))
        return UCS_OK; /* not ours: dropped (a rendezvous one too) */
    memcpy(&d, header, sizeof(d));
    s = find_source(ctx, d.nonce, d.rank);
    if (s == NULL)
        return rndv ? UCS_ERR_NO_MEMORY : UCS_OK;
    if (ctx->fencing && d.epoch != ctx->open_epoch) {
        if (s->fenced_epoch != d.epoch)
            s->fenced = 0;
        s->fenced_epoch = d.epoch;
        s->fenced += length;
        s->fenced_total += length;
        return UCS_OK; /* dropped; the answer to the flush counts them */
    }
    if (!inside_a_buffer(ctx, d.address, length)) {
        s->refused += length;
        WEX_DEBUG(ctx->host,
                  "destination rank %llu: refused %zu bytes from "
                  "source rank %llu at 0x%llx, outside every buffer",
                  (unsigned long long)ctx->rank, length,
                  (unsigned long long)s->rank, (unsigned long long)d.address);
        return UCS_OK; /* dropped; the answer to the flush counts them */
    }
    if (!rndv) {
        memcpy((void *)(uintptr_t)d.address, data, length);
        s->placed += length;
        return UCS_OK;
    }
    op = malloc(sizeof(*op));
    if (op == NULL)
        return UCS_ERR_NO_MEMORY;
    op->ctx = ctx;
    op->src = s;
    op->bytes = length;
    op->ep = (param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP)
                 ? param->reply_ep
                 : NULL;
    memset(&rp, 0, sizeof(rp));
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
    rp.cb.recv_am = received;
    rp.user_data = op;
    s->receiving++;
    op->next = ctx->am_receiving;
    op->prev = &ctx->am_receiving;
    if (op->next != NULL)
        op->next->prev = &op->next;
    ctx->am_receiving = op;
    req = ucp_am_recv_data_nbx(ctx->worker, data, (void *)(uintptr_t)d.address,
                               length, &rp);
    if (UCS_PTR_IS_PTR(req))
        return UCS_INPROGRESS;
    ctx->am_receiving = op->next; /* done at once: never in flight */
    if (op->next != NULL)
        op->next->prev = &ctx->am_receiving;
    s->receiving--;
    free(op);
    if (UCS_PTR_IS_ERR(req))
        s->refused += length;
    else
        s->placed += length;
    return UCS_INPROGRESS; /* UCP owns the descriptor now */
}

static ucs_status_t on_flush(void *arg, const void *header, size_t header_len,
                             void *data, size_t length,
                             const ucp_am_recv_param_t *param)
{
    wex_transport_ctx *ctx = arg;
    ucx_am_source *s;
    flush_header f;

    (void)data;
    (void)length;
    if (header_len != sizeof(f) ||
        !(param->recv_attr & UCP_AM_RECV_ATTR_FIELD_REPLY_EP))
        return UCS_OK;
    memcpy(&f, header, sizeof(f));
    s = find_source(ctx, f.nonce, f.rank);
    if (s == NULL)
        return UCS_OK;
    s->flush = f;
    s->flush_pending = 1;
    s->failed = 0; /* it speaks, so it lives */
    s->reply_ep = param->reply_ep;
    maybe_answer(ctx, s);
    return UCS_OK;
}

/* ---- handlers ------------------------------------------------------- */

static wex_status set_handler(wex_transport_ctx *ctx, unsigned id,
                              ucp_am_recv_callback_t cb)
{
    ucp_am_handler_param_t hp;
    ucs_status_t us;

    memset(&hp, 0, sizeof(hp));
    hp.field_mask = UCP_AM_HANDLER_PARAM_FIELD_ID |
                    UCP_AM_HANDLER_PARAM_FIELD_CB |
                    UCP_AM_HANDLER_PARAM_FIELD_ARG;
    hp.id = id;
    hp.cb = cb;
    hp.arg = ctx;
    us = ucp_worker_set_am_recv_handler(ctx->worker, &hp);
    if (us != UCS_OK)
        return WP_FAIL(ctx->host, WEX_ERR_SYSTEM,
                       "ucp_worker_set_am_recv_handler: %s",
                       ucs_status_string(us));
    return WEX_OK;
}

wex_status ucx_am_handlers(wex_transport_ctx *ctx)
{
    wex_status st;

    if (ctx->side == WEX_SIDE_SOURCE) {
        ctx->nonce = ucx_am_new_nonce();
        return set_handler(ctx, AM_ACK, on_ack);
    }
    if ((st = set_handler(ctx, AM_DATA, on_data)) != WEX_OK)
        return st;
    return set_handler(ctx, AM_FLUSH, on_flush);
}

uint64_t ucx_am_receiving(const wex_transport_ctx *ctx)
{
    uint64_t n = 0;

    for (const recv_op *op = ctx->am_receiving; op != NULL; op = op->next)
        n++;
    return n;
}

static void ep_closed(void *request, ucs_status_t status, void *user_data)
{
    (void)status;
    (void)user_data;
    ucp_request_free(request);
}

unsigned ucx_am_cut_receiving(wex_transport_ctx *ctx)
{
    uint64_t n = ucx_am_receiving(ctx);
    ucp_ep_h *eps = malloc((n ? n : 1) * sizeof(*eps));
    ucp_request_param_t param;
    unsigned closed = 0;

    if (eps == NULL)
        return 0;
    /* Gathered first: closing completes receives, which leave the list. */
    for (recv_op *op = ctx->am_receiving; op != NULL; op = op->next) {
        ucp_ep_h ep = op->ep;
        if (ep == NULL)
            continue;
        for (recv_op *o = op; o != NULL; o = o->next)
            if (o->ep == ep)
                o->ep = NULL; /* closed once */
        for (ucx_am_source *s = ctx->am_sources; s != NULL; s = s->next)
            if (s->reply_ep == ep)
                s->failed = 1; /* its flush gets no answer */
        eps[closed++] = ep;
    }
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS | UCP_OP_ATTR_FIELD_CALLBACK;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    param.cb.send = ep_closed;
    for (unsigned i = 0; i < closed; i++) {
        void *req = ucp_ep_close_nbx(eps[i], &param);
        if (UCS_PTR_IS_ERR(req))
            WEX_DEBUG(ctx->host,
                      "destination rank %llu: closing a source's "
                      "endpoint: %s",
                      (unsigned long long)ctx->rank,
                      ucs_status_string(UCS_PTR_STATUS(req)));
    }
    free(eps);
    return closed;
}

void ucx_am_sources_free(wex_transport_ctx *ctx)
{
    while (ctx->am_sources != NULL) {
        ucx_am_source *s = ctx->am_sources;
        ctx->am_sources = s->next;
        free(s);
    }
}
