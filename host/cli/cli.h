/* The `wex` command line: one file per subcommand. */
#ifndef WEX_CLI_H
#define WEX_CLI_H

#include <stdio.h>

/* Exit codes shared by every subcommand. */
#define WEX_EXIT_OK 0
#define WEX_EXIT_FAILED 1 /* the work itself failed */
#define WEX_EXIT_USAGE 2  /* bad arguments or invalid input */

typedef struct wex_cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} wex_cli_command;

int wex_cmd_plugins(int argc, char **argv);
int wex_cmd_validate(int argc, char **argv);
int wex_cmd_layout(int argc, char **argv);
int wex_cmd_plan(int argc, char **argv);
int wex_cmd_store(int argc, char **argv);
int wex_cmd_run(int argc, char **argv);
int wex_cmd_conformance(int argc, char **argv);

/* True when argv holds -h or --help. */
int wex_cli_wants_help(int argc, char **argv);

#endif /* WEX_CLI_H */
