/*
 * One source, many test plugins. Each -D flag breaks one rule of the
 * plugin contract so the loader tests can check the host's answer:
 *   FAKE_NO_ENTRY        the entry symbol is not exported
 *   FAKE_REFUSE_ABI      negotiate refuses every version
 *   FAKE_OUT_OF_RANGE    negotiate picks a version outside the offer
 *   FAKE_SMALL_DESC      the descriptor's struct_size is too small
 *   FAKE_KIND            the kind the library reports (default engine)
 *   FAKE_NAME            the plugin's name (manifest and library)
 *   FAKE_REPORTED_NAME   a different name reported by the library
 *   FAKE_INIT_FAILS      init fails with a message
 *   FAKE_NO_DEFINE_ENTRY no entry point at all (it comes from a dependency)
 *   FAKE_MIN_TABLES      descriptor and ops table exactly ABI 1.0's sizes
 *   FAKE_BIG_TABLES      both larger than this host knows (a newer plugin)
 *   FAKE_SHORT_OPS       an ops table smaller than ABI 1.0's
 * A plain build is a well-behaved one-rank engine.
 */
#include <stdlib.h>
#include <string.h>

#include <wex/plugin.h>

#ifndef FAKE_NAME
#define FAKE_NAME "fake"
#endif
#ifdef FAKE_REPORTED_NAME
#undef FAKE_NAME
#define FAKE_NAME FAKE_REPORTED_NAME
#endif
#ifndef FAKE_KIND
#define FAKE_KIND WEX_KIND_ENGINE
#endif

#ifndef FAKE_NO_DEFINE_ENTRY

struct wex_plugin_state {
    const wex_host_services *host;
    int inits;
};

static wex_status fake_init(const wex_host_services *host,
                            wex_plugin_state **state_p)
{
#ifdef FAKE_INIT_FAILS
    host->set_error(host->ctx, WEX_ERR_SYSTEM,
                    "cannot reach the license server");
    (void)state_p;
    return WEX_ERR_SYSTEM;
#else
    wex_plugin_state *s = calloc(1, sizeof(*s));
    if (s == NULL)
        return WEX_ERR_NOMEM;
    s->host = host;
    s->inits = 1;
    WEX_DEBUG(host, "fake plugin initialised");
    *state_p = s;
    return WEX_OK;
#endif
}

static void fake_fini(wex_plugin_state *state)
{
    free(state);
}

/* Engine ops: one rank holding nothing. Enough for the loader's checks;
 * the real adapters live in plugins/engines/. */
struct wex_engine_ctx {
    int unused;
};

static wex_status fake_ctx_create(wex_plugin_state *state,
                                  const wex_engine_args *args,
                                  wex_engine_ctx **ctx_p)
{
    (void)state;
    (void)args;
    *ctx_p = calloc(1, sizeof(**ctx_p));
    return *ctx_p ? WEX_OK : WEX_ERR_NOMEM;
}

static void fake_ctx_destroy(wex_engine_ctx *ctx)
{
    free(ctx);
}

static wex_status fake_rank_count(wex_engine_ctx *ctx, uint64_t *count_p)
{
    (void)ctx;
    *count_p = 1;
    return WEX_OK;
}

static wex_status fake_describe_rank(wex_engine_ctx *ctx, uint64_t rank,
                                     wex_layout_builder *builder)
{
    (void)ctx;
    (void)builder;
    return rank == 0 ? WEX_OK : WEX_ERR_INVALID;
}

/* A later minor version's tables: members this host has never heard
 * of follow the 1.0 ones, and must be left alone. */
static wex_status fake_future_call(void)
{
    return WEX_ERR_INTERNAL;
}

static const struct {
    wex_engine_ops base;
    wex_status (*future[3])(void);
} fake_ops_table = {
    {
#if defined(FAKE_MIN_TABLES)
        .struct_size = WEX_ENGINE_OPS_SIZE_1_0,
#elif defined(FAKE_BIG_TABLES)
        .struct_size = sizeof(fake_ops_table),
#elif defined(FAKE_SHORT_OPS)
        .struct_size = WEX_ENGINE_OPS_SIZE_1_0 - 8,
#else
        .struct_size = sizeof(wex_engine_ops),
#endif
        .ctx_create = fake_ctx_create,
        .ctx_destroy = fake_ctx_destroy,
        .rank_count = fake_rank_count,
        .describe_rank = fake_describe_rank,
    },
    {fake_future_call, fake_future_call, fake_future_call},
};

static const struct {
    wex_plugin_desc base;
    const void *future[2];
} fake_desc_table = {
    {
#if defined(FAKE_SMALL_DESC)
        .struct_size = 16,
#elif defined(FAKE_MIN_TABLES)
        .struct_size = WEX_PLUGIN_DESC_SIZE_1_0,
#elif defined(FAKE_BIG_TABLES)
        .struct_size = sizeof(fake_desc_table),
#else
        .struct_size = sizeof(wex_plugin_desc),
#endif
        .abi_version = WEX_ABI_1_0,
        .kind = FAKE_KIND,
        .flags = WEX_PLUGIN_THREAD_SAFE,
        .name = FAKE_NAME,
        .version = "0.0.1",
        .init = fake_init,
        .fini = fake_fini,
        .ops = &fake_ops_table.base,
    },
    {&fake_ops_table, &fake_ops_table},
};
#define fake_desc (fake_desc_table.base)

#ifndef FAKE_NO_ENTRY /* otherwise hidden like every other symbol */
WEX_PLUGIN_EXPORT
#endif
wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                wex_negotiate_out *out);

wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                wex_negotiate_out *out)
{
    if (in == NULL || out == NULL ||
        in->struct_size < sizeof(wex_negotiate_in) ||
        out->struct_size < sizeof(wex_negotiate_out))
        return WEX_ERR_ABI;
#ifdef FAKE_REFUSE_ABI
    return WEX_ERR_ABI;
#endif
    if (in->abi_min > WEX_ABI_1_0 || in->abi_max < WEX_ABI_1_0)
        return WEX_ERR_ABI;
#ifdef FAKE_OUT_OF_RANGE
    out->abi_version = WEX_MAKE_VERSION(9, 0);
#else
    out->abi_version = WEX_ABI_1_0;
#endif
    out->desc = &fake_desc;
    return WEX_OK;
}

#else
/* Borrows its entry point from the library it links (fake_dep): the host
 * must notice the symbol is not the plugin's own. */
wex_status wex_plugin_negotiate(const wex_negotiate_in *in,
                                wex_negotiate_out *out);
/* A reference keeps fake_dep a real dependency even under --as-needed. */
wex_plugin_negotiate_fn fake_borrowed = wex_plugin_negotiate;
#endif
