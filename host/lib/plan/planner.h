/*
 * Planning a job: read it, lay both sides out, place their ranks on
 * hosts, open the policy, and ask it for any one rank's operations.
 */
#ifndef WEX_HOST_PLANNER_H
#define WEX_HOST_PLANNER_H

#include "job_config.h"
#include "plan.h"

typedef struct wex__planner {
    wex__job_config *job;
    wex_model *src_model, *dst_model; /* dst_model may equal src_model */
    wex__side src, dst;
    wex__topology topology;
    wex_options topology_view, policy_options;
    wex__plugin *policy;
    const wex_policy_ops *ops;
    wex_policy_ctx *ctx;
    double layout_seconds; /* describing every rank of both sides */
    /* Per canonical tensor: an fp8 weight the host quantizes on the way
     * (quantize_plan.h); NULL when there is none. */
    unsigned char *quantized;
} wex__planner;

/* On failure the planner is closed and the thread's error says why. */
wex_status wex__planner_open(wex__planner *p, wex__registry *registry,
                             const char *job_path);
/* The same for a job already read; the planner owns `job` from here on,
 * even on failure. */
wex_status wex__planner_open_job(wex__planner *p, wex__registry *registry,
                                 wex__job_config *job);
void wex__planner_close(wex__planner *p);

/* Replaces b's operations with those `rank` of `side` takes part in. */
wex_status wex__planner_rank(wex__planner *p, uint32_t side, uint64_t rank,
                             wex_plan_builder *b);
/* The same, with source ranks `dead` (ascending) sending nothing: the
 * policy plans around them, or fails naming what no live source holds. */
wex_status wex__planner_rank_without(wex__planner *p, uint32_t side,
                                     uint64_t rank, const uint64_t *dead,
                                     uint64_t dead_count,
                                     wex_plan_builder *b);

/* The two models describe the same tensors (names, shapes, dtypes). */
wex_status wex__models_match(const wex_model *src, const char *src_path,
                             const wex_model *dst, const char *dst_path);

#endif /* WEX_HOST_PLANNER_H */
