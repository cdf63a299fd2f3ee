/*
 * The command line of every subcommand, read the same way: options
 * through getopt_long, numbers through one range-checked parser, and
 * every mistake told in one line on stderr that names the command and
 * the option, after which the command exits with CLI_EXIT_USAGE.
 */
#ifndef CLI_ARGS_H
#define CLI_ARGS_H

#include <getopt.h>
#include <stdint.h>
#include <stdio.h>

#include <wex/abi.h>

/* A rank number: no side has more than UINT32_MAX ranks (layout/side.c). */
#define CLI_RANK_MAX (UINT32_MAX - 1)

/* What cli_next returns besides the `val` of an option it read. */
#define CLI_DONE (-1)    /* every argument has been read */
#define CLI_POSITIONAL 1 /* an argument that is not an option: in p->arg */
#define CLI_BAD '?'      /* a mistake, already told on stderr */

/* Values of options that have no short form start here, clear of every
 * character a short option could be. */
#define CLI_LONG_ONLY 256

typedef struct cli_parser {
    const char *command; /* "wex run": what every message starts with */
    int argc;
    char **argv;
    const struct option *options; /* ends with an all-zero entry */
    char shortopts[64];
    int rest;        /* after "--": the next argument to hand out */
    const char *arg; /* the option's value, or the positional argument */
    char name[64];   /* the option as messages call it, e.g. "--steps" */
} cli_parser;

/* True when argv (before any "--") holds -h or --help: every command
 * shows its help for that, whatever else the line holds. */
int cli_wants_help(int argc, char **argv);

/* Starts reading argv[1..] (argv[0] is the command's name). `shortopts`
 * lists the short forms as getopt wants them ("v", "" for none).
 * Options and positional arguments come back in the order written. */
void cli_parser_init(cli_parser *p, const char *command, int argc, char **argv,
                     const char *shortopts, const struct option *options);

/* The next option's `val` (its value, if it takes one, in p->arg and its
 * name in p->name), CLI_POSITIONAL, CLI_DONE, or CLI_BAD for an unknown
 * or ambiguous option, a missing value or a value given to an option
 * that takes none. */
int cli_next(cli_parser *p);

/* For an option that takes two values (--worker SIDE RANK): the
 * argument after the one in p->arg, or NULL (told) when there is none. */
const char *cli_second_value(cli_parser *p, const char *what);

/* What a command's option switch does with every value it has no case
 * of its own for: 'h' prints `usage` to stdout (CLI_EXIT_OK); a
 * positional argument is one too many and a mistake cli_next has told
 * already is just that (CLI_EXIT_USAGE, from cli.h). */
int cli_other_option(const cli_parser *p, int c, void (*usage)(FILE *out));

/* Prints "COMMAND: MESSAGE" as one line; returns CLI_BAD. */
int cli_error(const char *command, const char *fmt, ...) WEX_PRINTF(2, 3);

/* Tells that positional argument p->arg is one too many; CLI_BAD. */
int cli_unexpected(const cli_parser *p);

/* Parses `text` as a decimal integer in [min, max]. On anything else
 * (empty, not a number, trailing characters, a sign, overflow, out of
 * range) prints one line naming the option and the range, e.g.
 *   wex run: --steps: expected an integer from 1 to 1000000, got "abc"
 * and returns -1; `option` says which option (or part of one) it is. */
int cli_parse_u64(const char *command, const char *option, const char *text,
                  uint64_t min, uint64_t max, uint64_t *out);

/* Seconds: a decimal number greater than 0 and at most `max`; told the
 * same way as cli_parse_u64 otherwise. */
int cli_parse_seconds(const char *command, const char *option, const char *text,
                      double max, double *out);

/* A fraction: a decimal number from 0 to 1. */
int cli_parse_fraction(const char *command, const char *option,
                       const char *text, double *out);

/* The value of the option cli_next just returned, through the parsers
 * above. */
int cli_u64(const cli_parser *p, uint64_t min, uint64_t max, uint64_t *out);
int cli_seconds(const cli_parser *p, double max, double *out);
int cli_fraction(const cli_parser *p, double *out);

#endif /* CLI_ARGS_H */
