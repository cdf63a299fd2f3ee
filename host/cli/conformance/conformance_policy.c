/*
 * Policies (C17, C18, C22): plan a small job, Qwen3-0.6B from an hf
 * source rank to an hf destination rank, and check that the destination's
 * operations write every byte it holds exactly once and nothing else,
 * and that both ends list the same operations in the same order, every
 * time; then plan it again from two replicas with the first one dead, as
 * the host does after a source dies, and check the same of the survivor.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "conformance.h"
#include "tool_plan.h"

/* A piece in its local tensor's coordinates. */
static void piece_box(const wex_tool_piece *p, uint32_t lnd, conf_box *b)
{
    uint32_t lead = lnd - p->ndim;

    for (uint32_t k = 0; k < lnd; k++) {
        b->lo[k] = p->at[k];
        b->hi[k] = p->at[k] + (k < lead ? 1 : p->extent[k - lead]);
    }
}

/* An operation in its destination tensor's coordinates. */
static void op_box(const wex_tool_op *o, conf_box *b)
{
    uint32_t lead = o->dst_ndim - o->ndim;

    for (uint32_t k = 0; k < o->dst_ndim; k++) {
        b->lo[k] = o->dst_off[k];
        b->hi[k] = o->dst_off[k] + (k < lead ? 1 : o->extent[k - lead]);
    }
}

typedef struct tensor_tally {
    uint64_t need, written, written_sum, both;
} tensor_tally;

static int tally(const wex_tool_layout *l, size_t t, const wex_tool_op *ops,
                 size_t count, tensor_tally *out)
{
    wex_tool_layout_info info;
    wex_tool_tensor tensor;
    wex_tool_piece p;
    uint32_t lnd;
    size_t np = 0, no = 0, n = 0;
    conf_box *boxes;
    int rc = -1;

    wex_tool_layout_get_info(l, &info);
    wex_tool_layout_tensor(l, t, &tensor);
    lnd = tensor.ndim;
    for (size_t i = 0; i < info.piece_count; i++) {
        wex_tool_layout_piece(l, i, &p);
        np += p.tensor == t;
    }
    for (size_t i = 0; i < count; i++)
        no += ops[i].dst_tensor == t;
    boxes = calloc(2 * (np + no) + 1, sizeof(*boxes));
    if (boxes == NULL)
        return -1;
    memset(out, 0, sizeof(*out));
    /* [pieces][ops] then a copy of both for the union */
    for (size_t i = 0; i < info.piece_count; i++) {
        wex_tool_layout_piece(l, i, &p);
        if (p.tensor == t)
            piece_box(&p, lnd, &boxes[n++]);
    }
    for (size_t i = 0; i < count; i++)
        if (ops[i].dst_tensor == t) {
            op_box(&ops[i], &boxes[n]);
            out->written_sum += conf_box_volume(&boxes[n], lnd);
            n++;
        }
    memcpy(boxes + n, boxes, n * sizeof(*boxes));
    if (conf_union_volume(boxes + n, n, lnd, &out->both) == 0 &&
        conf_union_volume(boxes + np, no, lnd, &out->written) == 0 &&
        conf_union_volume(boxes, np, lnd, &out->need) == 0)
        rc = 0;
    free(boxes);
    return rc;
}

/* C17 (and C22): destination rank 0's operations against its layout.
 * Returns whether they pass. */
static int check_destination(int id, const wex_tool_planner *planner,
                             const wex_tool_op *ops, size_t count)
{
    const wex_tool_layout *l =
        wex_tool_planner_layout(planner, WEX_SIDE_DESTINATION, 0);
    wex_tool_layout_info info;
    uint64_t bad = 0, moved = 0;
    char first[CONF_REASON_MAX - 96] = "";

    wex_tool_layout_get_info(l, &info);
    for (size_t t = 0; t < info.tensor_count; t++) {
        wex_tool_tensor tensor;
        const char *name;
        tensor_tally c;

        wex_tool_layout_tensor(l, t, &tensor);
        name = tensor.name;
        if (tally(l, t, ops, count, &c) != 0) {
            conf_report(id, CONF_FAIL, "kit: out of memory");
            return 0;
        }
        moved += c.written_sum;
        if (c.both == c.need && c.written == c.need &&
            c.written_sum == c.written)
            continue;
        if (bad++ > 0)
            continue;
        if (c.both > c.need)
            snprintf(first, sizeof(first),
                     "%s: %llu elements written outside its pieces", name,
                     (unsigned long long)(c.both - c.need));
        else if (c.written < c.need)
            snprintf(first, sizeof(first),
                     "%s: %llu of its %llu elements never written", name,
                     (unsigned long long)(c.need - c.written),
                     (unsigned long long)c.need);
        else
            snprintf(first, sizeof(first),
                     "%s: %llu elements written more than once", name,
                     (unsigned long long)(c.written_sum - c.written));
    }
    if (bad > 0) {
        conf_report(id, CONF_FAIL,
                    "destination rank 0 (%zu operations): %llu of %zu local "
                    "tensors not written exactly once; first %s",
                    count, (unsigned long long)bad, info.tensor_count, first);
        return 0;
    }
    if (id == CONF_POLICY_COVERAGE)
        conf_report(id, CONF_PASS,
                    "%zu operations write each of the destination's %llu "
                    "elements exactly once",
                    count, (unsigned long long)moved);
    return 1;
}

static int same_op(const wex_tool_op *a, const wex_tool_op *b)
{
    return a->src_rank == b->src_rank && a->src_tensor == b->src_tensor &&
           a->dst_rank == b->dst_rank && a->dst_tensor == b->dst_tensor &&
           a->ndim == b->ndim && a->src_ndim == b->src_ndim &&
           a->dst_ndim == b->dst_ndim &&
           memcmp(a->src_off, b->src_off, a->src_ndim * sizeof(uint64_t)) ==
               0 &&
           memcmp(a->dst_off, b->dst_off, a->dst_ndim * sizeof(uint64_t)) ==
               0 &&
           memcmp(a->extent, b->extent, a->ndim * sizeof(uint64_t)) == 0;
}

/* One rank's operations, as planned. */
typedef struct op_list {
    wex_tool_op *ops;
    size_t count;
} op_list;

/* C18 (and C22): the pair (source `src_rank`, destination 0) seen from
 * both ends, and the destination's list planned twice. Returns the number
 * of operations between the two when they agree, -1 when not. */
static long check_agreement(int id, uint64_t src_rank, const op_list *src,
                            const op_list *dst, const op_list *again)
{
    size_t i = 0, j = 0, k = 0;

    if (again->count != dst->count) {
        conf_report(id, CONF_FAIL,
                    "planning destination rank 0 twice gave %zu, then %zu "
                    "operations",
                    dst->count, again->count);
        return -1;
    }
    for (k = 0; k < dst->count; k++)
        if (!same_op(&dst->ops[k], &again->ops[k])) {
            conf_report(id, CONF_FAIL,
                        "planning destination rank 0 twice: operation %zu "
                        "differs",
                        k);
            return -1;
        }
    for (k = 0;; k++) {
        while (i < src->count && src->ops[i].dst_rank != 0)
            i++;
        while (j < dst->count && dst->ops[j].src_rank != src_rank)
            j++;
        if (i == src->count || j == dst->count)
            break;
        if (!same_op(&src->ops[i], &dst->ops[j])) {
            conf_report(id, CONF_FAIL,
                        "operation %zu between source rank %llu and "
                        "destination rank 0 differs between the two ends' "
                        "plans (both must list the same operations in the "
                        "same order)",
                        k, (unsigned long long)src_rank);
            return -1;
        }
        i++;
        j++;
    }
    if (i != src->count || j != dst->count) {
        conf_report(id, CONF_FAIL,
                    "source rank %llu and destination rank 0 list different "
                    "numbers of operations with each other (%zu and %zu "
                    "in all)",
                    (unsigned long long)src_rank, src->count, dst->count);
        return -1;
    }
    return (long)k;
}

static char *job_text(const conf_ctx *ctx, int source_replicas)
{
    cJSON *job = cJSON_CreateObject(), *side, *policy, *parallel;
    char *text;

    cJSON_AddStringToObject(job, "name", "wex conformance");
    cJSON_AddStringToObject(job, "model", ctx->model_path);
    side = cJSON_AddObjectToObject(job, "source");
    cJSON_AddStringToObject(side, "engine", "hf");
    if (source_replicas > 1) {
        parallel = cJSON_AddObjectToObject(side, "parallel");
        cJSON_AddNumberToObject(parallel, "dp", source_replicas);
    }
    side = cJSON_AddObjectToObject(job, "destination");
    cJSON_AddStringToObject(side, "engine", "hf");
    policy = cJSON_AddObjectToObject(job, "policy");
    cJSON_AddStringToObject(policy, "name", ctx->manifest.name);
    if (ctx->options != NULL)
        cJSON_AddItemToObject(policy, "options",
                              cJSON_Duplicate(ctx->options, 1));
    cJSON_AddStringToObject(job, "transport", "shm");
    text = cJSON_PrintUnformatted(job);
    cJSON_Delete(job);
    return text;
}

/* Opens the conformance job; reports `ids` failed when it cannot. */
static int open_job(conf_ctx *ctx, wex_tool_registry *r, int source_replicas,
                    const int *ids, size_t count, wex_tool_planner **planner)
{
    char *text = job_text(ctx, source_replicas);

    if (wex_tool_planner_open_text(r, "conformance job", text, planner) ==
        WEX_OK)
        return 1;
    conf_report(ids[0], CONF_FAIL, "opening an hf%s -> hf job on %s: %s",
                source_replicas > 1 ? " (dp 2)" : "", CONF_MODEL_FILE,
                wex_last_error());
    for (size_t i = 1; i < count; i++)
        conf_report(ids[i], CONF_SKIP, "needs C%02d", ids[0]);
    return 0;
}

/* C17, C18. */
static void plan_whole(conf_ctx *ctx, wex_tool_registry *r)
{
    static const int ids[] = {CONF_POLICY_COVERAGE, CONF_POLICY_AGREE};
    op_list dst, src, again;
    wex_tool_planner *planner;
    long agreed;

    if (!open_job(ctx, r, 1, ids, 2, &planner))
        return;
    if (wex_tool_planner_ops(planner, WEX_SIDE_DESTINATION, 0, NULL, 0,
                             &dst.ops, &dst.count) != WEX_OK) {
        conf_report(CONF_POLICY_COVERAGE, CONF_FAIL,
                    "planning destination rank 0: %s", wex_last_error());
        conf_report(CONF_POLICY_AGREE, CONF_SKIP, "needs C17");
        return;
    }
    check_destination(CONF_POLICY_COVERAGE, planner, dst.ops, dst.count);
    conf_begin(CONF_POLICY_AGREE);
    if (wex_tool_planner_ops(planner, WEX_SIDE_SOURCE, 0, NULL, 0, &src.ops,
                             &src.count) != WEX_OK) {
        conf_report(CONF_POLICY_AGREE, CONF_FAIL, "planning source rank 0: %s",
                    wex_last_error());
        return;
    }
    if (wex_tool_planner_ops(planner, WEX_SIDE_DESTINATION, 0, NULL, 0,
                             &again.ops, &again.count) != WEX_OK) {
        conf_report(CONF_POLICY_AGREE, CONF_FAIL,
                    "planning destination rank 0 a second time: %s",
                    wex_last_error());
        return;
    }
    agreed = check_agreement(CONF_POLICY_AGREE, 0, &src, &dst, &again);
    if (agreed >= 0)
        conf_report(CONF_POLICY_AGREE, CONF_PASS,
                    "both ends list the same %ld operations in the same "
                    "order, every time",
                    agreed);
    /* the child exits soon and takes everything with it */
}

/* C22: two source replicas, the first dead. The host's planner refuses a
 * plan with an operation from a dead rank ("cannot fail over"); what is
 * left to check is that the survivor's plan is whole and agreed. */
static void plan_failover(conf_ctx *ctx, wex_tool_registry *r)
{
    static const int ids[] = {CONF_POLICY_FAILOVER};
    static const uint64_t dead[] = {0};
    op_list dst, src, again;
    wex_tool_planner *planner;
    long agreed;

    conf_begin(CONF_POLICY_FAILOVER);
    if (!open_job(ctx, r, 2, ids, 1, &planner))
        return;
    if (wex_tool_planner_ops(planner, WEX_SIDE_DESTINATION, 0, dead, 1,
                             &dst.ops, &dst.count) != WEX_OK) {
        conf_report(CONF_POLICY_FAILOVER, CONF_FAIL,
                    "planning destination rank 0 with source rank 0 dead "
                    "(source rank 1 holds everything): %s",
                    wex_last_error());
        return;
    }
    if (!check_destination(CONF_POLICY_FAILOVER, planner, dst.ops, dst.count))
        return;
    if (wex_tool_planner_ops(planner, WEX_SIDE_SOURCE, 1, dead, 1, &src.ops,
                             &src.count) != WEX_OK ||
        wex_tool_planner_ops(planner, WEX_SIDE_DESTINATION, 0, dead, 1,
                             &again.ops, &again.count) != WEX_OK) {
        conf_report(CONF_POLICY_FAILOVER, CONF_FAIL,
                    "planning again with source rank 0 dead: %s",
                    wex_last_error());
        return;
    }
    agreed = check_agreement(CONF_POLICY_FAILOVER, 1, &src, &dst, &again);
    if (agreed >= 0)
        conf_report(CONF_POLICY_FAILOVER, CONF_PASS,
                    "with source rank 0 dead, source rank 1's %ld "
                    "operations write each of the destination's elements "
                    "exactly once, listed alike at both ends",
                    agreed);
}

static void policy_child(conf_ctx *ctx, void *arg)
{
    wex_tool_registry *r = NULL;
    char *manifests;
    wex_tool_plugin *p;

    (void)arg;
    conf_begin(CONF_POLICY_COVERAGE);
    if (ctx->hf_manifest == NULL) {
        conf_report(CONF_POLICY_COVERAGE, CONF_FAIL,
                    "kit: no hf engine on the plugin search path to lay "
                    "the job out (set WEX_PLUGIN_PATH)");
        conf_report(CONF_POLICY_AGREE, CONF_SKIP, "needs C17");
        conf_report(CONF_POLICY_FAILOVER, CONF_SKIP, "needs C17");
        return;
    }
    manifests =
        malloc(strlen(ctx->manifest_path) + strlen(ctx->hf_manifest) + 2);
    sprintf(manifests, "%s:%s", ctx->manifest_path, ctx->hf_manifest);
    p = conf_load_plugin(ctx, manifests, &r);
    if (p == NULL) {
        conf_report(CONF_POLICY_COVERAGE, CONF_FAIL, "the host's loader: %s",
                    wex_last_error());
        conf_report(CONF_POLICY_AGREE, CONF_SKIP, "needs C17");
        conf_report(CONF_POLICY_FAILOVER, CONF_SKIP, "needs C17");
        return;
    }
    plan_whole(ctx, r);
    plan_failover(ctx, r);
    /* the child exits now and takes everything with it */
}

void conf_check_policy(conf_ctx *ctx)
{
    static const int ids[] = {CONF_POLICY_COVERAGE, CONF_POLICY_AGREE,
                              CONF_POLICY_FAILOVER};

    conf_run_child(ctx, "policy", ids, 3, policy_child, NULL);
}
