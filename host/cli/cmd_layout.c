/* wex layout: how an engine lays a model out over its ranks. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "cli.h"
#include "cli_args.h"
#include "layout_options.h"
#include "layout_slots.h"
#include "tool_json.h"
#include "tool_model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex layout --model CONFIG.json --engine NAME "
            "[--parallel K=V,...]\n"
            "                  [--options JSON] [--rank N] [--json]\n"
            "       wex layout --engine NAME --help-options\n"
            "\n"
            "Describes how engine NAME lays the model of CONFIG.json (a "
            "Hugging Face\nconfig.json) out over its ranks: the local "
            "tensors of each rank and the\npieces of canonical tensors "
            "they hold.\n"
            "\n"
            "  --parallel K=V,...  parallel config, e.g. tp=4,pp=2,ep=8,dp=2;"
            "\n"
            "                      pp_layers=12:14:14:12 for an uneven "
            "pipeline split\n"
            "  --options JSON      engine options (--help-options lists "
            "them)\n"
            "  --help-options      the engine's options: values, defaults, "
            "what each means\n"
            "  --rank N            only rank N\n"
            "  --json              a document valid against "
            "schemas/layout.schema.json\n"
            "\n"
            "Without --json: a summary of the model, then one line per "
            "rank (tensors,\npieces, bytes) and the replication factor; "
            "with options placing experts\n(redundant_experts, "
            "expert_placement), each rank's physical expert slots and\nthe "
            "logical expert each holds, per run of MoE layers alike.\n");
}

/* One value of --parallel: every key takes a count (or, listed, counts);
 * the job schema says which counts each key allows. */
static int parallel_value(const char *key, const char *text, double *out)
{
    char option[96];
    uint64_t v;

    snprintf(option, sizeof(option), "--parallel: %s", key);
    if (cli_parse_u64("wex layout", option, text, 0, UINT32_MAX, &v) != 0)
        return -1;
    *out = (double)v;
    return 0;
}

/* "tp=4,pp=2,pp_layers=3:5" -> {"tp":4,"pp":2,"pp_layers":[3,5]} */
static cJSON *parse_parallel(const char *text)
{
    cJSON *obj = cJSON_CreateObject();
    char *copy = strdup(text), *save = NULL;
    int ok = obj != NULL && copy != NULL;

    for (char *kv = ok ? strtok_r(copy, ",", &save) : NULL; kv && ok;
         kv = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(kv, '='), *v, *colon;
        double n;
        if (eq == NULL || eq == kv) {
            fprintf(stderr,
                    "wex layout: --parallel: expected K=V, got "
                    "'%s'\n",
                    kv);
            ok = 0;
            break;
        }
        *eq = '\0';
        if (strchr(eq + 1, ':') == NULL) {
            ok = parallel_value(kv, eq + 1, &n) == 0 &&
                 cJSON_AddNumberToObject(obj, kv, n) != NULL;
            continue;
        }
        cJSON *list = cJSON_AddArrayToObject(obj, kv);
        for (v = eq + 1; ok && list != NULL; v = colon + 1) {
            colon = strchr(v, ':');
            if (colon != NULL)
                *colon = '\0';
            ok = parallel_value(kv, v, &n) == 0;
            if (ok)
                cJSON_AddItemToArray(list, cJSON_CreateNumber(n));
            if (colon == NULL)
                break;
        }
        ok = ok && list != NULL;
    }
    free(copy);
    if (!ok) {
        cJSON_Delete(obj);
        obj = NULL;
    }
    return obj;
}

typedef struct layout_args {
    const char *model, *engine, *parallel, *options;
    uint64_t rank;
    int has_rank; /* else every rank */
    int json;
    int help_options;
    int slots; /* the options place experts: print each rank's slots */
} layout_args;

/* -1 to go on, or the exit status to return at once (--help, a
 * mistake). */
static int parse_args(int argc, char **argv, layout_args *a)
{
    enum {
        OPT_MODEL = CLI_LONG_ONLY,
        OPT_ENGINE,
        OPT_PARALLEL,
        OPT_OPTIONS,
        OPT_RANK,
        OPT_JSON,
        OPT_HELP_OPTIONS
    };
    static const struct option options[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"engine", required_argument, NULL, OPT_ENGINE},
        {"parallel", required_argument, NULL, OPT_PARALLEL},
        {"options", required_argument, NULL, OPT_OPTIONS},
        {"rank", required_argument, NULL, OPT_RANK},
        {"json", no_argument, NULL, OPT_JSON},
        {"help-options", no_argument, NULL, OPT_HELP_OPTIONS},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_parser p;
    int c;

    memset(a, 0, sizeof(*a));
    cli_parser_init(&p, "wex layout", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_MODEL: a->model = p.arg; break;
        case OPT_ENGINE: a->engine = p.arg; break;
        case OPT_PARALLEL: a->parallel = p.arg; break;
        case OPT_OPTIONS: a->options = p.arg; break;
        case OPT_JSON: a->json = 1; break;
        case OPT_HELP_OPTIONS: a->help_options = 1; break;
        case OPT_RANK:
            if (cli_u64(&p, 0, CLI_RANK_MAX, &a->rank) != 0)
                return CLI_EXIT_USAGE;
            a->has_rank = 1;
            break;
        default: return cli_other_option(&p, c, usage);
        }
    }
    if (a->help_options && a->engine != NULL)
        return layout_print_options(a->engine);
    if (a->model == NULL || a->engine == NULL) {
        fprintf(stderr, "wex layout: --model and --engine are required\n");
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* The parallel config must follow the job schema's definition. */
static int check_parallel(const cJSON *parallel)
{
    if (wex_tool_check_parallel(parallel, "--parallel") != WEX_OK) {
        fprintf(stderr, "wex layout: %s\n", wex_last_error());
        return -1;
    }
    return 0;
}

static int print_document(wex_tool_engine *e, uint64_t first, uint64_t last)
{
    cJSON *doc = wex_tool_layout_document(e, first, last);
    char *text = doc ? cJSON_PrintUnformatted(doc) : NULL;

    if (doc == NULL) {
        fprintf(stderr, "wex layout: %s\n", wex_last_error());
        return CLI_EXIT_USAGE;
    }
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(doc);
    return CLI_EXIT_OK;
}

/* Rank r's expert slots (layout_slots.h). */
static int print_slots(wex_tool_engine *e, uint64_t r)
{
    cJSON *doc = wex_tool_layout_document(e, r, r);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(doc, "layout");

    if (doc == NULL) {
        fprintf(stderr, "wex layout: %s\n", wex_last_error());
        return CLI_EXIT_USAGE;
    }
    layout_print_slots(cJSON_GetArrayItem(ranks, 0));
    cJSON_Delete(doc);
    return CLI_EXIT_OK;
}

static int describe_all(wex_tool_engine *e, const layout_args *a,
                        const wex_model *model)
{
    uint64_t ranks = wex_tool_engine_ranks(e);
    uint64_t first = a->has_rank ? a->rank : 0;
    uint64_t last = a->has_rank ? a->rank : ranks - 1;
    uint64_t total = 0;
    wex_tool_model_info m;
    int rc = CLI_EXIT_OK;

    if (a->json)
        return print_document(e, first, last);
    wex_tool_model_get_info(model, &m);
    printf("model   %s: %llu tensors, %llu bytes\n", m.architecture,
           (unsigned long long)m.count, (unsigned long long)m.total_bytes);
    printf("engine  %s: %llu ranks\n", a->engine, (unsigned long long)ranks);
    for (uint64_t r = first; r <= last && rc == CLI_EXIT_OK; r++) {
        wex_tool_layout *l;
        wex_tool_layout_info info;
        if (wex_tool_engine_describe(e, r, &l) != WEX_OK) {
            fprintf(stderr, "wex layout: %s\n", wex_last_error());
            rc = CLI_EXIT_USAGE;
            continue;
        }
        wex_tool_layout_get_info(l, &info);
        printf("rank %-5llu %zu tensors, %zu pieces, %llu bytes\n",
               (unsigned long long)r, info.tensor_count, info.piece_count,
               (unsigned long long)info.bytes);
        total += info.bytes;
        wex_tool_layout_free(l);
        if (a->slots)
            rc = print_slots(e, r);
    }
    if (rc == CLI_EXIT_OK && !a->has_rank)
        printf("total   %llu bytes held, %.3fx the model\n",
               (unsigned long long)total,
               m.total_bytes ? (double)total / (double)m.total_bytes : 0.0);
    return rc;
}

int cmd_layout(int argc, char **argv)
{
    cJSON *parallel = NULL, *options = NULL;
    wex_tool_registry *r = NULL;
    wex_model *model = NULL;
    wex_tool_engine *e = NULL;
    layout_args a;
    int rc;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if ((rc = parse_args(argc, argv, &a)) >= 0)
        return rc;
    rc = CLI_EXIT_USAGE;
    parallel = a.parallel ? parse_parallel(a.parallel) : cJSON_CreateObject();
    if (parallel == NULL || check_parallel(parallel) != 0)
        goto out;
    if (a.options && (options = cJSON_Parse(a.options)) == NULL) {
        fprintf(stderr, "wex layout: --options: invalid JSON\n");
        goto out;
    }
    a.slots = cJSON_HasObjectItem(options, "redundant_experts") ||
              cJSON_HasObjectItem(options, "expert_placement");
    if (wex_tool_model_load(a.model, &model) != WEX_OK ||
        wex_tool_registry_scan(&r) != WEX_OK ||
        wex_tool_engine_open(r, a.engine, model, parallel, options, &e) !=
            WEX_OK) {
        fprintf(stderr, "wex layout: %s\n", wex_last_error());
        goto out;
    }
    if (a.has_rank && a.rank >= wex_tool_engine_ranks(e)) {
        fprintf(stderr,
                "wex layout: --rank %llu: engine %s has ranks "
                "0..%llu\n",
                (unsigned long long)a.rank, a.engine,
                (unsigned long long)(wex_tool_engine_ranks(e) - 1));
        goto out;
    }
    rc = describe_all(e, &a, model);
out:
    wex_tool_engine_close(e);
    wex_tool_registry_free(r);
    wex_tool_model_free(model);
    cJSON_Delete(parallel);
    cJSON_Delete(options);
    return rc;
}
