/* wex conformance: put one plugin through the plugin contract's checks:
 * the command line here, finding the plugin in conformance_find.c, the
 * run and its report in conformance_run.c. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "cli_args.h"
#include "conformance.h"
#include "tool_json.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex conformance PLUGIN [--json] [--verbose] "
            "[--models DIR]\n"
            "                       [--options JSON] [--timeout S] "
            "[--deadline S]\n"
            "\n"
            "Puts one plugin through the numbered checks of the plugin "
            "contract\n(docs/plugins.md, docs/conformance.md) and prints "
            "PASS, FAIL or SKIP\nfor each, then a summary. PLUGIN is a "
            "manifest (.json), a library with\nits manifest beside it, or "
            "the name of a plugin on the search path\n(KIND/NAME when "
            "names collide). Plugin code only runs in child\nprocesses: a "
            "crash or a hang fails the check, not the kit.\n"
            "\n"
            "  --json        one JSON document on stdout\n"
            "  --verbose     details for passing checks too\n"
            "  --models DIR  where %s is (default: $WEX_MODELS_DIR,\n"
            "                the install's share/wex/models, the source "
            "tree's\n                samples/models, ./samples/models)\n"
            "  --options J   the plugin's options (JSON object) for its "
            "contexts\n                (default: none, as a job without "
            "options)\n"
            "  --timeout S   limit for each check process (default 120)\n"
            "  --deadline S  C20: how long a put + flush to a killed peer "
            "may take\n                (default 15)\n"
            "\n"
            "Exit status: 0 when no check fails, 1 when one does, 2 for "
            "bad arguments.\n"
            "\n"
            "Checks:\n",
            CONF_MODEL_FILE);
    for (int i = 0; i < CONF_LAST; i++) {
        const conf_check_info *c = &conf_checks[i];
        const char *p = c->help;
        int col = 6, fresh = 1;

        fprintf(out, "  C%02d %s\n      enforces: %s\n      ", c->id, c->title,
                c->rule);
        /* the explanation, wrapped at 78 columns */
        while (*p) {
            const char *sp = strchr(p, ' ');
            int len = sp ? (int)(sp - p) : (int)strlen(p);
            if (!fresh && col + 1 + len > 78) {
                fprintf(out, "\n      ");
                col = 6;
                fresh = 1;
            }
            if (!fresh) {
                fputc(' ', out);
                col++;
            }
            fprintf(out, "%.*s", len, p);
            col += len;
            fresh = 0;
            p += len;
            while (*p == ' ')
                p++;
        }
        fputc('\n', out);
    }
}

/* The most seconds --timeout and --deadline take: a day. */
#define SECONDS_MAX 86400

typedef struct conf_args {
    const char *plugin; /* the PLUGIN argument */
    const char *models, *options;
    int json, verbose;
} conf_args;

/* -1 to go on, or the exit status to return at once (--help, a
 * mistake). */
static int parse_args(int argc, char **argv, conf_args *a, conf_ctx *ctx)
{
    enum {
        OPT_JSON = CLI_LONG_ONLY,
        OPT_MODELS,
        OPT_OPTIONS,
        OPT_TIMEOUT,
        OPT_DEADLINE
    };
    static const struct option options[] = {
        {"json", no_argument, NULL, OPT_JSON},
        {"verbose", no_argument, NULL, 'v'},
        {"models", required_argument, NULL, OPT_MODELS},
        {"options", required_argument, NULL, OPT_OPTIONS},
        {"timeout", required_argument, NULL, OPT_TIMEOUT},
        {"deadline", required_argument, NULL, OPT_DEADLINE},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    cli_parser p;
    int c;

    memset(a, 0, sizeof(*a));
    cli_parser_init(&p, "wex conformance", argc, argv, "hv", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_JSON: a->json = 1; break;
        case 'v': a->verbose = 1; break;
        case OPT_MODELS: a->models = p.arg; break;
        case OPT_OPTIONS: a->options = p.arg; break;
        case OPT_TIMEOUT:
            if (cli_seconds(&p, SECONDS_MAX, &ctx->timeout_s) != 0)
                return CLI_EXIT_USAGE;
            break;
        case OPT_DEADLINE:
            if (cli_seconds(&p, SECONDS_MAX, &ctx->deadline_s) != 0)
                return CLI_EXIT_USAGE;
            break;
        case CLI_POSITIONAL:
            if (a->plugin != NULL) {
                cli_error(p.command,
                          "one plugin at a time ('%s', then "
                          "'%s')",
                          a->plugin, p.arg);
                return CLI_EXIT_USAGE;
            }
            a->plugin = p.arg;
            break;
        default: return cli_other_option(&p, c, usage);
        }
    }
    if (a->plugin == NULL) {
        cli_error(p.command, "no PLUGIN to check (see '%s --help')", p.command);
        return CLI_EXIT_USAGE;
    }
    return -1;
}

/* What the kind checks need, before any check runs: the sample model,
 * the hf engine, and --options valid for the plugin. -1 when told it
 * cannot be had. */
static int prepare(conf_ctx *ctx, const char *models)
{
    wex_tool_manifest *file;
    wex_tool_manifest_info m;
    int rc = 0;

    if (wex_tool_manifest_load(ctx->manifest_path, &file) != WEX_OK)
        return 0; /* C01 tells why */
    wex_tool_manifest_get_info(file, &m);
    if (m.kind == WEX_KIND_ENGINE || m.kind == WEX_KIND_POLICY) {
        ctx->model_path = conf_find_model(models);
        if (ctx->model_path == NULL) {
            fprintf(stderr,
                    "wex conformance: cannot find %s%s%s; pass "
                    "--models DIR (the source tree's "
                    "samples/models)\n",
                    CONF_MODEL_FILE, models ? " in " : "",
                    models ? models : "");
            rc = -1;
            goto out;
        }
    }
    if (m.kind == WEX_KIND_POLICY)
        ctx->hf_manifest = conf_hf_manifest();
    if (ctx->options != NULL && m.options_schema != NULL) {
        char *first = NULL;
        if (wex_tool_schema_validate(m.options_schema, ctx->options, &first) !=
            0) {
            fprintf(stderr, "wex conformance: --options: %s\n",
                    first ? first : "(root): cannot validate");
            rc = -1;
        }
        free(first);
    }
out:
    wex_tool_manifest_free(file);
    return rc;
}

int cmd_conformance(int argc, char **argv)
{
    cJSON *options = NULL;
    char err[1024];
    conf_args a;
    conf_ctx ctx;
    int rc;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    memset(&ctx, 0, sizeof(ctx));
    ctx.timeout_s = 120;
    ctx.deadline_s = 15;
    if ((rc = parse_args(argc, argv, &a, &ctx)) >= 0)
        return rc;
    rc = CLI_EXIT_USAGE;
    if (a.options != NULL) {
        options = cJSON_Parse(a.options);
        if (!cJSON_IsObject(options)) {
            fprintf(stderr,
                    "wex conformance: --options: expected a JSON "
                    "object, got '%s'\n",
                    a.options);
            goto out;
        }
        ctx.options = options;
    }
    ctx.manifest_path = conf_resolve_plugin(a.plugin, err, sizeof(err));
    if (ctx.manifest_path == NULL) {
        fprintf(stderr, "wex conformance: %s\n", err);
        goto out;
    }
    if (prepare(&ctx, a.models) != 0)
        goto out;
    conf_run_checks(&ctx);
    rc = conf_print(&ctx, a.plugin, a.json, a.verbose) ? CLI_EXIT_FAILED
                                                       : CLI_EXIT_OK;
out:
    wex_tool_manifest_free(ctx.manifest_file);
    free(ctx.manifest_path);
    free(ctx.model_path);
    free(ctx.hf_manifest);
    free(ctx.stray);
    cJSON_Delete(options);
    return rc;
}
