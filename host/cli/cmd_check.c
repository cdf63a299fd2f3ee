/* wex check: a checkpoint directory against a model's catalog. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "checkpoint.h"
#include "cli.h"
#include "cli_args.h"
#include "error.h"

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
    wex__checkpoint ck;
    uint64_t bytes = 0, told = 0;
    cli_parser p;
    int c;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cli_parser_init(&p, "wex check", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_MODEL:
            model_path = p.arg;
            break;
        case CLI_POSITIONAL:
            if (dir == NULL) {
                dir = p.arg;
                break;
            }
            return cli_other_option(&p, c, usage); /* one directory */
        default:
            return cli_other_option(&p, c, usage);
        }
    }
    if (dir == NULL || model_path == NULL) {
        fprintf(stderr, "wex check: needs a checkpoint directory and "
                        "--model CONFIG.json (see 'wex check --help')\n");
        return CLI_EXIT_USAGE;
    }
    if (wex__model_load(model_path, &model) != WEX_OK) {
        fprintf(stderr, "wex check: %s\n", wex__last_error());
        return CLI_EXIT_USAGE;
    }
    if (wex__checkpoint_open(dir, model, print_line, &told, &ck) != WEX_OK) {
        /* mismatches were each told already; a file that could not be
         * read or parsed is told here */
        if (told == 0)
            fprintf(stderr, "%s\n", wex__last_error());
        wex__model_free(model);
        return CLI_EXIT_USAGE;
    }
    for (uint64_t t = 0; t < model->count; t++)
        bytes += model->tensors[t].bytes;
    printf("%s: %zu file%s, the %" PRIu64 " tensors of %s (%" PRIu64
           " bytes) with their dtypes and shapes",
           dir, ck.nfiles, ck.nfiles == 1 ? "" : "s", model->count,
           model->architecture, bytes);
    if (ck.extra > 0)
        printf("; %" PRIu64 " other tensor%s skipped", ck.extra,
               ck.extra == 1 ? "" : "s");
    printf("\n");
    wex__checkpoint_close(&ck);
    wex__model_free(model);
    return CLI_EXIT_OK;
}
