/* Experts that move (EPLB): a destination rank hands wex its engine's
 * new placement between steps; at the next step's barrier every rank of
 * the job learns which destination ranks changed, lays those ranks out
 * again under their maps and plans its operations again (docs/design.md,
 * "Experts that move").
 *
 * Before the barrier a rank with a new placement puts its map at
 * placement/<digest> (once per distinct map: the text is content-
 * addressed), counts itself in the try's "placed" counter and names its
 * rank and digest under placed/<i>. After the barrier the counter is read
 * once (a step without changes costs that one round trip; a job whose
 * destination has no routed experts, none), and only the maps of ranks
 * whose digest differs from what this process follows are fetched. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "clock.h"
#include "error.h"
#include "job.h"
#include "log.h"

#define MAX_LAYERS (1u << 16)
#define MAX_SLOTS (1u << 20)

static cJSON *placement_doc(uint64_t layers, uint64_t physical,
                            const int32_t *map)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *rows =
        doc ? cJSON_AddArrayToObject(doc, "physical_to_logical") : NULL;

    for (uint64_t l = 0; rows != NULL && l < layers; l++) {
        cJSON *row = cJSON_CreateIntArray((const int *)(map + l * physical),
                                          (int)physical);
        if (row == NULL || !cJSON_AddItemToArray(rows, row)) {
            cJSON_Delete(row);
            rows = NULL;
        }
    }
    if (rows == NULL) {
        cJSON_Delete(doc);
        return NULL;
    }
    return doc;
}

/* Never 0: 0 is the placement the job's options give. */
static uint64_t digest_of(const char *text)
{
    return XXH3_64bits(text, strlen(text)) | 1u;
}

wex_status wex__placement_set(wex_job *job, uint64_t layers, uint64_t physical,
                              const int32_t *map)
{
    wex__engine *engine = NULL;
    cJSON *doc;
    char *text;
    uint64_t digest, now;
    wex_status st;

    if (job->side != WEX_SIDE_DESTINATION)
        return wex__error(WEX_ERR_INVALID,
                          "wex_job_set_placement: source rank %llu: only a "
                          "destination places experts",
                          (unsigned long long)job->rank);
    if (map == NULL || layers == 0 || physical == 0 || layers > MAX_LAYERS ||
        physical > MAX_SLOTS)
        return wex__error(WEX_ERR_INVALID,
                          "wex_job_set_placement: expected a map of 1..%u "
                          "layers by 1..%u slots, got %llu by %llu%s",
                          MAX_LAYERS, MAX_SLOTS, (unsigned long long)layers,
                          (unsigned long long)physical,
                          map == NULL ? " (map is NULL)" : "");
    if ((st = wex__job_complete_plan(job)) != WEX_OK)
        return st;
    doc = placement_doc(layers, physical, map);
    text = doc ? cJSON_PrintUnformatted(doc) : NULL;
    if (text == NULL) {
        cJSON_Delete(doc);
        return wex__error(WEX_ERR_NOMEM, "wex_job_set_placement: out of "
                                         "memory");
    }
    /* The engine checks the map as it would one in the job's options. */
    st = wex__planner_open_placed(&job->plan, doc, &engine);
    cJSON_Delete(doc);
    wex__engine_close(engine);
    if (st != WEX_OK) {
        free(text);
        return wex__error_prefix(st, "wex_job_set_placement");
    }
    digest = digest_of(text);
    now = job->members.placed ? job->members.placed[job->rank] : 0;
    free(job->members.placing);
    job->members.placing = NULL;
    if (digest == now) { /* what it follows already */
        free(text);
        return WEX_OK;
    }
    job->members.placing = text;
    job->members.placing_digest = digest;
    return WEX_OK;
}

static void digest_key(char *key, size_t cap, uint64_t digest)
{
    snprintf(key, cap, "placement/%016" PRIx64, digest);
}

wex_status wex__placement_post(wex_job *job, const char *try_prefix)
{
    wex__store_client *c = job->rendezvous.store;
    char key[160], value[64];
    int64_t i = 0;
    wex_status st;

    if (job->members.placing == NULL)
        return WEX_OK;
    digest_key(key, sizeof(key), job->members.placing_digest);
    st = wex__store_set(c, key, job->members.placing,
                        strlen(job->members.placing));
    snprintf(key, sizeof(key), "%splaced", try_prefix);
    if (st == WEX_OK)
        st = wex__store_add(c, key, 1, &i);
    snprintf(key, sizeof(key), "%splaced/%lld", try_prefix, (long long)i);
    snprintf(value, sizeof(value), "%llu %016" PRIx64,
             (unsigned long long)job->rank, job->members.placing_digest);
    if (st == WEX_OK)
        st = wex__store_set(c, key, value, strlen(value));
    return st == WEX_OK ? WEX_OK
                        : wex__error_prefix(st, "posting the placement");
}

typedef struct change {
    uint64_t rank, digest;
} change;

static int by_digest_rank(const void *a, const void *b)
{
    const change *x = a, *y = b;

    if (x->digest != y->digest)
        return x->digest < y->digest ? -1 : 1;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The ranks changed[first .. last) share a digest: fetch its map once and
 * lay out each run of consecutive ranks. */
static wex_status apply_map(wex_job *job, const change *changed, size_t first,
                            size_t last, double timeout)
{
    char key[96];
    void *text = NULL;
    size_t len = 0;
    cJSON *doc = NULL;
    wex__engine *engine = NULL;
    wex_status st;

    digest_key(key, sizeof(key), changed[first].digest);
    st = wex__store_get(job->rendezvous.store, key, timeout, &text, &len);
    if (st == WEX_OK && (doc = cJSON_ParseWithLength(text, len)) == NULL)
        st = wex__error(WEX_ERR_PEER, "%s: not a placement", key);
    if (st == WEX_OK)
        st = wex__planner_open_placed(&job->plan, doc, &engine);
    for (size_t i = first; st == WEX_OK && i < last;) {
        size_t j = i + 1;
        while (j < last && changed[j].rank == changed[j - 1].rank + 1)
            j++;
        st = wex__planner_place(&job->plan, engine, changed[i].rank, j - i);
        for (size_t k = i; st == WEX_OK && k < j; k++)
            job->members.placed[changed[k].rank] = changed[k].digest;
        i = j;
    }
    wex__engine_close(engine);
    cJSON_Delete(doc);
    free(text);
    return st;
}

wex_status wex__placement_follow(wex_job *job, const char *try_prefix,
                                 double timeout)
{
    wex__store_client *c = job->rendezvous.store;
    char key[160];
    int64_t n = 0;
    change *changed = NULL;
    size_t count = 0;
    wex_status st;
    double t0 = wex__now();

    if (job->members.experts_move == 0) {
        uint64_t layers, physical, experts;
        job->members.experts_move =
            wex__planner_expert_slots(&job->plan, &layers, &physical,
                                      &experts) == WEX_OK
                ? 1
                : -1;
        wex__error_clear();
    }
    if (job->members.experts_move < 0)
        return WEX_OK;
    snprintf(key, sizeof(key), "%splaced", try_prefix);
    if ((st = wex__store_add(c, key, 0, &n)) != WEX_OK || n <= 0)
        return st;
    if (job->members.placed == NULL)
        job->members.placed =
            calloc(job->plan.dst.ranks, sizeof(*job->members.placed));
    changed = calloc((size_t)n, sizeof(*changed));
    if (changed == NULL || job->members.placed == NULL) {
        free(changed);
        return wex__error(WEX_ERR_NOMEM, "placement: out of memory");
    }
    for (int64_t i = 1; st == WEX_OK && i <= n; i++) {
        void *v = NULL;
        size_t len = 0;
        unsigned long long rank = 0;
        uint64_t digest = 0;
        snprintf(key, sizeof(key), "%splaced/%lld", try_prefix, (long long)i);
        st = wex__store_get(c, key, timeout, &v, &len);
        if (st == WEX_OK && (sscanf(v, "%llu %" SCNx64, &rank, &digest) != 2 ||
                             rank >= job->plan.dst.ranks))
            st = wex__error(WEX_ERR_PEER, "%s: not a rank and a digest", key);
        free(v);
        if (st == WEX_OK && job->members.placed[rank] != digest) {
            changed[count].rank = rank;
            changed[count++].digest = digest;
        }
    }
    if (st == WEX_OK && count > 0)
        st = wex__job_complete_plan(job);
    qsort(changed, count, sizeof(*changed), by_digest_rank);
    for (size_t i = 0; st == WEX_OK && i < count;) {
        size_t j = i + 1;
        while (j < count && changed[j].digest == changed[i].digest)
            j++;
        st = apply_map(job, changed, i, j, timeout);
        i = j;
    }
    if (st == WEX_OK && job->side == WEX_SIDE_DESTINATION &&
        job->members.placing != NULL &&
        job->members.placed[job->rank] == job->members.placing_digest) {
        free(job->members.placing);
        job->members.placing = NULL;
    }
    if (st == WEX_OK && count > 0) {
        job->members.replan = 1;
        job->members.placements += count;
        WEX__DEBUG("%s rank %llu: %zu destination rank%s placed anew in "
                   "%.3f s",
                   job->mine->what, (unsigned long long)job->rank, count,
                   count > 1 ? "s" : "", wex__now() - t0);
    }
    free(changed);
    return st == WEX_OK ? WEX_OK
                        : wex__error_prefix(st, "following a placement");
}
