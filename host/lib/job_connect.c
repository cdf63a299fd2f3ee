/* Meeting the other ranks once per job: agreeing on the layouts,
 * exposing destination memory, attaching it on the sources. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "error.h"
#include "runtime.h"

static void hash_side(XXH3_state_t *h, const wex__side *s)
{
    XXH3_64bits_update(h, &s->ranks, sizeof(s->ranks));
    for (uint64_t r = 0; r < s->ranks; r++) {
        const wex__rank_layout *l = &s->layouts[r];
        for (size_t t = 0; t < l->tensor_count; t++) {
            const wex__local_tensor *lt = &l->tensors[t];
            XXH3_64bits_update(h, lt->name, strlen(lt->name) + 1);
            XXH3_64bits_update(h, &lt->dtype, sizeof(lt->dtype));
            XXH3_64bits_update(h, lt->shape, lt->ndim * sizeof(uint64_t));
        }
        for (size_t p = 0; p < l->piece_count; p++) {
            const wex__piece *pc = &l->pieces[p];
            XXH3_64bits_update(h, &pc->canonical, sizeof(pc->canonical));
            XXH3_64bits_update(h, &pc->tensor, sizeof(pc->tensor));
            XXH3_64bits_update(h, pc->offset, pc->ndim * sizeof(uint64_t));
            XXH3_64bits_update(h, pc->extent, pc->ndim * sizeof(uint64_t));
            XXH3_64bits_update(h, pc->at, sizeof(pc->at));
        }
    }
}

static void hash_json(XXH3_state_t *h, const cJSON *v)
{
    char *text = v ? cJSON_PrintUnformatted(v) : NULL;

    if (text != NULL)
        XXH3_64bits_update(h, text, strlen(text));
    free(text);
}

/* Both sides' layouts, the policy and its options, the topology: what
 * every rank must agree on for their plans to fit together. */
static uint64_t layout_digest(const wex_job *job)
{
    XXH3_state_t *h = XXH3_createState();
    const cJSON *doc = job->plan.job->doc;
    uint64_t d;

    XXH3_64bits_reset(h);
    hash_side(h, &job->plan.src);
    hash_side(h, &job->plan.dst);
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "policy"));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "topology"));
    hash_json(h, cJSON_GetObjectItemCaseSensitive(doc, "verify"));
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

    job->layout_digest = layout_digest(job);
    snprintf(key, sizeof(key), "digest/%s/%llu", side_name(job->side),
             (unsigned long long)job->rank);
    st = wex__store_set(job->store, key, &job->layout_digest,
                        sizeof(job->layout_digest));
    if (st == WEX_OK)
        st = wex__store_get(job->store, "digest/source/0", timeout, &value,
                            &len);
    if (st != WEX_OK)
        return wex__error_prefix(st, "waiting for source rank 0's layout "
                                 "digest");
    if (len != sizeof(uint64_t) ||
        memcmp(value, &job->layout_digest, sizeof(uint64_t)) != 0) {
        free(value);
        return wex__error(WEX_ERR_INVALID,
                          "%s rank %llu: the layout digest differs from "
                          "source rank 0's: the ranks were started with "
                          "different job configs (model, engines, parallel "
                          "configs, policy or topology)",
                          side_name(job->side), (unsigned long long)job->rank);
    }
    free(value);
    return WEX_OK;
}

static wex_status publish_memory(wex_job *job)
{
    unsigned char blob[WEX_TRANSPORT_KEY_MAX];

    for (size_t t = 0; t < job->layout->tensor_count; t++) {
        uint64_t len = sizeof(blob);
        char key[96];
        wex_status st;

        wex__error_clear();
        st = job->tops->mem_key(job->tctx, job->bind[t].mem, blob, &len);
        if (st != WEX_OK)
            return wex__error_prefix(st, "local tensor %s",
                                     job->layout->tensors[t].name);
        snprintf(key, sizeof(key), "mem/%llu/%zu",
                 (unsigned long long)job->rank, t);
        st = wex__store_set(job->store, key, blob, len);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

/* Attaches each distinct destination buffer the ops write into, once. */
static wex_status attach_peers(wex_job *job, double timeout)
{
    job->op_peer = calloc(job->op_count ? job->op_count : 1,
                          sizeof(*job->op_peer));
    job->attached = calloc(job->op_count ? job->op_count : 1,
                           sizeof(*job->attached));
    if (job->op_peer == NULL || job->attached == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t i = 0; i < job->op_count; i++) {
        const wex__op *o = &job->ops[i];
        char key[96];
        void *blob = NULL;
        size_t len = 0;
        wex_status st;

        for (size_t j = 0; j < i && job->op_peer[i] == NULL; j++)
            if (job->ops[j].dst_rank == o->dst_rank &&
                job->ops[j].dst_tensor == o->dst_tensor)
                job->op_peer[i] = job->op_peer[j];
        if (job->op_peer[i] != NULL)
            continue;
        snprintf(key, sizeof(key), "mem/%llu/%llu",
                 (unsigned long long)o->dst_rank,
                 (unsigned long long)o->dst_tensor);
        st = wex__store_get(job->store, key, timeout, &blob, &len);
        if (st != WEX_OK)
            return wex__error_prefix(st, "waiting for destination rank %llu's "
                                     "memory", (unsigned long long)o->dst_rank);
        wex__error_clear();
        st = job->tops->peer_attach(job->tctx, o->dst_rank, blob, len,
                                    &job->op_peer[i]);
        free(blob);
        if (st != WEX_OK)
            return wex__error_prefix(st, "attaching destination rank %llu",
                                     (unsigned long long)o->dst_rank);
        job->attached[job->attached_count++] = job->op_peer[i];
    }
    return WEX_OK;
}

wex_status wex__job_connect(wex_job *job)
{
    double timeout = job->plan.job->connect_seconds;
    int64_t everyone = (int64_t)(job->plan.src.ranks + job->plan.dst.ranks);
    char who[64];
    wex_status st;

    for (size_t t = 0; t < job->layout->tensor_count; t++)
        if (job->bind[t].address == NULL)
            return wex__error(WEX_ERR_INVALID,
                              "local tensor %s has no memory: bind or "
                              "allocate every tensor before connecting",
                              job->layout->tensors[t].name);
    if (job->address == NULL)
        return wex__error(WEX_ERR_INVALID, "%s: /rendezvous/address: no "
                          "rendezvous to meet the other ranks at",
                          job->plan.job->path);
    snprintf(who, sizeof(who), "%s/%llu", side_name(job->side),
             (unsigned long long)job->rank);
    st = wex__store_connect(job->address, job->token, who, timeout,
                            &job->store);
    if (st == WEX_OK)
        st = agree_on_layouts(job, timeout);
    if (st == WEX_OK && job->side == WEX_SIDE_DESTINATION)
        st = publish_memory(job);
    if (st == WEX_OK && job->side == WEX_SIDE_SOURCE)
        st = attach_peers(job, timeout);
    if (st == WEX_OK)
        st = wex__store_barrier(job->store, "connected", everyone, timeout);
    if (st != WEX_OK)
        return wex__error_prefix(st, "%s: connecting", who);
    job->connected = 1;
    return WEX_OK;
}
