/* The staging window, on a source (window.h): the end of each pass but
 * the last. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "window.h"

uint32_t wex__window_source_passes(const wex_job *job)
{
    uint32_t most = 1;

    if (job->side != WEX_SIDE_SOURCE || job->src.peer_passes == NULL)
        return 1;
    for (size_t q = 0; q < job->peer_count; q++)
        most = job->src.peer_passes[q] > most ? job->src.peer_passes[q] : most;
    return most;
}

static void pass_key(char *key, size_t cap, const char *prefix, uint32_t pass,
                     uint64_t dst, uint64_t src)
{
    snprintf(key, cap, "%spass/%u/%llu/%llu", prefix, pass,
             (unsigned long long)dst, (unsigned long long)src);
}

/* What a source says of a pass to destination peer q: "ok", and in a
 * delta job which of its operations there came whole ('1') or as a delta
 * ('0'), in operation order: the destination copies to the device only
 * what came whole. */
static char *pass_said(const wex_job *job, size_t q, uint32_t pass, size_t *len)
{
    char *value = malloc(job->op_count + 3);
    size_t n = 2;

    if (value == NULL)
        return NULL;
    memcpy(value, "ok", 2);
    for (size_t i = 0; job->plan.job->delta && i < job->op_count; i++)
        if (job->op_peer_index[i] == q && job->src.op_pass[i] == pass)
            value[n++] =
                job->src.delta.records != NULL &&
                        job->src.delta.records[i].mode == WEX__DELTA_OP_PAYLOAD
                    ? '0'
                    : '1';
    *len = n;
    return value;
}

wex_status wex__window_end_pass(wex_job *job, uint32_t pass, const char *prefix,
                                double timeout)
{
    char key[160];
    int any = 0;
    wex_status st;

    for (size_t q = 0; q < job->peer_count; q++)
        any |= job->src.peer_passes[q] > pass + 1;
    if (!any)
        return WEX_OK;
    /* what this pass put must land before the destinations read it */
    st = job->transport.ops->flush(job->transport.ctx);
    for (size_t q = 0; st == WEX_OK && q < job->peer_count; q++) {
        if (job->src.peer_passes[q] <= pass + 1)
            continue;
        size_t len = 0;
        char *said = pass_said(job, q, pass, &len);
        pass_key(key, sizeof(key), prefix, pass, job->peers[q], job->rank);
        st = said == NULL
                 ? wex__error(WEX_ERR_NOMEM, "job: out of memory")
                 : wex__store_set(job->rendezvous.store, key, said, len);
        free(said);
    }
    for (size_t q = 0; st == WEX_OK && q < job->peer_count; q++) {
        char *said = NULL;
        size_t len = 0;
        if (job->src.peer_passes[q] <= pass + 1)
            continue;
        snprintf(key, sizeof(key), "%sdrained/%u/%llu", prefix, pass,
                 (unsigned long long)job->peers[q]);
        st = wex__store_get(job->rendezvous.store, key, timeout, (void **)&said,
                            &len);
        if (st != WEX_OK)
            st = wex__error_prefix(st,
                                   "waiting for destination rank %llu to "
                                   "drain pass %u of its staging window",
                                   (unsigned long long)job->peers[q], pass);
        else if (len > 0 && said[0] == '!')
            st = wex__error(WEX_ERR_PEER, "destination rank %llu: %.*s",
                            (unsigned long long)job->peers[q], (int)(len - 1),
                            said + 1);
        free(said);
    }
    return st;
}

void wex__window_fail(wex_job *job, const char *prefix, const char *value,
                      size_t len)
{
    char key[160];

    for (size_t q = 0; job->src.peer_passes != NULL && q < job->peer_count; q++)
        for (uint32_t p = 0; p + 1 < job->src.peer_passes[q]; p++) {
            pass_key(key, sizeof(key), prefix, p, job->peers[q], job->rank);
            wex__store_set(job->rendezvous.store, key, value, len);
        }
}
