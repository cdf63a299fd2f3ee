/*
 * The `ucx` transport: one-sided puts with UCP, between processes on one
 * host or across hosts (RDMA, TCP, shared memory: whatever UCX selects;
 * UCX_TLS and the other UCX_* variables are honoured, never overridden).
 *
 * Every context owns one ucp_context and one worker.
 *  - A destination rank maps each buffer with ucp_mem_map (mem_alloc:
 *    fresh anonymous pages, or UCX's own shared memory, see
 *    ucx_allocated; mem_register: the caller's memory, no copy) and
 *    publishes, per buffer, its worker's address, the packed rkey and
 *    the buffer's address and size (ucx_key.h).
 *  - A source rank creates one endpoint per destination worker (shared by
 *    every buffer of that rank), unpacks each buffer's rkey, and writes
 *    with ucp_put_nbx; flush flushes every endpoint and waits.
 *
 * Several of UCX's transports (tcp, and RMA emulated over active messages
 * on any transport without native puts) only land a put once the
 * destination's worker runs. A destination rank does not call into the
 * transport while it waits for a step (it blocks in the host's
 * rendezvous), so its context runs a progress thread: it progresses the
 * worker while there is work and otherwise sleeps on the worker's event
 * fd. Every UCP call on a destination context holds ctx->lock, so the
 * worker only needs UCS_THREAD_MODE_SERIALIZED. Sources progress their
 * own worker inside put and flush, from the caller's thread.
 *
 * Endpoints use UCP_ERR_HANDLING_MODE_PEER: a destination that dies
 * fails its endpoint (the error callback marks it), and put and flush
 * then return WEX_ERR_PEER naming it; a destination that hangs makes
 * flush return WEX_ERR_TIMEOUT after flush_timeout_ms. Nothing waits
 * without a deadline, ctx_destroy included. UCX 1.13 serves such
 * endpoints with none of its shared-memory transports, so ranks on one
 * host talk tcp over loopback; the option error_handling "none" trades
 * the detection for shared memory (about 5x the bandwidth measured on
 * one host), a dead destination then showing only as a flush timeout,
 * or not at all when its memory is shared and still mapped.
 *
 * Over TCP, UCX emulates puts with active messages and the destination's
 * worker acknowledges each one. UCX 1.13 aborts the process when such an
 * acknowledgement fails (ucp_request_try_send: "unexpected error"), which
 * happens when the source died with puts still in flight; nothing here
 * can intercept it, so that destination dies too and the host's
 * rendezvous reports both deaths.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <ucp/api/ucp.h>
#include <wex/plugin.h>

#include "ucx_key.h"
#include "transport_common.h"
#include "transport_state.h"

#define FLUSH_TIMEOUT_DEFAULT_MS 60000
#define CONNECT_TIMEOUT_DEFAULT_MS 10000
#define TIMEOUT_MAX_MS 3600000
#define MAX_OUTSTANDING_DEFAULT 1024
#define MAX_OUTSTANDING_MAX 1048576
/* How long closing endpoints may take to flush and say goodbye before
 * they are abandoned to the worker's destruction. */
#define CLOSE_TIMEOUT_MS 2000
/* Progress calls that found nothing to do before the progress thread
 * sleeps, and how long it sleeps at most: a safety net for interfaces
 * that cannot raise wakeup events. */
#define IDLE_SPINS 64
#define IDLE_WAIT_MS 5

/* An endpoint to one destination rank's worker, shared by every buffer
 * of that rank a source attaches. Never freed before the worker is
 * destroyed: a late completion may still name it. */
typedef struct ucx_conn {
    struct ucx_conn *next;
    wex_transport_ctx *ctx;
    ucp_ep_h ep; /* NULL once closed */
    uint8_t *address;
    uint32_t address_len;
    uint64_t rank;
    uint32_t pid;
    char host[UCX_HOST_MAX + 1];
    uint64_t peers;       /* attached buffers using it */
    ucs_status_t failure; /* UCS_OK until the endpoint fails */
    int stuck; /* a flush or put timed out: close it by force */
    /* the flush in progress */
    void *flush_req;
    int flush_done;
    ucs_status_t flush_status;
} ucx_conn;

struct wex_transport_mem {
    wex_transport_mem *prev, *next;
    ucp_mem_h memh;
    void *address;
    uint64_t bytes;
    uint64_t map_bytes; /* our own mmap's length, or 0: caller's memory,
                           or UCX's (freed by ucp_mem_unmap) */
};

struct wex_transport_peer {
    wex_transport_peer *prev, *next;
    ucx_conn *conn;
    ucp_rkey_h rkey;
    uint64_t rank;
    uint64_t address; /* in the destination */
    uint64_t bytes;
};

struct wex_transport_ctx {
    wex_plugin_state *state;
    const wex_host_services *host;
    uint32_t side;
    uint64_t rank;
    int flush_timeout_ms;
    int connect_timeout_ms;
    uint64_t max_outstanding;
    ucp_err_handling_mode_t err_mode;
    ucp_context_h context;
    ucp_worker_h worker;
    /* destination */
    pthread_mutex_t lock; /* every UCP call, against the progress thread */
    ucp_address_t *address;
    size_t address_len;
    char host_name[UCX_HOST_MAX + 1];
    pthread_t thread;
    int thread_started;
    atomic_int stop;
    int efd;     /* the worker's event fd, or -1: sleep instead */
    int wake_fd; /* an eventfd that ends the thread's sleep */
    wex_transport_mem *mems;
    /* source */
    ucx_conn *conns;
    wex_transport_peer *peers;
    uint64_t outstanding; /* put requests not yet completed */
};

static int64_t now_ms(void)
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
static void source_progress(wex_transport_ctx *ctx, unsigned *idle)
{
    if (ucp_worker_progress(ctx->worker) != 0)
        *idle = 0;
    else if (++*idle > 1024)
        nap_us(20);
}

/* ---- plugin -------------------------------------------------------- */

/* ---- destination progress thread ----------------------------------- */

static void *progress_main(void *arg)
{
    wex_transport_ctx *ctx = arg;
    unsigned idle = 0;

    while (!atomic_load_explicit(&ctx->stop, memory_order_acquire)) {
        struct pollfd pfd[2];
        ucs_status_t st;
        unsigned n;

        pthread_mutex_lock(&ctx->lock);
        n = ucp_worker_progress(ctx->worker);
        pthread_mutex_unlock(&ctx->lock);
        if (n != 0) {
            idle = 0;
            continue;
        }
        if (++idle < IDLE_SPINS)
            continue;
        idle = 0;
        st = UCS_ERR_UNSUPPORTED;
        if (ctx->efd >= 0) {
            pthread_mutex_lock(&ctx->lock);
            st = ucp_worker_arm(ctx->worker);
            pthread_mutex_unlock(&ctx->lock);
            if (st == UCS_ERR_BUSY) /* events arrived meanwhile */
                continue;
        }
        pfd[0].fd = ctx->wake_fd;
        pfd[0].events = POLLIN;
        pfd[1].fd = st == UCS_OK ? ctx->efd : -1; /* -1: ignored */
        pfd[1].events = POLLIN;
        (void)poll(pfd, 2, st == UCS_OK ? IDLE_WAIT_MS : 1);
    }
    return NULL;
}

static wex_status progress_start(wex_transport_ctx *ctx)
{
    const wex_host_services *h = ctx->host;
    ucs_status_t st;
    int err;

    ctx->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (ctx->wake_fd < 0)
        return FAIL(h, WEX_ERR_SYSTEM, "eventfd: %s", strerror(errno));
    st = ucp_worker_get_efd(ctx->worker, &ctx->efd);
    if (st != UCS_OK) {
        WEX_DEBUG(h, "destination rank %llu: no worker event fd (%s): the "
                  "progress thread polls instead",
                  (unsigned long long)ctx->rank, ucs_status_string(st));
        ctx->efd = -1;
    }
    err = pthread_create(&ctx->thread, NULL, progress_main, ctx);
    if (err != 0)
        return FAIL(h, WEX_ERR_SYSTEM, "cannot start the progress thread: "
                    "%s", strerror(err));
    ctx->thread_started = 1;
    return WEX_OK;
}

static void progress_stop(wex_transport_ctx *ctx)
{
    uint64_t one = 1;

    if (!ctx->thread_started)
        return;
    atomic_store_explicit(&ctx->stop, 1, memory_order_release);
    if (write(ctx->wake_fd, &one, sizeof(one)) < 0) {
        /* the thread wakes within IDLE_WAIT_MS anyway */
    }
    pthread_join(ctx->thread, NULL);
    ctx->thread_started = 0;
}

/* ---- context ------------------------------------------------------- */

/* "/error_handling": "peer" (the default) or "none". */
static wex_status get_err_mode(const wex_host_services *h,
                               const wex_options *options,
                               ucp_err_handling_mode_t *mode)
{
    const char *v = NULL;

    *mode = UCP_ERR_HANDLING_MODE_PEER;
    if (options == NULL ||
        h->opt_type(options, "/error_handling") == WEX_JSON_MISSING)
        return WEX_OK;
    if (h->opt_get_str(options, "/error_handling", &v) != WEX_OK ||
        (strcmp(v, "peer") != 0 && strcmp(v, "none") != 0))
        return FAIL(h, WEX_ERR_INVALID,
                    "/error_handling: expected \"peer\" or \"none\"");
    if (strcmp(v, "none") == 0)
        *mode = UCP_ERR_HANDLING_MODE_NONE;
    return WEX_OK;
}

static void host_name(char *out)
{
    char name[256];

    if (gethostname(name, sizeof(name)) != 0)
        strcpy(name, "?");
    name[sizeof(name) - 1] = '\0';
    name[UCX_HOST_MAX] = '\0';
    for (char *p = name; *p; p++)
        if ((unsigned char)*p < 0x21 || (unsigned char)*p > 0x7e)
            *p = '?';
    strcpy(out, name);
}

static void ucx_ctx_destroy(wex_transport_ctx *ctx);

static wex_status ucx_ctx_create(wex_plugin_state *state,
                                 const wex_transport_args *args,
                                 wex_transport_ctx **ctx_p)
{
    const wex_host_services *h = state->host;
    int64_t flush_timeout = FLUSH_TIMEOUT_DEFAULT_MS;
    int64_t connect_timeout = CONNECT_TIMEOUT_DEFAULT_MS;
    int64_t max_outstanding = MAX_OUTSTANDING_DEFAULT;
    ucp_err_handling_mode_t err_mode;
    ucp_worker_params_t wp;
    ucp_params_t params;
    wex_transport_ctx *ctx;
    ucs_status_t us;
    wex_status st;

    if (args == NULL ||
        !WEX_HAS_MEMBER(wex_transport_args, options, args->struct_size))
        return FAIL(h, WEX_ERR_ABI, "transport args too small (%u bytes)",
                    args ? args->struct_size : 0u);
    if (args->side != WEX_SIDE_SOURCE && args->side != WEX_SIDE_DESTINATION)
        return FAIL(h, WEX_ERR_INVALID, "side %u is neither source nor "
                    "destination", args->side);
    if (args->side == WEX_SIDE_DESTINATION && args->destination_ranks != 0 &&
        args->rank >= args->destination_ranks)
        return FAIL(h, WEX_ERR_INVALID,
                    "destination rank %llu is outside 0..%llu",
                    (unsigned long long)args->rank,
                    (unsigned long long)(args->destination_ranks - 1));
    if ((st = wt_option_i64(h, args->options, "/flush_timeout_ms", 1,
                         TIMEOUT_MAX_MS, &flush_timeout)) != WEX_OK ||
        (st = wt_option_i64(h, args->options, "/connect_timeout_ms", 0,
                         TIMEOUT_MAX_MS, &connect_timeout)) != WEX_OK ||
        (st = wt_option_i64(h, args->options, "/max_outstanding", 1,
                         MAX_OUTSTANDING_MAX, &max_outstanding)) != WEX_OK ||
        (st = get_err_mode(h, args->options, &err_mode)) != WEX_OK)
        return st;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    ctx->state = state;
    ctx->host = h;
    ctx->side = args->side;
    ctx->rank = args->rank;
    ctx->flush_timeout_ms = (int)flush_timeout;
    ctx->connect_timeout_ms = (int)connect_timeout;
    ctx->max_outstanding = (uint64_t)max_outstanding;
    ctx->err_mode = err_mode;
    ctx->efd = -1;
    ctx->wake_fd = -1;
    pthread_mutex_init(&ctx->lock, NULL);
    host_name(ctx->host_name);

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    params.features = UCP_FEATURE_RMA;
    if (ctx->side == WEX_SIDE_DESTINATION)
        params.features |= UCP_FEATURE_WAKEUP;
    params.name = "wex";
    /* A source talks to destination workers; a destination's worker gets
     * a reverse endpoint from each source that writes to it. */
    params.estimated_num_eps =
        (size_t)(ctx->side == WEX_SIDE_SOURCE ? args->destination_ranks
                                              : args->source_ranks);
    if (params.estimated_num_eps == 0)
        params.estimated_num_eps = 1;
    us = ucp_init(&params, NULL, &ctx->context);
    if (us != UCS_OK) {
        ctx->context = NULL;
        st = FAIL(h, us == UCS_ERR_NO_MEMORY ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                  "ucp_init: %s (check the UCX_* environment, e.g. "
                  "UCX_TLS)", ucs_status_string(us));
        goto fail;
    }
    memset(&wp, 0, sizeof(wp));
    wp.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    wp.thread_mode = ctx->side == WEX_SIDE_DESTINATION
                         ? UCS_THREAD_MODE_SERIALIZED
                         : UCS_THREAD_MODE_SINGLE;
    us = ucp_worker_create(ctx->context, &wp, &ctx->worker);
    if (us != UCS_OK) {
        ctx->worker = NULL;
        st = FAIL(h, WEX_ERR_SYSTEM, "ucp_worker_create: %s",
                  ucs_status_string(us));
        goto fail;
    }
    if (ctx->side == WEX_SIDE_DESTINATION) {
        us = ucp_worker_get_address(ctx->worker, &ctx->address,
                                    &ctx->address_len);
        if (us != UCS_OK) {
            ctx->address = NULL;
            st = FAIL(h, WEX_ERR_SYSTEM, "ucp_worker_get_address: %s",
                      ucs_status_string(us));
            goto fail;
        }
        if ((st = progress_start(ctx)) != WEX_OK)
            goto fail;
        WEX_DEBUG(h, "destination rank %llu: UCX worker ready (%zu-byte "
                  "address, %s)",
                  (unsigned long long)ctx->rank, ctx->address_len,
                  ctx->efd >= 0 ? "event-driven progress thread"
                                : "polling progress thread");
    }
    *ctx_p = ctx;
    return WEX_OK;
fail:
    ucx_ctx_destroy(ctx);
    return st;
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

static wex_status peer_failed(wex_transport_ctx *ctx, const ucx_conn *c)
{
    return FAIL(ctx->host, WEX_ERR_PEER,
                "destination rank %llu unreachable: %s (host %s, pid %u)",
                (unsigned long long)c->rank, ucs_status_string(c->failure),
                c->host, c->pid);
}

/* Closes endpoints: those without buffers (all = 0) or every one. They
 * get CLOSE_TIMEOUT_MS together to close gracefully (a failed or stuck
 * one is closed by force); after that they are left to
 * ucp_worker_destroy. */
static void close_conns(wex_transport_ctx *ctx, int all)
{
    enum { BATCH = 64 };
    int64_t deadline = now_ms() + CLOSE_TIMEOUT_MS;
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
            param.flags = c->failure != UCS_OK || c->stuck
                              ? UCP_EP_CLOSE_FLAG_FORCE
                              : 0;
            req = ucp_ep_close_nbx(c->ep, &param);
            c->ep = NULL;
            if (UCS_PTR_IS_PTR(req))
                reqs[n++] = req;
        }
        for (size_t i = 0; i < n; i++) {
            while (ucp_request_check_status(reqs[i]) == UCS_INPROGRESS &&
                   now_ms() < deadline)
                source_progress(ctx, &idle);
            ucp_request_free(reqs[i]);
        }
    } while (n == BATCH);
}

static ucx_conn *find_conn(wex_transport_ctx *ctx, const ucx_key *k)
{
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next)
        if (c->ep != NULL && c->address_len == k->worker_address_len &&
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
static void flush_start(ucx_conn *c)
{
    ucp_request_param_t param;
    void *req;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA;
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
static void flush_abandon(ucx_conn *c)
{
    if (c->flush_req != NULL) {
        ucp_request_free(c->flush_req);
        c->flush_req = NULL;
    }
    c->flush_done = 1;
}

/* Logs which UCX transports an endpoint uses, at debug level. */
static void log_ep_info(wex_transport_ctx *ctx, const ucx_conn *c)
{
    const wex_host_services *h = ctx->host;
    char *text = NULL, *line, *save = NULL;
    size_t size = 0;
    FILE *f;

    if (!h->log_enabled(h->ctx, WEX_LOG_DEBUG))
        return;
    f = open_memstream(&text, &size);
    if (f == NULL)
        return;
    ucp_ep_print_info(c->ep, f);
    fclose(f);
    for (line = strtok_r(text, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save))
        if (line[0] != '\0' && strspn(line, "#= ") != strlen(line))
            WEX_DEBUG(h, "destination rank %llu: %s",
                      (unsigned long long)c->rank, line);
    free(text);
}

/* An endpoint to the worker in key k, connected (unless
 * connect_timeout_ms is 0). */
static wex_status conn_open(wex_transport_ctx *ctx, const ucx_key *k,
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
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
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
        return peer_failed(ctx, c);
    }
    if (ctx->connect_timeout_ms == 0) {
        *conn_p = c;
        return WEX_OK;
    }
    /* Flushing a new endpoint completes its wireup: a destination that
     * cannot be reached fails now, not on the first step. */
    deadline = now_ms() + ctx->connect_timeout_ms;
    flush_start(c);
    while (!c->flush_done && c->failure == UCS_OK && now_ms() < deadline)
        source_progress(ctx, &idle);
    if (c->failure == UCS_OK && c->flush_status != UCS_OK)
        c->failure = c->flush_status;
    if (c->failure != UCS_OK || !c->flush_done) {
        wex_status st = c->failure != UCS_OK
                            ? peer_failed(ctx, c)
                            : FAIL(h, WEX_ERR_TIMEOUT,
                                   "destination rank %llu (host %s, pid %u): "
                                   "no connection within %d ms "
                                   "(connect_timeout_ms)",
                                   (unsigned long long)c->rank, c->host,
                                   c->pid, ctx->connect_timeout_ms);
        flush_abandon(c);
        if (c->failure == UCS_OK)
            c->failure = UCS_ERR_TIMED_OUT;
        close_conns(ctx, 0);
        return st;
    }
    log_ep_info(ctx, c);
    *conn_p = c;
    return WEX_OK;
}

/* ---- memory -------------------------------------------------------- */

static wex_status map_memory(wex_transport_ctx *ctx, void *address,
                             uint64_t bytes, ucp_mem_h *memh_p)
{
    ucp_mem_map_params_t mp;
    ucs_status_t us;

    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = address;
    mp.length = (size_t)bytes;
    pthread_mutex_lock(&ctx->lock);
    us = ucp_mem_map(ctx->context, &mp, memh_p);
    pthread_mutex_unlock(&ctx->lock);
    if (us != UCS_OK)
        return FAIL(ctx->host,
                    us == UCS_ERR_NO_MEMORY ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                    "ucp_mem_map of %llu bytes at %p: %s",
                    (unsigned long long)bytes, address,
                    ucs_status_string(us));
    return WEX_OK;
}

static wex_status mem_new(wex_transport_ctx *ctx, void *address,
                          uint64_t bytes, uint64_t map_bytes,
                          wex_transport_mem **mem_p)
{
    wex_transport_mem *m = calloc(1, sizeof(*m));
    wex_status st;

    if (m == NULL)
        return FAIL(ctx->host, WEX_ERR_NOMEM, "out of memory");
    st = map_memory(ctx, address, bytes, &m->memh);
    if (st != WEX_OK) {
        free(m);
        return st;
    }
    m->address = address;
    m->bytes = bytes;
    m->map_bytes = map_bytes;
    pthread_mutex_lock(&ctx->lock);
    m->next = ctx->mems;
    if (ctx->mems != NULL)
        ctx->mems->prev = m;
    ctx->mems = m;
    pthread_mutex_unlock(&ctx->lock);
    *mem_p = m;
    return WEX_OK;
}

/* Memory UCX allocates itself (UCX_ALLOC_PRIO: SysV or POSIX shared
 * memory first), which its shared-memory transports can write into
 * directly, where caller memory needs puts emulated over active messages.
 * Those transports only serve endpoints without peer error handling, so
 * only error_handling "none" asks for it. NULL when UCX cannot oblige
 * with zeroed, page-aligned memory. */
static wex_transport_mem *ucx_allocated(wex_transport_ctx *ctx,
                                        uint64_t bytes, uint64_t page)
{
    ucp_mem_map_params_t mp;
    ucp_mem_attr_t attr;
    wex_transport_mem *m = calloc(1, sizeof(*m));
    ucs_status_t us;

    if (m == NULL)
        return NULL;
    memset(&mp, 0, sizeof(mp));
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS |
                    UCP_MEM_MAP_PARAM_FIELD_LENGTH |
                    UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = NULL;
    mp.length = (size_t)bytes;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    memset(&attr, 0, sizeof(attr));
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    pthread_mutex_lock(&ctx->lock);
    us = ucp_mem_map(ctx->context, &mp, &m->memh);
    if (us == UCS_OK && (ucp_mem_query(m->memh, &attr) != UCS_OK ||
                         attr.length < bytes ||
                         (uintptr_t)attr.address % page != 0)) {
        ucp_mem_unmap(ctx->context, m->memh);
        us = UCS_ERR_UNSUPPORTED;
    }
    pthread_mutex_unlock(&ctx->lock);
    if (us != UCS_OK) {
        WEX_DEBUG(ctx->host, "UCX could not allocate %llu bytes (%s): "
                  "using anonymous memory",
                  (unsigned long long)bytes, ucs_status_string(us));
        free(m);
        return NULL;
    }
    /* The last of UCX's methods is the heap, which is not zeroed. */
    memset(attr.address, 0, (size_t)bytes);
    m->address = attr.address;
    m->bytes = bytes;
    pthread_mutex_lock(&ctx->lock);
    m->next = ctx->mems;
    if (ctx->mems != NULL)
        ctx->mems->prev = m;
    ctx->mems = m;
    pthread_mutex_unlock(&ctx->lock);
    return m;
}

static wex_status ucx_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                                void **address_p, wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uint64_t map_bytes = (bytes + page - 1) / page * page;
    void *address;
    wex_status st;

    if (bytes == 0 || map_bytes < bytes || map_bytes > (uint64_t)SIZE_MAX / 2)
        return FAIL(h, WEX_ERR_INVALID, "mem_alloc of %llu bytes",
                    (unsigned long long)bytes);
    if (ctx->err_mode == UCP_ERR_HANDLING_MODE_NONE &&
        (*mem_p = ucx_allocated(ctx, bytes, page)) != NULL) {
        *address_p = (*mem_p)->address;
        return WEX_OK;
    }
    /* Fresh anonymous pages: zeroed, page aligned, faulted in now so the
     * first step does not pay for it (UCX pins them itself where a
     * transport needs it). */
    address = mmap(NULL, (size_t)map_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
    if (address == MAP_FAILED)
        return FAIL(h, errno == ENOMEM ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                    "mmap of %llu bytes: %s", (unsigned long long)map_bytes,
                    strerror(errno));
    st = mem_new(ctx, address, bytes, map_bytes, mem_p);
    if (st != WEX_OK) {
        munmap(address, (size_t)map_bytes);
        return st;
    }
    *address_p = address;
    return WEX_OK;
}

static wex_status ucx_mem_register(wex_transport_ctx *ctx, void *address,
                                   uint64_t bytes, uint32_t memory_kind,
                                   wex_transport_mem **mem_p)
{
    const wex_host_services *h = ctx->host;

    if (memory_kind != WEX_MEMORY_HOST)
        return FAIL(h, WEX_ERR_UNSUPPORTED,
                    "memory kind %u: this ucx transport moves host memory "
                    "only", memory_kind);
    if (address == NULL || bytes == 0 ||
        (uint64_t)(uintptr_t)address + bytes < (uint64_t)(uintptr_t)address)
        return FAIL(h, WEX_ERR_INVALID, "mem_register of %p + %llu bytes",
                    address, (unsigned long long)bytes);
    return mem_new(ctx, address, bytes, 0, mem_p);
}

/* Called with ctx->lock held (or with no progress thread left). */
static void mem_free(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    ucp_mem_unmap(ctx->context, m->memh);
    if (m->map_bytes != 0)
        munmap(m->address, (size_t)m->map_bytes);
    free(m);
}

static void ucx_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&ctx->lock);
    if (m->prev != NULL)
        m->prev->next = m->next;
    else
        ctx->mems = m->next;
    if (m->next != NULL)
        m->next->prev = m->prev;
    mem_free(ctx, m);
    pthread_mutex_unlock(&ctx->lock);
}

static wex_status ucx_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m,
                              void *key, uint64_t *key_len)
{
    const wex_host_services *h = ctx->host;
    void *rkey = NULL;
    size_t rkey_len = 0, len, cap;
    ucs_status_t us;
    ucx_key k;

    if (ctx->side != WEX_SIDE_DESTINATION)
        return FAIL(h, WEX_ERR_UNSUPPORTED,
                    "mem_key on source rank %llu: only destination ranks "
                    "expose buffers",
                    (unsigned long long)ctx->rank);
    if (m == NULL || key == NULL || key_len == NULL)
        return FAIL(h, WEX_ERR_INVALID, "mem_key: NULL argument");
    pthread_mutex_lock(&ctx->lock);
    us = ucp_rkey_pack(ctx->context, m->memh, &rkey, &rkey_len);
    pthread_mutex_unlock(&ctx->lock);
    if (us != UCS_OK)
        return FAIL(h, WEX_ERR_SYSTEM, "ucp_rkey_pack: %s",
                    ucs_status_string(us));
    memset(&k, 0, sizeof(k));
    k.pid = (uint32_t)getpid();
    k.rank = ctx->rank;
    k.address = (uint64_t)(uintptr_t)m->address;
    k.size = m->bytes;
    k.worker_address = (const uint8_t *)ctx->address;
    k.worker_address_len = (uint32_t)ctx->address_len;
    k.rkey = rkey;
    k.rkey_len = (uint32_t)rkey_len;
    k.host_len = (uint32_t)strlen(ctx->host_name);
    memcpy(k.host, ctx->host_name, k.host_len);
    cap = (size_t)(*key_len < WEX_TRANSPORT_KEY_MAX ? *key_len
                                                     : WEX_TRANSPORT_KEY_MAX);
    len = ucx_key_encode(&k, key, cap);
    ucp_rkey_buffer_release(rkey);
    if (len == 0)
        return FAIL(h, WEX_ERR_INVALID,
                    "mem_key: a %llu-byte key buffer is too small (%zu bytes "
                    "needed: a %zu-byte worker address, a %zu-byte rkey)",
                    (unsigned long long)*key_len, ucx_key_length(&k),
                    ctx->address_len, rkey_len);
    *key_len = len;
    return WEX_OK;
}

/* ---- peers --------------------------------------------------------- */

static wex_status ucx_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
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

    if (ctx->side != WEX_SIDE_SOURCE)
        return FAIL(h, WEX_ERR_UNSUPPORTED,
                    "peer_attach on destination rank %llu: only source "
                    "ranks write",
                    (unsigned long long)ctx->rank);
    if (key_len > WEX_TRANSPORT_KEY_MAX)
        return FAIL(h, WEX_ERR_INVALID,
                    "key for destination rank %llu: %llu bytes, more than "
                    "any ucx key",
                    (unsigned long long)peer_rank,
                    (unsigned long long)key_len);
    if (ucx_key_decode(key, (size_t)key_len, &k, why, sizeof(why)) != 0)
        return FAIL(h, WEX_ERR_INVALID,
                    "key for destination rank %llu is not a valid ucx key: "
                    "%s",
                    (unsigned long long)peer_rank, why);
    if (k.rank != peer_rank)
        return FAIL(h, WEX_ERR_INVALID,
                    "the key is destination rank %llu's, not rank %llu's",
                    (unsigned long long)k.rank,
                    (unsigned long long)peer_rank);
    c = find_conn(ctx, &k);
    if (c != NULL && c->rank != k.rank)
        return FAIL(h, WEX_ERR_INVALID,
                    "the key names the worker of destination rank %llu, "
                    "already attached as rank %llu",
                    (unsigned long long)k.rank, (unsigned long long)c->rank);
    if (c != NULL && c->failure != UCS_OK)
        return peer_failed(ctx, c);
    p = calloc(1, sizeof(*p));
    if (p == NULL)
        return FAIL(h, WEX_ERR_NOMEM, "out of memory");
    if (c == NULL && (st = conn_open(ctx, &k, &c)) != WEX_OK) {
        free(p);
        return st;
    }
    us = ucp_ep_rkey_unpack(c->ep, k.rkey, &p->rkey);
    if (us != UCS_OK) {
        free(p);
        close_conns(ctx, 0);
        return FAIL(h, WEX_ERR_INVALID,
                    "destination rank %llu's rkey does not unpack: %s (a key "
                    "from another UCX version or configuration?)",
                    (unsigned long long)k.rank, ucs_status_string(us));
    }
    c->peers++;
    p->conn = c;
    p->rank = k.rank;
    p->address = k.address;
    p->bytes = k.size;
    p->next = ctx->peers;
    if (ctx->peers != NULL)
        ctx->peers->prev = p;
    ctx->peers = p;
    *peer_p = p;
    return WEX_OK;
}

static void peer_free(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    if (p->prev != NULL)
        p->prev->next = p->next;
    else
        ctx->peers = p->next;
    if (p->next != NULL)
        p->next->prev = p->prev;
    ucp_rkey_destroy(p->rkey);
    p->conn->peers--;
    free(p);
}

static void ucx_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    if (p == NULL)
        return;
    peer_free(ctx, p);
    close_conns(ctx, 0);
}

/* ---- data path ----------------------------------------------------- */

static void put_done(void *request, ucs_status_t status, void *user_data)
{
    ucx_conn *c = user_data;

    c->ctx->outstanding--;
    if (status != UCS_OK && status != UCS_ERR_CANCELED &&
        c->failure == UCS_OK)
        c->failure = status;
    ucp_request_free(request);
}

static wex_status ucx_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                          uint64_t offset, const void *src, uint64_t bytes)
{
    ucx_conn *c = p->conn;
    ucp_request_param_t param;
    void *req;

    if (offset > p->bytes || bytes > p->bytes - offset)
        return FAIL(ctx->host, WEX_ERR_INVALID,
                    "put of %llu bytes at offset %llu overruns destination "
                    "rank %llu's %llu-byte buffer",
                    (unsigned long long)bytes, (unsigned long long)offset,
                    (unsigned long long)p->rank,
                    (unsigned long long)p->bytes);
    if (bytes == 0)
        return WEX_OK;
    if (c->failure != UCS_OK)
        return peer_failed(ctx, c);
    if (ctx->outstanding >= ctx->max_outstanding) {
        int64_t deadline = now_ms() + ctx->flush_timeout_ms;
        unsigned idle = 0;

        while (ctx->outstanding >= ctx->max_outstanding) {
            if (c->failure != UCS_OK)
                return peer_failed(ctx, c);
            if (now_ms() >= deadline) {
                c->stuck = 1;
                return FAIL(ctx->host, WEX_ERR_TIMEOUT,
                            "put to destination rank %llu: %llu puts still "
                            "in flight after %d ms (flush_timeout_ms)",
                            (unsigned long long)p->rank,
                            (unsigned long long)ctx->outstanding,
                            ctx->flush_timeout_ms);
            }
            source_progress(ctx, &idle);
        }
    }
    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                         UCP_OP_ATTR_FIELD_USER_DATA;
    param.cb.send = put_done;
    param.user_data = c;
    req = ucp_put_nbx(c->ep, src, (size_t)bytes, p->address + offset,
                      p->rkey, &param);
    if (UCS_PTR_IS_ERR(req)) {
        if (c->failure == UCS_OK)
            c->failure = UCS_PTR_STATUS(req);
        return peer_failed(ctx, c);
    }
    if (req != NULL)
        ctx->outstanding++;
    return WEX_OK;
}

static wex_status ucx_flush(wex_transport_ctx *ctx)
{
    const wex_host_services *h = ctx->host;
    int64_t deadline = now_ms() + ctx->flush_timeout_ms;
    const ucx_conn *failed = NULL, *late = NULL;
    uint64_t pending = 0;
    unsigned idle = 0;

    if (ctx->side != WEX_SIDE_SOURCE)
        return WEX_OK;
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next)
        if (c->ep != NULL && c->failure == UCS_OK)
            flush_start(c);
    for (;;) {
        pending = 0;
        late = NULL;
        for (ucx_conn *c = ctx->conns; c != NULL && failed == NULL;
             c = c->next) {
            if (c->ep == NULL)
                continue;
            if (c->failure == UCS_OK && c->flush_done &&
                c->flush_status != UCS_OK)
                c->failure = c->flush_status;
            if (c->failure != UCS_OK)
                failed = c;
            else if (!c->flush_done && pending++ == 0)
                late = c;
        }
        if (failed != NULL || pending == 0 || now_ms() >= deadline)
            break;
        source_progress(ctx, &idle);
    }
    for (ucx_conn *c = ctx->conns; c != NULL; c = c->next) {
        if (c->ep != NULL && !c->flush_done && failed == NULL)
            c->stuck = 1; /* timed out */
        if (c->ep != NULL)
            flush_abandon(c);
    }
    if (failed != NULL)
        return peer_failed(ctx, failed);
    if (pending != 0)
        return FAIL(h, WEX_ERR_TIMEOUT,
                    "flush: destination rank %llu (host %s, pid %u)%s did not "
                    "confirm its puts within %d ms (flush_timeout_ms)",
                    (unsigned long long)late->rank, late->host, late->pid,
                    pending > 1 ? " and others" : "", ctx->flush_timeout_ms);
    return WEX_OK;
}

/* ---- teardown ------------------------------------------------------ */

static void ucx_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    progress_stop(ctx);
    while (ctx->peers != NULL)
        peer_free(ctx, ctx->peers);
    if (ctx->worker != NULL)
        close_conns(ctx, 1);
    while (ctx->mems != NULL) {
        wex_transport_mem *m = ctx->mems;
        ctx->mems = m->next;
        mem_free(ctx, m);
    }
    if (ctx->address != NULL)
        ucp_worker_release_address(ctx->worker, ctx->address);
    if (ctx->worker != NULL)
        ucp_worker_destroy(ctx->worker);
    if (ctx->context != NULL)
        ucp_cleanup(ctx->context);
    /* Only now: the worker's last completions could still name them. */
    while (ctx->conns != NULL) {
        ucx_conn *c = ctx->conns;
        ctx->conns = c->next;
        free(c->address);
        free(c);
    }
    if (ctx->wake_fd >= 0)
        close(ctx->wake_fd);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---- descriptor ---------------------------------------------------- */

static const wex_transport_ops ucx_ops = {
    sizeof(wex_transport_ops),
    0,
    WEX_TRANSPORT_CAP_HOST_MEMORY | WEX_TRANSPORT_CAP_ONE_SIDED |
        WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_NETWORK |
        WEX_TRANSPORT_CAP_ALLOC,
    ucx_ctx_create,
    ucx_ctx_destroy,
    ucx_mem_alloc,
    ucx_mem_register,
    ucx_mem_deregister,
    ucx_mem_key,
    ucx_peer_attach,
    ucx_peer_detach,
    ucx_put,
    ucx_flush,
    NULL, /* recv: one-sided */
};

static const wex_plugin_desc ucx_desc = {
    sizeof(wex_plugin_desc), WEX_ABI_1_0, WEX_KIND_TRANSPORT,
    WEX_PLUGIN_THREAD_PER_CTX, "ucx", "0.1.0", wt_plugin_init, wt_plugin_fini, &ucx_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out)
{
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
    out->abi_version = WEX_ABI_1_0;
    out->desc = &ucx_desc;
    return WEX_OK;
}
