/*
 * What a plan adds up to, as `wex plan` prints it and wex_plan_json
 * returns it (schemas/plan.schema.json): the whole plan (every
 * destination rank's operations, each operation counted once), or one
 * rank's own operations.
 */
#ifndef WEX_HOST_PLAN_SUMMARY_H
#define WEX_HOST_PLAN_SUMMARY_H

#include <stdio.h>

#include <cjson/cJSON.h>

#include "delta_predict.h"
#include "planner.h"

typedef struct wex__plan_summary {
    int has_rank;  /* one rank's operations, else the whole plan */
    uint32_t side; /* of `rank` */
    uint64_t rank;
    wex__plan_stats stats;
    double plan_seconds;
    double predicted;      /* whole plan only */
    double lower_bound;    /* whole plan only */
    wex__plan_delta delta; /* whole plan, when a changed fraction is given */
} wex__plan_summary;

/* Plans the whole job (has_rank 0) or `rank` of `side`, adding up what
 * the operations move. Each operation is also written to `ops` (one JSON
 * line, when not NULL); `progress` draws a counter on stderr. With
 * `changed` in [0, 1] the whole plan also predicts a delta step where
 * that fraction of the elements changed (negative: none). */
wex_status wex__plan_summarize(wex__planner *p, int has_rank, uint32_t side,
                               uint64_t rank, FILE *ops, int progress,
                               double changed, wex__plan_summary *out);
void wex__plan_summary_fini(wex__plan_summary *s);

/* The document of schemas/plan.schema.json. */
cJSON *wex__plan_summary_document(const wex__planner *p,
                                  const wex__plan_summary *s);

#endif /* WEX_HOST_PLAN_SUMMARY_H */
