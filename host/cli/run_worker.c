/*
 * One rank of `wex run`: opens the job for its side and rank (the
 * launcher passes the rendezvous in WEX_RENDEZVOUS, WEX_TOKEN and
 * WEX_JOB_ID), gets its memory, and syncs every step: a source fills its
 * weights first, a destination checks every element afterwards. It
 * reports each step under report/SIDE/RANK in the rendezvous.
 *
 * WEX_RUN_FAULT="die:SIDE:RANK:STEP" makes that rank kill itself just
 * before that step's sync: how the tests play a crashed peer.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "run.h"

static const char *side_name(uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? "source" : "destination";
}

static int fault_now(uint32_t side, uint64_t rank, uint64_t step)
{
    const char *f = getenv("WEX_RUN_FAULT");
    char want[128];

    if (f == NULL)
        return 0;
    snprintf(want, sizeof(want), "die:%s:%llu:%llu", side_name(side),
             (unsigned long long)rank, (unsigned long long)step);
    return strcmp(f, want) == 0;
}

static wex_status get_memory(wex_job *job)
{
    for (uint64_t i = 0; i < wex_job_tensor_count(job); i++) {
        void *address;
        wex_status st = wex_job_alloc(job, i, &address);
        if (st != WEX_OK)
            return st;
    }
    return WEX_OK;
}

static void report(wex_job *job, const cJSON *doc)
{
    char key[96], *text = cJSON_PrintUnformatted(doc);

    snprintf(key, sizeof(key), "report/%s/%llu", side_name(job->side),
             (unsigned long long)job->rank);
    if (text != NULL)
        wex__store_set(job->store, key, text, strlen(text));
    free(text);
}

static int run_steps(wex_job *job, uint64_t steps, cJSON *doc)
{
    cJSON *list = cJSON_AddArrayToObject(doc, "steps");

    for (uint64_t s = 1; s <= steps; s++) {
        wex_sync_report r = {sizeof(r), 0, 0, 0, 0, 0, 0, 0};
        uint64_t bad = 0;
        cJSON *one;
        char key[64];

        if (job->side == WEX_SIDE_SOURCE)
            wex_run_fill(job, s);
        if (fault_now(job->side, job->rank, s))
            raise(SIGKILL);
        if (wex_sync(job, s, &r) != WEX_OK) {
            cJSON_AddStringToObject(doc, "error", wex_last_error());
            fprintf(stderr, "wex run: %s rank %llu: %s\n", side_name(job->side),
                    (unsigned long long)job->rank, wex_last_error());
            return 1;
        }
        if (job->side == WEX_SIDE_DESTINATION)
            bad = wex_run_check(job, s);
        one = cJSON_CreateObject();
        cJSON_AddNumberToObject(one, "step", (double)s);
        cJSON_AddNumberToObject(one, "seconds", r.seconds);
        cJSON_AddNumberToObject(one, "bytes", (double)r.bytes);
        cJSON_AddNumberToObject(one, "operations", (double)r.operations);
        cJSON_AddBoolToObject(one, "digests_matched", r.verified == 1);
        cJSON_AddNumberToObject(one, "mismatched_elements", (double)bad);
        cJSON_AddItemToArray(list, one);
        /* Posted after every step, so a rank that dies later still
         * leaves what it did. */
        report(job, doc);
        snprintf(key, sizeof(key), "progress/%llu", (unsigned long long)s);
        if (job->side == WEX_SIDE_DESTINATION)
            wex__store_add(job->store, key, 1, NULL);
        if (bad != 0) {
            fprintf(stderr, "wex run: destination rank %llu: step %llu: "
                            "%llu elements differ from what was sent\n",
                    (unsigned long long)job->rank, (unsigned long long)s,
                    (unsigned long long)bad);
            return 1;
        }
    }
    return 0;
}

int wex_run_worker(const run_args *a)
{
    uint32_t side = a->side;
    uint64_t rank = a->rank;
    wex_job *job = NULL;
    cJSON *doc = cJSON_CreateObject();
    int code = 1;
    wex_status st = wex_job_open(a->job, side, rank, NULL, &job);

    if (st == WEX_OK && a->verify >= 0)
        job->plan.job->verify_digest = a->verify;
    if (st != WEX_OK || get_memory(job) != WEX_OK ||
        wex_job_connect(job) != WEX_OK) {
        fprintf(stderr, "wex run: %s rank %llu: %s\n", side_name(side),
                (unsigned long long)rank, wex_last_error());
        if (job != NULL && job->store != NULL) {
            cJSON_AddStringToObject(doc, "error", wex_last_error());
            report(job, doc);
        }
    } else {
        uint64_t held = 0;
        for (size_t i = 0; i < job->layout->tensor_count; i++)
            held += job->layout->tensors[i].bytes;
        cJSON_AddNumberToObject(doc, "bytes_held", (double)held);
        code = run_steps(job, a->steps, doc);
        report(job, doc);
    }
    cJSON_Delete(doc);
    wex_job_close(job);
    return code;
}
