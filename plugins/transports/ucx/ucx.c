/*
 * The `ucx` transport: one-sided puts with UCP (active messages where no
 * lane does RMA natively), between processes on one host or across hosts
 * (RDMA, TCP, shared memory: whatever UCX selects; UCX_TLS and the other
 * UCX_* variables are honoured, never overridden).
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
 * Over TCP, UCX 1.13 emulates puts with active messages, slowly, and the
 * destination's worker acknowledges each one; it aborts the process when
 * such an acknowledgement fails, which happens when the source died with
 * puts in flight. So where no lane of an endpoint does RMA natively
 * (option data_path "auto"), sources send their bytes as active messages
 * of their own, which the destination places and acknowledges per flush
 * (ucx_am.c); nothing in that path is acknowledged by UCX on our behalf.
 *
 * This file: contexts, the progress thread and the descriptor; the rest
 * is listed in ucx_internal.h.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "plugin_options.h"
#include "ucx_internal.h"

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
        return WP_FAIL(h, WEX_ERR_SYSTEM, "eventfd: %s", strerror(errno));
    st = ucp_worker_get_efd(ctx->worker, &ctx->efd);
    if (st != UCS_OK) {
        WEX_DEBUG(h,
                  "destination rank %llu: no worker event fd (%s): the "
                  "progress thread polls instead",
                  (unsigned long long)ctx->rank, ucs_status_string(st));
        ctx->efd = -1;
    }
    err = pthread_create(&ctx->thread, NULL, progress_main, ctx);
    if (err != 0)
        return WP_FAIL(h, WEX_ERR_SYSTEM,
                       "cannot start the progress thread: "
                       "%s",
                       strerror(err));
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
    static const char *const names[] = {"peer", "none", NULL};
    int v = 0;
    wex_status st = wp_option_enum(h, options, "/error_handling", names, &v);

    *mode = v == 1 ? UCP_ERR_HANDLING_MODE_NONE : UCP_ERR_HANDLING_MODE_PEER;
    return st;
}

/* Whether UCX may open its tcp transport: UCX_TLS unset, or naming tcp
 * (or "all"), or excluding others but not tcp. Setting a tcp parameter
 * when no tcp interface opens makes UCX warn of an unused setting. */
static int tcp_may_open(void)
{
    const char *tls = getenv("UCX_TLS");

    if (tls == NULL || *tls == '\0')
        return 1;
    if (tls[0] == '^')
        return strstr(tls, "tcp") == NULL;
    return strstr(tls, "tcp") != NULL || strstr(tls, "all") != NULL;
}

/* UCX's configuration from the environment, with the tcp segment of
 * option tcp_segment_bytes unless UCX_TCP_RX_SEG_SIZE is set there. Over
 * tcp, each fragment of a rendezvous active message is one segment, and
 * at UCX's 64 KiB the fragments' headers, system calls and handler calls
 * cost a quarter of a sync's throughput on one host (tools/bench-ucx.sh).
 * UCX applies a modified transport parameter by its name in the
 * transport's table, without the "TCP_" prefix; tcp is the only UCX 1.13
 * transport with an RX_SEG_SIZE. */
static wex_status read_config(const wex_host_services *h, int64_t segment,
                              ucp_config_t **config)
{
    ucs_status_t us = ucp_config_read(NULL, NULL, config);
    char value[32];

    if (us != UCS_OK) {
        *config = NULL;
        return WP_FAIL(h, WEX_ERR_SYSTEM,
                       "ucp_config_read: %s (check the UCX_* environment)",
                       ucs_status_string(us));
    }
    if (getenv("UCX_TCP_RX_SEG_SIZE") != NULL || !tcp_may_open())
        return WEX_OK;
    snprintf(value, sizeof(value), "%lld", (long long)segment);
    us = ucp_config_modify(*config, "RX_SEG_SIZE", value);
    if (us != UCS_OK) {
        ucp_config_release(*config);
        *config = NULL;
        return WP_FAIL(h, WEX_ERR_SYSTEM, "ucp_config_modify RX_SEG_SIZE: %s",
                       ucs_status_string(us));
    }
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
    int64_t tcp_segment = TCP_SEGMENT_DEFAULT;
    /* in UCX_PATH_* order */
    static const char *const data_paths[] = {"auto", "put", "am", NULL};
    ucp_err_handling_mode_t err_mode;
    int data_path = UCX_PATH_AUTO;
    ucp_worker_params_t wp;
    ucp_config_t *config;
    ucp_params_t params;
    wex_transport_ctx *ctx;
    ucs_status_t us;
    wex_status st;

    if ((st = wt_check_args(h, args)) != WEX_OK ||
        (st = wp_option_i64(h, args->options, "/flush_timeout_ms", 1,
                            TIMEOUT_MAX_MS, &flush_timeout)) != WEX_OK ||
        (st = wp_option_i64(h, args->options, "/connect_timeout_ms", 0,
                            TIMEOUT_MAX_MS, &connect_timeout)) != WEX_OK ||
        (st = wp_option_i64(h, args->options, "/max_outstanding", 1,
                            MAX_OUTSTANDING_MAX, &max_outstanding)) != WEX_OK ||
        (st = wp_option_i64(h, args->options, "/tcp_segment_bytes",
                            TCP_SEGMENT_MIN, TCP_SEGMENT_MAX, &tcp_segment)) !=
            WEX_OK ||
        (st = get_err_mode(h, args->options, &err_mode)) != WEX_OK ||
        (st = wp_option_enum(h, args->options, "/data_path", data_paths,
                             &data_path)) != WEX_OK)
        return st;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    ctx->state = state;
    ctx->host = h;
    ctx->side = args->side;
    ctx->rank = args->rank;
    ctx->flush_timeout_ms = (int)flush_timeout;
    ctx->connect_timeout_ms = (int)connect_timeout;
    ctx->max_outstanding = (uint64_t)max_outstanding;
    ctx->err_mode = err_mode;
    ctx->data_path = data_path;
    ctx->efd = -1;
    ctx->wake_fd = -1;
    pthread_mutex_init(&ctx->lock, NULL);
    host_name(ctx->host_name);

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME |
                        UCP_PARAM_FIELD_ESTIMATED_NUM_EPS;
    /* data_path "put" leaves active messages out, as every version
     * before them did: UCX then picks its lanes for RMA alone. */
    params.features = UCP_FEATURE_RMA;
    if (ctx->data_path != UCX_PATH_PUT)
        params.features |= UCP_FEATURE_AM;
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
    if ((st = read_config(h, tcp_segment, &config)) != WEX_OK)
        goto fail;
    us = ucp_init(&params, config, &ctx->context);
    ucp_config_release(config);
    if (us != UCS_OK) {
        ctx->context = NULL;
        st =
            WP_FAIL(h, us == UCS_ERR_NO_MEMORY ? WEX_ERR_NOMEM : WEX_ERR_SYSTEM,
                    "ucp_init: %s (check the UCX_* environment, e.g. "
                    "UCX_TLS)",
                    ucs_status_string(us));
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
        st = WP_FAIL(h, WEX_ERR_SYSTEM, "ucp_worker_create: %s",
                     ucs_status_string(us));
        goto fail;
    }
    if (ctx->data_path != UCX_PATH_PUT && (st = ucx_am_handlers(ctx)) != WEX_OK)
        goto fail;
    if (ctx->side == WEX_SIDE_DESTINATION) {
        us = ucp_worker_get_address(ctx->worker, &ctx->address,
                                    &ctx->address_len);
        if (us != UCS_OK) {
            ctx->address = NULL;
            st = WP_FAIL(h, WEX_ERR_SYSTEM, "ucp_worker_get_address: %s",
                         ucs_status_string(us));
            goto fail;
        }
        if ((st = progress_start(ctx)) != WEX_OK)
            goto fail;
        WEX_DEBUG(h,
                  "destination rank %llu: UCX worker ready (%zu-byte "
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

/* ---- teardown ------------------------------------------------------ */

static void ucx_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    progress_stop(ctx);
    while (ctx->peers != NULL)
        ucx_peer_free(ctx, WT_PEER_OF(ctx->peers));
    if (ctx->worker != NULL)
        ucx_close_conns(ctx, 1);
    while (ctx->mems != NULL) {
        wex_transport_mem *m = WT_MEM_OF(ctx->mems);
        wt_list_unlink(&ctx->mems, &m->link);
        ucx_mem_free(ctx, m);
    }
    if (ctx->address != NULL)
        ucp_worker_release_address(ctx->worker, ctx->address);
    if (ctx->worker != NULL)
        ucp_worker_destroy(ctx->worker);
    if (ctx->context != NULL)
        ucp_cleanup(ctx->context);
    ucx_am_sources_free(ctx); /* the last receive's callback has run */
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
    .struct_size = sizeof(wex_transport_ops),
    .caps = WEX_TRANSPORT_CAP_HOST_MEMORY | WEX_TRANSPORT_CAP_ONE_SIDED |
            WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_NETWORK |
            WEX_TRANSPORT_CAP_ALLOC | WEX_TRANSPORT_CAP_REGISTER_SOURCE,
    .ctx_create = ucx_ctx_create,
    .ctx_destroy = ucx_ctx_destroy,
    .mem_alloc = ucx_mem_alloc,
    .mem_register = ucx_mem_register,
    .mem_deregister = ucx_mem_deregister,
    .mem_key = ucx_mem_key,
    .peer_attach = ucx_peer_attach,
    .peer_detach = ucx_peer_detach,
    .put = ucx_put,
    .flush = ucx_flush,
    .recv = NULL, /* one-sided */
    .peer_path = ucx_peer_path,
    .fence = ucx_fence,
};

static const wex_plugin_desc ucx_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_4,
    .kind = WEX_KIND_TRANSPORT,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "ucx",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &ucx_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_4, ucx_desc)
