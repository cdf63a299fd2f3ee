/* The `wex` command line: one file per subcommand. */
#ifndef CLI_H
#define CLI_H

/* Exit codes shared by every subcommand. */
#define CLI_EXIT_OK 0
#define CLI_EXIT_FAILED 1 /* the work itself failed */
#define CLI_EXIT_USAGE 2  /* bad arguments or invalid input */

typedef struct cli_command {
    const char *name;
    const char *summary;
    int (*run)(int argc, char **argv); /* argv[0] is the command name */
} cli_command;

int cmd_plugins(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_layout(int argc, char **argv);
int cmd_plan(int argc, char **argv);
int cmd_store(int argc, char **argv);
int cmd_check(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_conformance(int argc, char **argv);

#endif /* CLI_H */
