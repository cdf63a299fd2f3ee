/*
 * wex run: the main job. Launches every source and destination rank of a
 * job as its own process on this machine around an embedded rendezvous,
 * syncs synthetic weights for N steps, has every destination check every
 * element, and reports per-step time and throughput against this
 * machine's memcpy bandwidth measured in the same run.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "cli.h"
#include "error.h"
#include "run.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex run JOB.json [--steps N] [--verify digest|none] "
            "[--json]\n"
            "               [--host H --rendezvous HOST:PORT --token T "
            "--job-id ID]\n"
            "\n"
            "Runs the job on this machine: every source and destination "
            "rank as its own\nprocess, meeting at a rendezvous this command "
            "serves. Sources fill their\nweights with a deterministic "
            "function of (tensor, element, step), every\nrank syncs N steps "
            "(default 3) through the job's transport, and every\n"
            "destination checks every element it holds.\n"
            "\n"
            "  --steps N   steps to sync (default 3)\n"
            "  --verify digest|none\n"
            "              override the job's verify setting\n"
            "  --host H    only the ranks the job's topology places on host H "
            "(one\n"
            "              `wex run --host` per host, all meeting at the same\n"
            "              --rendezvous, which `wex store` serves; --token and\n"
            "              --job-id must match on every host)\n"
            "  --respawn   start a rank that was killed again, at the step "
            "after the one\n"
            "              it died in; the other ranks go on past a failed "
            "step\n"
            "  --json      a report valid against "
            "schemas/run-report.schema.json\n"
            "\n"
            "The report gives each step's time and throughput (destination "
            "bytes per\nsecond), the single-thread memcpy bandwidth of this "
            "machine measured in the\nsame run, their ratio, and whether "
            "every byte was verified. Exit status 0\nwhen every step "
            "committed, every element matched and every rank ended\n"
            "well.\n"
            "\n"
            "A step that loses a source rank whose regions other sources "
            "hold (data\nparallel) completes without it and reports "
            "\"failed_over\". For tests,\nWEX_RUN_FAULT=die:SIDE:RANK:STEP "
            "kills a rank just before that step,\nand die-mid:SIDE:RANK:STEP "
            "in the middle of it.\n");
}

static int parse_args(int argc, char **argv, run_args *a)
{
    memset(a, 0, sizeof(*a));
    a->steps = 3;
    a->first_step = 1;
    a->verify = -1;
    a->host = -1;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        char *end;
        if (strcmp(arg, "--json") == 0) {
            a->json = 1;
        } else if (strcmp(arg, "--steps") == 0 && i + 1 < argc) {
            errno = 0;
            a->steps = strtoull(argv[++i], &end, 10);
            if (*end != '\0' || errno != 0 || a->steps == 0 ||
                a->steps > 1000000) {
                fprintf(stderr, "wex run: --steps: expected 1..1000000, got "
                                "'%s'\n", argv[i]);
                return -1;
            }
        } else if (strcmp(arg, "--verify") == 0 && i + 1 < argc) {
            i++;
            if (strcmp(argv[i], "digest") != 0 && strcmp(argv[i], "none") != 0) {
                fprintf(stderr, "wex run: --verify: expected digest or none, "
                                "got '%s'\n", argv[i]);
                return -1;
            }
            a->verify = strcmp(argv[i], "digest") == 0;
        } else if (strcmp(arg, "--host") == 0 && i + 1 < argc) {
            errno = 0;
            a->host = (int64_t)strtoll(argv[++i], &end, 10);
            if (*end != '\0' || errno != 0 || a->host < 0) {
                fprintf(stderr, "wex run: --host: expected a host number, "
                                "got '%s'\n", argv[i]);
                return -1;
            }
        } else if (strcmp(arg, "--rendezvous") == 0 && i + 1 < argc) {
            a->rendezvous = argv[++i];
        } else if (strcmp(arg, "--token") == 0 && i + 1 < argc) {
            a->token = argv[++i];
        } else if (strcmp(arg, "--job-id") == 0 && i + 1 < argc) {
            a->job_id = argv[++i];
        } else if (strcmp(arg, "--respawn") == 0) {
            a->respawn = 1;
        } else if (strcmp(arg, "--keep-going") == 0) {
            a->keep_going = 1; /* internal: what --respawn gives workers */
        } else if (strcmp(arg, "--first-step") == 0 && i + 1 < argc) {
            a->first_step = strtoull(argv[++i], NULL, 10); /* internal */
        } else if (strcmp(arg, "--worker") == 0 && i + 2 < argc) {
            /* internal: how the launcher starts each rank */
            a->worker = 1;
            a->side = strcmp(argv[i + 1], "source") == 0
                          ? WEX_SIDE_SOURCE
                          : WEX_SIDE_DESTINATION;
            a->rank = strtoull(argv[i + 2], NULL, 10);
            i += 2;
        } else if (arg[0] != '-' && a->job == NULL) {
            a->job = arg;
        } else {
            fprintf(stderr, "wex run: unexpected argument '%s' (see wex run "
                            "--help)\n", arg);
            return -1;
        }
    }
    if (a->job == NULL) {
        fprintf(stderr, "wex run: no job file (see wex run --help)\n");
        return -1;
    }
    if (a->host >= 0 && (a->rendezvous == NULL || a->token == NULL ||
                         a->job_id == NULL)) {
        fprintf(stderr, "wex run: --host needs --rendezvous, --token and "
                        "--job-id shared by every host\n");
        return -1;
    }
    return 0;
}

/* Best of several single-thread memcpy passes over 256 MiB. */
double wex_run_memcpy_gbps(void)
{
    size_t n = (size_t)256 << 20;
    char *a = malloc(n), *b = malloc(n);
    double best = 0;

    if (a == NULL || b == NULL) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    for (int i = 0; i < 5; i++) {
        double t0 = wex__now();
        memcpy(b, a, n);
        double dt = wex__now() - t0;
        if (dt > 0 && (double)n / dt > best)
            best = (double)n / dt;
        a[i] = b[n - 1 - (size_t)i]; /* keep the copies observable */
    }
    free(a);
    free(b);
    return best / 1e9;
}

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

static pid_t spawn(const char *self, const run_args *a, uint32_t side,
                   uint64_t rank, uint64_t first_step)
{
    char steps[32], r[32], first[32];
    pid_t pid;

    snprintf(steps, sizeof(steps), "%llu", (unsigned long long)a->steps);
    snprintf(r, sizeof(r), "%llu", (unsigned long long)rank);
    snprintf(first, sizeof(first), "%llu", (unsigned long long)first_step);
    pid = fork();
    if (pid == 0) {
        const char *verify = a->verify < 0 ? NULL
                             : a->verify ? "digest"
                                         : "none";
        char *argv[16] = {(char *)"wex", (char *)"run", (char *)"--worker",
                          side == WEX_SIDE_SOURCE ? (char *)"source"
                                                  : (char *)"destination",
                          r, (char *)"--steps", steps, (char *)"--first-step",
                          first, (char *)a->job, NULL};
        int n = 10;
        if (a->respawn)
            argv[n++] = (char *)"--keep-going";
        if (verify != NULL) {
            argv[n++] = (char *)"--verify";
            argv[n++] = (char *)verify;
        }
        execv(self, argv);
        _exit(127);
    }
    return pid;
}

static wex_status start(launch *l, const run_args *a)
{
    const cJSON *rdv, *addr, *tok;
    char token[65], job_id[64];
    ssize_t n;
    wex__registry *registry;
    wex_status st;

    memset(l, 0, sizeof(*l));
    st = wex__registry_default(&registry);
    if (st == WEX_OK)
        st = wex__planner_open(&l->plan, registry, a->job);
    if (st != WEX_OK)
        return st;
    /* Planning needs no transport, running does: refuse a missing one
     * here, once, rather than in every rank's process. */
    if (wex__registry_find(registry, WEX_KIND_TRANSPORT,
                           l->plan.job->transport.name) == NULL) {
        char *names = wex__registry_names(registry, WEX_KIND_TRANSPORT);
        st = wex__error(WEX_ERR_INVALID, "%s: /transport: no transport "
                        "plugin named \"%s\" (available: %s)",
                        l->plan.job->path, l->plan.job->transport.name,
                        names && names[0] ? names : "none");
        free(names);
        return st;
    }
    if (a->verify >= 0)
        l->plan.job->verify_digest = a->verify;
    rdv = cJSON_GetObjectItemCaseSensitive(l->plan.job->doc, "rendezvous");
    addr = cJSON_GetObjectItemCaseSensitive(rdv, "address");
    tok = cJSON_GetObjectItemCaseSensitive(rdv, "token");
    random_hex(token, 16);
    if (a->token != NULL)
        snprintf(token, sizeof(token), "%s", a->token);
    else if (cJSON_IsString(tok))
        snprintf(token, sizeof(token), "%s", tok->valuestring);
    if (a->rendezvous == NULL) {
        st = wex__store_serve(cJSON_IsString(addr) ? addr->valuestring
                                                   : "127.0.0.1:0",
                              token, &l->server);
        if (st != WEX_OK)
            return st;
    }
    snprintf(job_id, sizeof(job_id), "run%ld-%llx", (long)getpid(),
             (unsigned long long)time(NULL));
    setenv("WEX_RENDEZVOUS",
           a->rendezvous ? a->rendezvous : wex__store_address(l->server), 1);
    setenv("WEX_TOKEN", token, 1);
    setenv("WEX_JOB_ID", a->job_id ? a->job_id : job_id, 1);
    st = wex__store_connect(getenv("WEX_RENDEZVOUS"), token,
                            a->host >= 0 ? "launcher/host" : "launcher",
                            l->plan.job->connect_seconds, &l->client);
    if (st != WEX_OK)
        return st;
    n = readlink("/proc/self/exe", l->self, sizeof(l->self) - 1);
    if (n <= 0)
        return wex__error(WEX_ERR_SYSTEM, "cannot find the wex executable");
    l->self[n] = '\0';
    l->count = l->plan.src.ranks + l->plan.dst.ranks;
    l->pids = calloc(l->count, sizeof(pid_t));
    l->sides = calloc(l->count, sizeof(uint32_t));
    l->ranks = calloc(l->count, sizeof(uint64_t));
    l->respawned = calloc(l->count, 1);
    l->killed = calloc(l->count, sizeof(int));
    if (l->pids == NULL || l->sides == NULL || l->ranks == NULL ||
        l->respawned == NULL || l->killed == NULL)
        return wex__error(WEX_ERR_NOMEM, "run: out of memory");
    {
        size_t all = l->count, k = 0;
        for (size_t i = 0; i < all; i++) {
            int src = i < l->plan.src.ranks;
            uint64_t rank = src ? i : i - l->plan.src.ranks;
            const wex__side *side = src ? &l->plan.src : &l->plan.dst;
            if (a->host >= 0 && side->hosts[rank] != (uint64_t)a->host)
                continue;
            l->sides[k] = src ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION;
            l->ranks[k] = rank;
            l->pids[k] = spawn(l->self, a, l->sides[k], rank, 1);
            if (l->pids[k] < 0)
                return wex__error(WEX_ERR_SYSTEM, "fork: %s", strerror(errno));
            l->count = ++k;
        }
        l->count = k;
        if (k == 0)
            return wex__error(WEX_ERR_INVALID, "%s: the topology places no "
                              "rank on host %lld", a->job,
                              (long long)a->host);
    }
    return WEX_OK;
}

/* The step after the one worker i died in: its report lists the steps
 * it finished, and the others go on past the one it was in. */
static uint64_t step_after_death(launch *l, size_t i)
{
    cJSON *doc = wex_run_worker_report(l, l->sides[i], l->ranks[i]);
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
    l->pids[i] = spawn(l->self, a, l->sides[i], l->ranks[i], first);
    if (l->pids[i] < 0)
        return 0;
    if (!a->json)
        fprintf(stderr, "\rwex run: %s rank %llu was killed; started again "
                "at step %llu\n",
                l->sides[i] == WEX_SIDE_SOURCE ? "source" : "destination",
                (unsigned long long)l->ranks[i], (unsigned long long)first);
    return 1;
}

/* Waits for every worker, drawing progress on a terminal. Returns the
 * number of workers that failed. */
static size_t wait_workers(launch *l, const run_args *a)
{
    int tty = !a->json && isatty(STDERR_FILENO);
    size_t left = l->count, failed = 0;
    uint64_t shown = 0;

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
            /* every destination adds one per step it commits */
            int64_t want = (int64_t)((shown + 1) * l->plan.dst.ranks);
            if (shown < a->steps &&
                wex__store_wait_ge(l->client, "progress", want, 0.05) ==
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

cJSON *wex_run_worker_report(launch *l, uint32_t side, uint64_t rank)
{
    char key[96];
    void *text = NULL;
    size_t len = 0;
    cJSON *doc = NULL;

    snprintf(key, sizeof(key), "report/%s/%llu",
             side == WEX_SIDE_SOURCE ? "source" : "destination",
             (unsigned long long)rank);
    if (wex__store_get(l->client, key, 0.2, &text, &len) == WEX_OK)
        doc = cJSON_ParseWithLength(text, len);
    free(text);
    return doc;
}

int wex_cmd_run(int argc, char **argv)
{
    run_args a;
    launch l;
    size_t failed;
    int code;

    if (wex_cli_wants_help(argc, argv)) {
        usage(stdout);
        return WEX_EXIT_OK;
    }
    if (parse_args(argc, argv, &a) != 0)
        return WEX_EXIT_USAGE;
    if (a.worker)
        return wex_run_worker(&a);
    if (start(&l, &a) != WEX_OK) {
        fprintf(stderr, "wex run: %s\n", wex__last_error());
        for (size_t i = 0; i < l.count; i++)
            if (l.pids && l.pids[i] > 0)
                kill(l.pids[i], SIGKILL);
        code = WEX_EXIT_USAGE;
    } else {
        failed = wait_workers(&l, &a);
        code = wex_run_report(&l, &a, failed);
    }
    if (l.client != NULL)
        wex__store_close(l.client);
    if (l.server != NULL)
        wex__store_stop(l.server);
    wex__planner_close(&l.plan);
    free(l.pids);
    free(l.sides);
    free(l.ranks);
    free(l.respawned);
    free(l.killed);
    return code;
}
