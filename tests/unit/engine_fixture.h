/* Opening an in-tree engine on a model config and looking at one rank's
 * layout: the fixture of the engine golden tests (test_engine_golden,
 * test_engine_serving, test_engine_training). */
#ifndef WEX_TEST_ENGINE_FIXTURE_H
#define WEX_TEST_ENGINE_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "error.h"
#include "host_registry.h"

static wex__registry *registry;

static void setup(void)
{
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    ck_assert_int_eq(wex__registry_scan(&registry), WEX_OK);
}

static void teardown(void)
{
    wex__registry_free(registry);
}

typedef struct described {
    wex_model *model;
    wex__engine *engine;
    wex__rank_layout layout;
} described;

/* Opens `engine` on `model` (a config in WEX_MODELS_DIR, or a path) with
 * the parallel config and options (JSON text; options NULL for none). */
static inline wex_status open_engine(described *d, const char *model,
                                     const char *engine, const char *parallel,
                                     const char *options)
{
    char path[1024];
    cJSON *par = cJSON_Parse(parallel);
    cJSON *opt = options ? cJSON_Parse(options) : NULL;
    wex_status st;

    memset(d, 0, sizeof(*d));
    if (model[0] == '/')
        snprintf(path, sizeof(path), "%s", model);
    else
        snprintf(path, sizeof(path), "%s/%s.config.json", WEX_MODELS_DIR,
                 model);
    ck_assert_ptr_nonnull(par);
    ck_assert(options == NULL || opt != NULL);
    ck_assert_int_eq(wex__model_load(path, &d->model), WEX_OK);
    st = wex__engine_open(registry, engine, d->model, par, opt, &d->engine);
    /* the engine keeps no reference to either document after open */
    cJSON_Delete(par);
    cJSON_Delete(opt);
    return st;
}

/* Describes another rank of the engine already open. */
static inline void describe_rank(described *d, uint64_t rank)
{
    wex__rank_layout_fini(&d->layout);
    memset(&d->layout, 0, sizeof(d->layout));
    ck_assert_msg(wex__engine_describe(d->engine, rank, &d->layout) == WEX_OK,
                  "rank %llu: %s", (unsigned long long)rank, wex__last_error());
}

static inline void describe(described *d, const char *model, const char *engine,
                            const char *parallel, const char *options,
                            uint64_t rank)
{
    ck_assert_msg(open_engine(d, model, engine, parallel, options) == WEX_OK,
                  "%s", wex__last_error());
    describe_rank(d, rank);
}

static inline void release(described *d)
{
    wex__rank_layout_fini(&d->layout);
    wex__engine_close(d->engine);
    wex__model_free(d->model);
}

/* The local tensor so named (its index in *index_p); fails the test when
 * the rank has none. */
static inline const wex__local_tensor *
tensor(const described *d, const char *name, uint64_t *index_p)
{
    for (size_t i = 0; i < d->layout.tensor_count; i++)
        if (strcmp(d->layout.tensors[i].name, name) == 0) {
            if (index_p)
                *index_p = i;
            return &d->layout.tensors[i];
        }
    ck_abort_msg("no local tensor %s", name);
    return NULL;
}

static inline int has_tensor(const described *d, const char *name)
{
    for (size_t i = 0; i < d->layout.tensor_count; i++)
        if (strcmp(d->layout.tensors[i].name, name) == 0)
            return 1;
    return 0;
}

/* Some local tensor's name contains `part`. */
static inline int has_tensor_with(const described *d, const char *part)
{
    for (size_t i = 0; i < d->layout.tensor_count; i++)
        if (strstr(d->layout.tensors[i].name, part) != NULL)
            return 1;
    return 0;
}

/* Local tensors whose names start with `prefix`. */
static inline size_t count_prefixed(const described *d, const char *prefix)
{
    size_t n = 0;

    for (size_t i = 0; i < d->layout.tensor_count; i++)
        n += strncmp(d->layout.tensors[i].name, prefix, strlen(prefix)) == 0;
    return n;
}

/* Pieces of the rank's layout holding canonical tensor `canonical`. */
static inline size_t pieces_of(const described *d, const char *canonical)
{
    int64_t c = wex__model_find(d->model, canonical);
    size_t n = 0;

    ck_assert_msg(c >= 0, "no canonical tensor %s", canonical);
    for (size_t i = 0; i < d->layout.piece_count; i++)
        n += d->layout.pieces[i].canonical == (uint64_t)c;
    return n;
}

/* The n-th piece of local tensor `local` holding canonical `canonical`. */
static inline const wex__piece *piece(const described *d, const char *local,
                                      const char *canonical, int nth)
{
    uint64_t t;
    int64_t c = wex__model_find(d->model, canonical);

    tensor(d, local, &t);
    ck_assert_msg(c >= 0, "no canonical tensor %s", canonical);
    for (size_t i = 0; i < d->layout.piece_count; i++) {
        const wex__piece *p = &d->layout.pieces[i];
        if (p->tensor == t && p->canonical == (uint64_t)c && nth-- == 0)
            return p;
    }
    ck_abort_msg("%s holds no piece of %s", local, canonical);
    return NULL;
}

/* The engine refuses the config in one line containing `expect`. */
static inline void refused(const char *model, const char *engine,
                           const char *parallel, const char *options,
                           const char *expect)
{
    described d;

    ck_assert_int_eq(open_engine(&d, model, engine, parallel, options),
                     WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), expect) != NULL, "'%s' lacks '%s'",
                  wex__last_error(), expect);
    ck_assert_ptr_null(strchr(wex__last_error(), '\n'));
    wex__model_free(d.model);
}

#endif /* WEX_TEST_ENGINE_FIXTURE_H */
