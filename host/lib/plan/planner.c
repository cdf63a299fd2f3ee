#include "planner.h"

#include "quantize_plan.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "replica_cover.h"
#include "clock.h"

static void shape_text(const wex__tensor *t, char *out, size_t cap)
{
    size_t used = (size_t)snprintf(out, cap, "%s [", wex_dtype_name(t->dtype));

    for (uint32_t d = 0; d < t->ndim && used < cap; d++)
        used += (size_t)snprintf(out + used, cap - used, d ? ", %llu" : "%llu",
                                 (unsigned long long)t->shape[d]);
    if (used < cap)
        snprintf(out + used, cap - used, "]");
}

wex_status wex__models_match(const wex_model *src, const char *src_path,
                             const wex_model *dst, const char *dst_path)
{
    if (src->count != dst->count)
        return wex__error(WEX_ERR_INVALID,
                          "%s has %llu tensors but %s has %llu: the two sides "
                          "must hold the same model",
                          src_path, (unsigned long long)src->count, dst_path,
                          (unsigned long long)dst->count);
    for (uint64_t i = 0; i < src->count; i++) {
        const wex__tensor *a = &src->tensors[i], *b;
        int64_t j = wex__model_find(dst, a->name);
        char sa[96], sb[96];

        if (j < 0)
            return wex__error(WEX_ERR_INVALID,
                              "%s has tensor %s, %s does not: the two sides "
                              "must hold the same model",
                              src_path, a->name, dst_path);
        b = &dst->tensors[j];
        if (a->dtype == b->dtype && a->ndim == b->ndim &&
            memcmp(a->shape, b->shape, a->ndim * sizeof(uint64_t)) == 0)
            continue;
        shape_text(a, sa, sizeof(sa));
        shape_text(b, sb, sizeof(sb));
        return wex__error(WEX_ERR_INVALID,
                          "%s is %s in %s but %s in %s: wex copies bytes as "
                          "they are and converts neither dtypes nor shapes",
                          a->name, sa, src_path, sb, dst_path);
    }
    return WEX_OK;
}

/* An engine's refusal of its parallel config ("parallel/tp: ...") said
 * as every other job error is: FILE: /SIDE/parallel/tp: ... */
static wex_status name_the_field(wex_status st, const char *file,
                                 const char *side, const char *engine)
{
    char msg[WEX__ERROR_MAX];
    const char *at;

    snprintf(msg, sizeof(msg), "%s", wex__last_error());
    at = strstr(msg, "parallel/");
    if (at == NULL)
        at = strstr(msg, "parallel:");
    if (at == NULL)
        return st;
    return wex__error(st, "%s: /%s/%s (engine %s)", file, side, at, engine);
}

/* A model config that cannot be read or built, said with the job field
 * that named it: FILE: /model: CONFIG: ... */
static wex_status load_model(const wex__job_config *j, const char *path,
                             const char *side, wex_model **model_p)
{
    wex_status st = wex__model_load(path, model_p);

    if (st == WEX_OK)
        return WEX_OK;
    if (j->model_path == NULL || strcmp(path, j->model_path) == 0)
        return wex__error_prefix(st, "%s: /model", j->path);
    return wex__error_prefix(st, "%s: /%s/model", j->path, side);
}

static wex_status load_models(wex__planner *p)
{
    wex__job_config *j = p->job;
    wex_status st =
        load_model(j, j->source_model_path, "source", &p->src_model);

    if (st != WEX_OK)
        return st;
    if (strcmp(j->source_model_path, j->destination_model_path) == 0) {
        p->dst_model = p->src_model;
        return WEX_OK;
    }
    st = load_model(j, j->destination_model_path, "destination", &p->dst_model);
    if (st != WEX_OK)
        return st;
    return wex__models_match(p->src_model, j->source_model_path, p->dst_model,
                             j->destination_model_path);
}

wex_status wex__planner_policy_ctx(wex__planner *p)
{
    wex_policy_args args;
    wex_status st;

    if (p->ctx != NULL) {
        p->ops->ctx_destroy(p->ctx);
        p->ctx = NULL;
    }
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.options = &p->policy_options;
    wex__error_clear();
    st = p->ops->ctx_create(p->policy->plugin_state, &args, &p->ctx);
    if (st != WEX_OK) {
        if (wex__last_error()[0] == '\0')
            wex__error(st, "failed without a message");
        return wex__error_prefix(st, "policy %s", p->job->policy.name);
    }
    return WEX_OK;
}

static wex_status open_policy(wex__planner *p, wex__registry *registry)
{
    wex_status st;

    p->policy = p->job->policy.plugin;
    st = wex__plugin_load(registry, p->policy);
    if (st != WEX_OK)
        return st;
    p->ops = &p->policy->ops.policy;
    p->policy_options = wex__options_view(p->job->policy.options);
    return wex__planner_policy_ctx(p);
}

/* Pieces of canonical tensor c the policy plans on one side. */
static uint64_t planned_pieces(const wex__side *s, uint64_t c)
{
    const uint64_t *start =
        s->policy_canon_start ? s->policy_canon_start : s->canon_start;

    return start[c + 1] - start[c];
}

/* Every tensor a destination holds must be held by some source: an
 * engine may leave tensors out (Megatron holds none of DeepSeek's MTP
 * copies of the embedding and head, which it shares), and the job is
 * then refused here in one line, naming the tensor, instead of by the
 * policy mid-plan. fp8 weights the sources quantize are checked when
 * their cells are cut. */
static wex_status sources_cover(const wex__planner *p)
{
    const wex__side *src = &p->src, *dst = &p->dst;

    for (uint64_t c = 0; c < dst->model->count; c++) {
        const wex__piece_ref *r;
        const wex__rank_layout *l;
        if (planned_pieces(dst, c) == 0 || planned_pieces(src, c) > 0)
            continue;
        r = &dst->canon_refs[dst->canon_start[c]];
        l = &dst->layouts[r->rank];
        return wex__error(
            WEX_ERR_INVALID,
            "%s: destination engine %s holds %s (rank %llu, in "
            "its local tensor %s) but no rank of source engine "
            "%s holds any of it: the source's layout leaves "
            "it out",
            p->job->path, p->job->destination.name, dst->model->tensors[c].name,
            (unsigned long long)r->rank,
            l->tensors[l->pieces[r->piece].tensor].name, p->job->source.name);
    }
    return WEX_OK;
}

wex_status wex__planner_open(wex__planner *p, wex__registry *registry,
                             const char *job_path)
{
    wex__job_config *job;
    wex_status st;

    memset(p, 0, sizeof(*p));
    st = wex__job_config_load(job_path, registry, WEX__JOB_PLAN_ONLY, &job,
                              NULL);
    if (st != WEX_OK)
        return st;
    return wex__planner_open_job(p, registry, job);
}

/* An elastic destination's dp replicas: equal groups of ranks, each a
 * whole copy (replica_cover.h). */
static wex_status elastic_replicas_whole(wex__planner *p)
{
    const wex__job_config *j = p->job;
    uint64_t replicas = j->destination_replicas;
    char where[1100];

    if (j->elastic_min_replicas == 0)
        return WEX_OK;
    snprintf(where, sizeof(where), "%s: /destination/elastic", j->path);
    if (replicas == 0 || p->dst.ranks % replicas != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: the destination's %llu ranks are not %llu "
                          "replicas of equal size",
                          where, (unsigned long long)p->dst.ranks,
                          (unsigned long long)replicas);
    return wex__side_whole_replicas(&p->dst, p->dst.ranks / replicas, where);
}

/* Everything after reading the job: models, both sides' layouts, the
 * topology and the policy. */
static wex_status lay_out(wex__planner *p, int with_policy)
{
    wex__job_config *j = p->job;
    wex_status st = load_models(p);
    double t0 = wex__now();

    if (st == WEX_OK &&
        (st = wex__side_open(&p->src, "source", p->registry, j->source.name,
                             p->src_model, j->source_parallel,
                             j->source.options)) != WEX_OK)
        st = name_the_field(st, j->path, "source", j->source.name);
    if (st == WEX_OK &&
        (st = wex__side_open(&p->dst, "destination", p->registry,
                             j->destination.name, p->dst_model,
                             j->destination_parallel,
                             j->destination.options)) != WEX_OK)
        st = name_the_field(st, j->path, "destination", j->destination.name);
    p->layout_seconds = wex__now() - t0;
    if (st == WEX_OK)
        st = wex__topology_place(j->topology, j->path, &p->src, &p->dst,
                                 &p->topology);
    p->topology_view = wex__options_view(j->topology);
    if (st == WEX_OK)
        st = wex__quantize_classify(p);
    if (st == WEX_OK)
        st = sources_cover(p);
    if (st == WEX_OK)
        st = elastic_replicas_whole(p);
    if (st == WEX_OK && with_policy)
        st = open_policy(p, p->registry);
    return st;
}

static wex_status open_job(wex__planner *p, wex__registry *registry,
                           wex__job_config *job, int with_policy)
{
    wex_status st;

    memset(p, 0, sizeof(*p));
    p->job = job;
    p->registry = registry;
    st = lay_out(p, with_policy);
    if (st != WEX_OK)
        wex__planner_close(p);
    return st;
}

wex_status wex__planner_open_job(wex__planner *p, wex__registry *registry,
                                 wex__job_config *job)
{
    return open_job(p, registry, job, 1);
}

wex_status wex__planner_check_job(wex__planner *p, wex__registry *registry,
                                  wex__job_config *job)
{
    return open_job(p, registry, job, 0);
}

wex_status wex__planner_load_models(wex__planner *p)
{
    wex_status st;

    if (p->src_model != NULL)
        return WEX_OK;
    st = load_models(p);
    p->src.model = p->src_model;
    p->dst.model = p->dst_model;
    return st;
}

wex_status wex__planner_complete(wex__planner *p, uint32_t side, uint64_t rank)
{
    wex__planner full;
    wex__side *kept, *fresh;
    wex_status st;

    if (!p->from_share)
        return WEX_OK;
    /* Laid out aside, so a failure leaves p as it was. */
    memset(&full, 0, sizeof(full));
    full.job = p->job;
    full.registry = p->registry;
    st = lay_out(&full, 1);
    kept = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
    fresh = side == WEX_SIDE_SOURCE ? &full.src : &full.dst;
    if (st == WEX_OK && (rank >= fresh->ranks || fresh->ranks != kept->ranks))
        st = wex__error(WEX_ERR_INTERNAL,
                        "plan: laid out again, the %s has "
                        "%llu ranks where its share said %llu",
                        kept->what, (unsigned long long)fresh->ranks,
                        (unsigned long long)kept->ranks);
    if (st != WEX_OK) {
        full.job = NULL;
        wex__planner_close(&full);
        return st;
    }
    /* The rank's local tensors (their names were handed out) stay where
     * they were; its pieces are the fresh ones, which the sides' views
     * point into. */
    {
        wex__rank_layout *a = &kept->layouts[rank], *b = &fresh->layouts[rank];
        wex__local_tensor *tensors = a->tensors;
        size_t count = a->tensor_count, cap = a->tensor_cap;
        a->tensors = b->tensors;
        a->tensor_count = b->tensor_count;
        a->tensor_cap = b->tensor_cap;
        b->tensors = tensors;
        b->tensor_count = count;
        b->tensor_cap = cap;
    }
    full.sides_digest = p->sides_digest;
    full.sides_digest_known = p->sides_digest_known;
    full.replicated = p->replicated;
    p->replicated = NULL;
    p->job = NULL;
    wex__planner_close(p);
    *p = full;
    return WEX_OK;
}

void wex__planner_close(wex__planner *p)
{
    if (p->ctx != NULL)
        p->ops->ctx_destroy(p->ctx);
    wex__side_close(&p->src);
    wex__side_close(&p->dst);
    if (p->dst_model != p->src_model)
        wex__model_free(p->dst_model);
    wex__model_free(p->src_model);
    wex__job_config_free(p->job);
    free(p->quantized);
    free(p->replicated);
    wex__kept_cells_free(p->kept_cells);
    memset(p, 0, sizeof(*p));
}

wex_status wex__planner_rank(wex__planner *p, uint32_t side, uint64_t rank,
                             wex_plan_builder *b)
{
    return wex__planner_rank_without(p, side, rank, NULL, 0, b);
}

static int listed(const uint64_t *list, uint64_t count, uint64_t v)
{
    for (uint64_t i = 0; i < count; i++)
        if (list[i] == v)
            return 1;
    return 0;
}

wex_status wex__planner_rank_without(wex__planner *p, uint32_t side,
                                     uint64_t rank, const uint64_t *dead,
                                     uint64_t dead_count, wex_plan_builder *b)
{
    wex_plan_request req;
    const wex__side *mine = side == WEX_SIDE_SOURCE ? &p->src : &p->dst;
    wex_status st;

    if (rank >= mine->ranks)
        return wex__error(WEX_ERR_INVALID, "%s rank %llu is outside 0..%llu",
                          mine->what, (unsigned long long)rank,
                          (unsigned long long)(mine->ranks - 1));
    b->count = 0;
    memset(&req, 0, sizeof(req));
    req.struct_size = sizeof(req);
    req.side = side;
    req.rank = rank;
    req.source = &p->src;
    req.destination = &p->dst;
    req.topology = &p->topology_view;
    req.dead_sources = dead;
    req.dead_source_count = dead_count;
    wex__error_clear();
    st = p->ops->plan(p->ctx, &req, b);
    if (st != WEX_OK) {
        if (wex__last_error()[0] == '\0')
            wex__error(st, "failed without a message");
        return wex__error_prefix(st, "policy %s", p->job->policy.name);
    }
    for (size_t i = 0; i < b->count; i++) {
        uint64_t r =
            side == WEX_SIDE_SOURCE ? b->ops[i].src_rank : b->ops[i].dst_rank;
        if (r != rank)
            return wex__error(WEX_ERR_INVALID,
                              "policy %s: asked for %s rank %llu's operations, "
                              "it gave one for rank %llu",
                              p->job->policy.name, mine->what,
                              (unsigned long long)rank, (unsigned long long)r);
        if (listed(dead, dead_count, b->ops[i].src_rank))
            return wex__error(WEX_ERR_UNSUPPORTED,
                              "policy %s cannot fail over: it planned an "
                              "operation from dead source rank %llu",
                              p->job->policy.name,
                              (unsigned long long)b->ops[i].src_rank);
    }
    return wex__quantize_plan_rank(p, side, rank, dead, dead_count, b);
}
