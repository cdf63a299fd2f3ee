/* wex plan: who sends which bytes to whom, and how long it should take. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "error.h"
#include "fd_io.h"
#include "planner.h"

typedef struct plan_args {
    const char *job;
    const char *ops_path;
    int json;
    int has_rank;
    uint64_t rank;
    uint32_t side;
} plan_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex plan JOB.json [--json] [--ops FILE.jsonl] "
            "[--rank N [--side source|destination]]\n"
            "\n"
            "Lays out both sides of the job, asks its policy for every "
            "rank's copy\noperations and reports what they add up to: bytes "
            "moved and needed,\nredundancy, the busiest ranks, the predicted "
            "step time and the lower\nbound on it for the job's topology.\n"
            "\n"
            "  --json         a document valid against "
            "schemas/plan.schema.json\n"
            "  --ops FILE     write every operation, one JSON object per "
            "line\n"
            "                 (\"-\" for standard output)\n"
            "  --rank N       plan only rank N (of --side, default "
            "destination): its\n"
            "                 own operations, as that rank's process "
            "computes them\n"
            "\n"
            "The transport the job names need not be installed: planning "
            "moves no bytes.\n");
}

static int parse_args(int argc, char **argv, plan_args *a)
{
    memset(a, 0, sizeof(*a));
    a->side = WEX_SIDE_DESTINATION;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        char *end;

        if (strcmp(arg, "--json") == 0) {
            a->json = 1;
            continue;
        }
        if (arg[0] != '-' || strcmp(arg, "-") == 0) {
            if (a->job != NULL) {
                fprintf(stderr, "wex plan: one job at a time ('%s')\n", arg);
                return -1;
            }
            a->job = arg;
            continue;
        }
        if (next == NULL) {
            fprintf(stderr, "wex plan: %s needs a value\n", arg);
            return -1;
        }
        i++;
        if (strcmp(arg, "--ops") == 0) {
            a->ops_path = next;
        } else if (strcmp(arg, "--rank") == 0) {
            errno = 0;
            a->rank = strtoull(next, &end, 10);
            if (*end != '\0' || errno != 0 || next[0] == '-') {
                fprintf(stderr, "wex plan: --rank: expected a rank number, "
                                "got '%s'\n", next);
                return -1;
            }
            a->has_rank = 1;
        } else if (strcmp(arg, "--side") == 0) {
            if (strcmp(next, "source") == 0)
                a->side = WEX_SIDE_SOURCE;
            else if (strcmp(next, "destination") == 0)
                a->side = WEX_SIDE_DESTINATION;
            else {
                fprintf(stderr, "wex plan: --side: expected source or "
                                "destination, got '%s'\n", next);
                return -1;
            }
        } else {
            fprintf(stderr, "wex plan: unknown option %s (see wex plan "
                            "--help)\n", arg);
            return -1;
        }
    }
    if (a->job == NULL) {
        fprintf(stderr, "wex plan: no job file (see wex plan --help)\n");
        return -1;
    }
    return 0;
}

typedef struct plan_result {
    wex__plan_stats stats;
    double plan_seconds, predicted, lower_bound;
} plan_result;

/* Plans every destination rank (each operation has exactly one), or only
 * the asked-for rank. */
static wex_status run_plan(wex__planner *p, const plan_args *a, FILE *ops,
                           plan_result *out)
{
    wex_plan_builder b;
    wex_status st;
    double t0 = wex__now();
    int progress = !a->json && isatty(STDERR_FILENO) && !a->has_rank;

    st = wex__plan_stats_init(&out->stats, &p->src, &p->dst);
    wex__plan_builder_init(&b, &p->src, &p->dst);
    for (uint64_t r = 0; st == WEX_OK && r < p->dst.ranks; r++) {
        uint64_t rank = a->has_rank ? a->rank : r;
        st = wex__planner_rank(p, a->has_rank ? a->side : WEX_SIDE_DESTINATION,
                               rank, &b);
        if (st != WEX_OK)
            break;
        wex__plan_stats_add(&out->stats, &p->src, &p->dst, b.ops, b.count);
        if (ops != NULL)
            wex__plan_write_ops(ops, b.ops, b.count);
        if (progress)
            fprintf(stderr, "\rplanning: %" PRIu64 "/%" PRIu64 " destination "
                            "ranks", r + 1, p->dst.ranks);
        if (a->has_rank)
            break;
    }
    if (progress)
        fputs("\r\033[K", stderr);
    out->plan_seconds = wex__now() - t0;
    wex__plan_builder_fini(&b);
    if (st == WEX_OK && !a->has_rank) {
        /* A ranks' stats need no bound; the whole plan's need both. */
        out->predicted = wex__plan_predicted_seconds(&out->stats, &p->topology);
        st = wex__plan_lower_bound(&p->src, &p->dst, &p->topology,
                                   &out->lower_bound);
    }
    return st;
}

static void print_json(const wex__planner *p, const plan_args *a,
                       const plan_result *r)
{
    cJSON *doc = cJSON_CreateObject();
    char *text;

    cJSON_AddStringToObject(doc, "job", p->job->path);
    cJSON_AddStringToObject(doc, "policy", p->job->policy.name);
    cJSON_AddStringToObject(doc, "source_engine", p->job->source.name);
    cJSON_AddStringToObject(doc, "destination_engine",
                            p->job->destination.name);
    cJSON_AddNumberToObject(doc, "source_ranks", (double)p->src.ranks);
    cJSON_AddNumberToObject(doc, "destination_ranks", (double)p->dst.ranks);
    cJSON_AddNumberToObject(doc, "hosts", (double)p->topology.hosts);
    if (a->has_rank) {
        cJSON_AddStringToObject(doc, "side", a->side == WEX_SIDE_SOURCE
                                                 ? "source"
                                                 : "destination");
        cJSON_AddNumberToObject(doc, "rank", (double)a->rank);
    }
    cJSON_AddNumberToObject(doc, "operations", (double)r->stats.operations);
    cJSON_AddNumberToObject(doc, "bytes", (double)r->stats.bytes);
    if (!a->has_rank) {
        cJSON_AddNumberToObject(doc, "bytes_needed",
                                (double)r->stats.bytes_needed);
        cJSON_AddNumberToObject(doc, "redundant_bytes",
                                (double)r->stats.redundant_bytes);
        cJSON_AddNumberToObject(doc, "intra_host_bytes",
                                (double)r->stats.intra_host_bytes);
        cJSON_AddNumberToObject(doc, "max_rank_send_bytes",
                                (double)wex__plan_max_send(&r->stats));
        cJSON_AddNumberToObject(doc, "max_rank_recv_bytes",
                                (double)wex__plan_max_recv(&r->stats));
        cJSON_AddNumberToObject(doc, "predicted_seconds", r->predicted);
        cJSON_AddNumberToObject(doc, "lower_bound_seconds", r->lower_bound);
    }
    cJSON_AddNumberToObject(doc, "plan_seconds", r->plan_seconds);
    cJSON_AddNumberToObject(doc, "layout_seconds", p->layout_seconds);
    text = cJSON_Print(doc);
    if (text != NULL)
        puts(text);
    free(text);
    cJSON_Delete(doc);
}

static void print_human(const wex__planner *p, const plan_args *a,
                        const plan_result *r)
{
    const wex__plan_stats *s = &r->stats;

    printf("job        %s: %s (%" PRIu64 " rank%s) -> %s (%" PRIu64
           " rank%s) on %" PRIu64 " host%s, policy %s\n",
           p->job->path, p->job->source.name, p->src.ranks,
           p->src.ranks == 1 ? "" : "s", p->job->destination.name,
           p->dst.ranks, p->dst.ranks == 1 ? "" : "s", p->topology.hosts,
           p->topology.hosts == 1 ? "" : "s", p->job->policy.name);
    if (a->has_rank) {
        printf("rank       %s %" PRIu64 ": %" PRIu64 " operations, %" PRIu64
               " bytes, planned in %.3f s\n",
               a->side == WEX_SIDE_SOURCE ? "source" : "destination", a->rank,
               s->operations, s->bytes, r->plan_seconds);
        return;
    }
    printf("plan       %" PRIu64 " operations moving %" PRIu64
           " bytes (needed %" PRIu64 ", redundant %" PRIu64 ")\n",
           s->operations, s->bytes, s->bytes_needed, s->redundant_bytes);
    printf("links      busiest sender %" PRIu64 " bytes, busiest receiver %"
           PRIu64 " bytes, %" PRIu64 " bytes within hosts\n",
           wex__plan_max_send(s), wex__plan_max_recv(s), s->intra_host_bytes);
    printf("time       predicted %.4f s, lower bound %.4f s (ratio %.3f) at "
           "%.0f GB/s NIC, %.0f GB/s within a host\n",
           r->predicted, r->lower_bound,
           r->lower_bound > 0 ? r->predicted / r->lower_bound : 1.0,
           p->topology.nic_bytes_per_s / 1e9,
           p->topology.intra_bytes_per_s / 1e9);
    printf("planning   %.3f s for every rank, after %.3f s of layouts\n",
           r->plan_seconds, p->layout_seconds);
}

int wex_cmd_plan(int argc, char **argv)
{
    wex__registry *registry;
    wex__planner p;
    plan_args a;
    plan_result r;
    FILE *ops = NULL;
    wex_status st;
    int code = WEX_EXIT_OK;

    if (wex_cli_wants_help(argc, argv)) {
        usage(stdout);
        return WEX_EXIT_OK;
    }
    if (parse_args(argc, argv, &a) != 0)
        return WEX_EXIT_USAGE;
    if (wex__registry_default(&registry) != WEX_OK ||
        wex__planner_open(&p, registry, a.job) != WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex__last_error());
        return WEX_EXIT_USAGE;
    }
    if (a.ops_path != NULL) {
        ops = strcmp(a.ops_path, "-") == 0 ? stdout : fopen(a.ops_path, "w");
        if (ops == NULL) {
            fprintf(stderr, "wex plan: --ops %s: %s\n", a.ops_path,
                    strerror(errno));
            wex__planner_close(&p);
            return WEX_EXIT_USAGE;
        }
    }
    memset(&r, 0, sizeof(r));
    st = run_plan(&p, &a, ops, &r);
    if (ops != NULL && ops != stdout && fclose(ops) != 0 && st == WEX_OK)
        st = wex__error(WEX_ERR_SYSTEM, "--ops %s: %s", a.ops_path,
                        strerror(errno));
    if (st != WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex__last_error());
        code = WEX_EXIT_FAILED;
    } else if (ops != stdout) {
        if (a.json)
            print_json(&p, &a, &r);
        else
            print_human(&p, &a, &r);
    }
    wex__plan_stats_fini(&r.stats);
    wex__planner_close(&p);
    return code;
}
