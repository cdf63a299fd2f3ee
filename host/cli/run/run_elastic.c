/*
 * `wex run --elastic`: the job's destination replicas come and go
 * (docs/design.md, "Elastic replicas"). WEX_RUN_FAULT may list, comma
 * separated, "leave:REPLICA:STEP" (every rank of the replica leaves
 * before that step, with wex_job_leave) and "join:REPLICA:STEP" (its
 * ranks join at that step, with wex_job_join: again, or for the first
 * time when the replica's first event is a join). The timeline is fixed:
 * a source starts step S only once every replica due at S has connected
 * (and every one gone by S has left), and a joiner connects only once the
 * sources finished the step before, through counters in the rendezvous:
 *   elastic/arrived/R  destination rank R connected to join (each time)
 *   elastic/left/R     destination rank R left (each time)
 *   elastic/steps      steps source rank 0 finished
 */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "run.h"
#include "tool_base.h"

/* How long a rank waits for another's counter: a joiner may take a while
 * to open its job and connect. */
#define ELASTIC_WAIT_SECONDS 120.0

static int by_step(const void *pa, const void *pb)
{
    const run_replica_event *a = pa, *b = pb;

    if (a->step != b->step)
        return a->step < b->step ? -1 : 1;
    return a->replica < b->replica ? -1 : a->replica > b->replica;
}

/* "leave:Q:S" or "join:Q:S" into *e; 0, or -1 when the item is another
 * fault (die, hang, ...); -2 when it is malformed. */
static int parse_item(const char *item, size_t len, run_replica_event *e)
{
    char buf[128], kind[16], tail;
    unsigned long long q, s;

    if (len >= sizeof(buf))
        return -2;
    memcpy(buf, item, len);
    buf[len] = '\0';
    if (strncmp(buf, "leave:", 6) != 0 && strncmp(buf, "join:", 5) != 0)
        return -1;
    if (sscanf(buf, "%15[a-z]:%llu:%llu%c", kind, &q, &s, &tail) != 3)
        return -2;
    e->join = strcmp(kind, "join") == 0;
    e->replica = q;
    e->step = s;
    return 0;
}

wex_status run_elastic_parse(const char *faults, uint64_t replicas,
                             uint64_t per, uint64_t steps, run_elastic *el)
{
    const char *p = faults;

    memset(el, 0, sizeof(*el));
    el->replicas = replicas;
    el->per = per;
    while (p != NULL && *p != '\0') {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        run_replica_event e, *grown;
        int how = parse_item(p, len, &e);

        if (how == -2 || (how == 0 && (e.replica >= replicas || e.step < 1 ||
                                       e.step > steps)))
            return wex_tool_error(
                WEX_ERR_INVALID,
                "WEX_RUN_FAULT: '%.*s': expected leave:REPLICA:STEP or "
                "join:REPLICA:STEP with a replica below %llu and a step in "
                "1..%llu",
                (int)len, p, (unsigned long long)replicas,
                (unsigned long long)steps);
        if (how == 0) {
            grown = realloc(el->events, (el->count + 1) * sizeof(*grown));
            if (grown == NULL)
                return wex_tool_error(WEX_ERR_NOMEM, "out of memory");
            el->events = grown;
            el->events[el->count++] = e;
        }
        p = end ? end + 1 : NULL;
    }
    if (el->count > 1)
        qsort(el->events, el->count, sizeof(*el->events), by_step);
    /* each replica's events alternate: a leave while there, a join while
     * gone (a first join: it starts gone) */
    for (uint64_t q = 0; q < replicas; q++) {
        int there = 1, first = 1;
        for (size_t i = 0; i < el->count; i++) {
            const run_replica_event *e = &el->events[i];
            if (e->replica != q)
                continue;
            if (first && e->join)
                there = 0;
            first = 0;
            if (e->join == there || (e->join && e->step == 1 && !first))
                return wex_tool_error(
                    WEX_ERR_INVALID,
                    "WEX_RUN_FAULT: %s:%llu:%llu: replica %llu is %s at "
                    "step %llu",
                    e->join ? "join" : "leave", (unsigned long long)q,
                    (unsigned long long)e->step, (unsigned long long)q,
                    there ? "already there" : "already gone",
                    (unsigned long long)e->step);
            there = e->join;
        }
    }
    return WEX_OK;
}

void run_elastic_free(run_elastic *el)
{
    free(el->events);
    memset(el, 0, sizeof(*el));
}

int run_elastic_present(const run_elastic *el, uint64_t replica, uint64_t step)
{
    int there = 1, first = 1;

    for (size_t i = 0; i < el->count; i++) {
        const run_replica_event *e = &el->events[i];
        if (e->replica != replica)
            continue;
        if (first && e->join)
            there = 0;
        first = 0;
        if (e->step <= step)
            there = e->join;
    }
    return there;
}

/* How many times the replica arrived (its first step, then each join)
 * and left, by step `step` included. */
static void counts(const run_elastic *el, uint64_t replica, uint64_t step,
                   int64_t *arrived, int64_t *left)
{
    *arrived = run_elastic_present(el, replica, 1) ? 1 : 0;
    *left = 0;
    for (size_t i = 0; i < el->count; i++) {
        const run_replica_event *e = &el->events[i];
        if (e->replica != replica || e->step > step)
            continue;
        if (e->join)
            *arrived += e->step > 1;
        else
            (*left)++;
    }
}

static wex_status wait_counter(wex_tool_store_client *c, const char *what,
                               uint64_t rank, int64_t want)
{
    char key[64];

    if (want <= 0)
        return WEX_OK;
    snprintf(key, sizeof(key), "elastic/%s/%llu", what,
             (unsigned long long)rank);
    return wex_tool_store_wait_ge(c, key, want, ELASTIC_WAIT_SECONDS);
}

wex_status run_elastic_before_step(const run_elastic *el,
                                   wex_tool_store_client *c, uint64_t step)
{
    for (uint64_t q = 0; q < el->replicas; q++) {
        int64_t arrived, left;
        wex_status st = WEX_OK;
        counts(el, q, step, &arrived, &left);
        for (uint64_t k = 0; k < el->per && st == WEX_OK; k++) {
            st = wait_counter(c, "arrived", q * el->per + k, arrived);
            if (st == WEX_OK)
                st = wait_counter(c, "left", q * el->per + k, left);
        }
        if (st != WEX_OK)
            return wex_tool_error_prefix(
                st, "before step %llu: waiting for replica %llu to %s",
                (unsigned long long)step, (unsigned long long)q,
                run_elastic_present(el, q, step) ? "join" : "leave");
    }
    return WEX_OK;
}

wex_status run_elastic_step_done(wex_tool_store_client *c)
{
    return wex_tool_store_add(c, "elastic/steps", 1, NULL);
}

wex_status run_elastic_await_steps(wex_tool_store_client *c, uint64_t done)
{
    return done == 0 ? WEX_OK
                     : wex_tool_store_wait_ge(c, "elastic/steps", (int64_t)done,
                                              ELASTIC_WAIT_SECONDS);
}

wex_status run_elastic_tell(wex_tool_store_client *c, const char *what,
                            uint64_t rank)
{
    char key[64];

    snprintf(key, sizeof(key), "elastic/%s/%llu", what,
             (unsigned long long)rank);
    return wex_tool_store_add(c, key, 1, NULL);
}

uint64_t run_elastic_next(const run_elastic *el, uint64_t replica,
                          uint64_t step, uint64_t steps)
{
    for (uint64_t s = step; s <= steps; s++)
        if (run_elastic_present(el, replica, s))
            return s;
    return 0;
}

/* A path of the job resolved against its directory, as the job's own
 * loader does, so a copy of the job elsewhere names the same files. */
static void absolute(cJSON *obj, const char *key, const char *dir)
{
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    char *joined;

    if (!cJSON_IsString(v) || v->valuestring[0] == '/')
        return;
    joined = malloc(strlen(dir) + strlen(v->valuestring) + 2);
    if (joined == NULL)
        return;
    sprintf(joined, "%s/%s", dir, v->valuestring);
    cJSON_SetValuestring(v, joined);
    free(joined);
}

static wex_status read_all(const char *path, char **text_p, size_t *len_p)
{
    FILE *f = fopen(path, "rb");
    char *text = NULL;
    long size;

    if (f == NULL)
        return wex_tool_error(WEX_ERR_INVALID, "%s: %s", path, strerror(errno));
    if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
        fseek(f, 0, SEEK_SET) != 0 ||
        (text = malloc((size_t)size + 1)) == NULL ||
        fread(text, 1, (size_t)size, f) != (size_t)size) {
        fclose(f);
        free(text);
        return wex_tool_error(WEX_ERR_SYSTEM, "reading %s", path);
    }
    fclose(f);
    text[size] = '\0';
    *text_p = text;
    *len_p = (size_t)size;
    return WEX_OK;
}

wex_status run_elastic_job(const char *job, char *out, size_t cap,
                           char *dir_out, size_t dir_cap)
{
    char *text = NULL, *copy = realpath(job, NULL), *dir;
    cJSON *doc = NULL, *dst;
    size_t len = 0;
    FILE *f = NULL;
    wex_status st;

    out[0] = dir_out[0] = '\0';
    if (copy == NULL)
        return wex_tool_error(WEX_ERR_INVALID, "%s: %s", job, strerror(errno));
    st = read_all(job, &text, &len);
    if (st == WEX_OK && (doc = cJSON_ParseWithLength(text, len)) == NULL)
        st = wex_tool_error(WEX_ERR_INVALID, "%s: not JSON", job);
    free(text);
    text = NULL;
    dst = cJSON_GetObjectItemCaseSensitive(doc, "destination");
    if (st == WEX_OK && !cJSON_IsObject(dst))
        st = wex_tool_error(WEX_ERR_INVALID,
                            "%s: /destination: expected an "
                            "object",
                            job);
    if (st == WEX_OK &&
        cJSON_GetObjectItemCaseSensitive(dst, "elastic") != NULL) {
        snprintf(out, cap, "%s", job); /* elastic already */
        goto done;
    }
    if (st == WEX_OK) {
        cJSON *el = cJSON_AddObjectToObject(dst, "elastic");
        cJSON_AddNumberToObject(el, "min_replicas", 1);
        dir = dirname(copy);
        absolute(doc, "model", dir);
        absolute(doc, "plan_shares", dir);
        absolute(cJSON_GetObjectItemCaseSensitive(doc, "source"), "model", dir);
        absolute(dst, "model", dir);
        snprintf(dir_out, dir_cap, "/tmp/wex-run-elastic-XXXXXX");
        if (mkdtemp(dir_out) == NULL) {
            st = wex_tool_error(WEX_ERR_SYSTEM, "mkdtemp: %s", strerror(errno));
            dir_out[0] = '\0';
        }
    }
    if (st == WEX_OK) {
        snprintf(out, cap, "%s/job.json", dir_out);
        text = cJSON_Print(doc);
        f = fopen(out, "w");
        if (text == NULL || f == NULL || fputs(text, f) < 0)
            st = wex_tool_error(WEX_ERR_SYSTEM, "writing %s", out);
        if (f != NULL && fclose(f) != 0 && st == WEX_OK)
            st = wex_tool_error(WEX_ERR_SYSTEM, "writing %s", out);
    }
done:
    free(text);
    free(copy);
    cJSON_Delete(doc);
    return st;
}

void run_elastic_remove_job(const char *job, const char *dir)
{
    if (dir[0] == '\0')
        return;
    unlink(job);
    rmdir(dir);
}
