/*
 * The launcher of `wex run`: serves (or joins) the job's rendezvous,
 * starts one worker process per rank this host runs, starts a killed one
 * again when asked to, and waits for them all, drawing progress.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "run.h"
#include "tool_base.h"
#include "tool_plugins.h"

static void random_hex(char *out, size_t bytes)
{
    unsigned char raw[32];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    ssize_t got = fd >= 0 ? read(fd, raw, bytes) : -1;

    if (fd >= 0)
        close(fd);
    for (size_t i = 0; i < bytes; i++)
        sprintf(out + 2 * i, "%02x",
                got == (ssize_t)bytes ? raw[i]
                                      : (unsigned)(rand() ^ getpid()) & 0xff);
}

/* --elastic: the destination's replicas and the events WEX_RUN_FAULT
 * plays on them, checked once here; the workers get the shape. */
static wex_status elastic_shape(launch *l, const run_args *a,
                                const wex_tool_job_info *job)
{
    const cJSON *dst =
        cJSON_GetObjectItemCaseSensitive(job->doc, "destination");
    const cJSON *dp = cJSON_GetObjectItemCaseSensitive(
        cJSON_GetObjectItemCaseSensitive(dst, "parallel"), "dp");
    uint64_t replicas = cJSON_IsNumber(dp) ? (uint64_t)dp->valuedouble : 1;
    char text[32];
    wex_status st;

    if (replicas == 0 || job->destination_ranks % replicas != 0)
        return wex_tool_error(WEX_ERR_INVALID,
                              "%s: /destination/parallel/dp: %llu replicas "
                              "do not divide %llu ranks",
                              job->path, (unsigned long long)replicas,
                              (unsigned long long)job->destination_ranks);
    st = run_elastic_parse(getenv("WEX_RUN_FAULT"), replicas,
                           job->destination_ranks / replicas, a->steps,
                           &l->elastic);
    if (st != WEX_OK)
        return st;
    snprintf(text, sizeof(text), "%llu", (unsigned long long)replicas);
    setenv("WEX_RUN_REPLICAS", text, 1);
    snprintf(text, sizeof(text), "%llu",
             (unsigned long long)(job->destination_ranks / replicas));
    setenv("WEX_RUN_REPLICA_RANKS", text, 1);
    return WEX_OK;
}

/* Starts one worker; a source gets the plan shares in `shares`. */
static pid_t spawn(const char *self, const run_args *a, const char *shares,
                   uint32_t side, uint64_t rank, uint64_t first_step)
{
    char steps[32], r[32], first[32];
    pid_t parent = getpid(), pid;

    snprintf(steps, sizeof(steps), "%llu", (unsigned long long)a->steps);
    snprintf(r, sizeof(r), "%llu", (unsigned long long)rank);
    snprintf(first, sizeof(first), "%llu", (unsigned long long)first_step);
    pid = fork();
    if (pid == 0) {
        const char *verify = a->verify < 0 ? NULL
                             : a->verify   ? "digest"
                                           : "none";
        char *argv[28] = {(char *)"wex",
                          (char *)"run",
                          (char *)"--worker",
                          side == WEX_SIDE_SOURCE ? (char *)"source"
                                                  : (char *)"destination",
                          r,
                          (char *)"--steps",
                          steps,
                          (char *)"--first-step",
                          first,
                          (char *)a->job,
                          NULL};
        char shard[32], changed[40], every[32];
        int n = 10;
        /* A worker dies with its launcher, however the launcher dies
         * (SIGKILL included), even in the middle of filling memory; one
         * whose launcher died before this line does not start at all. */
        if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
            _exit(127);
        if (shares[0] != '\0' && side == WEX_SIDE_SOURCE)
            setenv("WEX_PLAN_SHARES", shares, 1);
        if (a->respawn)
            argv[n++] = (char *)"--keep-going";
        if (a->elastic)
            argv[n++] = (char *)"--elastic";
        if (a->from_checkpoint != NULL) {
            argv[n++] = (char *)"--from-checkpoint";
            argv[n++] = (char *)a->from_checkpoint;
        }
        if (a->save != NULL && side == WEX_SIDE_DESTINATION) {
            snprintf(shard, sizeof(shard), "%llu",
                     (unsigned long long)a->shard_bytes);
            argv[n++] = (char *)"--save";
            argv[n++] = (char *)a->save;
            argv[n++] = (char *)"--shard-bytes";
            argv[n++] = shard;
        }
        if (verify != NULL) {
            argv[n++] = (char *)"--verify";
            argv[n++] = (char *)verify;
        }
        if (a->changed < 1) {
            snprintf(changed, sizeof(changed), "%.17g", a->changed);
            argv[n++] = (char *)"--changed";
            argv[n++] = changed;
        }
        if (a->rebalance_every > 0 && side == WEX_SIDE_DESTINATION) {
            snprintf(every, sizeof(every), "%llu",
                     (unsigned long long)a->rebalance_every);
            argv[n++] = (char *)"--rebalance-every";
            argv[n++] = every;
        }
        execv(self, argv);
        _exit(127);
    }
    return pid;
}

wex_status run_launch(launch *l, const run_args *a)
{
    const cJSON *rdv, *addr, *tok;
    char token[65], job_id[64];
    ssize_t n;
    wex_tool_registry *registry;
    wex_tool_job_info job;
    wex_status st;

    memset(l, 0, sizeof(*l));
    st = wex_tool_registry_default(&registry);
    if (st == WEX_OK)
        st = wex_tool_planner_open(registry, a->job, &l->plan);
    if (st != WEX_OK)
        return st;
    wex_tool_planner_get_job(l->plan, &job);
    /* Planning needs no transport, running does: refuse a missing one
     * here, once, rather than in every rank's process. */
    if (wex_tool_registry_find(registry, WEX_KIND_TRANSPORT, job.transport) ==
        NULL) {
        char *names = wex_tool_registry_names(registry, WEX_KIND_TRANSPORT);
        st = wex_tool_error(WEX_ERR_INVALID,
                            "%s: /transport: no transport "
                            "plugin named \"%s\" (available: %s)",
                            job.path, job.transport,
                            names && names[0] ? names : "none");
        free(names);
        return st;
    }
    if (a->verify >= 0)
        wex_tool_planner_set_verify(l->plan, a->verify);
    if (a->elastic && (st = elastic_shape(l, a, &job)) != WEX_OK)
        return st;
    /* A checkpoint that does not fit, a save that could not finish, or
     * ranks this machine cannot hold are refused here, once, before any
     * rank starts. */
    if ((st = run_check_checkpoint(l, a)) != WEX_OK ||
        (st = run_check_memory(l, a)) != WEX_OK ||
        (st = run_write_shares(l, a)) != WEX_OK)
        return st;
    rdv = cJSON_GetObjectItemCaseSensitive(job.doc, "rendezvous");
    addr = cJSON_GetObjectItemCaseSensitive(rdv, "address");
    tok = cJSON_GetObjectItemCaseSensitive(rdv, "token");
    random_hex(token, 16);
    if (a->token != NULL)
        snprintf(token, sizeof(token), "%s", a->token);
    else if (cJSON_IsString(tok))
        snprintf(token, sizeof(token), "%s", tok->valuestring);
    if (a->rendezvous == NULL) {
        st = wex_tool_store_serve(cJSON_IsString(addr) ? addr->valuestring
                                                       : "127.0.0.1:0",
                                  token, &l->server);
        if (st != WEX_OK)
            return st;
    }
    snprintf(job_id, sizeof(job_id), "run%ld-%llx", (long)getpid(),
             (unsigned long long)time(NULL));
    setenv("WEX_RENDEZVOUS",
           a->rendezvous ? a->rendezvous : wex_tool_store_address(l->server),
           1);
    setenv("WEX_TOKEN", token, 1);
    setenv("WEX_JOB_ID", a->job_id ? a->job_id : job_id, 1);
    st = wex_tool_store_connect(getenv("WEX_RENDEZVOUS"), token,
                                a->host >= 0 ? "launcher/host" : "launcher",
                                job.connect_seconds, &l->client);
    if (st != WEX_OK)
        return st;
    n = readlink("/proc/self/exe", l->self, sizeof(l->self) - 1);
    if (n <= 0)
        return wex_tool_error(WEX_ERR_SYSTEM, "cannot find the wex "
                                              "executable");
    l->self[n] = '\0';
    l->count = job.source_ranks + job.destination_ranks;
    l->pids = calloc(l->count, sizeof(pid_t));
    l->sides = calloc(l->count, sizeof(uint32_t));
    l->ranks = calloc(l->count, sizeof(uint64_t));
    l->respawned = calloc(l->count, 1);
    l->killed = calloc(l->count, sizeof(int));
    if (l->pids == NULL || l->sides == NULL || l->ranks == NULL ||
        l->respawned == NULL || l->killed == NULL)
        return wex_tool_error(WEX_ERR_NOMEM, "run: out of memory");
    {
        size_t all = l->count, k = 0;
        for (size_t i = 0; i < all; i++) {
            int src = i < job.source_ranks;
            uint64_t rank = src ? i : i - job.source_ranks;
            uint32_t side = src ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION;
            if (a->host >= 0 &&
                wex_tool_planner_host(l->plan, side, rank) != (uint64_t)a->host)
                continue;
            l->sides[k] = side;
            l->ranks[k] = rank;
            l->pids[k] = spawn(l->self, a, l->shares, l->sides[k], rank, 1);
            if (l->pids[k] < 0)
                return wex_tool_error(WEX_ERR_SYSTEM, "fork: %s",
                                      strerror(errno));
            l->count = ++k;
        }
        l->count = k;
        if (k == 0)
            return wex_tool_error(WEX_ERR_INVALID,
                                  "%s: the topology places "
                                  "no rank on host %lld",
                                  a->job, (long long)a->host);
    }
    return WEX_OK;
}

/* The step after the one worker i died in: its report lists the steps
 * it finished, and the others go on past the one it was in. */
static uint64_t step_after_death(launch *l, size_t i)
{
    cJSON *doc = run_worker_report(l, l->sides[i], l->ranks[i]);
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(doc, "steps");
    const cJSON *last = cJSON_GetArrayItem(list, cJSON_GetArraySize(list) - 1);
    const cJSON *step = cJSON_GetObjectItemCaseSensitive(last, "step");
    uint64_t next = cJSON_IsNumber(step) ? (uint64_t)step->valuedouble + 2 : 2;

    cJSON_Delete(doc);
    return next;
}

/* With --respawn, starts worker i again once after a signal killed it;
 * returns whether it did. */
static int respawn(launch *l, const run_args *a, size_t i, int status)
{
    uint64_t first;

    if (!a->respawn || !WIFSIGNALED(status) || l->respawned[i])
        return 0;
    first = step_after_death(l, i);
    if (first > a->steps)
        return 0;
    l->respawned[i] = 1;
    l->pids[i] = spawn(l->self, a, l->shares, l->sides[i], l->ranks[i], first);
    if (l->pids[i] < 0)
        return 0;
    if (!a->json)
        fprintf(stderr,
                "\rwex run: %s rank %llu was killed; started again "
                "at step %llu\n",
                l->sides[i] == WEX_SIDE_SOURCE ? "source" : "destination",
                (unsigned long long)l->ranks[i], (unsigned long long)first);
    return 1;
}

/* The destinations' commits through `step`: every rank every step, but
 * with --elastic only the replicas there. */
static int64_t commits_through(const launch *l, uint64_t step,
                               uint64_t destinations)
{
    const run_elastic *el = &l->elastic;
    int64_t n = 0;

    if (el->per == 0)
        return (int64_t)(step * destinations);
    for (uint64_t s = 1; s <= step; s++)
        for (uint64_t q = 0; q < el->replicas; q++)
            n += run_elastic_present(el, q, s) ? (int64_t)el->per : 0;
    return n;
}

size_t run_wait(launch *l, const run_args *a)
{
    int tty = !a->json && isatty(STDERR_FILENO);
    size_t left = l->count, failed = 0;
    uint64_t shown = 0, destinations;
    wex_tool_job_info job;

    wex_tool_planner_get_job(l->plan, &job);
    destinations = job.destination_ranks;

    while (left > 0) {
        int status;
        pid_t pid = waitpid(-1, &status, WNOHANG);
        if (pid > 0) {
            size_t i = 0;
            while (i < l->count && l->pids[i] != pid)
                i++;
            if (i < l->count && respawn(l, a, i, status))
                continue;
            left--;
            if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                failed++;
            if (i < l->count && WIFSIGNALED(status))
                l->killed[i] = WTERMSIG(status);
            continue;
        }
        if (pid < 0 && errno != EINTR)
            break;
        if (tty) {
            /* every destination there adds one per step it commits */
            int64_t want = commits_through(l, shown + 1, destinations);
            if (shown < a->steps &&
                wex_tool_store_wait_ge(l->client, "progress", want, 0.05) ==
                    WEX_OK) {
                shown++;
                fprintf(stderr, "\rsyncing: step %llu/%llu committed",
                        (unsigned long long)shown,
                        (unsigned long long)a->steps);
            }
        } else {
            usleep(20000);
        }
    }
    if (tty)
        fputs("\r\033[K", stderr);
    return failed;
}

cJSON *run_worker_report(launch *l, uint32_t side, uint64_t rank)
{
    char key[96];
    void *text = NULL;
    size_t len = 0;
    cJSON *doc = NULL;

    snprintf(key, sizeof(key), "report/%s/%llu",
             side == WEX_SIDE_SOURCE ? "source" : "destination",
             (unsigned long long)rank);
    if (wex_tool_store_get(l->client, key, 0.2, &text, &len) == WEX_OK)
        doc = cJSON_ParseWithLength(text, len);
    free(text);
    return doc;
}

void run_launch_close(launch *l, int kill_workers)
{
    for (size_t i = 0; kill_workers && l->pids != NULL && i < l->count; i++)
        if (l->pids[i] > 0)
            kill(l->pids[i], SIGKILL);
    if (l->client != NULL)
        wex_tool_store_close(l->client);
    if (l->server != NULL)
        wex_tool_store_stop(l->server);
    run_remove_shares(l);
    wex_tool_planner_close(l->plan);
    free(l->pids);
    free(l->sides);
    free(l->ranks);
    free(l->respawned);
    free(l->killed);
    run_elastic_free(&l->elastic);
}
