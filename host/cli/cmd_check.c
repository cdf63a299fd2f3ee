/* wex check: a checkpoint directory against a model's catalog. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include <wex/wex.h>

#include "cli.h"
#include "cli_args.h"
#include "tool_checkpoint.h"
#include "tool_model.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex check DIR --model CONFIG.json\n"
            "\n"
            "Checks the Hugging Face checkpoint in DIR (model.safetensors."
            "index.json and\nits shards, or model.safetensors) against the "
            "canonical tensors of the\nmodel CONFIG.json describes: every "
            "file's header (bounds, dtypes, offsets,\noverlaps), and every "
            "tensor present with its dtype and shape. Prints what\nit "
            "holds and exits 0 when it matches; otherwise one line per "
            "mismatch,\n\"FILE: tensor NAME: expected ..., got ...\", and "
            "exit 2. Tensors the model\ndoes not have are counted and "
            "skipped (WEX_LOG_LEVEL=info lists them).\n"
            "\n"
            "  --model CONFIG.json  the model's config.json\n");
}

static void print_line(void *arg, const char *line)
{
    (*(uint64_t *)arg)++;
    fprintf(stderr, "%s\n", line);
}

int cmd_check(int argc, char **argv)
{
    enum { OPT_MODEL = CLI_LONG_ONLY };
    static const struct option options[] = {
        {"model", required_argument, NULL, OPT_MODEL},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *model_path = NULL, *dir = NULL;
    wex_model *model = NULL;
    wex_tool_checkpoint *ck;
    wex_tool_model_info info;
    uint64_t told = 0;
    size_t files;
    cli_parser p;
    int c;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cli_parser_init(&p, "wex check", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_MODEL: model_path = p.arg; break;
        case CLI_POSITIONAL:
            if (dir == NULL) {
                dir = p.arg;
                break;
            }
            return cli_other_option(&p, c, usage); /* one directory */
        default: return cli_other_option(&p, c, usage);
        }
    }
    if (dir == NULL || model_path == NULL) {
        fprintf(stderr, "wex check: needs a checkpoint directory and "
                        "--model CONFIG.json (see 'wex check --help')\n");
        return CLI_EXIT_USAGE;
    }
    if (wex_tool_model_load(model_path, &model) != WEX_OK) {
        fprintf(stderr, "wex check: %s\n", wex_last_error());
        return CLI_EXIT_USAGE;
    }
    if (wex_tool_checkpoint_open(dir, model, print_line, &told, &ck) !=
        WEX_OK) {
        /* mismatches were each told already; a file that could not be
         * read or parsed is told here */
        if (told == 0)
            fprintf(stderr, "%s\n", wex_last_error());
        wex_tool_model_free(model);
        return CLI_EXIT_USAGE;
    }
    wex_tool_model_get_info(model, &info);
    files = wex_tool_checkpoint_files(ck);
    printf("%s: %zu file%s, the %" PRIu64 " tensors of %s (%" PRIu64
           " bytes) with their dtypes and shapes",
           dir, files, files == 1 ? "" : "s", info.count, info.architecture,
           info.total_bytes);
    if (wex_tool_checkpoint_skipped(ck) > 0)
        printf("; %" PRIu64 " other tensor%s skipped",
               wex_tool_checkpoint_skipped(ck),
               wex_tool_checkpoint_skipped(ck) == 1 ? "" : "s");
    printf("\n");
    wex_tool_checkpoint_close(ck);
    wex_tool_model_free(model);
    return CLI_EXIT_OK;
}
