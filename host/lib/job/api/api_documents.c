/* wex.h: layouts and plans as documents (wex_layout_json, wex_plan_json),
 * and wex_version. The same documents `wex layout --json` and
 * `wex plan --json` print. */
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "catalog.h"
#include "engine.h"
#include "error.h"
#include "host_registry.h"
#include "json_pointer.h"
#include "layout_document.h"
#include "plan_summary.h"
#include "job.h"
#include "schema_store.h"
#include "version.h"

const char *wex_version(void)
{
    return wex__version();
}

void wex_free(void *p)
{
    free(p);
}

/* A JSON object given as text, or an empty one for NULL; `what` names it
 * in the error. */
static wex_status parse_object(const char *text, const char *what,
                               cJSON **doc_p)
{
    *doc_p = text ? cJSON_Parse(text) : cJSON_CreateObject();
    if (*doc_p != NULL && cJSON_IsObject(*doc_p))
        return WEX_OK;
    cJSON_Delete(*doc_p);
    *doc_p = NULL;
    return wex__error(WEX_ERR_INVALID, "%s: expected a JSON object", what);
}

static wex_status give_text(cJSON *doc, char **json_p)
{
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;

    cJSON_Delete(doc);
    if (text == NULL)
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    /* cJSON allocates with malloc unless told otherwise, so wex_free's
     * free() matches it. */
    *json_p = text;
    return WEX_OK;
}

wex_status wex_layout_json(const char *model_config, const char *engine,
                           const char *parallel_text, const char *options_text,
                           int64_t rank, char **json_p)
{
    cJSON *parallel = NULL, *options = NULL, *doc = NULL;
    const cJSON *schema =
        wex__json_pointer_get(wex__schema("job"), "/$defs/parallel");
    wex__registry *registry = NULL;
    wex_model *model = NULL;
    wex__engine *e = NULL;
    wex_status st;

    if (model_config == NULL || engine == NULL || json_p == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "wex_layout_json: expected a "
                          "model config, an engine and a result pointer");
    *json_p = NULL;
    st = parse_object(parallel_text, "parallel", &parallel);
    if (st == WEX_OK && options_text != NULL)
        st = parse_object(options_text, "options", &options);
    if (st == WEX_OK && schema != NULL)
        st = wex__schema_check_with(schema, parallel, "parallel", "", NULL);
    if (st == WEX_OK)
        st = wex__model_load(model_config, &model);
    if (st == WEX_OK)
        st = wex__registry_default(&registry);
    if (st == WEX_OK)
        st = wex__engine_check_options(registry, engine, options);
    if (st == WEX_OK)
        st = wex__engine_open(registry, engine, model, parallel, options, &e);
    if (st == WEX_OK && rank >= 0 && (uint64_t)rank >= e->ranks)
        st = wex__error(WEX_ERR_INVALID,
                        "rank %lld: engine %s has ranks "
                        "0..%llu",
                        (long long)rank, engine,
                        (unsigned long long)(e->ranks - 1));
    if (st == WEX_OK) {
        doc = wex__layout_document(e, rank >= 0 ? (uint64_t)rank : 0,
                                   rank >= 0 ? (uint64_t)rank : e->ranks - 1);
        st = doc ? give_text(doc, json_p) : WEX_ERR_INVALID;
    }
    wex__engine_close(e);
    wex__model_free(model);
    cJSON_Delete(parallel);
    cJSON_Delete(options);
    return st;
}

wex_status wex_plan_json(const char *config, uint32_t side, int64_t rank,
                         char **json_p)
{
    wex__registry *registry = NULL;
    wex__job_config *job = NULL;
    wex__plan_summary summary;
    wex__planner planner;
    int opened = 0;
    wex_status st;

    if (config == NULL || json_p == NULL ||
        (side != WEX_SIDE_SOURCE && side != WEX_SIDE_DESTINATION))
        return wex__error(WEX_ERR_INVALID,
                          "wex_plan_json: expected a job, "
                          "a side (source or destination) and a result "
                          "pointer");
    *json_p = NULL;
    memset(&summary, 0, sizeof(summary));
    st = wex__registry_default(&registry);
    if (st == WEX_OK)
        st = wex__job_config_read(config, registry, WEX__JOB_PLAN_ONLY, &job);
    if (st == WEX_OK) {
        st = wex__planner_open_job(&planner, registry, job); /* owns job */
        opened = st == WEX_OK;
    }
    if (st == WEX_OK && rank >= 0 &&
        (uint64_t)rank >=
            (side == WEX_SIDE_SOURCE ? planner.src.ranks : planner.dst.ranks))
        st = wex__error(
            WEX_ERR_INVALID,
            "%s rank %lld: the job has ranks "
            "0..%llu on that side",
            side == WEX_SIDE_SOURCE ? "source" : "destination", (long long)rank,
            (unsigned long long)((side == WEX_SIDE_SOURCE ? planner.src.ranks
                                                          : planner.dst.ranks) -
                                 1));
    if (st == WEX_OK)
        st = wex__plan_summarize(&planner, rank >= 0, side,
                                 rank >= 0 ? (uint64_t)rank : 0, NULL, 0, -1,
                                 &summary);
    if (st == WEX_OK)
        st = give_text(wex__plan_summary_document(&planner, &summary), json_p);
    wex__plan_summary_fini(&summary);
    if (opened)
        wex__planner_close(&planner);
    return st;
}
