#include "plan_summary.h"

#include <inttypes.h>
#include <string.h>

#include "clock.h"

wex_status wex__plan_summarize(wex__planner *p, int has_rank, uint32_t side,
                               uint64_t rank, FILE *ops, int progress,
                               wex__plan_summary *out)
{
    wex_plan_builder b;
    wex_status st;
    double t0 = wex__now();

    memset(out, 0, sizeof(*out));
    out->has_rank = has_rank;
    out->side = side;
    out->rank = rank;
    progress = progress && !has_rank;
    st = wex__plan_stats_init(&out->stats, &p->src, &p->dst);
    wex__plan_builder_init(&b, &p->src, &p->dst);
    /* Every operation has exactly one destination: planning each
     * destination rank counts each once. */
    for (uint64_t r = 0; st == WEX_OK && r < p->dst.ranks; r++) {
        st = wex__planner_rank(p, has_rank ? side : WEX_SIDE_DESTINATION,
                               has_rank ? rank : r, &b);
        if (st != WEX_OK)
            break;
        wex__plan_stats_add(&out->stats, &p->src, &p->dst, b.ops, b.count);
        if (ops != NULL)
            wex__plan_write_ops(ops, b.ops, b.count);
        if (progress)
            fprintf(stderr, "\rplanning: %" PRIu64 "/%" PRIu64 " destination "
                            "ranks", r + 1, p->dst.ranks);
        if (has_rank)
            break;
    }
    if (progress)
        fputs("\r\033[K", stderr);
    out->plan_seconds = wex__now() - t0;
    wex__plan_builder_fini(&b);
    if (st == WEX_OK && !has_rank) {
        /* One rank's figures need no bound; the whole plan's need both. */
        out->predicted = wex__plan_predicted_seconds(&out->stats, &p->topology);
        st = wex__plan_lower_bound(&p->src, &p->dst, &p->topology,
                                   &out->lower_bound);
    }
    return st;
}

void wex__plan_summary_fini(wex__plan_summary *s)
{
    wex__plan_stats_fini(&s->stats);
}

cJSON *wex__plan_summary_document(const wex__planner *p,
                                  const wex__plan_summary *r)
{
    cJSON *doc = cJSON_CreateObject();

    if (doc == NULL)
        return NULL;
    cJSON_AddStringToObject(doc, "job", p->job->path);
    cJSON_AddStringToObject(doc, "policy", p->job->policy.name);
    cJSON_AddStringToObject(doc, "source_engine", p->job->source.name);
    cJSON_AddStringToObject(doc, "destination_engine",
                            p->job->destination.name);
    cJSON_AddNumberToObject(doc, "source_ranks", (double)p->src.ranks);
    cJSON_AddNumberToObject(doc, "destination_ranks", (double)p->dst.ranks);
    cJSON_AddNumberToObject(doc, "hosts", (double)p->topology.hosts);
    if (r->has_rank) {
        cJSON_AddStringToObject(doc, "side", r->side == WEX_SIDE_SOURCE
                                                 ? "source"
                                                 : "destination");
        cJSON_AddNumberToObject(doc, "rank", (double)r->rank);
    }
    cJSON_AddNumberToObject(doc, "operations", (double)r->stats.operations);
    cJSON_AddNumberToObject(doc, "bytes", (double)r->stats.bytes);
    cJSON_AddNumberToObject(doc, "source_bytes", (double)r->stats.source_bytes);
    cJSON_AddNumberToObject(doc, "quantized_bytes",
                            (double)r->stats.quantized_bytes);
    if (!r->has_rank) {
        cJSON_AddNumberToObject(doc, "bytes_needed",
                                (double)r->stats.bytes_needed);
        cJSON_AddNumberToObject(doc, "redundant_bytes",
                                (double)r->stats.redundant_bytes);
        cJSON_AddNumberToObject(doc, "intra_host_bytes",
                                (double)r->stats.intra_host_bytes);
        cJSON_AddNumberToObject(doc, "max_rank_send_bytes",
                                (double)wex__plan_max_send(&r->stats));
        cJSON_AddNumberToObject(doc, "max_rank_recv_bytes",
                                (double)wex__plan_max_recv(&r->stats));
        cJSON_AddNumberToObject(doc, "predicted_seconds", r->predicted);
        if (r->stats.quantized_bytes > 0)
            cJSON_AddNumberToObject(doc, "quantize_gb_per_s",
                                    p->topology.quantize_bytes_per_s / 1e9);
        cJSON_AddNumberToObject(doc, "lower_bound_seconds", r->lower_bound);
    }
    cJSON_AddNumberToObject(doc, "plan_seconds", r->plan_seconds);
    cJSON_AddNumberToObject(doc, "layout_seconds", p->layout_seconds);
    return doc;
}
