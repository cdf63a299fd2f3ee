/*
 * A delta step predicted before any step runs (`wex plan --changed F`,
 * docs/design.md "Delta steps"): every operation that can go as a delta
 * sends the payload the encoder is expected to make when a fraction F of
 * its elements changed at random places (a QUANTIZE operation's e4m3
 * bytes too); the rest (fp8 scales, other conversions, and every one
 * when F is past the job's max_fraction) go whole. A source
 * first scans its snapshots (at the rate this CPU's encoder measures on
 * the threads a source encodes with), then sends; the step is its busiest link's or source's time.
 */
#ifndef WEX_HOST_DELTA_PREDICT_H
#define WEX_HOST_DELTA_PREDICT_H

#include "planner.h"

typedef struct wex__plan_delta {
    double changed;          /* the fraction predicted for; < 0: not asked */
    double max_fraction;     /* the job's, or the default when delta is off */
    wex__plan_stats stats;   /* the operations at their wire bytes */
    uint64_t whole_bytes;    /* of operations that go whole */
    uint64_t snapshot_bytes; /* every source's snapshots */
    uint64_t max_snapshot_bytes; /* the largest source's */
    uint64_t max_outbox_bytes;   /* ... and the largest outbox */
    double scan_bytes_per_s;     /* measured here, on scan_threads */
    unsigned scan_threads;       /* the job's delta.threads, or this CPU's */
    double predicted;            /* the step, seconds */
} wex__plan_delta;

/* Starts a prediction at `changed` (negative: none asked; then the
 * calls below do nothing). */
wex_status wex__plan_delta_init(wex__plan_delta *d, const wex__planner *p,
                                double changed);
/* Adds one destination rank's operations. */
wex_status wex__plan_delta_add(wex__plan_delta *d, const wex__planner *p,
                               const wex__op *ops, size_t count);
/* Plans each source rank for its snapshots, and predicts the step. */
wex_status wex__plan_delta_finish(wex__plan_delta *d, wex__planner *p);
void wex__plan_delta_fini(wex__plan_delta *d);

#endif /* WEX_HOST_DELTA_PREDICT_H */
