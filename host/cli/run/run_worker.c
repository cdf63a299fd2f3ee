/*
 * One rank of `wex run`: opens the job for its side and rank (the
 * launcher passes the rendezvous in WEX_RENDEZVOUS, WEX_TOKEN and
 * WEX_JOB_ID), gets its memory, and syncs every step: a source fills its
 * weights first, a destination checks every element afterwards. It
 * reports each step under report/SIDE/RANK in the rendezvous.
 *
 * WEX_RUN_FAULT="die:SIDE:RANK:STEP" makes that rank kill itself just
 * before that step's sync, "die-mid:SIDE:RANK:STEP" once that step's
 * barrier has passed, while its operations run ("die-mid:SIDE:RANK:STEP:MS"
 * MS milliseconds after it): how the tests play a crashed peer.
 * "hang:SIDE:RANK:STEP" wedges it before that step, for good: only a
 * signal ends it. "scribble:destination:RANK:STEP" flips a bit of what
 * landed after that step commits, before the element check, which must
 * then fail.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "run.h"
#include "tool_base.h"
#include "tool_job.h"

static const char *side_name(uint32_t side)
{
    return side == WEX_SIDE_SOURCE ? "source" : "destination";
}

/* Whether WEX_RUN_FAULT (one fault, or several comma separated) holds
 * this one. */
static int fault_now(const char *how, uint32_t side, uint64_t rank,
                     uint64_t step)
{
    const char *f = getenv("WEX_RUN_FAULT");
    char want[128];
    size_t n;

    if (f == NULL)
        return 0;
    n = (size_t)snprintf(want, sizeof(want), "%s:%s:%llu:%llu", how,
                         side_name(side), (unsigned long long)rank,
                         (unsigned long long)step);
    for (const char *p = f; p != NULL && *p;
         p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, want, n) != 0)
            continue;
        if (p[n] == '\0' || p[n] == ',' ||
            (strcmp(how, "die-mid") == 0 && p[n] == ':'))
            return 1;
    }
    return 0;
}

/* The milliseconds after the barrier a "die-mid:...:MS" fault waits. */
static long fault_delay_ms(void)
{
    const char *f = getenv("WEX_RUN_FAULT");
    const char *last = f != NULL ? strrchr(f, ':') : NULL;
    int fields = 0;

    for (const char *p = f; p != NULL && *p; p++)
        fields += *p == ':';
    return fields == 4 ? strtol(last + 1, NULL, 10) : 0;
}

static uint64_t mid_step_fault; /* the step of a die-mid fault; 0: none */

static void *kill_later(void *arg)
{
    long ms = *(const long *)arg;
    struct timespec ts = {ms / 1000, ms % 1000 * 1000000L};

    nanosleep(&ts, NULL);
    raise(SIGKILL);
    return NULL;
}

/* The job's after-barrier hook: every other rank is in the step, and this
 * one has not moved a byte of it yet, so a kill now (or MS milliseconds
 * from now, while its operations run) cannot miss the step, however
 * busy the machine. */
static void die_mid_step(wex_job *job, uint64_t step)
{
    static long delay_ms;
    pthread_t t;

    if (step != mid_step_fault)
        return;
    wex_tool_job_after_barrier(job, NULL);
    delay_ms = fault_delay_ms();
    if (delay_ms <= 0 || pthread_create(&t, NULL, kill_later, &delay_ms) != 0)
        raise(SIGKILL);
    pthread_detach(t);
}

static void arm_mid_step_fault(wex_job *job, uint64_t step)
{
    mid_step_fault = step;
    wex_tool_job_after_barrier(job, die_mid_step);
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

/* A source's "paths": how its bytes reach each destination rank it
 * sends to, as the transport chose when it attached them. */
static void add_paths(wex_job *job, const run_args *a, cJSON *doc)
{
    const uint64_t *peers;
    size_t count;
    cJSON *paths;

    if (a->side != WEX_SIDE_SOURCE)
        return;
    peers = wex_tool_job_peers(job, &count);
    cJSON_DeleteItemFromObjectCaseSensitive(doc, "paths");
    paths = cJSON_AddObjectToObject(doc, "paths");
    for (size_t i = 0; paths != NULL && i < count; i++) {
        const char *path = wex_job_peer_path(job, peers[i]);
        char rank[24];

        snprintf(rank, sizeof(rank), "%llu", (unsigned long long)peers[i]);
        if (path != NULL)
            cJSON_AddStringToObject(paths, rank, path);
    }
}

/* Where this rank's report goes in the rendezvous. */
static void report_key(const run_args *a, char *key, size_t cap)
{
    snprintf(key, cap, "report/%s/%llu", side_name(a->side),
             (unsigned long long)a->rank);
}

/* --elastic: this worker's own client of the rendezvous, which stays
 * while its job leaves and joins again. */
static wex_tool_store_client *own;

static wex_tool_store_client *store_of(wex_job *job)
{
    return own != NULL ? own : wex_tool_job_store(job);
}

static void report(wex_job *job, const run_args *a, cJSON *doc)
{
    char key[96], *text;

    add_paths(job, a, doc);
    text = cJSON_PrintUnformatted(doc);

    report_key(a, key, sizeof(key));
    if (text != NULL && store_of(job) != NULL)
        wex_tool_store_set(store_of(job), key, text, strlen(text));
    free(text);
}

/* The steps list of this rank's report: a rank started again goes on
 * with the one its earlier life posted. */
static cJSON *steps_list(wex_job *job, const run_args *a, cJSON *doc)
{
    char key[96];
    void *text = NULL;
    size_t len = 0;
    cJSON *old = NULL, *list;

    report_key(a, key, sizeof(key));
    if (a->first_step > 1 &&
        wex_tool_store_get(store_of(job), key, 0, &text, &len) == WEX_OK)
        old = cJSON_ParseWithLength(text, len);
    free(text);
    list = cJSON_DetachItemFromObjectCaseSensitive(old, "steps");
    cJSON_Delete(old);
    if (!cJSON_IsArray(list)) {
        cJSON_Delete(list);
        list = cJSON_CreateArray();
    }
    cJSON_AddItemToObject(doc, "steps", list);
    return list;
}

/* After the last step: the destination ranks write what they hold. */
static int save(wex_job *job, const run_args *a, cJSON *doc)
{
    double start = wex_tool_now();

    if (wex_job_save(job, a->save, a->shard_bytes) != WEX_OK) {
        fprintf(stderr, "wex run: destination rank %llu: %s\n",
                (unsigned long long)a->rank, wex_last_error());
        cJSON_AddStringToObject(doc, "error", wex_last_error());
        return 1;
    }
    cJSON_AddNumberToObject(doc, "save_seconds", wex_tool_now() - start);
    return 0;
}

/* What a step of a delta job moved: the bytes on the wire, how, the
 * elements that changed, and (a destination) the apply's time. */
static void add_delta(cJSON *one, const wex_sync_report *r)
{
    static const char *const modes[] = {"full", "delta", "mixed"};

    cJSON_AddNumberToObject(one, "wire_bytes", (double)r->wire_bytes);
    cJSON_AddStringToObject(one, "mode", r->mode < 3 ? modes[r->mode] : "full");
    cJSON_AddNumberToObject(one, "delta_elements", (double)r->delta_elements);
    cJSON_AddNumberToObject(one, "changed_elements",
                            (double)r->changed_elements);
    cJSON_AddNumberToObject(one, "apply_seconds", r->apply_seconds);
}

/* A source waits, before it fills the next step's weights, until each
 * destination it sends to has committed step `step`, the last it saw
 * commit (committed/RANK holds a destination's last committed step;
 * every one commits a committed step): then the oracle's filling
 * never runs beside a destination's step, whose apply (a delta step's)
 * comes after the verdict the source returns at. A trainer's next step
 * runs on its GPUs; this one's would take the CPUs a step is timed on.
 * Best effort: a destination that died after its commit is waited for
 * a few seconds, then the source goes on. */
static void await_commits(wex_job *job, uint64_t step)
{
    size_t n = 0;
    const uint64_t *peers = wex_tool_job_peers(job, &n);

    for (size_t p = 0; p < n; p++) {
        char key[64];
        snprintf(key, sizeof(key), "committed/%llu",
                 (unsigned long long)peers[p]);
        (void)wex_tool_store_wait_ge(store_of(job), key, (int64_t)step, 5.0);
    }
}

/* What a step did, into the rank's report list and the rendezvous's
 * counters, and (a destination) every element checked: 0 when it went
 * well, 1 when the run must stop, 2 when a failed step is only reported
 * (--keep-going). */
static int record_step(wex_job *job, const run_args *a, cJSON *doc, cJSON *list,
                       uint64_t s, wex_status st, const wex_sync_report *r,
                       const wex_tool_checkpoint *ck)
{
    uint32_t side = a->side;
    uint64_t rank = a->rank, bad = 0;
    cJSON *one = cJSON_CreateObject();

    cJSON_AddNumberToObject(one, "step", (double)s);
    cJSON_AddBoolToObject(one, "committed", st == WEX_OK);
    cJSON_AddItemToArray(list, one);
    if (st != WEX_OK && r->missed && a->keep_going) {
        /* A rank started again after the step began without it:
         * nothing of it was written; it joins the next one. */
        cJSON_AddBoolToObject(one, "missed", 1);
        fprintf(stderr,
                "wex run: %s rank %llu: step %llu went on "
                "without it; it joins the next step\n",
                side_name(side), (unsigned long long)rank,
                (unsigned long long)s);
        report(job, a, doc);
        return 2;
    }
    if (st != WEX_OK) {
        cJSON_AddStringToObject(one, "error", wex_last_error());
        fprintf(stderr, "wex run: %s rank %llu: %s\n", side_name(side),
                (unsigned long long)rank, wex_last_error());
        report(job, a, doc);
        if (a->keep_going)
            return 2;
        cJSON_AddStringToObject(doc, "error", wex_last_error());
        return 1;
    }
    if (side == WEX_SIDE_DESTINATION) {
        char key[64];
        int64_t held = 0;
        /* the counter becomes this step: it holds the last one committed
         * (a rank started again, or a replica that was gone, skips some) */
        snprintf(key, sizeof(key), "committed/%llu", (unsigned long long)rank);
        if (wex_tool_store_add(store_of(job), key, 0, &held) == WEX_OK &&
            (int64_t)s > held)
            wex_tool_store_add(store_of(job), key, (int64_t)s - held, NULL);
        if (fault_now("scribble", side, rank, s))
            wex_tool_synth_scribble(job);
        bad = run_worker_mismatches(job, ck, s);
    }
    cJSON_AddNumberToObject(one, "seconds", r->seconds);
    cJSON_AddNumberToObject(one, "bytes", (double)r->bytes);
    cJSON_AddNumberToObject(one, "operations", (double)r->operations);
    cJSON_AddNumberToObject(one, "attempts", (double)r->attempts);
    cJSON_AddNumberToObject(one, "failed_over", (double)r->failed_over);
    if (side == WEX_SIDE_SOURCE)
        cJSON_AddNumberToObject(one, "puts", (double)r->puts);
    if (a->elastic) {
        cJSON *rep = cJSON_AddObjectToObject(one, "replicas");
        cJSON_AddNumberToObject(rep, "present", (double)r->replicas);
        cJSON_AddNumberToObject(rep, "committed",
                                (double)r->replicas_committed);
        cJSON_AddNumberToObject(rep, "joined", (double)r->replicas_joined);
        cJSON_AddNumberToObject(rep, "left", (double)r->replicas_left);
        cJSON_AddNumberToObject(rep, "seeded", (double)r->replicas_seeded);
        if (r->seeded_bytes > 0)
            cJSON_AddNumberToObject(one, "seeded_bytes",
                                    (double)r->seeded_bytes);
    }
    add_delta(one, r);
    cJSON_AddBoolToObject(one, "digests_matched", r->verified == 1);
    cJSON_AddNumberToObject(one, "mismatched_elements", (double)bad);
    /* Posted after every step, so a rank that dies later still leaves
     * what it did. */
    report(job, a, doc);
    /* One counter of commits, not a key per step: a long run's
     * rendezvous must not grow. */
    if (side == WEX_SIDE_DESTINATION)
        wex_tool_store_add(store_of(job), "progress", 1, NULL);
    if (bad != 0) {
        fprintf(stderr,
                "wex run: destination rank %llu: step %llu: "
                "%llu elements differ from what was sent\n",
                (unsigned long long)rank, (unsigned long long)s,
                (unsigned long long)bad);
        return 1;
    }
    return 0;
}

static int run_steps(wex_job *job, const run_args *a, cJSON *doc,
                     const wex_tool_checkpoint *ck, const run_elastic *el)
{
    cJSON *list = steps_list(job, a, doc);
    uint32_t side = a->side;
    uint64_t rank = a->rank, last = 0;
    int code = 0;

    for (uint64_t s = a->first_step; s <= a->steps; s++) {
        wex_sync_report r;
        wex_status st = WEX_OK;
        int how;

        memset(&r, 0, sizeof(r));
        r.struct_size = sizeof(r);
        if (el != NULL &&
            (st = run_elastic_before_step(el, own, s)) != WEX_OK) {
            record_step(job, a, doc, list, s, st, &r, ck);
            return 1;
        }
        if (side == WEX_SIDE_SOURCE && a->from_checkpoint == NULL) {
            if (last > 0)
                await_commits(job, last);
            wex_tool_synth_fill(job, s);
        }
        if (fault_now("die", side, rank, s))
            raise(SIGKILL);
        while (fault_now("hang", side, rank, s))
            pause(); /* wedged: only a signal ends it */
        if (fault_now("die-mid", side, rank, s))
            arm_mid_step_fault(job, s);
        if (side == WEX_SIDE_DESTINATION &&
            (st = run_rebalance(job, a, s)) != WEX_OK) {
            record_step(job, a, doc, list, s, st, &r, ck);
            return 1;
        }
        st = wex_sync(job, s, &r);
        if (el != NULL && rank == 0)
            run_elastic_step_done(own);
        how = record_step(job, a, doc, list, s, st, &r, ck);
        if (how == 1)
            return 1;
        /* kept going: a missed step is not this rank's failure */
        code = st != WEX_OK && !r.missed;
        if (st == WEX_OK && side == WEX_SIDE_SOURCE)
            last = s;
    }
    if (code != 0)
        cJSON_AddStringToObject(doc, "error", "the last step failed");
    else if (a->save != NULL && side == WEX_SIDE_DESTINATION)
        code = save(job, a, doc);
    return code;
}

/* --elastic, a destination: its replica's steps, joining when it comes
 * (wex_job_join) and leaving when it goes (wex_job_leave), as
 * WEX_RUN_FAULT plays them. */
static int run_replica(wex_job *job, const run_args *a, cJSON *doc,
                       const wex_tool_checkpoint *ck, const run_elastic *el)
{
    cJSON *list = steps_list(job, a, doc);
    uint64_t q = a->rank / el->per, s = 1;

    while ((s = run_elastic_next(el, q, s, a->steps)) != 0) {
        wex_sync_report r;
        uint64_t joined = 0;
        double t0;
        wex_status st;
        int how;

        memset(&r, 0, sizeof(r));
        r.struct_size = sizeof(r);
        /* joining: once the sources finished the step before; ready is
         * from then (connecting, the join, the step) to its commit */
        st = run_elastic_await_steps(own, s - 1);
        t0 = wex_tool_now();
        if (st == WEX_OK)
            st = wex_job_connect(job);
        if (st == WEX_OK)
            st = run_elastic_tell(own, "arrived", a->rank);
        if (st == WEX_OK)
            st = wex_job_join(job, &joined, &r);
        if (st == WEX_OK && joined != s)
            st = wex_tool_error(
                WEX_ERR_INTERNAL, "replica %llu joined step %llu, not %llu",
                (unsigned long long)q, (unsigned long long)joined,
                (unsigned long long)s);
        if (st == WEX_OK && !a->json)
            fprintf(stderr,
                    "wex run: destination rank %llu (replica %llu) joined "
                    "step %llu in %.3f s\n",
                    (unsigned long long)a->rank, (unsigned long long)q,
                    (unsigned long long)s, wex_tool_now() - t0);
        how = record_step(job, a, doc, list, s, st, &r, ck);
        if (how != 0)
            return 1;
        for (s++; s <= a->steps && run_elastic_present(el, q, s); s++) {
            memset(&r, 0, sizeof(r));
            r.struct_size = sizeof(r);
            st = wex_sync(job, s, &r);
            if (record_step(job, a, doc, list, s, st, &r, ck) != 0)
                return 1;
        }
        if (s > a->steps)
            break;
        /* gone before step s */
        if ((st = wex_job_leave(job)) != WEX_OK ||
            (st = run_elastic_tell(own, "left", a->rank)) != WEX_OK) {
            cJSON_AddStringToObject(doc, "error", wex_last_error());
            return 1;
        }
        if (!a->json)
            fprintf(stderr,
                    "wex run: destination rank %llu (replica %llu) left "
                    "before step %llu\n",
                    (unsigned long long)a->rank, (unsigned long long)q,
                    (unsigned long long)s);
    }
    return 0;
}

/* --elastic: the replicas' events (WEX_RUN_FAULT, the shape the
 * launcher put in WEX_RUN_REPLICAS and WEX_RUN_REPLICA_RANKS), and this
 * worker's own client of the rendezvous. */
static wex_status elastic_setup(const run_args *a, run_elastic *el)
{
    const char *replicas = getenv("WEX_RUN_REPLICAS");
    const char *per = getenv("WEX_RUN_REPLICA_RANKS");
    char who[64];
    wex_status st;

    if (replicas == NULL || per == NULL)
        return wex_tool_error(WEX_ERR_INVALID,
                              "wex run --elastic: a worker needs "
                              "WEX_RUN_REPLICAS and WEX_RUN_REPLICA_RANKS "
                              "(the launcher sets them)");
    st =
        run_elastic_parse(getenv("WEX_RUN_FAULT"), strtoull(replicas, NULL, 10),
                          strtoull(per, NULL, 10), a->steps, el);
    snprintf(who, sizeof(who), "worker/%s/%llu", side_name(a->side),
             (unsigned long long)a->rank);
    if (st == WEX_OK)
        st = wex_tool_store_connect(getenv("WEX_RENDEZVOUS"),
                                    getenv("WEX_TOKEN"), who, 60.0, &own);
    return st;
}

int run_worker(const run_args *a)
{
    uint32_t side = a->side;
    uint64_t rank = a->rank;
    wex_job *job = NULL;
    cJSON *doc = cJSON_CreateObject();
    int code = 1;
    wex_status st;

    run_elastic el;

    memset(&el, 0, sizeof(el));
    /* before anything fills or checks a weight */
    wex_tool_synth_set_changed(a->changed);
    st = wex_job_open(a->job, side, rank, NULL, &job);
    if (st == WEX_OK && a->elastic)
        st = elastic_setup(a, &el);

    if (st == WEX_OK && a->verify >= 0)
        wex_tool_job_set_verify(job, a->verify);
    wex_tool_checkpoint *ck = NULL;

    if (st == WEX_OK)
        st = wex_tool_synth_prepare(job);
    if (st == WEX_OK)
        st = run_worker_checkpoint_open(job, a, &ck);
    /* an elastic destination connects when its replica joins */
    if (st != WEX_OK ||
        (!(a->from_checkpoint && side == WEX_SIDE_SOURCE) &&
         get_memory(job) != WEX_OK) ||
        ((!a->elastic || side == WEX_SIDE_SOURCE) &&
         wex_job_connect(job) != WEX_OK)) {
        fprintf(stderr, "wex run: %s rank %llu: %s\n", side_name(side),
                (unsigned long long)rank, wex_last_error());
        if (job != NULL && store_of(job) != NULL) {
            cJSON_AddStringToObject(doc, "error", wex_last_error());
            report(job, a, doc);
        }
    } else {
        uint64_t held = 0;
        int placed_at_end = 0;
        for (uint64_t i = 0; i < wex_job_tensor_count(job); i++) {
            wex_tensor t;
            memset(&t, 0, sizeof(t));
            t.struct_size = sizeof(t);
            if (wex_job_tensor(job, i, &t) == WEX_OK)
                held += t.bytes;
        }
        cJSON_AddNumberToObject(doc, "bytes_held", (double)held);
        if (a->rebalance_every > 0 || wex_tool_job_placements(job) > 0)
            placed_at_end = 1;
        if (wex_tool_job_snapshot_bytes(job) > 0)
            cJSON_AddNumberToObject(doc, "snapshot_bytes",
                                    (double)wex_tool_job_snapshot_bytes(job));
        code = el.replicas == 0 || side == WEX_SIDE_SOURCE
                   ? run_steps(job, a, doc, ck, el.replicas ? &el : NULL)
                   : run_replica(job, a, doc, ck, &el);
        if (placed_at_end)
            cJSON_AddNumberToObject(doc, "placed_ranks",
                                    (double)wex_tool_job_placements(job));
        report(job, a, doc);
    }
    run_worker_checkpoint_close(ck);
    cJSON_Delete(doc);
    wex_job_close(job);
    run_elastic_free(&el);
    wex_tool_store_close(own);
    own = NULL;
    return code;
}
