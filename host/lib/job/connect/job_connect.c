/* Meeting the other ranks once per job: agreeing on the layouts,
 * exposing destination memory, attaching it on the sources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "error.h"
#include "delta_move.h"
#include "landing.h"
#include "job.h"

static void hash_json(XXH3_state_t *h, const cJSON *v)
{
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;

    if (text != NULL)
        XXH3_64bits_update(h, text, strlen(text));
    free(text);
}

/* Both sides' layouts, the policy and its options, the topology, the
 * transport and its options, deltas: what every rank must agree on for their
 * plans and their endpoints to fit together (a source sending ucx's
 * active messages to a destination that left them out would only time
 * out). */
static uint64_t layout_digest(wex_job *job)
{
    XXH3_state_t *h = XXH3_createState();
    const cJSON *doc = job->plan.job->doc;
    uint64_t d;
    uint64_t sides = wex__planner_sides_digest(&job->plan);

    XXH3_64bits_reset(h);
    XXH3_64bits_update(h, &sides, sizeof(sides));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "policy"));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "topology"));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "verify"));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "transport"));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "delta"));
    d = XXH3_64bits_digest(h);
    XXH3_freeState(h);
    return d;
}

static const char *side_name(uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? "source" : "destination";
}

static wex_status agree_on_layouts(wex_job *job, double timeout)
{
    char key[96];
    void *value = NULL;
    size_t len = 0;
    wex_status st;

    job->rendezvous.layout_digest = layout_digest(job);
    snprintf(key, sizeof(key), "digest/%s/%llu", side_name(job->side),
             (unsigned long long)job->rank);
    st = wex__store_set(job->rendezvous.store, key,
                        &job->rendezvous.layout_digest,
                        sizeof(job->rendezvous.layout_digest));
    if (st == WEX_OK)
        st = wex__store_get(job->rendezvous.store, "digest/source/0", timeout,
                            &value, &len);
    if (st != WEX_OK)
        return wex__error_prefix(st, "waiting for source rank 0's layout "
                                     "digest");
    if (len != sizeof(uint64_t) ||
        memcmp(value, &job->rendezvous.layout_digest, sizeof(uint64_t)) != 0) {
        free(value);
        return wex__error(WEX_ERR_INVALID,
                          "%s rank %llu: the layout digest differs from "
                          "source rank 0's: the ranks were started with "
                          "different job configs (model, engines, parallel "
                          "configs, policy, topology or transport)",
                          side_name(job->side), (unsigned long long)job->rank);
    }
    free(value);
    return WEX_OK;
}

/* A delta inbox for each source peer, or none: the header, the inbox's
 * size and its key, or the header alone (delta_move.h). `blob` holds
 * the header already. */
static wex_status publish_inboxes(wex_job *job, unsigned char *blob)
{
    wex_status st = wex__delta_inbox_open(job);

    memset(blob + 8, 0, 8);
    for (size_t p = 0; p < job->peer_count && st == WEX_OK; p++) {
        wex_transport_mem *mem = wex__delta_inbox_of(job, job->peers[p]);
        uint64_t len = WEX_TRANSPORT_KEY_MAX, bytes = 0;
        char key[96];

        for (size_t k = 0; mem != NULL && k < job->dst.delta.inbox_count; k++)
            if (job->dst.delta.inbox_mem[k] == mem)
                bytes = job->dst.delta.inbox_size[k];
        if (mem != NULL) {
            memcpy(blob + WEX__MEM_HEADER, &bytes, 8);
            wex__error_clear();
            st = job->transport.ops->mem_key(job->transport.ctx, mem,
                                             blob + WEX__MEM_HEADER + 8, &len);
            if (st != WEX_OK)
                return wex__error_prefix(st, "a delta inbox's key");
        }
        snprintf(key, sizeof(key), "mem/%llu/inbox/%llu",
                 (unsigned long long)job->rank,
                 (unsigned long long)job->peers[p]);
        st = wex__store_set(job->rendezvous.store, key, blob,
                            mem != NULL ? WEX__MEM_HEADER + 8 + len
                                        : WEX__MEM_HEADER);
    }
    return st;
}

/* Each key is prefixed with this rank's incarnation (job_members.c). */
wex_status wex__job_publish_memory(wex_job *job)
{
    unsigned char blob[WEX__MEM_HEADER + 8 + WEX_TRANSPORT_KEY_MAX];
    uint32_t passes = job->dst.passes ? job->dst.passes : 1;
    int64_t incarnation = 0;
    char key[96];
    wex_status st;

    snprintf(key, sizeof(key), "incarnation/destination/%llu",
             (unsigned long long)job->rank);
    st = wex__store_add(job->rendezvous.store, key, 1, &incarnation);
    if (st != WEX_OK)
        return st;
    memcpy(blob, &incarnation, 8);
    memcpy(blob + 12, &passes, 4);
    for (size_t t = 0; t < job->layout->tensor_count; t++) {
        uint64_t len = WEX_TRANSPORT_KEY_MAX;

        memcpy(blob + 8, &job->bind[t].pass, 4);
        wex__error_clear();
        st = job->transport.ops->mem_key(job->transport.ctx, job->bind[t].mem,
                                         blob + WEX__MEM_HEADER, &len);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s",
                                     job->layout->tensors[t].name);
        snprintf(key, sizeof(key), "mem/%llu/%zu",
                 (unsigned long long)job->rank, t);
        st = wex__store_set(job->rendezvous.store, key, blob,
                            WEX__MEM_HEADER + len);
        if (st != WEX_OK)
            return st;
    }
    /* one pass: its board; more: each is digested as it drains */
    if (wex__landing_on(job) && passes == 1) {
        uint64_t len = WEX_TRANSPORT_KEY_MAX;

        memset(blob + 8, 0, 4);
        st = wex__landing_key(job, blob + WEX__MEM_HEADER, &len);
        if (st != WEX_OK)
            return st;
        snprintf(key, sizeof(key), "mem/%llu/board",
                 (unsigned long long)job->rank);
        st = wex__store_set(job->rendezvous.store, key, blob,
                            WEX__MEM_HEADER + len);
        if (st != WEX_OK)
            return st;
    }
    if (job->plan.job->delta) {
        st = publish_inboxes(job, blob);
        if (st != WEX_OK)
            return st;
    }
    return wex__store_add(job->rendezvous.store, "joins", 1, NULL);
}

wex_status wex__job_connect(wex_job *job)
{
    double timeout = job->plan.job->connect_seconds;
    int64_t everyone = (int64_t)(job->plan.src.ranks + job->plan.dst.ranks);
    int elastic = job->plan.job->elastic_min_replicas > 0;
    char who[64];
    wex_status st;

    for (size_t t = 0; t < job->layout->tensor_count; t++)
        if (job->bind[t].address == NULL)
            return wex__error(WEX_ERR_INVALID,
                              "local tensor %s has no memory: bind or "
                              "allocate every tensor before connecting",
                              job->layout->tensors[t].name);
    if (job->rendezvous.address == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /rendezvous/address: no "
                          "rendezvous to meet the other ranks at",
                          job->plan.job->path);
    snprintf(who, sizeof(who), "%s/%llu", side_name(job->side),
             (unsigned long long)job->rank);
    st = wex__job_find_replicas(job);
    if (st == WEX_OK)
        st = wex__elastic_setup(job);
    if (st != WEX_OK)
        return st;
    st = wex__store_connect(job->rendezvous.address, job->rendezvous.token, who,
                            timeout, &job->rendezvous.store);
    if (st == WEX_OK)
        st = agree_on_layouts(job, timeout);
    if (st == WEX_OK)
        st = wex__transport_connect(job, timeout);
    if (st == WEX_OK && job->side == WEX_SIDE_DESTINATION)
        st = wex__job_publish_memory(job);
    /* Elastic: nobody waits for replicas that may never come, and a
     * source attaches a replica's memory once it takes part in a step. */
    if (st == WEX_OK && job->side == WEX_SIDE_SOURCE && !elastic)
        st = wex__job_attach(job, timeout);
    if (st == WEX_OK && !elastic)
        st = wex__store_barrier(job->rendezvous.store, "connected", everyone,
                                timeout);
    /* Every destination has published by now: later moves of "joins"
     * are ranks coming back. */
    if (st == WEX_OK && job->side == WEX_SIDE_SOURCE)
        st = wex__store_add(job->rendezvous.store, "joins", 0,
                            &job->src.joins_seen);
    if (st != WEX_OK)
        return wex__error_prefix(st, "%s: connecting", who);
    job->rendezvous.connected = 1;
    return WEX_OK;
}

void wex__job_rendezvous_fini(wex_job *job)
{
    if (job->rendezvous.store != NULL)
        wex__store_close(job->rendezvous.store);
    free(job->rendezvous.address);
    free(job->rendezvous.token);
    free(job->rendezvous.job_id);
    memset(&job->rendezvous, 0, sizeof(job->rendezvous));
}
