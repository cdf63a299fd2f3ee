/*
 * The `balanced` policy: zero-redundancy, load-balanced, host-local and
 * coalesced plans, derived per rank (balanced.h says how).
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "balanced.h"
#include "plugin_options.h"
#include "plugin_state.h"

struct wex_policy_ctx {
    const wex_host_services *host;
    pb_config cfg;
    pb_cache cache;
};

/* The defaults are the manifest's (manifest.json.in). */
static wex_status pb_ctx_create(wex_plugin_state *state,
                                const wex_policy_args *args,
                                wex_policy_ctx **ctx_p)
{
    const wex_host_services *h = state->host;
    const wex_options *o = args->options;
    int32_t prefer_local = 1, coalesce = 1;
    int64_t split_min_bytes = INT64_C(1) << 20;
    wex_policy_ctx *ctx;
    wex_status st;

    if ((st = wp_option_bool(h, o, "/prefer_local", &prefer_local)) != WEX_OK ||
        (st = wp_option_bool(h, o, "/coalesce", &coalesce)) != WEX_OK ||
        (st = wp_option_i64(h, o, "/split_min_bytes", 1, INT64_MAX,
                            &split_min_bytes)) != WEX_OK)
        return st;
    ctx = calloc(1, sizeof(*ctx));
    if (ctx == NULL)
        return WEX_ERR_NOMEM;
    ctx->host = h;
    ctx->cfg.prefer_local = prefer_local;
    ctx->cfg.coalesce = coalesce;
    ctx->cfg.split_min_bytes = (uint64_t)split_min_bytes;
    *ctx_p = ctx;
    return WEX_OK;
}

static void pb_ctx_destroy(wex_policy_ctx *ctx)
{
    if (ctx != NULL)
        pb_cache_fini(&ctx->cache);
    free(ctx);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* The canonical tensors the rank holds, ascending, without repeats. */
static wex_status held(pb_job *job, const wex_layout *side, uint64_t **list_p,
                       uint64_t *count_p)
{
    const wex_host_services *h = job->host;
    uint64_t n = h->layout_rank_piece_count(side, job->rank), k = 0;
    uint64_t *list = malloc((n ? n : 1) * sizeof(*list));

    if (list == NULL)
        return WEX_ERR_NOMEM;
    for (uint64_t i = 0; i < n; i++) {
        wex_piece_view v = {sizeof(v), 0, 0, 0, 0, 0, 0, NULL, NULL, NULL};
        h->layout_rank_piece(side, job->rank, i, &v);
        list[i] = v.canonical;
    }
    qsort(list, n, sizeof(*list), cmp_u64);
    for (uint64_t i = 0; i < n; i++)
        if (k == 0 || list[k - 1] != list[i])
            list[k++] = list[i];
    *list_p = list;
    *count_p = k;
    return WEX_OK;
}

static wex_status plan_canonical(pb_job *job, uint64_t c)
{
    const wex_host_services *h = job->host;
    const wex_plan_request *req = job->req;
    const pb_packed *packed;
    uint64_t nsrc, ndst;
    wex_status st;

    job->src = h->layout_canonical_pieces(req->source, c, &nsrc);
    job->dst = h->layout_canonical_pieces(req->destination, c, &ndst);
    st = pb_cache_get(job->cache, h, req, c, &packed);
    if (st != WEX_OK)
        return st;
    job->ndim = packed->ndim;
    job->src_host = packed->src_host;
    job->sbox = packed->sbox;
    job->dbox = packed->dbox;
    for (uint64_t j = 0; st == WEX_OK && j < ndst; j++)
        if (job->side == WEX_SIDE_SOURCE || PB_DST(job, j)->rank == job->rank)
            st = pb_assign_piece(job, c, nsrc, ndst, j);
    return st;
}

static wex_status emit_all(pb_job *job, wex_plan_builder *b)
{
    const wex_host_services *h = job->host;
    wex_status st = WEX_OK;

    for (size_t i = 0; st == WEX_OK && i < job->out->count; i++) {
        const pb_op *o = &job->out->v[i];
        wex_plan_op op = {sizeof(op),    o->ndim,     o->src_rank,
                          o->src_tensor, o->dst_rank, o->dst_tensor,
                          o->src_off,    o->dst_off,  o->ext};
        st = h->plan_add_op(b, &op);
    }
    return st;
}

static wex_status pb_plan(wex_policy_ctx *ctx, const wex_plan_request *req,
                          wex_plan_builder *b)
{
    pb_ops ops = {NULL, 0, 0};
    pb_job job;
    uint64_t *list = NULL, count = 0;
    wex_status st;

    memset(&job, 0, sizeof(job));
    job.host = ctx->host;
    job.req = req;
    job.cfg = ctx->cfg;
    job.side = req->side;
    job.rank = req->rank;
    job.out = &ops;
    job.cache = &ctx->cache;
    if (req->struct_size >= offsetof(wex_plan_request, dead_source_count) +
                                sizeof(req->dead_source_count)) {
        job.dead = req->dead_sources;
        job.dead_count = req->dead_sources ? req->dead_source_count : 0;
    }
    st = held(&job,
              req->side == WEX_SIDE_SOURCE ? req->source : req->destination,
              &list, &count);
    for (uint64_t i = 0; st == WEX_OK && i < count; i++)
        st = plan_canonical(&job, list[i]);
    if (st == WEX_OK)
        st = pb_coalesce(&ops, job.cfg.coalesce);
    if (st == WEX_OK)
        st = emit_all(&job, b);
    else if (st == WEX_ERR_NOMEM)
        ctx->host->set_error(ctx->host->ctx, st, "balanced: out of memory");
    free(list);
    free(job.cand);
    free(job.cuts);
    free(ops.v);
    return st;
}

static const wex_policy_ops pb_ops_table = {
    .struct_size = sizeof(wex_policy_ops),
    .ctx_create = pb_ctx_create,
    .ctx_destroy = pb_ctx_destroy,
    .plan = pb_plan,
};

static const wex_plugin_desc pb_desc = {
    .struct_size = sizeof(wex_plugin_desc),
    .abi_version = WEX_ABI_1_0,
    .kind = WEX_KIND_POLICY,
    .flags = WEX_PLUGIN_THREAD_PER_CTX,
    .name = "balanced",
    .version = "0.1.0",
    .init = wp_plugin_init,
    .fini = wp_plugin_fini,
    .ops = &pb_ops_table,
};

WEX_PLUGIN_DEFINE_ENTRY(WEX_ABI_1_0, pb_desc)
