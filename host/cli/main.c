/* wex: the command, and which subcommand runs. */
#include <stdio.h>
#include <string.h>

#include <wex/abi.h>

#include "cli.h"

static const cli_command commands[] = {
    {"plugins", "list the plugins on the search path and whether they load",
     cmd_plugins},
    {"validate", "check a job config and its plugins' options", cmd_validate},
    {"layout", "show how an engine lays a model out over its ranks",
     cmd_layout},
    {"plan", "plan who sends which bytes to whom, and predict the step time",
     cmd_plan},
    {"run", "run a job's ranks on this machine and sync synthetic weights",
     cmd_run},
    {"store", "serve a job's rendezvous store (where its ranks meet)",
     cmd_store},
    {"check", "check a Hugging Face checkpoint against a model's tensors",
     cmd_check},
    {"conformance", "check a plugin against the plugin contract",
     cmd_conformance},
};

#define COMMAND_COUNT (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *out)
{
    fprintf(out, "usage: wex [--help] [--version] COMMAND [ARGS...]\n"
                 "\n"
                 "wex moves model weights from a training job into running "
                 "inference\nengines, for reinforcement-learning loops.\n"
                 "\n"
                 "Commands:\n");
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        fprintf(out, "  %-11s %s\n", commands[i].name, commands[i].summary);
    fprintf(out, "\n"
                 "Run 'wex COMMAND --help' for what a command takes.\n"
                 "\n"
                 "Environment:\n"
                 "  WEX_PLUGIN_PATH       directories searched for plugins "
                 "first (colon-separated)\n"
                 "  WEX_PLUGIN_MANIFESTS  only these manifest files or "
                 "directories (colon-separated)\n"
                 "  WEX_LOG_LEVEL         error, warn (default), info, debug "
                 "or trace\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
        strcmp(argv[1], "help") == 0) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0) {
        printf("wex %s (plugin ABI %u.%u)\n", WEX_VERSION_STRING,
               WEX_VERSION_MAJOR(WEX_ABI_CURRENT),
               WEX_VERSION_MINOR(WEX_ABI_CURRENT));
        return CLI_EXIT_OK;
    }
    for (size_t i = 0; i < COMMAND_COUNT; i++)
        if (strcmp(argv[1], commands[i].name) == 0)
            return commands[i].run(argc - 1, argv + 1);
    fprintf(stderr, "wex: unknown command '%s' (see 'wex --help')\n", argv[1]);
    return CLI_EXIT_USAGE;
}
