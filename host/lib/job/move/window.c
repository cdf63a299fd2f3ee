/* The staging window, on a destination (window.h): where each CUDA tensor
 * lands, and every pass but the last drained to the device. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delta_move.h"
#include "device_memory.h"
#include "error.h"
#include "log.h"
#include "window.h"

/* Places in the window start on a cache line. */
#define PLACE_ALIGN 64u

wex_status wex__window_place(wex_job *job, uint64_t index, uint64_t bytes,
                             void **host_p)
{
    wex__binding *b = &job->bind[index];
    uint64_t size = job->plan.job->device_staging_bytes;
    uint64_t need = (bytes + PLACE_ALIGN - 1) / PLACE_ALIGN * PLACE_ALIGN;
    wex_status st;

    if (job->dst.passes == 0 ||
        (bytes <= size && job->dst.window_used + need > size &&
         job->dst.window_used > 0)) {
        job->dst.window_pass = job->dst.passes++;
        job->dst.window_used = 0;
    }
    b->pass = job->dst.window_pass;
    if (bytes > size) {
        /* a copy of its own, received with the window's current pass */
        st = wex__device_alloc_pinned(job->device, bytes, &b->shadow);
        b->own_shadow = st == WEX_OK;
        *host_p = b->shadow;
        return st == WEX_OK ? st
                            : wex__error_prefix(st, "its own staging "
                                                    "(larger than "
                                                    "device_staging_bytes)");
    }
    if (job->dst.window == NULL) {
        st = wex__device_alloc_pinned(job->device, size, &job->dst.window);
        if (st != WEX_OK)
            return wex__error_prefix(st, "the staging window "
                                         "(device_staging_bytes)");
    }
    b->shadow = (unsigned char *)job->dst.window + job->dst.window_used;
    b->own_shadow = 0;
    job->dst.window_used += need;
    *host_p = b->shadow;
    WEX__DEBUG("destination rank %llu: tensor %llu (%llu bytes) lands in "
               "pass %u of the staging window",
               (unsigned long long)job->rank, (unsigned long long)index,
               (unsigned long long)bytes, b->pass);
    return WEX_OK;
}

void wex__window_free(wex_job *job)
{
    for (uint64_t i = 0; job->bind != NULL && i < job->layout->tensor_count;
         i++) {
        if (job->bind[i].own_shadow)
            wex__device_free_pinned(job->device, job->bind[i].shadow);
        job->bind[i].shadow = NULL;
        job->bind[i].own_shadow = 0;
    }
    wex__device_free_pinned(job->device, job->dst.window);
    job->dst.window = NULL;
}

wex_status wex__window_copy_in(wex_job *job, uint32_t pass)
{
    wex_status st = WEX_OK;
    int any = 0;

    for (uint64_t i = 0; i < job->layout->tensor_count && st == WEX_OK; i++)
        if (job->bind[i].shadow != NULL &&
            (pass == UINT32_MAX || job->bind[i].pass == pass)) {
            st = wex__device_copy_in(job->device, job->bind[i].address,
                                     job->bind[i].shadow, job->bind[i].bytes);
            any = 1;
        }
    if (any && st == WEX_OK)
        st = wex__device_copy_in_end(job->device);
    return st;
}

/* Tells every source that this destination drains no more passes. */
static void give_up(wex_job *job, const char *prefix, uint32_t from,
                    const char *why);

void wex__window_refuse(wex_job *job, const char *prefix, const char *why)
{
    give_up(job, prefix, 0, why);
}

static void give_up(wex_job *job, const char *prefix, uint32_t from,
                    const char *why)
{
    char key[160], value[WEX__ERROR_MAX + 1];

    snprintf(value, sizeof(value), "!%s", why);
    for (uint32_t p = from; p + 1 < job->dst.passes; p++) {
        snprintf(key, sizeof(key), "%sdrained/%u/%llu", prefix, p,
                 (unsigned long long)job->rank);
        wex__store_set(job->rendezvous.store, key, value, strlen(value));
    }
}

/* Waits for every source to say it put pass `pass`; WEX__PEER_OK, or how
 * it failed. */
static wex__peer_outcome wait_sources(wex_job *job, const char *prefix,
                                      uint32_t pass, double timeout, char *why,
                                      size_t cap)
{
    char key[160];

    for (size_t q = 0; q < job->peer_count; q++) {
        char *said = NULL;
        size_t len = 0;
        wex_status st;
        snprintf(key, sizeof(key), "%spass/%u/%llu/%llu", prefix, pass,
                 (unsigned long long)job->rank,
                 (unsigned long long)job->peers[q]);
        st = wex__store_get(job->rendezvous.store, key, timeout, (void **)&said,
                            &len);
        if (st == WEX_ERR_PEER) { /* the message names who died */
            snprintf(why, cap, "%s", wex__last_error());
            return WEX__PEER_DIED;
        }
        if (st != WEX_OK) {
            snprintf(why, cap,
                     "source rank %llu did not finish pass %u of "
                     "the staging window: %s",
                     (unsigned long long)job->peers[q], pass,
                     wex__last_error());
            return WEX__PEER_FAILED;
        }
        if (len > 0 && said[0] == '!') {
            snprintf(why, cap, "source rank %llu failed: %.*s",
                     (unsigned long long)job->peers[q], (int)(len - 1),
                     said + 1);
            free(said);
            return WEX__PEER_FAILED;
        }
        if (job->dst.delta.whole != NULL) /* which came whole (a delta job) */
            for (size_t i = 0, k = 2; i < job->op_count; i++)
                if (job->ops[i].src_rank == job->peers[q] &&
                    job->bind[job->ops[i].dst_tensor].pass == pass) {
                    job->dst.delta.whole[i] = k >= len || said[k] == '1';
                    k++;
                }
        free(said);
    }
    return WEX__PEER_OK;
}

wex__peer_outcome wex__window_drain(wex_job *job, const char *prefix,
                                    int verify, double timeout, char *why,
                                    size_t cap)
{
    char key[160];

    for (uint32_t p = 0; p + 1 < job->dst.passes; p++) {
        wex__peer_outcome how = wait_sources(job, prefix, p, timeout, why, cap);
        wex_status st = WEX_OK;
        if (how == WEX__PEER_OK) {
            /* digested now, before the next pass overwrites the window
             * (in a delta job, what came whole) */
            int deltas = job->dst.delta.inbox_count > 0;
            for (size_t i = 0; verify && i < job->op_count; i++)
                if (job->bind[job->ops[i].dst_tensor].pass == p &&
                    (!deltas || job->dst.delta.whole[i])) {
                    job->scratch.digests[i] =
                        wex__digest_landed(job, &job->ops[i]);
                    job->dst.early[i] = 1;
                }
            st = deltas ? wex__delta_copy_pass(job, p)
                        : wex__window_copy_in(job, p);
            if (st != WEX_OK) {
                snprintf(why, cap, "%s", wex__last_error());
                how = WEX__PEER_FAILED;
            }
        }
        if (how != WEX__PEER_OK) {
            give_up(job, prefix, p, why);
            return how;
        }
        snprintf(key, sizeof(key), "%sdrained/%u/%llu", prefix, p,
                 (unsigned long long)job->rank);
        st = wex__store_set(job->rendezvous.store, key, "ok", 2);
        if (st != WEX_OK) {
            snprintf(why, cap, "%s", wex__last_error());
            give_up(job, prefix, p, why);
            return WEX__PEER_FAILED;
        }
    }
    return WEX__PEER_OK;
}
