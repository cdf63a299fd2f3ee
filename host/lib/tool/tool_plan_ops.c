/* A planner's operations, what they add up to, and the plan shares made
 * of them, for the command (tool_plan.h): plan/planner.h,
 * plan_summary.h and plan_share.h. */
#include <stdlib.h>
#include <string.h>

#include "delta_groups.h"
#include "error.h"
#include "plan_share.h"
#include "plan_summary.h"
#include "quantize.h"
#include "tool_plan.h"

static void copy_op(const wex__op *o, wex_tool_op *out)
{
    memset(out, 0, sizeof(*out));
    out->src_rank = o->src_rank;
    out->src_tensor = o->src_tensor;
    out->dst_rank = o->dst_rank;
    out->dst_tensor = o->dst_tensor;
    out->ndim = o->ndim;
    out->src_ndim = o->src_ndim;
    out->dst_ndim = o->dst_ndim;
    memcpy(out->src_off, o->src_off, sizeof(out->src_off));
    memcpy(out->dst_off, o->dst_off, sizeof(out->dst_off));
    memcpy(out->extent, o->extent, sizeof(out->extent));
}

wex_status wex_tool_planner_ops(wex_tool_planner *planner, uint32_t side,
                                uint64_t rank, const uint64_t *dead,
                                uint64_t dead_count, wex_tool_op **ops_p,
                                size_t *count_p)
{
    wex_plan_builder b;
    wex_status st;

    *ops_p = NULL;
    *count_p = 0;
    wex__plan_builder_init(&b, &planner->src, &planner->dst);
    st = dead_count > 0 ? wex__planner_rank_without(planner, side, rank, dead,
                                                    dead_count, &b)
                        : wex__planner_rank(planner, side, rank, &b);
    if (st == WEX_OK &&
        (*ops_p = malloc((b.count ? b.count : 1) * sizeof(**ops_p))) == NULL)
        st =
            wex__error(WEX_ERR_NOMEM, "%zu operations: out of memory", b.count);
    for (size_t i = 0; st == WEX_OK && i < b.count; i++)
        copy_op(&b.ops[i], &(*ops_p)[i]);
    if (st == WEX_OK)
        *count_p = b.count;
    wex__plan_builder_fini(&b);
    return st;
}

static void copy_delta(const wex__plan_delta *d, wex_tool_plan_summary *out)
{
    out->delta.changed = d->changed;
    if (d->changed < 0)
        return;
    out->delta.max_fraction = d->max_fraction;
    out->delta.wire_bytes = d->stats.bytes;
    out->delta.whole_bytes = d->whole_bytes;
    out->delta.max_send = wex__plan_max_send(&d->stats);
    out->delta.max_recv = wex__plan_max_recv(&d->stats);
    out->delta.snapshot_bytes = d->snapshot_bytes;
    out->delta.max_snapshot_bytes = d->max_snapshot_bytes;
    out->delta.max_outbox_bytes = d->max_outbox_bytes;
    out->delta.scan_bytes_per_s = d->scan_bytes_per_s;
    out->delta.scan_threads = d->scan_threads;
    out->delta.predicted = d->predicted;
}

wex_status wex_tool_plan_summarize(wex_tool_planner *planner, int has_rank,
                                   uint32_t side, uint64_t rank, FILE *ops,
                                   int progress, double changed,
                                   wex_tool_plan_summary *out,
                                   cJSON **document_p)
{
    wex__plan_summary r;
    const wex__plan_stats *s = &r.stats;
    wex_status st;

    memset(out, 0, sizeof(*out));
    if (document_p != NULL)
        *document_p = NULL;
    st = wex__plan_summarize(planner, has_rank, side, rank, ops, progress,
                             changed, &r);
    if (st == WEX_OK) {
        out->operations = s->operations;
        out->bytes = s->bytes;
        out->bytes_needed = s->bytes_needed;
        out->redundant_bytes = s->redundant_bytes;
        out->source_bytes = s->source_bytes;
        out->quantized_bytes = s->quantized_bytes;
        out->quantize_work_bytes = s->quantize_work_bytes;
        out->quantize_rule = WEX__QUANT_RULE;
        out->intra_host_bytes = s->intra_host_bytes;
        out->max_send = wex__plan_max_send(s);
        out->max_recv = wex__plan_max_recv(s);
        out->plan_seconds = r.plan_seconds;
        out->predicted = r.predicted;
        out->lower_bound = r.lower_bound;
        copy_delta(&r.delta, out);
        if (document_p != NULL)
            *document_p = wex__plan_summary_document(planner, &r);
    }
    wex__plan_summary_fini(&r);
    return st;
}

wex_status wex_tool_planner_delta_memory(wex_tool_planner *planner,
                                         uint64_t rank, uint64_t *snapshot_p,
                                         uint64_t *outbox_p)
{
    wex_plan_builder b;
    wex_status st;

    *snapshot_p = *outbox_p = 0;
    if (!planner->job->delta)
        return WEX_OK;
    wex__plan_builder_init(&b, &planner->src, &planner->dst);
    st = wex__planner_rank(planner, WEX_SIDE_SOURCE, rank, &b);
    if (st == WEX_OK)
        st = wex__delta_memory(b.ops, b.count, planner->job->delta_max_fraction,
                               snapshot_p, outbox_p);
    wex__plan_builder_fini(&b);
    return st;
}

wex_status wex_tool_planner_delta_inboxes(wex_tool_planner *planner,
                                          uint64_t rank, uint64_t *bytes_p)
{
    wex_plan_builder b;
    wex_status st;

    *bytes_p = 0;
    if (!planner->job->delta)
        return WEX_OK;
    wex__plan_builder_init(&b, &planner->src, &planner->dst);
    st = wex__planner_rank(planner, WEX_SIDE_DESTINATION, rank, &b);
    if (st == WEX_OK)
        st = wex__delta_inboxes(b.ops, b.count, planner->job->delta_inbox_bytes,
                                bytes_p);
    wex__plan_builder_fini(&b);
    return st;
}

wex_status wex_tool_share_make(wex_tool_planner *planner, const char *dir,
                               uint32_t side, uint64_t rank, uint64_t *bytes)
{
    return wex__share_make(planner, dir, side, rank, bytes);
}
