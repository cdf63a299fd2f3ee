/* wex validate: check a job config without running anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "cli.h"
#include "cli_args.h"
#include "tool_plan.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex validate JOB.json...\n"
            "\n"
            "Checks each job config against the job schema "
            "(schemas/job.schema.json),\nchecks that the engines, policy "
            "and transport it names exist, validates each one's\noptions "
            "against the schema in that plugin's manifest, then loads the\n"
            "model config and lays out both sides with their engines and "
            "places\nthem on hosts, as 'wex plan' does (without planning), "
            "within the\nsize limits of docs/limits.md. "
            "Prints 'FILE: valid', or one line per problem:\n"
            "  FILE: JSON-POINTER: what was expected\n"
            "\n"
            "Exit status: 0 when every file is valid, 2 otherwise.\n");
}

int cmd_validate(int argc, char **argv)
{
    static const struct option options[] = {{"help", no_argument, NULL, 'h'},
                                            {NULL, 0, NULL, 0}};
    wex_tool_registry *r = NULL;
    const char **files = NULL;
    int bad = 0, count = 0, c, rc = CLI_EXIT_USAGE;
    cli_parser p;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    files = calloc((size_t)argc, sizeof(*files));
    if (files == NULL) {
        fprintf(stderr, "wex validate: out of memory\n");
        rc = CLI_EXIT_FAILED;
        goto out;
    }
    cli_parser_init(&p, "wex validate", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        if (c == 'h') {
            usage(stdout);
            rc = CLI_EXIT_OK;
            goto out;
        }
        if (c != CLI_POSITIONAL)
            goto out;
        files[count++] = p.arg;
    }
    if (count == 0) {
        cli_error(p.command, "no job file (see '%s --help')", p.command);
        goto out;
    }
    if (wex_tool_registry_scan(&r) != WEX_OK) {
        fprintf(stderr, "wex validate: %s\n", wex_last_error());
        rc = CLI_EXIT_FAILED;
        goto out;
    }
    for (int i = 0; i < count; i++) {
        char *all = NULL;

        if (wex_tool_job_check(r, files[i], &all) == WEX_OK) {
            printf("%s: valid\n", files[i]);
        } else {
            fputs(all ? all : wex_last_error(), stderr);
            if (all == NULL)
                fputc('\n', stderr);
            bad++;
        }
        free(all);
    }
    rc = bad ? CLI_EXIT_USAGE : CLI_EXIT_OK;
out:
    wex_tool_registry_free(r);
    free(files);
    return rc;
}
