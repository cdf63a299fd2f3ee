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
    wex__registry *registry;
    /* Opened from one rank's plan share (plan_share.h): no model, no
     * policy, and of every rank of both sides only what that rank's
     * operations name: its own layout whole, its peers' local tensors,
     * and the fp8 cells it quantizes into (kept_cells).
     * wex__planner_complete lays everything out when more is needed. */
    int from_share;
    struct wex__kept_cells *kept_cells;
    /* Computed once (plan_facts.c), or read from the share: */
    uint64_t sides_digest;
    int sides_digest_known;
    uint8_t *replicated; /* bit r: every region source r holds has another
                            holder, so a step may go on without it */
} wex__planner;

/* On failure the planner is closed and the thread's error says why. */
wex_status wex__planner_open(wex__planner *p, wex__registry *registry,
                             const char *job_path);
/* The same for a job already read; the planner owns `job` from here on,
 * even on failure. */
wex_status wex__planner_open_job(wex__planner *p, wex__registry *registry,
                                 wex__job_config *job);
/* What `wex validate` checks: the same, laying out both sides and
 * placing them on hosts, but with no policy opened (no rank can be
 * planned); close it as any planner. */
wex_status wex__planner_check_job(wex__planner *p, wex__registry *registry,
                                  wex__job_config *job);
void wex__planner_close(wex__planner *p);
/* A planner opened from a share: lays out both sides, opens the policy,
 * and drops the share. The sides' ranks, local tensors and pieces keep
 * their indices, so operations taken from the share stay valid, and
 * rank `rank` of `side` keeps its local tensors' very memory (the tensor
 * names handed out stay valid). On failure p is as it was. A
 * no-op for a planner that laid everything out. */
wex_status wex__planner_complete(wex__planner *p, uint32_t side, uint64_t rank);

/* A planner opened from a share: loads the models (the sides' `model`),
 * and nothing more. A no-op when they are loaded. */
wex_status wex__planner_load_models(wex__planner *p);

/* An XXH3 of both sides' layouts: local tensors and pieces of every rank
 * (plan_facts.c). */
uint64_t wex__planner_sides_digest(wex__planner *p);
/* Which sources are replicated (the `replicated` bits), computed on first
 * use; NULL when memory ran short (the error says so). */
const uint8_t *wex__planner_replicated(wex__planner *p);

/* Replaces b's operations with those `rank` of `side` takes part in. */
wex_status wex__planner_rank(wex__planner *p, uint32_t side, uint64_t rank,
                             wex_plan_builder *b);
/* The same, with source ranks `dead` (ascending) sending nothing: the
 * policy plans around them, or fails naming what no live source holds. */
wex_status wex__planner_rank_without(wex__planner *p, uint32_t side,
                                     uint64_t rank, const uint64_t *dead,
                                     uint64_t dead_count, wex_plan_builder *b);

/* planner_place.c: the destination's engine opened with its options'
 * "expert_placement" set to `placement` ({"physical_to_logical": ...}),
 * which the engine checks (one line naming the layer and slot). */
wex_status wex__planner_open_placed(wex__planner *p, const cJSON *placement,
                                    wex__engine **engine_p);
/* ... then destination ranks [first, first + count) (one replica) laid
 * out by it: their pieces replaced, the destination's index, the pieces
 * the host quantizes and the policy renewed. On failure the ranks keep
 * their pieces (the policy may need a retry). */
wex_status wex__planner_place(wex__planner *p, wex__engine *engine,
                              uint64_t first, uint64_t count);

/* planner_place.c: the destination's expert slots: MoE layers of the
 * main model (no MTP layers), physical slots a layer (routed experts +
 * options/redundant_experts) and routed experts; WEX_ERR_INVALID for a
 * model without routed experts. */
wex_status wex__planner_expert_slots(wex__planner *p, uint64_t *layers_p,
                                     uint64_t *physical_p, uint64_t *experts_p);
/* The policy's context, created afresh (the one there destroyed): the
 * policy caches what it packs of the layouts, which a placement moves. */
wex_status wex__planner_policy_ctx(wex__planner *p);

/* The two models describe the same tensors (names, shapes, dtypes). */
wex_status wex__models_match(const wex_model *src, const char *src_path,
                             const wex_model *dst, const char *dst_path);

#endif /* WEX_HOST_PLANNER_H */
