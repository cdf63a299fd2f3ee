/* wex plan: who sends which bytes to whom, and how long it should take. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <wex/wex.h>

#include "cli.h"
#include "cli_args.h"
#include "tool_base.h"
#include "tool_plan.h"

typedef struct plan_args {
    const char *job;
    const char *ops_path;
    const char *shares;
    int json;
    int has_rank;
    uint64_t rank;
    uint32_t side;
    double changed; /* --changed; < 0: not asked */
} plan_args;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex plan JOB.json [--json] [--ops FILE.jsonl] "
            "[--rank N [--side source|destination]]\n"
            "                     [--shares DIR] [--changed F]\n"
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
            "  --changed F    also predict a delta step where a fraction F "
            "(0 to 1) of\n"
            "                 the elements changed at random places: the "
            "bytes on the\n"
            "                 wire, what the sources hold for it, and the "
            "step's time\n"
            "                 (whole plan only; docs/design.md, \"Delta "
            "steps\")\n"
            "\n"
            "The transport the job names need not be installed: planning "
            "moves no bytes.\n");
}

/* -1 to go on, or the exit status to return at once (--help, a
 * mistake). */
static int parse_args(int argc, char **argv, plan_args *a)
{
    enum {
        OPT_JSON = CLI_LONG_ONLY,
        OPT_OPS,
        OPT_RANK,
        OPT_SIDE,
        OPT_SHARES,
        OPT_CHANGED
    };
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"ops", required_argument, NULL, OPT_OPS},
        {"rank", required_argument, NULL, OPT_RANK},
        {"side", required_argument, NULL, OPT_SIDE},
        {"shares", required_argument, NULL, OPT_SHARES},
        {"changed", required_argument, NULL, OPT_CHANGED},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_parser p;
    int c;

    memset(a, 0, sizeof(*a));
    a->side = WEX_SIDE_DESTINATION;
    a->changed = -1;
    cli_parser_init(&p, "wex plan", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_JSON: a->json = 1; break;
        case OPT_OPS: a->ops_path = p.arg; break;
        case OPT_SHARES: a->shares = p.arg; break;
        case OPT_CHANGED:
            if (cli_fraction(&p, &a->changed) != 0)
                return CLI_EXIT_USAGE;
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
                fprintf(stderr,
                        "wex plan: --side: expected source or "
                        "destination, got '%s'\n",
                        p.arg);
                return CLI_EXIT_USAGE;
            }
            break;
        case CLI_POSITIONAL:
            if (a->job != NULL) {
                fprintf(stderr, "wex plan: one job at a time ('%s')\n", p.arg);
                return CLI_EXIT_USAGE;
            }
            a->job = p.arg;
            break;
        default: return cli_other_option(&p, c, usage);
        }
    }
    if (a->job == NULL) {
        fprintf(stderr, "wex plan: no job file (see wex plan --help)\n");
        return CLI_EXIT_USAGE;
    }
    if (a->changed >= 0 && a->has_rank) {
        fprintf(stderr, "wex plan: --changed predicts the whole plan's "
                        "step; drop --rank\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

static void print_json(const cJSON *doc)
{
    char *text = doc ? cJSON_Print(doc) : NULL;

    if (text != NULL)
        puts(text);
    free(text);
}

/* The delta step --changed asked for, beside the whole step. */
static void print_delta(const wex_tool_plan_summary *s)
{
    double pct = s->bytes > 0
                     ? 100.0 * (double)s->delta.wire_bytes / (double)s->bytes
                     : 0;

    printf("delta      at %g %% changed: %" PRIu64 " bytes on the wire "
           "(%.2f %% of the whole step), %" PRIu64 " of them in operations "
           "that go whole%s\n",
           s->delta.changed * 100, s->delta.wire_bytes, pct,
           s->delta.whole_bytes,
           s->delta.changed > s->delta.max_fraction
               ? " (past max_fraction: every one)"
               : " (fp8 scales and other conversions)");
    printf("           busiest sender %" PRIu64
           " bytes, busiest receiver %" PRIu64 " bytes; snapshots %" PRIu64
           " bytes (largest source "
           "%" PRIu64 ", its outbox %" PRIu64
           "), scanned at %.1f GB/s on %u threads\n",
           s->delta.max_send, s->delta.max_recv, s->delta.snapshot_bytes,
           s->delta.max_snapshot_bytes, s->delta.max_outbox_bytes,
           s->delta.scan_bytes_per_s / 1e9, s->delta.scan_threads);
    printf("           predicted %.4f s, against %.4f s for the whole step "
           "(%.1fx)\n",
           s->delta.predicted, s->predicted,
           s->delta.predicted > 0 ? s->predicted / s->delta.predicted : 0);
}

/* A destination holding redundant experts: how many slots, and how
 * they are placed (wex layout lists each rank's). */
static void print_experts(const wex_tool_job_info *j)
{
    const cJSON *dst = cJSON_GetObjectItemCaseSensitive(j->doc, "destination");
    const cJSON *o = cJSON_GetObjectItemCaseSensitive(dst, "options");
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(o, "redundant_experts");
    const cJSON *place =
        cJSON_GetObjectItemCaseSensitive(o, "expert_placement");

    if (!cJSON_IsNumber(r) && place == NULL)
        return;
    printf("experts    the destination's MoE layers hold their experts + %.0f "
           "redundant slots, placed %s (their bytes are needed, counted "
           "above; wex layout lists each rank's slots)\n",
           cJSON_IsNumber(r) ? r->valuedouble : 0.0,
           cJSON_IsObject(place) ? "by the job's map" : "linearly");
}

static void print_human(const wex_tool_planner *p, const plan_args *a,
                        const wex_tool_plan_summary *s)
{
    wex_tool_job_info j;

    wex_tool_planner_get_job(p, &j);
    printf("job        %s: %s (%" PRIu64 " rank%s) -> %s (%" PRIu64
           " rank%s) on %" PRIu64 " host%s, policy %s\n",
           j.path, j.source_engine, j.source_ranks,
           j.source_ranks == 1 ? "" : "s", j.destination_engine,
           j.destination_ranks, j.destination_ranks == 1 ? "" : "s", j.hosts,
           j.hosts == 1 ? "" : "s", j.policy);
    if (a->has_rank) {
        printf("rank       %s %" PRIu64 ": %" PRIu64 " operations, %" PRIu64
               " bytes, planned in %.3f s\n",
               a->side == WEX_SIDE_SOURCE ? "source" : "destination", a->rank,
               s->operations, s->bytes, s->plan_seconds);
        return;
    }
    printf("plan       %" PRIu64 " operations moving %" PRIu64
           " bytes (needed %" PRIu64 ", redundant %" PRIu64 ")\n",
           s->operations, s->bytes, s->bytes_needed, s->redundant_bytes);
    print_experts(&j);
    printf("sources    read %" PRIu64 " bytes to send them", s->source_bytes);
    if (s->quantized_bytes > 0)
        printf(", %" PRIu64 " of them quantized to fp8 (%s) at %.1f GB/s a "
               "source, each cell once for all its replicas (the work: %" PRIu64
               " bytes)",
               s->quantized_bytes, s->quantize_rule,
               j.quantize_bytes_per_s / 1e9, s->quantize_work_bytes);
    printf("\n");
    printf("links      busiest sender %" PRIu64
           " bytes, busiest receiver %" PRIu64 " bytes, %" PRIu64
           " bytes within hosts\n",
           s->max_send, s->max_recv, s->intra_host_bytes);
    printf("time       predicted %.4f s, lower bound %.4f s (ratio %.3f) at "
           "%.0f GB/s NIC, %.0f GB/s within a host\n",
           s->predicted, s->lower_bound,
           s->lower_bound > 0 ? s->predicted / s->lower_bound : 1.0,
           j.nic_bytes_per_s / 1e9, j.intra_bytes_per_s / 1e9);
    printf("planning   %.3f s for every rank, after %.3f s of layouts\n",
           s->plan_seconds, j.layout_seconds);
    if (s->delta.changed >= 0)
        print_delta(s);
}

/* Every rank's share (or --rank's), said in one line on `out`. */
static wex_status write_shares(wex_tool_planner *p, const plan_args *a,
                               FILE *out)
{
    uint64_t files = 0, bytes = 0;
    double t0 = wex_tool_now();
    wex_status st = WEX_OK;
    wex_tool_job_info j;

    wex_tool_planner_get_job(p, &j);
    for (uint32_t side = 0; side < 2 && st == WEX_OK; side++) {
        uint64_t ranks =
            side == WEX_SIDE_SOURCE ? j.source_ranks : j.destination_ranks;
        for (uint64_t r = 0; r < ranks && st == WEX_OK; r++) {
            if (a->has_rank && (side != a->side || r != a->rank))
                continue;
            st = wex_tool_share_make(p, a->shares, side, r, &bytes);
            files += st == WEX_OK;
        }
    }
    if (st != WEX_OK)
        return wex_tool_error_prefix(st, "--shares %s", a->shares);
    fprintf(out,
            "shares     %" PRIu64 " plan share%s, %.1f MB, written to %s "
            "in %.3f s\n",
            files, files == 1 ? "" : "s", bytes / 1e6, a->shares,
            wex_tool_now() - t0);
    return WEX_OK;
}

int cmd_plan(int argc, char **argv)
{
    wex_tool_registry *registry;
    wex_tool_planner *p;
    plan_args a;
    wex_tool_plan_summary r;
    cJSON *doc = NULL;
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
    if (wex_tool_registry_default(&registry) != WEX_OK ||
        wex_tool_planner_open(registry, a.job, &p) != WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex_last_error());
        return CLI_EXIT_USAGE;
    }
    if (a.ops_path != NULL) {
        ops = strcmp(a.ops_path, "-") == 0 ? stdout : fopen(a.ops_path, "w");
        if (ops == NULL) {
            fprintf(stderr, "wex plan: --ops %s: %s\n", a.ops_path,
                    strerror(errno));
            wex_tool_planner_close(p);
            return CLI_EXIT_USAGE;
        }
    }
    /* the document is made while the summary's figures are at hand */
    st = wex_tool_plan_summarize(p, a.has_rank, a.side, a.rank, ops,
                                 !a.json && isatty(STDERR_FILENO), a.changed,
                                 &r, a.json && ops != stdout ? &doc : NULL);
    if (ops != NULL && ops != stdout && fclose(ops) != 0 && st == WEX_OK)
        st = wex_tool_error(WEX_ERR_SYSTEM, "--ops %s: %s", a.ops_path,
                            strerror(errno));
    if (st != WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex_last_error());
        code = CLI_EXIT_FAILED;
    } else if (ops != stdout) {
        if (a.json)
            print_json(doc);
        else
            print_human(p, &a, &r);
    }
    if (st == WEX_OK && a.shares != NULL &&
        write_shares(p, &a, a.json || ops == stdout ? stderr : stdout) !=
            WEX_OK) {
        fprintf(stderr, "wex plan: %s\n", wex_last_error());
        code = CLI_EXIT_FAILED;
    }
    cJSON_Delete(doc);
    wex_tool_planner_close(p);
    return code;
}
