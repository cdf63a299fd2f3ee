/*
 * A job's ranks as processes, for the tests that run a transport plugin
 * between them (test_device_nccl, test_device_ipc): each rank forked
 * before the rendezvous serves, told its address through a pipe, running
 * the test's rank_main; a job run to its end, what each destination
 * holds read back, every rank's exit checked.
 */
#ifndef WEX_TEST_DEVICE_FORKS_H
#define WEX_TEST_DEVICE_FORKS_H

#include <stdint.h>
#include <sys/types.h>
#include <unistd.h>

#include "device_ranks.h"

#define MOST 8

/* What a forked rank runs: job `text` as rank `rank` of `side`, its
 * tensors in memory of `kind`; a destination writes what it holds to
 * `out`. Its exit status. */
typedef int (*rank_main_fn)(const char *text, uint32_t side, uint64_t rank,
                            const char *address, uint32_t kind, int out);

/* Set before forking: where the first source writes a byte once its
 * first step committed (-1: none), where the ranks' stderr goes (-1: the
 * test's), and the rank (its index in start_ranks, sources first) that is
 * to die (-1: none; every other rank sees -1). */
static int started_fd = -1;
static int log_fd = -1;
static int dying = -1;

/* Forks `sources` sources and two destinations of job `text`, each
 * running `rank_main`, their tensors in memory of `kind`; rank i writes
 * to fds[i][1]. Returns the rendezvous, serving once every rank is
 * forked. */
static wex_store *start_ranks(rank_main_fn rank_main, const char *text,
                              int sources, uint32_t kind, pid_t *pids,
                              int (*fds)[2])
{
    int ranks = sources + 2, addr[MOST][2];

    for (int i = 0; i < ranks; i++) {
        int source = i < sources;
        if (pipe(fds[i]) != 0 || pipe(addr[i]) != 0)
            return NULL;
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[i][0]);
            close(addr[i][1]);
            if (started_fd >= 0 && i != 0) {
                close(started_fd);
                started_fd = -1; /* only the source tells */
            }
            if (log_fd >= 0)
                dup2(log_fd, 2);
            if (dying != i)
                dying = -1;
            _exit(rank_main(text,
                            source ? WEX_SIDE_SOURCE : WEX_SIDE_DESTINATION,
                            (uint64_t)(source ? i : i - sources),
                            await_address(addr[i][0]), kind, fds[i][1]));
        }
        close(fds[i][1]);
        close(addr[i][0]);
    }
    return serve(ranks, addr);
}

/* Runs job `text` to its end, each rank running `rank_main`; held[d]:
 * what destination d holds. */
static void run_job(rank_main_fn rank_main, const char *text, int sources,
                    uint32_t kind, uint64_t held[2])
{
    int ranks = sources + 2, fds[MOST][2];
    pid_t pids[MOST];
    wex_store *store;

    if (ranks > MOST)
        return;
    store = start_ranks(rank_main, text, sources, kind, pids, fds);
    for (int i = sources; i < ranks; i++) {
        EXPECT(read(fds[i][0], &held[i - sources], sizeof(held[0])) ==
                   sizeof(held[0]),
               "destination %d reported nothing", i - sources);
        close(fds[i][0]);
    }
    for (int i = 0; i < sources; i++)
        close(fds[i][0]);
    expect_clean_exits(pids, sources, ranks);
    wex_store_close(store);
}

#endif /* WEX_TEST_DEVICE_FORKS_H */
