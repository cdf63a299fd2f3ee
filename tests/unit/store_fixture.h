/* A rendezvous server per test on a free loopback port, and clients
 * that join it with the test's token (define TOKEN before including). */
#ifndef WEX_TEST_STORE_FIXTURE_H
#define WEX_TEST_STORE_FIXTURE_H

#include <check.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "error.h"
#include "store.h"

static wex__store_server *server;
static char address[64];

static void setup(void)
{
    ck_assert_msg(wex__store_serve("127.0.0.1:0", TOKEN, &server) == WEX_OK,
                  "%s", wex__last_error());
    snprintf(address, sizeof(address), "%s", wex__store_address(server));
    ck_assert_ptr_nonnull(strstr(address, "127.0.0.1:"));
}

static void teardown(void)
{
    wex__store_stop(server);
    server = NULL;
}

static wex__store_client *join(const char *who)
{
    wex__store_client *c = NULL;

    ck_assert_msg(wex__store_connect(address, TOKEN, who, 2.0, &c) == WEX_OK,
                  "%s", wex__last_error());
    return c;
}

static void pause_s(double s)
{
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};

    nanosleep(&ts, NULL);
}

/* Abandons a connection (what a killed process looks like) and waits
 * until the server has recorded the death: its reader notices the closed
 * socket on its own thread, and a client that says hello before then
 * takes the death for news (it may be the dead rank rejoining). */
static inline void abandon_and_wait(wex__store_client *gone)
{
    size_t deaths = wex__store_death_count(server);

    wex__store_abandon(gone);
    for (int i = 0; i < 5000 && wex__store_death_count(server) == deaths; i++)
        pause_s(0.001);
    ck_assert_msg(wex__store_death_count(server) > deaths,
                  "the server did not record the abandoned connection's "
                  "death within 5 s");
}

#endif /* WEX_TEST_STORE_FIXTURE_H */
