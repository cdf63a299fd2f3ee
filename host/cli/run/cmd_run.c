/*
 * wex run: the main job. Launches every source and destination rank of a
 * job as its own process on this machine around an embedded rendezvous
 * (run_launch.c), syncs synthetic weights for N steps in each
 * (run_worker.c), has every destination check every element, and
 * reports per-step time and throughput against this machine's memcpy
 * bandwidth measured in the same run (run_report.c).
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "run.h"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: wex run JOB.json [--steps N] [--verify digest|none] "
        "[--json] [--changed F]\n"
        "               [--rebalance-every N]\n"
        "               [--host H --rendezvous HOST:PORT --token T "
        "--job-id ID]\n"
        "               [--from-checkpoint DIR] [--save OUT "
        "[--shard-bytes N]]\n"
        "\n"
        "Runs the job on this machine: every source and destination "
        "rank as its own\nprocess, meeting at a rendezvous this command "
        "serves. Sources fill their\nweights with a deterministic "
        "function of (tensor, element, step), every\nrank syncs N steps "
        "(default 3) through the job's transport, and every\n"
        "destination checks every element it holds.\n"
        "\n"
        "The sources' plan is computed here, once: each source worker "
        "opens the job\nfrom its plan share (in WEX_PLAN_SHARES or the "
        "job's plan_shares when set,\nelse in a directory of this "
        "run's, removed when it ends).\n"
        "\n"
        "  --steps N   steps to sync (default 3)\n"
        "  --verify digest|none\n"
        "              override the job's verify setting\n"
        "  --changed F each step changes a fraction F (0 to 1, default "
        "1) of the\n"
        "              elements, the same ones on every rank (drawn "
        "from a hash of\n"
        "              tensor and element): with \"delta\" in the job, "
        "what a delta\n"
        "              step sends; every element is still checked\n"
        "  --host H    only the ranks the job's topology places on host H "
        "(one\n"
        "              `wex run --host` per host, all meeting at the same\n"
        "              --rendezvous, which `wex store` serves; --token and\n"
        "              --job-id must match on every host)\n"
        "  --respawn   start a rank that was killed again, at the step "
        "after the one\n"
        "              it died in; the other ranks go on past a failed "
        "step\n"
        "  --elastic   the destination's replicas come and go: the job's "
        "destination\n"
        "              is made elastic (min_replicas 1) if it is not; "
        "WEX_RUN_FAULT lists\n"
        "              leave:REPLICA:STEP (its ranks leave before that "
        "step) and\n"
        "              join:REPLICA:STEP (they join at that step; a "
        "replica whose first\n"
        "              event is a join starts then), comma separated. "
        "Sources must\n"
        "              never fail a step, every replica must commit every "
        "step it is\n"
        "              there for, and a line is printed per change\n"
        "  --rebalance-every N\n"
        "              the destinations move their experts every N steps, "
        "as EPLB\n"
        "              does (a job whose destination has "
        "redundant_experts): each\n"
        "              MoE layer's slots shuffled, every logical expert "
        "still held,\n"
        "              handed to wex_job_set_placement; every slot is "
        "checked after\n"
        "              every step\n"
        "  --json      a report valid against "
        "schemas/run-report.schema.json\n"
        "  --from-checkpoint DIR\n"
        "              the sources read the Hugging Face checkpoint in "
        "DIR instead of\n"
        "              synthetic weights (the job's source engine must "
        "be hf), and\n"
        "              every destination checks every element against "
        "it\n"
        "  --save OUT  after the last step, the destination ranks "
        "together write\n"
        "              what they hold to OUT as a Hugging Face "
        "checkpoint (OUT\n"
        "              must not exist, or be empty; nothing is left "
        "there if a\n"
        "              step fails)\n"
        "  --shard-bytes N\n"
        "              shards of at most N bytes (default 5000000000; "
        "0: one file)\n"
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
        "kills a rank just before that step,\ndie-mid:SIDE:RANK:STEP "
        "in the middle of it (die-mid:SIDE:RANK:STEP:MS that many\n"
        "milliseconds into it), and hang:SIDE:RANK:STEP wedges it before "
        "that step until a signal ends it;\nscribble:destination:RANK:STEP "
        "flips a bit of what landed in that step before the\nelement "
        "check (which must then fail). Workers die with this "
        "command,\nhowever it ends.\n");
}

/* "source" or "destination" into *side; -1 (told) for anything else. */
static int parse_side(const cli_parser *p, uint32_t *side)
{
    if (strcmp(p->arg, "source") == 0)
        *side = WEX_SIDE_SOURCE;
    else if (strcmp(p->arg, "destination") == 0)
        *side = WEX_SIDE_DESTINATION;
    else {
        cli_error(p->command, "%s: expected source or destination, got '%s'",
                  p->name, p->arg);
        return -1;
    }
    return 0;
}

/* --worker SIDE RANK: how the launcher starts each rank (internal). */
static int parse_worker(cli_parser *p, run_args *a)
{
    const char *rank;

    if (parse_side(p, &a->side) != 0 ||
        (rank = cli_second_value(p, "a rank")) == NULL ||
        cli_parse_u64(p->command, p->name, rank, 0, CLI_RANK_MAX, &a->rank) !=
            0)
        return -1;
    a->worker = 1;
    return 0;
}

enum {
    OPT_JSON = CLI_LONG_ONLY,
    OPT_STEPS,
    OPT_VERIFY,
    OPT_HOST,
    OPT_RENDEZVOUS,
    OPT_TOKEN,
    OPT_JOB_ID,
    OPT_RESPAWN,
    OPT_KEEP_GOING,
    OPT_FIRST_STEP,
    OPT_WORKER,
    OPT_FROM_CHECKPOINT,
    OPT_SAVE,
    OPT_SHARD_BYTES,
    OPT_CHANGED,
    OPT_ELASTIC,
    OPT_REBALANCE_EVERY
};

static const struct option options[] = {
    {"json", no_argument, NULL, OPT_JSON},
    {"steps", required_argument, NULL, OPT_STEPS},
    {"verify", required_argument, NULL, OPT_VERIFY},
    {"host", required_argument, NULL, OPT_HOST},
    {"rendezvous", required_argument, NULL, OPT_RENDEZVOUS},
    {"token", required_argument, NULL, OPT_TOKEN},
    {"job-id", required_argument, NULL, OPT_JOB_ID},
    {"respawn", no_argument, NULL, OPT_RESPAWN},
    /* internal: how the launcher starts (and restarts) each rank */
    {"keep-going", no_argument, NULL, OPT_KEEP_GOING},
    {"first-step", required_argument, NULL, OPT_FIRST_STEP},
    {"worker", required_argument, NULL, OPT_WORKER},
    {"from-checkpoint", required_argument, NULL, OPT_FROM_CHECKPOINT},
    {"save", required_argument, NULL, OPT_SAVE},
    {"shard-bytes", required_argument, NULL, OPT_SHARD_BYTES},
    {"changed", required_argument, NULL, OPT_CHANGED},
    {"elastic", no_argument, NULL, OPT_ELASTIC},
    {"rebalance-every", required_argument, NULL, OPT_REBALANCE_EVERY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0}};

/* One option (or the job file) into *a; -1 after telling a mistake. */
static int take(cli_parser *p, int c, run_args *a)
{
    uint64_t host;

    switch (c) {
    case OPT_JSON: a->json = 1; return 0;
    case OPT_RENDEZVOUS: a->rendezvous = p->arg; return 0;
    case OPT_TOKEN: a->token = p->arg; return 0;
    case OPT_JOB_ID: a->job_id = p->arg; return 0;
    case OPT_RESPAWN: a->respawn = 1; return 0;
    case OPT_ELASTIC: a->elastic = 1; return 0;
    case OPT_REBALANCE_EVERY:
        return cli_u64(p, 1, RUN_STEPS_MAX, &a->rebalance_every);
    case OPT_KEEP_GOING: a->keep_going = 1; return 0;
    case OPT_WORKER: return parse_worker(p, a);
    case OPT_FROM_CHECKPOINT: a->from_checkpoint = p->arg; return 0;
    case OPT_SAVE: a->save = p->arg; return 0;
    case OPT_SHARD_BYTES: return cli_u64(p, 0, UINT64_MAX / 2, &a->shard_bytes);
    case OPT_STEPS: return cli_u64(p, 1, RUN_STEPS_MAX, &a->steps);
    case OPT_CHANGED: return cli_fraction(p, &a->changed);
    case OPT_FIRST_STEP: return cli_u64(p, 1, RUN_STEPS_MAX, &a->first_step);
    case OPT_HOST:
        /* hosts are numbered from 0; no job comes near 2^32 of them */
        if (cli_u64(p, 0, UINT32_MAX, &host) != 0)
            return -1;
        a->host = (int64_t)host;
        return 0;
    case OPT_VERIFY:
        if (strcmp(p->arg, "digest") != 0 && strcmp(p->arg, "none") != 0) {
            cli_error(p->command,
                      "--verify: expected digest or none, got "
                      "'%s'",
                      p->arg);
            return -1;
        }
        a->verify = strcmp(p->arg, "digest") == 0;
        return 0;
    case CLI_POSITIONAL:
        if (a->job != NULL) {
            cli_unexpected(p);
            return -1;
        }
        a->job = p->arg;
        return 0;
    default: return -1;
    }
}

/* -1 to go on, or the exit status to return at once (--help, a
 * mistake). */
static int parse_args(int argc, char **argv, run_args *a)
{
    cli_parser p;
    int c;

    memset(a, 0, sizeof(*a));
    a->steps = 3;
    a->first_step = 1;
    a->verify = -1;
    a->host = -1;
    a->shard_bytes = RUN_SHARD_BYTES;
    a->changed = 1;
    cli_parser_init(&p, "wex run", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        if (c == 'h') {
            usage(stdout);
            return CLI_EXIT_OK;
        }
        if (take(&p, c, a) != 0)
            return CLI_EXIT_USAGE;
    }
    if (a->job == NULL) {
        fprintf(stderr, "wex run: no job file (see wex run --help)\n");
        return CLI_EXIT_USAGE;
    }
    if (a->rebalance_every > 0 && a->elastic) {
        fprintf(stderr, "wex run: --rebalance-every and --elastic are not "
                        "played together\n");
        return CLI_EXIT_USAGE;
    }
    if (a->host >= 0 &&
        (a->rendezvous == NULL || a->token == NULL || a->job_id == NULL)) {
        fprintf(stderr, "wex run: --host needs --rendezvous, --token and "
                        "--job-id shared by every host\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* The launcher's part: every rank, their wait, the report. */
static int run_with(const run_args *ap)
{
    run_args a = *ap;
    launch l;
    int code;

    if (run_launch(&l, &a) != WEX_OK) {
        fprintf(stderr, "wex run: %s\n", wex_last_error());
        run_launch_close(&l, 1);
        return CLI_EXIT_USAGE;
    }
    code = run_report(&l, &a, run_wait(&l, &a));
    run_launch_close(&l, 0);
    return code;
}

int cmd_run(int argc, char **argv)
{
    run_args a;
    int code;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if ((code = parse_args(argc, argv, &a)) >= 0)
        return code;
    if (a.worker)
        return run_worker(&a);
    if (a.elastic) {
        static char job[4200], dir[4096];
        if (run_elastic_job(a.job, job, sizeof(job), dir, sizeof(dir)) !=
            WEX_OK) {
            fprintf(stderr, "wex run: %s\n", wex_last_error());
            return CLI_EXIT_FAILED;
        }
        a.job = job;
        code = run_with(&a);
        run_elastic_remove_job(job, dir);
        return code;
    }
    return run_with(&a);
}
