/*
 * Plugins for the conformance kit's own test. One source; a plain build of
 * each kind is a small conformant plugin written from scratch, and each
 * -D flag breaks one rule so the kit's check for it must fail:
 *   BROKEN_KIND      WEX_KIND_ENGINE (default), _POLICY or _TRANSPORT
 *   BROKEN_NAME      the plugin's name
 *   ACCEPT_ANY_ABI   negotiate accepts any offer                    C06 C07
 *   FRESH_DESC       every accepted offer gets another descriptor   C12
 *   NULL_OP          the engine's describe_rank is NULL            C11 (C14)
 *   EXTRA_EXPORT     exports a second function                      C03
 *   UNDEFINED_HOST   calls a libwex function (built without -z defs) C04
 *   GAP              the engine leaves the last canonical tensor out C15
 *   UNSTABLE         the engine describes a rank differently twice  C14
 *   ACCEPT_ANY_TP    ctx_create accepts any parallel config         C16
 *   PRINTS           init prints to stdout                          C21
 *   TWICE            the policy sends every region twice            C17
 *   ASYMMETRIC       source ranks list their operations reversed    C18
 *   IGNORE_DEAD      the policy plans from dead sources too          C22
 *   DROP             the transport's put writes nothing             C19
 *   HANG             flush waits forever once its peer is dead      C20
 *   CONNECT          the transport has connect (ABI 1.3): the destination
 *                    publishes its pid, the source fetches it, and nothing
 *                    works on a rank that did not connect (conformant)
 *   BAD_NAME         with CONNECT: publishes under a name the host's
 *                    rendezvous refuses                              C19
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wex/plugin.h>

#ifndef BROKEN_NAME
#define BROKEN_NAME "broken"
#endif
#ifndef BROKEN_KIND
#define BROKEN_KIND WEX_KIND_ENGINE
#endif

struct wex_plugin_state {
    const wex_host_services *host;
};

#ifdef UNDEFINED_HOST
/* libwex's public API, which a plugin must never reach for */
const char *wex_last_error(void);
#endif

static wex_status broken_init(const wex_host_services *host,
                              wex_plugin_state **state_p)
{
    wex_plugin_state *s = calloc(1, sizeof(*s));

    if (s == NULL)
        return WEX_ERR_NOMEM;
    s->host = host;
#ifdef UNDEFINED_HOST
    if (host == NULL && wex_last_error() != NULL)
        return WEX_ERR_INTERNAL;
#endif
#ifdef PRINTS
    printf("broken plugin: initialised\n");
#endif
    *state_p = s;
    return WEX_OK;
}

static void broken_fini(wex_plugin_state *state)
{
    free(state);
}

#ifdef EXTRA_EXPORT
WEX_EXPORT int broken_helper(void);
int broken_helper(void)
{
    return 42;
}
#endif

/* ---- engine: the checkpoint itself, on one rank ------------------------ */

#if BROKEN_KIND == WEX_KIND_ENGINE
struct wex_engine_ctx {
    const wex_host_services *host;
    const wex_model *model;
};

static wex_status e_ctx_create(wex_plugin_state *state,
                               const wex_engine_args *args,
                               wex_engine_ctx **ctx_p)
{
    const wex_host_services *host = state->host;
    wex_engine_ctx *ctx;

#ifndef ACCEPT_ANY_TP
    if (host->opt_type(args->parallel, "/tp") != WEX_JSON_MISSING) {
        int64_t tp = 0;
        if (host->opt_get_i64(args->parallel, "/tp", &tp) != WEX_OK ||
            tp != 1) {
            host->set_error(host->ctx, WEX_ERR_INVALID,
                            "parallel/tp: this engine runs on one rank, so "
                            "tp must be 1 (got %lld)",
                            (long long)tp);
            return WEX_ERR_INVALID;
        }
    }
#endif
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = host;
    ctx->model = args->model;
    *ctx_p = ctx;
    return WEX_OK;
}

static void e_ctx_destroy(wex_engine_ctx *ctx)
{
    free(ctx);
}

static wex_status e_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    (void)ctx;
    *count_p = 1;
    return WEX_OK;
}

static wex_status e_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                  wex_layout_builder *builder)
{
    const wex_host_services *host = ctx->host;
    uint64_t n = host->model_tensor_count(ctx->model);
    const uint64_t zero[WEX_MAX_DIMS] = {0};
    wex_status st;

    if (rank != 0) {
        host->set_error(host->ctx, WEX_ERR_INVALID, "no rank %llu",
                        (unsigned long long)rank);
        return WEX_ERR_INVALID;
    }
#ifdef GAP
    n--;
#endif
#ifdef UNSTABLE
    static int calls;
    if (calls++ % 2 == 1 &&
        (st = host->layout_set_coord(builder, "replica", 0)) != WEX_OK)
        return st;
#endif
    for (uint64_t i = 0; i < n; i++) {
        wex_tensor_info info;
        wex_local_tensor_desc desc;
        wex_piece_desc piece;
        uint64_t t;

        memset(&info, 0, sizeof(info));
        info.struct_size = sizeof(info);
        if ((st = host->model_tensor(ctx->model, i, &info)) != WEX_OK)
            return st;
        memset(&desc, 0, sizeof(desc));
        desc.struct_size = sizeof(desc);
        desc.dtype = info.dtype;
        desc.ndim = info.ndim;
        desc.name = info.name;
        desc.shape = info.shape;
        if ((st = host->layout_add_tensor(builder, &desc, &t)) != WEX_OK)
            return st;
        memset(&piece, 0, sizeof(piece));
        piece.struct_size = sizeof(piece);
        piece.transform = WEX_TRANSFORM_NONE;
        piece.canonical = i;
        piece.offset = zero;
        piece.extent = info.shape;
        piece.at = zero;
        if ((st = host->layout_add_piece(builder, t, &piece)) != WEX_OK)
            return st;
    }
    return WEX_OK;
}

static const wex_engine_ops broken_ops = {
    sizeof(wex_engine_ops),
    0,
    0,
    e_ctx_create,
    e_ctx_destroy,
    e_rank_count,
#ifdef NULL_OP
    NULL,
#else
    e_describe_rank,
#endif
};
#ifdef NULL_OP
/* kept, so the variant differs from the plain build in one place only */
wex_status (*const broken_unused_describe)(
    wex_engine_ctx *, uint64_t, wex_layout_builder *) = e_describe_rank;
#endif
#endif

/* ---- policy: every destination piece from the first source holding it -- */

#if BROKEN_KIND == WEX_KIND_POLICY
struct wex_policy_ctx {
    const wex_host_services *host;
};

static wex_status p_ctx_create(wex_plugin_state *state,
                               const wex_policy_args *args,
                               wex_policy_ctx **ctx_p)
{
    wex_policy_ctx *ctx = calloc(1, sizeof(*ctx));

    (void)args;
    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    *ctx_p = ctx;
    return WEX_OK;
}

static void p_ctx_destroy(wex_policy_ctx *ctx)
{
    free(ctx);
}

/* Whether the host listed source rank `rank` as dead (the list is appended
 * to the request: read it only when struct_size covers it). */
static int dead(const wex_plan_request *req, uint64_t rank)
{
#ifdef IGNORE_DEAD
    (void)req;
    (void)rank;
#else
    if (req->struct_size >= offsetof(wex_plan_request, dead_source_count) +
                                sizeof(req->dead_source_count))
        for (uint64_t i = 0; i < req->dead_source_count; i++)
            if (req->dead_sources[i] == rank)
                return 1;
#endif
    return 0;
}

static int holds(const wex_piece_view *s, const wex_piece_view *d)
{
    for (uint32_t k = 0; k < d->ndim; k++)
        if (d->offset[k] < s->offset[k] ||
            d->offset[k] + d->extent[k] > s->offset[k] + s->extent[k])
            return 0;
    return 1;
}

/* The operation for destination piece `d`, or 0 when `d` is not this
 * request's business; < 0 on failure. */
static wex_status piece_op(wex_policy_ctx *ctx, const wex_plan_request *req,
                           const wex_piece_view *d, wex_plan_builder *builder)
{
    const wex_host_services *host = ctx->host;
    const wex_piece_view *base, *s = NULL;
    uint64_t count = 0, src_off[WEX_MAX_DIMS];
    wex_plan_op op;
    uint32_t lead;
    wex_status st;

    base = host->layout_canonical_pieces(req->source, d->canonical, &count);
    for (uint64_t i = 0; i < count && s == NULL; i++)
        if (holds(WEX_PIECE_VIEW_AT(base, i), d) &&
            !dead(req, WEX_PIECE_VIEW_AT(base, i)->rank))
            s = WEX_PIECE_VIEW_AT(base, i);
    if (s == NULL) {
        host->set_error(host->ctx, WEX_ERR_UNSUPPORTED,
                        "no live source piece holds a whole destination piece "
                        "of canonical tensor %llu",
                        (unsigned long long)d->canonical);
        return WEX_ERR_UNSUPPORTED;
    }
    if (req->side == WEX_SIDE_SOURCE && s->rank != req->rank)
        return WEX_OK;
    lead = s->local_ndim - s->ndim;
    for (uint32_t k = 0; k < s->local_ndim; k++)
        src_off[k] = s->at[k] +
                     (k < lead ? 0 : d->offset[k - lead] - s->offset[k - lead]);
    memset(&op, 0, sizeof(op));
    op.struct_size = sizeof(op);
    op.ndim = d->ndim;
    op.src_rank = s->rank;
    op.src_tensor = s->tensor;
    op.dst_rank = d->rank;
    op.dst_tensor = d->tensor;
    op.src_offset = src_off;
    op.dst_offset = d->at;
    op.extent = d->extent;
    st = host->plan_add_op(builder, &op);
#ifdef TWICE
    if (st == WEX_OK)
        st = host->plan_add_op(builder, &op);
#endif
    return st;
}

static wex_status p_plan(wex_policy_ctx *ctx, const wex_plan_request *req,
                         wex_plan_builder *builder)
{
    const wex_host_services *host = ctx->host;
    uint64_t ranks = host->layout_rank_count(req->destination);
    int reverse = 0;

#ifdef ASYMMETRIC
    reverse = req->side == WEX_SIDE_SOURCE;
#endif
    for (uint64_t r = 0; r < ranks; r++) {
        uint64_t n;
        if (req->side == WEX_SIDE_DESTINATION && r != req->rank)
            continue;
        n = host->layout_rank_piece_count(req->destination, r);
        for (uint64_t j = 0; j < n; j++) {
            wex_piece_view d;
            wex_status st;
            memset(&d, 0, sizeof(d));
            d.struct_size = sizeof(d);
            st = host->layout_rank_piece(req->destination, r,
                                         reverse ? n - 1 - j : j, &d);
            if (st == WEX_OK)
                st = piece_op(ctx, req, &d, builder);
            if (st != WEX_OK)
                return st;
        }
    }
    return WEX_OK;
}

static const wex_policy_ops broken_ops = {
    sizeof(wex_policy_ops), 0, 0, p_ctx_create, p_ctx_destroy, p_plan,
};
#endif

/* ---- transport: memfds, attached through /proc/PID/fd/FD ----------------- */

#if BROKEN_KIND == WEX_KIND_TRANSPORT
#define KEY_MAGIC 0x6b6e7262u /* "brnk" */

struct wex_transport_ctx {
    const wex_host_services *host;
    int32_t last_peer_pid;
    uint32_t side;
    int connected; /* CONNECT: connect has run */
};
struct wex_transport_mem {
    void *address;
    uint64_t bytes;
    int fd;
};
struct wex_transport_peer {
    uint8_t *address;
    uint64_t bytes;
    int32_t pid;
};

typedef struct key {
    uint32_t magic;
    int32_t pid;
    int32_t fd;
    uint32_t reserved;
    uint64_t bytes;
} key;

static wex_status t_ctx_create(wex_plugin_state *state,
                               const wex_transport_args *args,
                               wex_transport_ctx **ctx_p)
{
    wex_transport_ctx *ctx = calloc(1, sizeof(*ctx));

    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = state->host;
    ctx->side = args->side;
    *ctx_p = ctx;
    return WEX_OK;
}

static void t_ctx_destroy(wex_transport_ctx *ctx)
{
    free(ctx);
}

static wex_status fail(wex_transport_ctx *ctx, wex_status st, const char *what)
{
    ctx->host->set_error(ctx->host->ctx, st, "%s: %s", what,
                         errno ? strerror(errno) : "invalid");
    return st;
}

/* Without CONNECT there is nothing to wait for. */
static int connected(const wex_transport_ctx *ctx)
{
#ifdef CONNECT
    return ctx->connected;
#else
    (void)ctx;
    return 1;
#endif
}

#ifdef CONNECT
#ifdef BAD_NAME
#define GREETING "greeting/0"
#else
#define GREETING "greeting"
#endif
/* The destination publishes its pid; a source fetches it. */
static wex_status t_connect(wex_transport_ctx *ctx,
                            const wex_transport_exchange *ex)
{
    int32_t pid = (int32_t)getpid();
    uint64_t len = 0;
    wex_status st;

    if (ex == NULL || ex->struct_size < WEX_TRANSPORT_EXCHANGE_SIZE_1_3) {
        errno = 0;
        return fail(ctx, WEX_ERR_ABI, "connect: no exchange");
    }
    if (ctx->side == WEX_SIDE_DESTINATION)
        st = ex->publish(ex->ctx, GREETING, &pid, sizeof(pid));
    else
        st = ex->fetch(ex->ctx, GREETING, &pid, sizeof(pid), &len);
    if (st != WEX_OK)
        return st; /* the host's message stands */
    if (ctx->side == WEX_SIDE_SOURCE && (len != sizeof(pid) || pid <= 0)) {
        errno = 0;
        return fail(ctx, WEX_ERR_PEER, "connect: a greeting of no pid");
    }
    ctx->connected = 1;
    return WEX_OK;
}
#else
#define t_connect NULL
#endif

static wex_status t_mem_alloc(wex_transport_ctx *ctx, uint64_t bytes,
                              void **address_p, wex_transport_mem **mem_p)
{
    wex_transport_mem *m = calloc(1, sizeof(*m));

    errno = 0;
    if (m == NULL || bytes == 0)
        return fail(ctx, WEX_ERR_INVALID, "mem_alloc");
    m->fd = memfd_create("wex-broken", MFD_CLOEXEC);
    if (m->fd < 0 || ftruncate(m->fd, (off_t)bytes) != 0) {
        free(m);
        return fail(ctx, WEX_ERR_SYSTEM, "mem_alloc");
    }
    m->address =
        mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, m->fd, 0);
    if (m->address == MAP_FAILED) {
        close(m->fd);
        free(m);
        return fail(ctx, WEX_ERR_SYSTEM, "mem_alloc: mmap");
    }
    m->bytes = bytes;
    *address_p = m->address;
    *mem_p = m;
    return WEX_OK;
}

static wex_status t_mem_register(wex_transport_ctx *ctx, void *address,
                                 uint64_t bytes, uint32_t kind,
                                 wex_transport_mem **mem_p)
{
    (void)address;
    (void)bytes;
    (void)kind;
    (void)mem_p;
    ctx->host->set_error(ctx->host->ctx, WEX_ERR_UNSUPPORTED,
                         "this transport exposes mem_alloc'd memory only");
    return WEX_ERR_UNSUPPORTED;
}

static void t_mem_deregister(wex_transport_ctx *ctx, wex_transport_mem *m)
{
    (void)ctx;
    munmap(m->address, m->bytes);
    close(m->fd);
    free(m);
}

static wex_status t_mem_key(wex_transport_ctx *ctx, wex_transport_mem *m,
                            void *out, uint64_t *key_len)
{
    key k;

    errno = 0;
    if (!connected(ctx))
        return fail(ctx, WEX_ERR_INTERNAL, "mem_key before connect");
    if (*key_len < sizeof(k))
        return fail(ctx, WEX_ERR_INVALID, "mem_key: buffer too small");
    memset(&k, 0, sizeof(k));
    k.magic = KEY_MAGIC;
    k.pid = (int32_t)getpid();
    k.fd = m->fd;
    k.bytes = m->bytes;
    memcpy(out, &k, sizeof(k));
    *key_len = sizeof(k);
    return WEX_OK;
}

static wex_status t_peer_attach(wex_transport_ctx *ctx, uint64_t peer_rank,
                                const void *data, uint64_t len,
                                wex_transport_peer **peer_p)
{
    wex_transport_peer *p;
    char path[64];
    struct stat st;
    key k;
    int fd;

    (void)peer_rank;
    errno = 0;
    if (len != sizeof(k))
        return fail(ctx, WEX_ERR_INVALID, "peer_attach: not a key");
    memcpy(&k, data, sizeof(k));
    if (k.magic != KEY_MAGIC)
        return fail(ctx, WEX_ERR_INVALID, "peer_attach: bad magic");
    snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)k.pid, (int)k.fd);
    fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0)
        return fail(ctx, WEX_ERR_PEER, "peer_attach: open");
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size < k.bytes ||
        (p = calloc(1, sizeof(*p))) == NULL) {
        close(fd);
        return fail(ctx, WEX_ERR_PEER, "peer_attach: stale key");
    }
    p->address = mmap(NULL, k.bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (p->address == MAP_FAILED) {
        free(p);
        return fail(ctx, WEX_ERR_SYSTEM, "peer_attach: mmap");
    }
    p->bytes = k.bytes;
    p->pid = k.pid;
    ctx->last_peer_pid = k.pid;
    *peer_p = p;
    return WEX_OK;
}

static void t_peer_detach(wex_transport_ctx *ctx, wex_transport_peer *p)
{
    (void)ctx;
    munmap(p->address, p->bytes);
    free(p);
}

static wex_status t_put(wex_transport_ctx *ctx, wex_transport_peer *p,
                        uint64_t offset, const void *src, uint64_t bytes)
{
    errno = 0;
    if (!connected(ctx))
        return fail(ctx, WEX_ERR_INTERNAL, "put before connect");
    if (offset > p->bytes || bytes > p->bytes - offset)
        return fail(ctx, WEX_ERR_INVALID, "put: overruns the buffer");
#ifndef DROP
    memcpy(p->address + offset, src, bytes);
#else
    (void)src;
#endif
    return WEX_OK;
}

static wex_status t_flush(wex_transport_ctx *ctx)
{
#ifdef HANG
    /* waits for an acknowledgement a dead peer never sends */
    while (ctx->last_peer_pid > 0 && kill(ctx->last_peer_pid, 0) != 0 &&
           errno == ESRCH)
        pause();
#else
    (void)ctx;
#endif
    return WEX_OK;
}

static const wex_transport_ops broken_ops = {
    sizeof(wex_transport_ops),
    0,
    WEX_TRANSPORT_CAP_HOST_MEMORY | WEX_TRANSPORT_CAP_ONE_SIDED |
        WEX_TRANSPORT_CAP_SAME_HOST | WEX_TRANSPORT_CAP_ALLOC,
    t_ctx_create,
    t_ctx_destroy,
    t_mem_alloc,
    t_mem_register,
    t_mem_deregister,
    t_mem_key,
    t_peer_attach,
    t_peer_detach,
    t_put,
    t_flush,
    NULL,      /* recv: one-sided */
    NULL,      /* peer_path: one way */
    t_connect, /* NULL unless CONNECT */
    NULL,      /* fence: cannot fence */
};
#endif

/* ---- negotiation ------------------------------------------------------- */

#ifdef CONNECT
#define BROKEN_ABI WEX_ABI_1_3 /* connect */
#else
#define BROKEN_ABI WEX_ABI_1_0
#endif

static const wex_plugin_desc broken_desc = {
    sizeof(wex_plugin_desc),
    BROKEN_ABI,
    BROKEN_KIND,
    WEX_PLUGIN_THREAD_SINGLE,
    BROKEN_NAME,
    "0.0.1",
    broken_init,
    broken_fini,
    &broken_ops,
};

WEX_PLUGIN_EXPORT wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                                  wex_negotiate_out *out);

wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                wex_negotiate_out *out)
{
    if (in == NULL || out == NULL ||
        in->struct_size < sizeof(wex_negotiate_in) ||
        out->struct_size < sizeof(wex_negotiate_out))
        return WEX_ERR_ABI;
#ifdef ACCEPT_ANY_ABI
    out->abi_version = in->abi_min;
    out->desc = &broken_desc;
    return WEX_OK;
#else
    if (in->abi_min > BROKEN_ABI || in->abi_max < BROKEN_ABI)
        return WEX_ERR_ABI;
    out->abi_version = BROKEN_ABI;
#ifdef FRESH_DESC
    static wex_plugin_desc copies[4];
    static unsigned calls;
    copies[calls % 4] = broken_desc;
    out->desc = &copies[calls++ % 4];
#else
    out->desc = &broken_desc;
#endif
    return WEX_OK;
#endif
}
