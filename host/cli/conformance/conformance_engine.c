/*
 * Engine adapters (C14 - C16): describe a real model under the simplest
 * parallel config, the same way twice; cover every canonical tensor; and
 * refuse a parallel config no engine could run, with one line.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "conformance.h"
#include "tool_base.h"
#include "tool_json.h"
#include "tool_model.h"

static int same_tensor(const wex_tool_tensor *x, const wex_tool_tensor *y)
{
    return strcmp(x->name, y->name) == 0 && x->dtype == y->dtype &&
           x->ndim == y->ndim &&
           memcmp(x->shape, y->shape, x->ndim * sizeof(uint64_t)) == 0;
}

/* `lnd`: the ndim of the local tensor both pieces are in. */
static int same_piece(const wex_tool_piece *x, const wex_tool_piece *y,
                      uint32_t lnd)
{
    return x->canonical == y->canonical && x->tensor == y->tensor &&
           x->transform == y->transform && x->ndim == y->ndim &&
           memcmp(x->offset, y->offset, x->ndim * sizeof(uint64_t)) == 0 &&
           memcmp(x->extent, y->extent, x->ndim * sizeof(uint64_t)) == 0 &&
           memcmp(x->at, y->at, lnd * sizeof(uint64_t)) == 0;
}

/* The first difference between two descriptions of one rank, or NULL. */
static const char *layout_diff(const wex_tool_layout *a,
                               const wex_tool_layout *b)
{
    wex_tool_layout_info ia, ib;

    wex_tool_layout_get_info(a, &ia);
    wex_tool_layout_get_info(b, &ib);
    if (ia.coord_count != ib.coord_count)
        return "another number of coordinates";
    for (size_t i = 0; i < ia.coord_count; i++) {
        const char *ka, *kb;
        int64_t va, vb;
        wex_tool_layout_coord(a, i, &ka, &va);
        wex_tool_layout_coord(b, i, &kb, &vb);
        if (strcmp(ka, kb) != 0 || va != vb)
            return "other coordinates";
    }
    if (ia.tensor_count != ib.tensor_count)
        return "another number of local tensors";
    for (size_t i = 0; i < ia.tensor_count; i++) {
        wex_tool_tensor x, y;
        wex_tool_layout_tensor(a, i, &x);
        wex_tool_layout_tensor(b, i, &y);
        if (!same_tensor(&x, &y))
            return "another local tensor";
    }
    if (ia.piece_count != ib.piece_count)
        return "another number of pieces";
    for (size_t i = 0; i < ia.piece_count; i++) {
        wex_tool_piece x, y;
        wex_tool_tensor t;
        wex_tool_layout_piece(a, i, &x);
        wex_tool_layout_piece(b, i, &y);
        wex_tool_layout_tensor(a, x.tensor, &t);
        if (!same_piece(&x, &y, t.ndim))
            return "another piece";
    }
    return NULL;
}

static int has_capability(const wex_tool_manifest_info *m, const char *cap)
{
    const cJSON *caps =
        cJSON_GetObjectItemCaseSensitive(m->json, "capabilities");
    const cJSON *c;

    cJSON_ArrayForEach(c, caps) if (cJSON_IsString(c) &&
                                    strcmp(c->valuestring, cap) == 0) return 1;
    return 0;
}

/* C14: every rank describes, and describes the same way again. */
static int describe_all(wex_tool_engine *e, const char *parallel,
                        wex_tool_layout **layouts)
{
    uint64_t ranks = wex_tool_engine_ranks(e);
    size_t tensors = 0, pieces = 0;

    if (ranks == 0) {
        conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL,
                    "rank_count is 0 under parallel %s", parallel);
        return 0;
    }
    for (uint64_t r = 0; r < ranks; r++) {
        wex_tool_layout_info info;
        if (wex_tool_engine_describe(e, r, &layouts[r]) != WEX_OK) {
            conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL,
                        "rank %llu of %llu under parallel %s: %s",
                        (unsigned long long)r, (unsigned long long)ranks,
                        parallel, wex_last_error());
            return 0;
        }
        wex_tool_layout_get_info(layouts[r], &info);
        tensors += info.tensor_count;
        pieces += info.piece_count;
    }
    /* a pure function: again, last rank first */
    for (uint64_t r = ranks; r-- > 0;) {
        wex_tool_layout *again;
        const char *diff;

        if (wex_tool_engine_describe(e, r, &again) != WEX_OK) {
            conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL,
                        "describing rank %llu a second time failed: %s",
                        (unsigned long long)r, wex_last_error());
            return 0;
        }
        diff = layout_diff(layouts[r], again);
        wex_tool_layout_free(again);
        if (diff != NULL) {
            conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL,
                        "describing rank %llu a second time gave %s: "
                        "layouts must be a pure function of the model, the "
                        "parallel config and the options",
                        (unsigned long long)r, diff);
            return 0;
        }
    }
    conf_report(CONF_ENGINE_DESCRIBE, CONF_PASS,
                "%llu rank%s under parallel %s: %zu local tensors, %zu "
                "pieces, the same when described again",
                (unsigned long long)ranks, ranks == 1 ? "" : "s", parallel,
                tensors, pieces);
    return 1;
}

/* C15: over all ranks, every element of every canonical tensor is held
 * by at least one piece. */
static void check_coverage(const wex_model *model,
                           wex_tool_layout *const *layouts, uint64_t ranks)
{
    wex_tool_model_info m;
    uint64_t *start, *fill;
    uint64_t total = 0, short_tensors = 0, first = 0, first_have = 0;
    conf_box *boxes = NULL;
    wex_tool_layout_info info;
    wex_tool_piece p;
    wex_tool_tensor t;

    wex_tool_model_get_info(model, &m);
    start = calloc(m.count + 1, sizeof(*start));
    fill = calloc(m.count + 1, sizeof(*fill));
    if (start == NULL || fill == NULL)
        goto nomem;
    for (uint64_t r = 0; r < ranks; r++) {
        wex_tool_layout_get_info(layouts[r], &info);
        for (size_t i = 0; i < info.piece_count; i++) {
            wex_tool_layout_piece(layouts[r], i, &p);
            start[p.canonical + 1]++;
        }
    }
    for (uint64_t c = 0; c < m.count; c++)
        start[c + 1] += start[c];
    total = start[m.count];
    boxes = calloc(total ? total : 1, sizeof(*boxes));
    if (boxes == NULL)
        goto nomem;
    memcpy(fill, start, (m.count + 1) * sizeof(*fill));
    for (uint64_t r = 0; r < ranks; r++) {
        wex_tool_layout_get_info(layouts[r], &info);
        for (size_t i = 0; i < info.piece_count; i++) {
            conf_box *b;
            wex_tool_layout_piece(layouts[r], i, &p);
            wex_tool_model_tensor(model, p.canonical, &t);
            b = &boxes[fill[p.canonical]++];
            for (uint32_t d = 0; d < p.ndim; d++) {
                b->lo[d] = p.offset[d];
                b->hi[d] = p.offset[d] + p.extent[d];
                if (b->hi[d] > t.shape[d] || b->hi[d] < b->lo[d]) {
                    conf_report(CONF_ENGINE_COVERAGE, CONF_FAIL,
                                "rank %llu: a piece of %s reaches past its "
                                "dimension %u (%llu > %llu)",
                                (unsigned long long)r, t.name, d,
                                (unsigned long long)b->hi[d],
                                (unsigned long long)t.shape[d]);
                    goto out;
                }
            }
        }
    }
    for (uint64_t c = 0; c < m.count; c++) {
        uint64_t have;
        wex_tool_model_tensor(model, c, &t);
        if (conf_union_volume(boxes + start[c], start[c + 1] - start[c], t.ndim,
                              &have) != 0)
            goto nomem;
        if (have < t.elements && short_tensors++ == 0) {
            first = c;
            first_have = have;
        }
    }
    if (short_tensors > 0) {
        wex_tool_model_tensor(model, first, &t);
        conf_report(CONF_ENGINE_COVERAGE, CONF_FAIL,
                    "%llu of %llu canonical tensors are not wholly held by "
                    "any rank; first %s: %llu of its %llu elements are in "
                    "no piece",
                    (unsigned long long)short_tensors,
                    (unsigned long long)m.count, t.name,
                    (unsigned long long)(t.elements - first_have),
                    (unsigned long long)t.elements);
        goto out;
    }
    conf_report(CONF_ENGINE_COVERAGE, CONF_PASS,
                "all %llu canonical tensors (%llu elements) covered by %llu "
                "pieces",
                (unsigned long long)m.count,
                (unsigned long long)m.total_elements,
                (unsigned long long)total);
    goto out;
nomem:
    conf_report(CONF_ENGINE_COVERAGE, CONF_FAIL, "kit: out of memory");
out:
    free(boxes);
    free(start);
    free(fill);
}

/* C16: {"tp": 7} cannot split Qwen3-0.6B's 16 heads; ctx_create says
 * so, in one line. */
static void check_refusal(const conf_ctx *ctx, const wex_tool_plugin *p,
                          const wex_model *model)
{
    const wex_engine_ops *ops = wex_tool_plugin_engine_ops(p);
    cJSON *parallel = cJSON_Parse("{\"tp\": 7}");
    wex_options *pview = wex_tool_options_make(parallel);
    wex_options *oview = wex_tool_options_make(ctx->options);
    wex_engine_ctx *ectx = NULL;
    wex_engine_args args;
    const char *msg;
    wex_status st;

    if (pview == NULL || oview == NULL) {
        conf_report(CONF_ENGINE_REFUSE, CONF_FAIL, "kit: out of memory");
        goto out;
    }
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    args.model = model;
    args.parallel = pview;
    args.options = oview;
    wex_tool_error_clear();
    st = ops->ctx_create(wex_tool_plugin_state(p), &args, &ectx);
    msg = wex_last_error();
    if (st == WEX_OK) {
        ops->ctx_destroy(ectx);
        conf_report(CONF_ENGINE_REFUSE, CONF_FAIL,
                    "ctx_create accepted parallel {\"tp\": 7} for %s (16 "
                    "attention heads, 8 KV heads)",
                    CONF_MODEL_FILE);
    } else if (st != WEX_ERR_INVALID) {
        conf_report(CONF_ENGINE_REFUSE, CONF_FAIL,
                    "refused {\"tp\": 7} with status %d (%s); expected "
                    "WEX_ERR_INVALID: %s",
                    st, wex_status_string(st), msg[0] ? msg : "no message");
    } else if (msg[0] == '\0') {
        conf_report(CONF_ENGINE_REFUSE, CONF_FAIL,
                    "refused {\"tp\": 7} without a message: name the "
                    "constraint through host->set_error");
    } else if (strchr(msg, '\n') != NULL) {
        conf_report(CONF_ENGINE_REFUSE, CONF_FAIL,
                    "refused {\"tp\": 7}, but the message spans several "
                    "lines: %s",
                    msg);
    } else {
        conf_report(CONF_ENGINE_REFUSE, CONF_PASS, "refused {\"tp\": 7}: %s",
                    msg);
    }
out:
    wex_tool_options_free(pview);
    wex_tool_options_free(oview);
    cJSON_Delete(parallel);
}

static void engine_child(conf_ctx *ctx, void *arg)
{
    static const char *const simplest[] = {"{}", "{\"tp\": 1}"};
    char first_error[CONF_REASON_MAX - 64] = "";
    wex_tool_layout **layouts = NULL;
    wex_tool_registry *r = NULL;
    wex_model *model = NULL;
    wex_tool_engine *e = NULL;
    cJSON *parallel = NULL;
    const char *used = NULL;
    wex_tool_plugin *p;
    uint64_t ranks;

    (void)arg;
    conf_begin(CONF_ENGINE_DESCRIBE);
    if (wex_tool_model_load(ctx->model_path, &model) != WEX_OK) {
        conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL, "kit: %s",
                    wex_last_error());
        conf_report(CONF_ENGINE_COVERAGE, CONF_SKIP, "needs the model");
        conf_report(CONF_ENGINE_REFUSE, CONF_SKIP, "needs the model");
        return;
    }
    p = conf_load_plugin(ctx, ctx->manifest_path, &r);
    if (p == NULL) {
        conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL, "the host's loader: %s",
                    wex_last_error());
        conf_report(CONF_ENGINE_COVERAGE, CONF_SKIP, "needs C14");
        conf_report(CONF_ENGINE_REFUSE, CONF_SKIP, "needs C14");
        return;
    }
    for (size_t i = 0; i < 2 && e == NULL; i++) {
        parallel = cJSON_Parse(simplest[i]);
        if (wex_tool_engine_open(r, ctx->manifest.name, model, parallel,
                                 ctx->options, &e) == WEX_OK) {
            used = simplest[i];
            break;
        }
        if (i == 0)
            snprintf(first_error, sizeof(first_error), "%s", wex_last_error());
        cJSON_Delete(parallel);
        parallel = NULL;
    }
    if (e == NULL) {
        conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL,
                    "refused the simplest parallel configs {} and "
                    "{\"tp\": 1} for %s: %s",
                    CONF_MODEL_FILE, first_error);
        conf_report(CONF_ENGINE_COVERAGE, CONF_SKIP, "needs C14");
    } else {
        ranks = wex_tool_engine_ranks(e);
        layouts = calloc(ranks ? ranks : 1, sizeof(*layouts));
        conf_begin(CONF_ENGINE_DESCRIBE);
        if (layouts != NULL && describe_all(e, used, layouts)) {
            conf_begin(CONF_ENGINE_COVERAGE);
            check_coverage(model, layouts, ranks);
        } else {
            if (layouts == NULL)
                conf_report(CONF_ENGINE_DESCRIBE, CONF_FAIL,
                            "kit: out of memory for %llu ranks",
                            (unsigned long long)ranks);
            conf_report(CONF_ENGINE_COVERAGE, CONF_SKIP, "needs C14");
        }
    }
    conf_begin(CONF_ENGINE_REFUSE);
    if (!has_capability(&ctx->manifest, "tp"))
        conf_report(CONF_ENGINE_REFUSE, CONF_SKIP,
                    "the manifest lists no \"tp\" capability");
    else
        check_refusal(ctx, p, model);
    /* the child exits now: layouts, engine and registry go with it */
}

void conf_check_engine(conf_ctx *ctx)
{
    static const int ids[] = {CONF_ENGINE_DESCRIBE, CONF_ENGINE_COVERAGE,
                              CONF_ENGINE_REFUSE};

    conf_run_child(ctx, "engine", ids, 3, engine_child, NULL);
}
