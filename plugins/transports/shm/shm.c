/*
 * The `shm` transport: ranks on one host, in separate processes, with
 * one copy per byte.
 *
 * A destination rank's buffers come in two kinds:
 *  - mem_alloc: a sealed memfd mapped MAP_SHARED. A source attaching it
 *    connects to the destination context's abstract Unix socket, receives
 *    the memfd over SCM_RIGHTS (shm_fdpass.c) and maps it too; put is a
 *    memcpy straight into the destination's pages.
 *  - mem_register (caller memory, not shareable): the source writes with
 *    process_vm_writev into the destination's pid at the buffer's
 *    address, the kernel copying once between the two address spaces.
 * Neither leaves anything in /dev/shm or the filesystem: memfds and
 * abstract sockets vanish with their last user.
 *
 * process_vm_writev needs ptrace access to the destination. Under Yama's
 * ptrace_scope = 1 (the default on Ubuntu and others) only ancestors may
 * ptrace a process, and sources are never the destination's ancestors;
 * so while it has a registered buffer exposed, a destination declares
 * prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY), which lets any process of
 * the same user write into it (the same user could already do so under
 * ptrace_scope = 0). It is cleared again when the last such buffer is
 * deregistered. memfd buffers need none of this: prefer mem_alloc.
 *
 * This file: the plugin's state, contexts and the descriptor; the rest
 * is listed in shm_internal.h.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_options.h"
#include "shm_internal.h"

#define CONNECT_TIMEOUT_DEFAULT_MS 10000
#define CONNECT_TIMEOUT_MAX_MS 3600000

/* ---- plugin -------------------------------------------------------- */

/* Not plugins/common's init and fini: shm's state holds more (why:
 * shm_internal.h). */
static wex_status shm_init(const wex_host_services *host,
                           wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    pthread_mutex_init(&state->lock, NULL);
    *state_p = state;
    return WEX_OK;
}

static void shm_fini(wex_plugin_state *state)
{
    if (state == NULL)
        return;
    pthread_mutex_destroy(&state->lock);
    free(state);
}

/* ---- context ------------------------------------------------------- */

static int name_safe(const char *s)
{
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') ||
              (*s >= '0' && *s <= '9') || *s == '-' || *s == '_' || *s == '.'))
            return 0;
    return 1;
}

/* "wex-<job_id>-d<rank>"; a job id too long or with other characters is
 * replaced by its hash, and a missing one by this process's pid. */
static void make_name(wex_transport_ctx *ctx, const char *job_id)
{
    unsigned long long rank = (unsigned long long)ctx->rank;
    int fits = 0;

    if (job_id != NULL && job_id[0] != '\0' && name_safe(job_id)) {
        int n = snprintf(ctx->name, sizeof(ctx->name), "wex-%s-d%llu", job_id,
                         rank);
        fits = n > 0 && (size_t)n <= SHM_NAME_MAX;
    }
    if (!fits && job_id != NULL && job_id[0] != '\0') {
        uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a */
        for (const char *p = job_id; *p; p++)
            hash = (hash ^ (unsigned char)*p) * 0x100000001b3ull;
        snprintf(ctx->name, sizeof(ctx->name), "wex-h%016llx-d%llu",
                 (unsigned long long)hash, rank);
    } else if (!fits) {
        uint64_t seq;
        pthread_mutex_lock(&ctx->state->lock);
        seq = ctx->state->anonymous_jobs++;
        pthread_mutex_unlock(&ctx->state->lock);
        snprintf(ctx->name, sizeof(ctx->name), "wex-p%ld.%llu-d%llu",
                 (long)getpid(), (unsigned long long)seq, rank);
    }
    ctx->name_len = strlen(ctx->name);
}

/* The server thread's view of the buffer table and the fence page. */
static uint32_t lookup(void *arg, shm_asked *asked, shm_reply *reply, int *fd_p)
{
    wex_transport_ctx *ctx = arg;
    const shm_request *req = asked->request;
    uint64_t *size_p = &reply->size;
    uint32_t status = SHM_REPLY_UNKNOWN;

    if (req->kind == SHM_KIND_FENCE)
        return shm_fence_serve(ctx, asked, reply, fd_p);
    pthread_mutex_lock(&ctx->lock);
    for (wt_link *l = ctx->mems; l != NULL; l = l->next) {
        wex_transport_mem *m = WT_MEM_OF(l);

        if (m->id != req->buffer_id)
            continue;
        *size_p = m->bytes;
        if (m->kind != req->kind || m->bytes != req->size ||
            (uint64_t)(uintptr_t)m->address != req->address) {
            status = SHM_REPLY_MISMATCH;
        } else if (m->kind == SHM_KIND_MEMFD &&
                   (*fd_p = fcntl(m->fd, F_DUPFD_CLOEXEC, 0)) < 0) {
            WEX_WARN(ctx->host, "@%s: cannot pass buffer %llu: dup: %s",
                     ctx->name, (unsigned long long)m->id, strerror(errno));
            status = SHM_REPLY_FAILED;
        } else {
            status = SHM_REPLY_OK;
        }
        break;
    }
    pthread_mutex_unlock(&ctx->lock);
    return status;
}

static void shm_ctx_destroy(wex_transport_ctx *ctx);

static wex_status shm_ctx_create(wex_plugin_state *state,
                                 const wex_transport_args *args,
                                 wex_transport_ctx **ctx_p)
{
    const wex_host_services *h = state->host;
    int64_t timeout = CONNECT_TIMEOUT_DEFAULT_MS;
    wex_transport_ctx *ctx;
    wex_status st;

    if ((st = wt_check_args(h, args)) != WEX_OK ||
        (st = wp_option_i64(h, args->options, "/connect_timeout_ms", 0,
                            CONNECT_TIMEOUT_MAX_MS, &timeout)) != WEX_OK)
        return st;

    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WP_FAIL(h, WEX_ERR_NOMEM, "out of memory");
    ctx->state = state;
    ctx->host = h;
    ctx->side = args->side;
    ctx->rank = args->rank;
    ctx->connect_timeout_ms = (int)timeout;
    ctx->fence_fd = -1;
    pthread_mutex_init(&ctx->lock, NULL);
    if (ctx->side == WEX_SIDE_DESTINATION) {
        make_name(ctx, args->job_id);
        st = shm_fence_setup(ctx);
        if (st == WEX_OK)
            st = shm_server_start(h, ctx->name, ctx->name_len, lookup, ctx,
                                  &ctx->server);
        if (st != WEX_OK) {
            shm_ctx_destroy(ctx);
            return st;
        }
        WEX_DEBUG(h, "destination rank %llu serves its buffers on @%s",
                  (unsigned long long)ctx->rank, ctx->name);
    }
    *ctx_p = ctx;
    return WEX_OK;
}

static void shm_ctx_destroy(wex_transport_ctx *ctx)
{
    if (ctx == NULL)
        return;
    /* First the server, so no thread reads the table any more. */
    shm_server_stop(ctx->server);
    shm_fence_teardown(ctx);
    while (ctx->peers != NULL) {
        wex_transport_peer *p = WT_PEER_OF(ctx->peers);
        wt_list_unlink(&ctx->peers, &p->link);
        shm_peer_free(ctx, p);
    }
    while (ctx->mems != NULL) {
        wex_transport_mem *m = WT_MEM_OF(ctx->mems);
        wt_list_unlink(&ctx->mems, &m->link);
        shm_mem_free(ctx, m);
    }
    pthread_mutex_destroy(&ctx->lock);
    free(ctx);
}

/* ---- descriptor ---------------------------------------------------- */

static const wex_transport_ops shm_ops = {
    .struct_size = sizeof(wex_transport_ops),
    .caps = WEX_TRANSPORT_CAP_HOST_MEMORY | WEX_TRANSPORT_CAP_ONE_SIDED |
            WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_ALLOC |
            WEX_TRANSPORT_CAP_PUTS_LAND_IN_ORDER,
    .ctx_create = shm_ctx_create,
    .ctx_destroy = shm_ctx_destroy,
    .mem_alloc = shm_mem_alloc,
    .mem_register = shm_mem_register,
    .mem_deregister = shm_mem_deregister,
    .mem_key = shm_mem_key,
    .peer_attach = shm_peer_attach,
    .peer_detach = shm_peer_detach,
    .put = shm_put,
    .flush = shm_flush,
    .recv = NULL, /* one-sided */
    .fence = shm_fence,
};

static const wex_plugin_desc shm_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_4,
    .kind = WEX_KIND_TRANSPORT,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "shm",
    .version = "0.1.0",
    .init = shm_init,
    .fini = shm_fini,
    .ops = &shm_ops,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_4, shm_desc)
