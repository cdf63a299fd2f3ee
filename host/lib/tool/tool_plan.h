/*
 * Planning a job as libwex does (tool.h): read its config, lay out both
 * sides, place their ranks on hosts, and ask its policy for any rank's
 * operations; what the whole plan adds up to; the plan shares ranks
 * open the job from (docs/design.md, "Plan shares"). `wex validate`,
 * `wex plan`, `wex run`'s launcher and the conformance kit's policy
 * checks stand on it.
 */
#ifndef WEX_TOOL_PLAN_H
#define WEX_TOOL_PLAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cjson/cJSON.h>
#include <wex/host.h>

#include "tool_model.h"
#include "tool_plugins.h"

typedef struct wex__planner wex_tool_planner;

/* The job a planner opened, with its defaults filled in. */
typedef struct wex_tool_job_info {
    const char *path; /* the job file, "<job text>" or the name given */
    const cJSON *doc; /* the whole document */
    const char *source_engine, *destination_engine, *policy, *transport;
    wex_tool_plugin *transport_plugin; /* NULL when not installed */
    const char *plan_shares;           /* "plan_shares" resolved, or NULL */
    uint64_t source_ranks, destination_ranks;
    uint64_t hosts;                            /* the topology's */
    double nic_bytes_per_s, intra_bytes_per_s; /* per rank, per direction */
    double quantize_bytes_per_s; /* floats one source quantizes to fp8 */
    double layout_seconds;       /* describing every rank of both sides */
    double connect_seconds;      /* how long ranks wait to meet */
    int verify_digest;           /* verify "digest" */
    uint64_t staging_bytes;      /* a source packs strided runs into */
    /* A source's arena for the fp8 weights the host quantizes on the
     * way; 0 when the plan quantizes none. */
    uint64_t quantize_staging_bytes;
    /* "delta": on or off; a destination's inboxes (0: 5 % of what it
     * holds, at least 1 MiB) */
    int delta;
    uint64_t delta_inbox_bytes;
} wex_tool_job_info;

/* One copy operation: a box of source tensor `src_tensor` of source rank
 * `src_rank` into destination tensor `dst_tensor` of `dst_rank`. */
typedef struct wex_tool_op {
    uint64_t src_rank, src_tensor, dst_rank, dst_tensor;
    uint32_t ndim;     /* extent's: the trailing dimensions */
    uint32_t src_ndim; /* src_off's: the source tensor's */
    uint32_t dst_ndim; /* dst_off's: the destination tensor's */
    uint64_t src_off[WEX_MAX_DIMS];
    uint64_t dst_off[WEX_MAX_DIMS];
    uint64_t extent[WEX_MAX_DIMS];
} wex_tool_op;

/* What a plan adds up to: the whole plan (each operation once), or one
 * rank's own operations. */
typedef struct wex_tool_plan_summary {
    uint64_t operations;
    uint64_t bytes;               /* moved */
    uint64_t bytes_needed;        /* the destinations' piece bytes */
    uint64_t redundant_bytes;     /* written twice into one destination */
    uint64_t source_bytes;        /* read at the sources to send them */
    uint64_t quantized_bytes;     /* of those, read to quantize to fp8 */
    uint64_t quantize_work_bytes; /* each cell once, whichever source */
    const char *quantize_rule;    /* the rule they are quantized by */
    uint64_t intra_host_bytes;
    uint64_t max_send, max_recv; /* the busiest sender's and receiver's */
    double plan_seconds;
    double predicted;   /* the step time; whole plan only */
    double lower_bound; /* no plan beats it; whole plan only */
    /* a delta step where a fraction `changed` of the elements changed;
     * whole plan only, and only when a fraction was asked for */
    struct {
        double changed; /* < 0: not asked */
        double max_fraction;
        uint64_t wire_bytes, whole_bytes, max_send, max_recv;
        uint64_t snapshot_bytes, max_snapshot_bytes, max_outbox_bytes;
        double scan_bytes_per_s;
        unsigned scan_threads;
        double predicted;
    } delta;
} wex_tool_plan_summary;

/* What `wex validate` checks of the job file `path`: its schema, its
 * plugins and their options, then both sides laid out and placed on
 * hosts, as `wex plan` does without planning. On failure the thread's
 * error holds the first problem, and *all_p (when not NULL) may hold
 * every problem of the config, one line each; free it. */
wex_status wex_tool_job_check(wex_tool_registry *registry, const char *path,
                              char **all_p);

/* Opens the job file `path` (its transport need not be installed):
 * lays out both sides and opens the policy. */
wex_status wex_tool_planner_open(wex_tool_registry *registry, const char *path,
                                 wex_tool_planner **planner_p);
/* The same for a job's JSON text; `name` stands for the file in
 * messages, and paths in it are relative to the working directory. */
wex_status wex_tool_planner_open_text(wex_tool_registry *registry,
                                      const char *name, const char *text,
                                      wex_tool_planner **planner_p);
void wex_tool_planner_close(wex_tool_planner *planner); /* NULL: no-op */

void wex_tool_planner_get_job(const wex_tool_planner *planner,
                              wex_tool_job_info *info);
/* Overrides the job's verify setting (1 "digest", 0 "none"). */
void wex_tool_planner_set_verify(wex_tool_planner *planner, int digest);
/* A side's (WEX_SIDE_*) model, a rank's layout (lent: the planner frees
 * it) and the host the topology places the rank on. */
const wex_model *wex_tool_planner_model(const wex_tool_planner *planner,
                                        uint32_t side);
const wex_tool_layout *wex_tool_planner_layout(const wex_tool_planner *p,
                                               uint32_t side, uint64_t rank);
uint64_t wex_tool_planner_host(const wex_tool_planner *planner, uint32_t side,
                               uint64_t rank);

/* The operations rank `rank` of `side` takes part in, as its process
 * plans them, with source ranks `dead` (ascending; dead_count may be 0)
 * sending nothing: the policy plans around them, or fails naming what
 * no live source holds. *ops_p is malloc'd (free it). */
wex_status wex_tool_planner_ops(wex_tool_planner *planner, uint32_t side,
                                uint64_t rank, const uint64_t *dead,
                                uint64_t dead_count, wex_tool_op **ops_p,
                                size_t *count_p);

/* Plans the whole job (has_rank 0) or `rank` of `side`, adding up what
 * the operations move. Each operation is also written to `ops` (one
 * JSON line, when not NULL); `progress` draws a counter on stderr. With
 * `changed` in [0, 1] (negative: not asked) the whole plan also predicts
 * a delta step at that changed fraction (out->delta). With
 * `document_p`, *document_p gets the summary as the document of
 * schemas/plan.schema.json (NULL when it cannot be made); delete it. */
wex_status wex_tool_plan_summarize(wex_tool_planner *planner, int has_rank,
                                   uint32_t side, uint64_t rank, FILE *ops,
                                   int progress, double changed,
                                   wex_tool_plan_summary *out,
                                   cJSON **document_p);
/* What one source rank holds for delta steps (its snapshots and its
 * outbox), as the job's max_fraction sizes them; 0 and 0 when the job
 * has deltas off. */
wex_status wex_tool_planner_delta_memory(wex_tool_planner *planner,
                                         uint64_t rank, uint64_t *snapshot_p,
                                         uint64_t *outbox_p);

/* What destination rank `rank` allocates for delta inboxes; 0 when the
 * job has deltas off. */
wex_status wex_tool_planner_delta_inboxes(wex_tool_planner *planner,
                                          uint64_t rank, uint64_t *bytes_p);

/* Plans rank `rank` of `side` with every source live and writes its
 * plan share into `dir` (made if missing), whole or not at all; adds the
 * file's bytes to *bytes. */
wex_status wex_tool_share_make(wex_tool_planner *planner, const char *dir,
                               uint32_t side, uint64_t rank, uint64_t *bytes);

#endif /* WEX_TOOL_PLAN_H */
