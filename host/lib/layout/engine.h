/*
 * Driving an engine adapter plugin: open it for a model and a parallel
 * config, count its ranks, describe one rank into a wex__rank_layout.
 */
#ifndef WEX_HOST_ENGINE_H
#define WEX_HOST_ENGINE_H

#include <cjson/cJSON.h>

#include "layout.h"
#include "options.h"
#include "registry.h"

typedef struct wex__engine {
    wex__plugin *plugin;
    const wex_engine_ops *ops;
    wex_engine_ctx *ctx;
    const wex_model *model;
    wex_options parallel;
    wex_options options;
    uint64_t ranks;
} wex__engine;

/* Checks `options` (NULL: none) against engine `name`'s options schema,
 * as a job's are: "engine NAME: /options...: what is wrong" (an unknown
 * name with the name it resembles). An engine not found passes: opening
 * it says so. */
wex_status wex__engine_check_options(wex__registry *registry, const char *name,
                                     const cJSON *options);
/* `parallel` and `options` (either may be NULL) must outlive the engine. */
wex_status wex__engine_open(wex__registry *registry, const char *name,
                            const wex_model *model, const cJSON *parallel,
                            const cJSON *options, wex__engine **engine_p);
void wex__engine_close(wex__engine *engine);

/* Describes `rank`; `layout` is initialised here, the caller fini's it. */
wex_status wex__engine_describe(wex__engine *engine, uint64_t rank,
                                wex__rank_layout *layout);

#endif /* WEX_HOST_ENGINE_H */
