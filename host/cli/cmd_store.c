/* wex store: serve a job's rendezvous store until told to stop. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <wex/wex.h>

#include "cli.h"
#include "cli_args.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex store --token TOKEN [--listen HOST:PORT]\n"
            "\n"
            "Serves the rendezvous store every rank of a job meets at (set "
            "the job\nconfig's rendezvous address to it), until SIGINT or "
            "SIGTERM. Prints\n\"listening on HOST:PORT\" once it is "
            "serving.\n"
            "\n"
            "  --token TOKEN      the job's token; every client must "
            "present it\n"
            "  --listen HOST:PORT where to listen (default 127.0.0.1:0: "
            "loopback, a\n"
            "                     free port); an empty HOST is loopback\n");
}

int cmd_store(int argc, char **argv)
{
    enum { OPT_LISTEN = CLI_LONG_ONLY, OPT_TOKEN };
    static const struct option options[] = {
        {"listen", required_argument, NULL, OPT_LISTEN},
        {"token", required_argument, NULL, OPT_TOKEN},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    const char *listen = "127.0.0.1:0", *token = NULL;
    wex_store *store;
    cli_parser p;
    sigset_t stop;
    int sig, c;

    if (cli_wants_help(argc, argv)) {
        usage(stdout);
        return CLI_EXIT_OK;
    }
    cli_parser_init(&p, "wex store", argc, argv, "h", options);
    while ((c = cli_next(&p)) != CLI_DONE) {
        switch (c) {
        case OPT_LISTEN: listen = p.arg; break;
        case OPT_TOKEN: token = p.arg; break;
        default: return cli_other_option(&p, c, usage);
        }
    }
    if (token == NULL || token[0] == '\0') {
        fprintf(stderr, "wex store: --token TOKEN is required: clients "
                        "present it to join\n");
        return CLI_EXIT_USAGE;
    }
    /* Blocked before the server starts its threads, so they inherit the
     * mask and the signals reach sigwait below. A shell starts background
     * jobs with SIGINT ignored, and sigwait on an ignored signal is
     * unspecified: restore the default first. */
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    wex_status st = wex_store_open(listen, token, &store);
    if (st != WEX_OK) {
        fprintf(stderr, "wex store: %s\n", wex_last_error());
        return st == WEX_ERR_INVALID ? CLI_EXIT_USAGE : CLI_EXIT_FAILED;
    }
    printf("listening on %s\n", wex_store_address(store));
    fflush(stdout);
    while (sigwait(&stop, &sig) != 0)
        ;
    wex_store_close(store);
    return CLI_EXIT_OK;
}
