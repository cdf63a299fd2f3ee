#include "parallel_cfg.h"

#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "plugin_fail.h"

static int listed(const char *key, const char *const *list)
{
    for (; list != NULL && *list != NULL; list++)
        if (strcmp(key, *list) == 0)
            return 1;
    return 0;
}

static void join(char *out, size_t cap, const char *const *keys)
{
    size_t used = 0;

    out[0] = '\0';
    for (; *keys != NULL && used < cap; keys++)
        used += (size_t)snprintf(out + used, cap - used, "%s%s",
                                 used ? ", " : "", *keys);
}

wex_status ws_parallel_read(const wex_host_services *host,
                            const wex_options *parallel, const char *engine,
                            const char *const *keys, const char *const *extra,
                            int64_t *values)
{
    uint64_t count = 0;
    char pointer[64], supported[256];

    for (size_t i = 0; keys[i] != NULL; i++) {
        snprintf(pointer, sizeof(pointer), "/%s", keys[i]);
        values[i] = 1;
        if (host->opt_type(parallel, pointer) == WEX_JSON_MISSING)
            continue;
        if (host->opt_get_i64(parallel, pointer, &values[i]) != WEX_OK ||
            values[i] < 1)
            return WP_FAIL(host, WEX_ERR_INVALID,
                           "parallel/%s: expected a positive integer", keys[i]);
    }
    join(supported, sizeof(supported), keys);
    host->opt_count(parallel, "", &count);
    for (uint64_t i = 0; i < count; i++) {
        const char *key = NULL;
        int64_t v = 0;

        if (host->opt_key(parallel, "", i, &key) != WEX_OK ||
            listed(key, keys) || listed(key, extra))
            continue;
        snprintf(pointer, sizeof(pointer), "/%s", key);
        if (host->opt_get_i64(parallel, pointer, &v) == WEX_OK && v == 1)
            continue;
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/%s: the %s engine has no such parallelism; "
                       "expected 1 or absent (it supports %s)",
                       key, engine, supported);
    }
    return WEX_OK;
}

static wex_status explicit_split(const wex_host_services *host,
                                 const wex_options *parallel,
                                 const char *engine, int64_t layers, int64_t pp,
                                 int64_t *counts)
{
    uint64_t n = 0;
    int64_t sum = 0;
    char pointer[48];

    host->opt_count(parallel, "/pp_layers", &n);
    if ((int64_t)n != pp)
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/pp_layers: %s needs one entry per pipeline "
                       "stage; expected %lld entries, got %llu",
                       engine, (long long)pp, (unsigned long long)n);
    for (int64_t s = 0; s < pp; s++) {
        snprintf(pointer, sizeof(pointer), "/pp_layers/%lld", (long long)s);
        if (host->opt_get_i64(parallel, pointer, &counts[s]) != WEX_OK ||
            counts[s] < 1)
            return WP_FAIL(host, WEX_ERR_INVALID,
                           "parallel/pp_layers/%lld: expected a positive "
                           "layer count (every stage holds a layer)",
                           (long long)s);
        sum += counts[s];
    }
    if (sum != layers)
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/pp_layers: the stages hold %lld layers; the "
                       "model has %lld",
                       (long long)sum, (long long)layers);
    return WEX_OK;
}

static int64_t opt_or(const wex_host_services *host, const wex_options *doc,
                      const char *pointer, int64_t fallback)
{
    int64_t v = fallback;

    if (host->opt_type(doc, pointer) != WEX_JSON_MISSING)
        host->opt_get_i64(doc, pointer, &v);
    return v;
}

wex_status ws_pp_split(const wex_host_services *host,
                       const wex_options *parallel, const char *engine,
                       int64_t layers, int64_t pp, int even, int64_t *counts)
{
    int64_t first = opt_or(host, parallel, "/first_stage_layers", -1);
    int64_t last = opt_or(host, parallel, "/last_stage_layers", -1);
    int64_t middle_layers = layers, middle_stages = pp, lo = 0, hi = pp;

    if (pp > layers)
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/pp: %lld pipeline stages for %lld layers; "
                       "%s needs at least one layer per stage",
                       (long long)pp, (long long)layers, engine);
    if (host->opt_type(parallel, "/pp_layers") != WEX_JSON_MISSING)
        return explicit_split(host, parallel, engine, layers, pp, counts);
    if ((first >= 0 || last >= 0) && pp == 1)
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/first_stage_layers: uneven stages need "
                       "pp > 1");
    if (first >= 0) {
        counts[lo++] = first;
        middle_layers -= first;
        middle_stages--;
    }
    if (last >= 0 && hi > lo) {
        counts[--hi] = last;
        middle_layers -= last;
        middle_stages--;
    }
    if (middle_layers < 0 || (middle_stages == 0 && middle_layers != 0))
        return WP_FAIL(host, WEX_ERR_INVALID,
                       "parallel/first_stage_layers: the first and last "
                       "stages hold more or fewer than the model's %lld "
                       "layers",
                       (long long)layers);
    if (middle_stages == 0)
        return WEX_OK;
    if (even || first >= 0 || last >= 0) {
        if (middle_layers % middle_stages != 0)
            return WP_FAIL(host, WEX_ERR_INVALID,
                           "parallel/pp: %s splits %lld layers evenly over "
                           "%lld pipeline stages, which does not divide "
                           "(set first_stage_layers/last_stage_layers or "
                           "pp_layers for an uneven split)",
                           engine, (long long)middle_layers,
                           (long long)middle_stages);
        for (int64_t s = lo; s < hi; s++)
            counts[s] = middle_layers / middle_stages;
    } else {
        int64_t remainder = layers % pp;
        for (int64_t s = 0; s < pp; s++)
            counts[s] = layers / pp;
        /* vLLM's get_pp_indices: the extra layers go to the stages just
         * before the last one, which also holds the lm_head. */
        for (int64_t i = 2; i < remainder + 2; i++)
            counts[(pp - i + pp) % pp]++;
    }
    for (int64_t s = 0; s < pp; s++)
        if (counts[s] < 1)
            return WP_FAIL(host, WEX_ERR_INVALID,
                           "parallel/pp: stage %lld would hold %lld layers; "
                           "%s needs at least one layer per stage",
                           (long long)s, (long long)counts[s], engine);
    return WEX_OK;
}

wex_status ws_stage_table(const wex_host_services *host,
                          const wex_options *parallel, const char *engine,
                          int64_t layers, int64_t pp, int even,
                          int64_t **first_p)
{
    int64_t *counts = calloc((size_t)pp, sizeof(*counts));
    int64_t *first = calloc((size_t)pp + 1, sizeof(*first));
    wex_status st = WEX_ERR_NOMEM;

    if (counts != NULL && first != NULL)
        st = ws_pp_split(host, parallel, engine, layers, pp, even, counts);
    for (int64_t s = 0; st == WEX_OK && s < pp; s++)
        first[s + 1] = first[s] + counts[s];
    free(counts);
    if (st != WEX_OK) {
        free(first);
        first = NULL;
    }
    *first_p = first;
    return st;
}

void ws_unrank(uint64_t rank, const int64_t *sizes, int n, int64_t *coords)
{
    for (int i = n - 1; i >= 0; i--) {
        coords[i] = (int64_t)(rank % (uint64_t)sizes[i]);
        rank /= (uint64_t)sizes[i];
    }
}
