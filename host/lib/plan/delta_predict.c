/* A delta step predicted (delta_predict.h). */
#include <stdlib.h>
#include <string.h>

#include "delta.h"
#include "delta_groups.h"
#include "delta_predict.h"
#include "parallel.h"
#include "error.h"

/* The 5 words a source posts per operation (wex__delta_record). */
#define RECORD_BYTES 40

wex_status wex__plan_delta_init(wex__plan_delta *d, const wex__planner *p,
                                double changed)
{
    memset(d, 0, sizeof(*d));
    d->changed = changed;
    if (changed < 0)
        return WEX_OK;
    /* the job's, or the default a job with deltas off is given */
    d->max_fraction = p->job->delta_max_fraction;
    return wex__plan_stats_init(&d->stats, &p->src, &p->dst);
}

/* The bytes one operation puts on the wire at the fraction asked. */
static uint64_t wire_bytes(const wex__plan_delta *d, const wex__op *o)
{
    double payload;

    if (!wex__delta_eligible(o) || d->changed > d->max_fraction)
        return o->bytes;
    payload = wex__delta_expected_bytes(o->bytes / o->dtype_size, o->dtype_size,
                                        d->changed) +
              RECORD_BYTES;
    return payload < (double)o->bytes ? (uint64_t)payload : o->bytes;
}

wex_status wex__plan_delta_add(wex__plan_delta *d, const wex__planner *p,
                               const wex__op *ops, size_t count)
{
    wex__op *wire;
    wex_status st;

    if (d->changed < 0 || count == 0)
        return WEX_OK;
    if ((wire = malloc(count * sizeof(*wire))) == NULL)
        return wex__error(WEX_ERR_NOMEM, "plan: out of memory");
    memcpy(wire, ops, count * sizeof(*wire));
    for (size_t i = 0; i < count; i++) {
        wire[i].bytes = wire_bytes(d, &ops[i]);
        if (wire[i].bytes == ops[i].bytes)
            d->whole_bytes += ops[i].bytes;
    }
    st = wex__plan_stats_add(&d->stats, &p->src, &p->dst, wire, count);
    free(wire);
    return st;
}

wex_status wex__plan_delta_finish(wex__plan_delta *d, wex__planner *p)
{
    const wex__topology *t = &p->topology;
    wex_plan_builder b;
    wex_status st = WEX_OK;
    double worst = 0;

    if (d->changed < 0)
        return WEX_OK;
    d->scan_threads = p->job->delta_threads > 0
                          ? p->job->delta_threads
                          : wex__parallel_default(WEX__DELTA_THREADS);
    d->scan_bytes_per_s = wex__delta_scan_rate(d->scan_threads);
    wex__plan_builder_init(&b, &p->src, &p->dst);
    for (uint64_t r = 0; st == WEX_OK && r < p->src.ranks; r++) {
        uint64_t snap, outbox;
        double s;
        st = wex__planner_rank(p, WEX_SIDE_SOURCE, r, &b);
        if (st == WEX_OK)
            st = wex__delta_memory(b.ops, b.count, d->max_fraction, &snap,
                                   &outbox);
        if (st != WEX_OK)
            break;
        d->snapshot_bytes += snap;
        if (snap > d->max_snapshot_bytes)
            d->max_snapshot_bytes = snap;
        if (outbox > d->max_outbox_bytes)
            d->max_outbox_bytes = outbox;
        /* a source scans every snapshot, then sends */
        s = wex__plan_source_seconds(&d->stats, r, t) +
            (d->scan_bytes_per_s > 0 ? (double)snap / d->scan_bytes_per_s : 0);
        if (s > worst)
            worst = s;
    }
    wex__plan_builder_fini(&b);
    for (uint64_t r = 0; st == WEX_OK && r < p->dst.ranks; r++)
        if (wex__plan_link_seconds(d->stats.recv[r], t) > worst)
            worst = wex__plan_link_seconds(d->stats.recv[r], t);
    d->predicted = worst;
    return st;
}

void wex__plan_delta_fini(wex__plan_delta *d)
{
    if (d->changed >= 0)
        wex__plan_stats_fini(&d->stats);
}
