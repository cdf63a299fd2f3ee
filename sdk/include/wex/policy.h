/*
 * Policies: decide who sends which bytes to whom. A policy reads both
 * sides' layouts through host services (layout_*) and emits one rank's
 * copy operations through the host's plan builder (plan_add_op). It is
 * called once per job ("plan once, replay every step").
 *
 * Every process of a job calls the policy for its own rank only, so a
 * policy must be a pure function of the two layouts, the topology and
 * its options: the operations rank A lists with rank B must be exactly
 * the ones B lists with A, in the same order.
 */
#ifndef WEX_POLICY_H
#define WEX_POLICY_H

#include <wex/host.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wex_policy_ctx wex_policy_ctx; /* plugin, per job */

typedef struct wex_policy_args {
    uint32_t struct_size;
    uint32_t reserved0;
    const wex_options *options; /* validated against the manifest schema */
} wex_policy_args;
#define WEX_POLICY_ARGS_SIZE_1_0 WEX_SIZE_THROUGH(wex_policy_args, options)

typedef struct wex_plan_request {
    uint32_t struct_size;
    uint32_t side; /* WEX_SIDE_* of `rank` */
    uint64_t rank; /* the rank whose operations are wanted */
    const wex_layout *source;
    const wex_layout *destination;
    /* The job's topology with defaults filled in: {"gpus_per_host",
     * "placement", "nic_gb_per_s", "intra_host_gb_per_s", ...}; which host
     * a rank is on comes from layout_host. */
    const wex_options *topology;
    /* Source ranks that are dead and must send nothing (the job fails
     * over to ranks that hold the same regions), ascending. A source rank
     * listed here gets no operations; a destination's regions come from
     * live holders only, or the plan fails naming what no live source
     * holds. */
    const uint64_t *dead_sources;
    uint64_t dead_source_count;
} wex_plan_request;
#define WEX_PLAN_REQUEST_SIZE_1_0                                              \
    WEX_SIZE_THROUGH(wex_plan_request, dead_source_count)

typedef struct wex_policy_ops {
    uint32_t struct_size;
    uint32_t reserved0;
    uint64_t caps; /* reserved, zero */

    wex_status (*ctx_create)(wex_plugin_state *state,
                             const wex_policy_args *args,
                             wex_policy_ctx **ctx_p);
    void (*ctx_destroy)(wex_policy_ctx *ctx);

    /* Emits every operation `request->rank` takes part in (as sender for
     * a source rank, as receiver for a destination rank), in the order
     * both ends of each pair will execute them. Deterministic: the same
     * request gives the same operations in every process. */
    wex_status (*plan)(wex_policy_ctx *ctx, const wex_plan_request *request,
                       wex_plan_builder *builder);
} wex_policy_ops;
#define WEX_POLICY_OPS_SIZE_1_0 WEX_SIZE_THROUGH(wex_policy_ops, plan)

#ifdef __cplusplus
}
#endif

#endif /* WEX_POLICY_H */
