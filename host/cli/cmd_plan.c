/* wex plan: who sends which bytes to whom, and how long it should take. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "cli_args.h"
#include "error.h"
#include "host_registry.h"
#include "clock.h"
#include "plan_share.h"
#include "plan_summary.h"
#include "quantize.h"

typedef struct plan_args {
    const char *job;
    const char *ops_path;
    const char *shares;
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
            "                     [--shares DIR]\n"
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
            "  --shares DIR   also write every rank's plan share into DIR "
            "(only rank N's\n"
            "                 with --rank): a rank that opens the job "
            "with\n"
            "                 WEX_PLAN_SHARES=DIR (or the job's "
            "\"plan_shares\") reads\n"
            "                 its share instead of laying out every rank "
            "and planning\n"
            "\n"
            "The transport the job names need not be installed: planning "
            "moves no bytes.\n");
}

/* -1 to go on, or the exit status to return at once (--help, a
 * mistake). */
static int parse_args(int argc, char **argv, plan_args *a)
{
    enum { OPT_JSON = CLI_LONG_ONLY, OPT_OPS, OPT_RANK, OPT_SIDE, OPT_SHARES };
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"ops", required_argument, NULL, OPT_OPS},
        {"rank", required_argument, NULL, OPT_RANK},
        {"side", required_argument, NULL, OPT_SIDE},
        {"shares", required_argument, NULL, OPT_SHARES},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_parser p;
    int c;

    memset(a, 0, sizeof(*a));
    a->side = WEX_SIDE_DESTINATION;
    cli_parser_init(&p, "wex plan", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_OPS:
            a->ops_path = p.arg;
            break;
        case OPT_SHARES:
            a->shares = p.arg;
            break;
        case OPT_RANK:
            if (cli_u64(&p, 0, CLI_RANK_MAX, &a->rank) != 0)
                return CLI_EXIT_USAGE;
            a->has_rank = 1;
            break;
        case OPT_SIDE:
            if (strcmp(p.arg, "source") == 0) {
                a->side = WEX_SIDE_SOURCE;
            } else if (strcmp(p.arg, "destination") == 0) {
                a->side = WEX_SIDE_DESTINATION;
            } else {
                fprintf(stderr, "wex plan: --side: expected source or "
                                "destination, got '%s'\n", p.arg);
                return CLI_EXIT_USAGE;
            }
            break;
        case CLI_POSITIONAL:
            if (a->job != NULL) {
                fprintf(stderr, "wex plan: one job at a time ('%s')\n",
                        p.arg);
                return CLI_EXIT_USAGE;
            }
            a->job = p.arg;
            break;
        default:
            return cli_other_option(&p, c, usage);
        }
    }
    if (a->job == NULL) {
        fprintf(stderr, "wex plan: no job file (see wex plan --help)\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

static void print_json(const wex__planner *p, const wex__plan_summary *r)
{
    cJSON *doc = wex__plan_summary_document(p, r);
    char *text = doc ? cJSON_Print(doc) : NULL;

    if (text != NULL)
        puts(text);
    free(text);
    cJSON_Delete(doc);
}

static void print_human(const wex__planner *p, const plan_args *a,
                        const wex__plan_summary *r)
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
    printf("sources    read %" PRIu64 " bytes to send them", s->source_bytes);
    if (s->quantized_bytes > 0)
        printf(", %" PRIu64 " of them quantized to fp8 (%s) at %.1f GB/s a "
               "source", s->quantized_bytes, WEX__QUANT_RULE,
               p->topology.quantize_bytes_per_s / 1e9);
    printf("\n");
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

/* Every rank's share (or --rank's), said in one line on `out`. */
static wex_status write_shares(wex__planner *p, const plan_args *a,
                               FILE *out)
{
    uint64_t files = 0, bytes = 0;
    double t0 = wex__now();
    wex_status st = WEX_OK;

    for (uint32_t side = 0; side < 2 && st == WEX_OK; side++) {
        uint64_t ranks = side == WEX_SIDE_SOURCE ? p->src.ranks
                                                 : p->dst.ranks;
        for (uint64_t r = 0; r < ranks && st == WEX_OK; r++) {
            if (a->has_rank && (side != a->side || r != a->rank))
                continue;
            st = wex__share_make(p, a->shares, side, r, &bytes);
            files += st == WEX_OK;
        }
    }
    if (st != WEX_OK)
        return wex__error_prefix(st, "--shares %s", a->shares);
    fprintf(out, "shares     %" PRIu64 " plan share%s, %.1f MB, written to %s "
            "in %.3f s\n", files, files == 1 ? "" : "s", bytes / 1e6,
            a->shares, wex__now() - t0);
    return WEX_OK;
}

int cmd_plan(int argc, char **argv)
{
    wex__registry *registry;
    wex__planner p;
    plan_args a;
    wex__plan_summary r;
    FILE *ops = NULL;
    wex_status st;
    int code = CLI_EXIT_OK;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if ((code = parse_args(argc, argv, &a)) >= 0)
        return code;
    code = CLI_EXIT_OK;
    if (wex__registry_default(&registry) != WEX_OK ||
        wex__planner_open(&p, registry, a.job) != WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex__last_error());
        return CLI_EXIT_USAGE;
    }
    if (a.ops_path != NULL) {
        ops = strcmp(a.ops_path, "-") == 0 ? stdout : fopen(a.ops_path, "w");
        if (ops == NULL) {
            fprintf(stderr, "wex plan: --ops %s: %s\n", a.ops_path,
                    strerror(errno));
            wex__planner_close(&p);
            return CLI_EXIT_USAGE;
        }
    }
    st = wex__plan_summarize(&p, a.has_rank, a.side, a.rank, ops,
                             !a.json && isatty(STDERR_FILENO), &r);
    if (ops != NULL && ops != stdout && fclose(ops) != 0 && st == WEX_OK)
        st = wex__error(WEX_ERR_SYSTEM, "--ops %s: %s", a.ops_path,
                        strerror(errno));
    if (st != WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex__last_error());
        code = CLI_EXIT_FAILED;
    } else if (ops != stdout) {
        if (a.json)
            print_json(&p, &r);
        else
            print_human(&p, &a, &r);
    }
    if (st == WEX_OK && a.shares != NULL &&
        write_shares(&p, &a, a.json || ops == stdout ? stderr : stdout) !=
            WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex__last_error());
        code = CLI_EXIT_FAILED;
    }
    wex__plan_summary_fini(&r);
    wex__planner_close(&p);
    return code;
}
