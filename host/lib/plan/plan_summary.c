#include "plan_summary.h"

#include <inttypes.h>
#include <string.h>

#include "clock.h"

wex_status wex__plan_summarize(wex__planner *p, int has_rank, uint32_t side,
                               uint64_t rank, FILE *ops, int progress,
                               double changed, wex__plan_summary *out)
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
    if (st == WEX_OK)
        st = wex__plan_delta_init(&out->delta, p, has_rank ? -1 : changed);
    wex__plan_builder_init(&b, &p->src, &p->dst);
    /* Every operation has exactly one destination: planning each
     * destination rank counts each once. */
    for (uint64_t r = 0; st == WEX_OK && r < p->dst.ranks; r++) {
        st = wex__planner_rank(p, has_rank ? side : WEX_SIDE_DESTINATION,
                               has_rank ? rank : r, &b);
        if (st != WEX_OK)
            break;
        st = wex__plan_stats_add(&out->stats, &p->src, &p->dst, b.ops, b.count);
        if (st == WEX_OK)
            st = wex__plan_delta_add(&out->delta, p, b.ops, b.count);
        if (st != WEX_OK)
            break;
        if (ops != NULL)
            wex__plan_write_ops(ops, b.ops, b.count);
        if (progress)
            fprintf(stderr,
                    "\rplanning: %" PRIu64 "/%" PRIu64 " destination "
                    "ranks",
                    r + 1, p->dst.ranks);
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
        if (st == WEX_OK)
            st = wex__plan_delta_finish(&out->delta, p);
    }
    return st;
}

void wex__plan_summary_fini(wex__plan_summary *s)
{
    wex__plan_stats_fini(&s->stats);
    wex__plan_delta_fini(&s->delta);
}

/* "delta": the step predicted at a changed fraction. */
static void add_delta(cJSON *doc, const wex__plan_delta *d)
{
    cJSON *o = cJSON_AddObjectToObject(doc, "delta");

    if (o == NULL)
        return;
    cJSON_AddNumberToObject(o, "changed_fraction", d->changed);
    cJSON_AddNumberToObject(o, "max_fraction", d->max_fraction);
    cJSON_AddNumberToObject(o, "wire_bytes", (double)d->stats.bytes);
    cJSON_AddNumberToObject(o, "whole_bytes", (double)d->whole_bytes);
    cJSON_AddNumberToObject(o, "max_rank_send_bytes",
                            (double)wex__plan_max_send(&d->stats));
    cJSON_AddNumberToObject(o, "max_rank_recv_bytes",
                            (double)wex__plan_max_recv(&d->stats));
    cJSON_AddNumberToObject(o, "snapshot_bytes", (double)d->snapshot_bytes);
    cJSON_AddNumberToObject(o, "max_source_snapshot_bytes",
                            (double)d->max_snapshot_bytes);
    cJSON_AddNumberToObject(o, "max_source_outbox_bytes",
                            (double)d->max_outbox_bytes);
    cJSON_AddNumberToObject(o, "scan_gb_per_s", d->scan_bytes_per_s / 1e9);
    cJSON_AddNumberToObject(o, "scan_threads", d->scan_threads);
    cJSON_AddNumberToObject(o, "predicted_seconds", d->predicted);
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
        cJSON_AddStringToObject(
            doc, "side", r->side == WEX_SIDE_SOURCE ? "source" : "destination");
        cJSON_AddNumberToObject(doc, "rank", (double)r->rank);
    }
    cJSON_AddNumberToObject(doc, "operations", (double)r->stats.operations);
    cJSON_AddNumberToObject(doc, "bytes", (double)r->stats.bytes);
    cJSON_AddNumberToObject(doc, "source_bytes", (double)r->stats.source_bytes);
    cJSON_AddNumberToObject(doc, "quantized_bytes",
                            (double)r->stats.quantized_bytes);
    cJSON_AddNumberToObject(doc, "quantize_work_bytes",
                            (double)r->stats.quantize_work_bytes);
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
        if (r->delta.changed >= 0)
            add_delta(doc, &r->delta);
    }
    cJSON_AddNumberToObject(doc, "plan_seconds", r->plan_seconds);
    cJSON_AddNumberToObject(doc, "layout_seconds", p->layout_seconds);
    return doc;
}
