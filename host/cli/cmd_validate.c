/* wex validate: check a job config without running anything. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "error.h"
#include "job_config.h"
#include "registry.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex validate JOB.json...\n"
            "\n"
            "Checks each job config against the job schema "
            "(schemas/job.schema.json),\nchecks that the engines, policy "
            "and transport it names exist, and\nvalidates each one's "
            "options against the schema in that plugin's\nmanifest. "
            "Prints 'FILE: valid', or one line per problem:\n"
            "  FILE: JSON-POINTER: what was expected\n"
            "\n"
            "Exit status: 0 when every file is valid, 2 otherwise.\n");
}

int wex_cmd_validate(int argc, char **argv)
{
    wex__registry *r = NULL;
    int bad = 0;

    if (wex_cli_wants_help(argc, argv)) {
        usage(stdout);
        return WEX_EXIT_OK;
    }
    if (argc < 2) {
        usage(stderr);
        return WEX_EXIT_USAGE;
    }
    if (wex__registry_scan(&r) != WEX_OK) {
        fprintf(stderr, "wex validate: %s\n", wex__last_error());
        return WEX_EXIT_FAILED;
    }
    for (int i = 1; i < argc; i++) {
        wex__job_config *config = NULL;
        char *all = NULL;

        if (wex__job_config_load(argv[i], r, 0, &config, &all) == WEX_OK) {
            printf("%s: valid\n", argv[i]);
            wex__job_config_free(config);
        } else {
            fputs(all ? all : wex__last_error(), stderr);
            if (all == NULL)
                fputc('\n', stderr);
            bad++;
        }
        free(all);
    }
    wex__registry_free(r);
    return bad ? WEX_EXIT_USAGE : WEX_EXIT_OK;
}
