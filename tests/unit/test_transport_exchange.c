/* The job's rendezvous lent to a transport's connect (ABI 1.3): two ranks
 * in two processes meet through a real store over loopback, one
 * publishing what the other waits for; bad names, oversized values,
 * absent names and failing connects get their one-line errors. */
#include <check.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_run.h"
#include "error.h"
#include "job.h"

#define TOKEN "exchange-token"
#include "store_fixture.h"

#define ID_BYTES 128

extern char **environ;

static wex__job_config config;
static wex_transport_ops tops;
static struct wex_job job;
static wex_status (*probe)(const wex_transport_exchange *ex);

static wex_status probe_connect(wex_transport_ctx *ctx,
                                const wex_transport_exchange *ex)
{
    (void)ctx;
    return probe(ex);
}

/* A job on this process's rank: only what connecting a transport reads
 * (its store is the caller's to set). */
static void probe_job(void)
{
    memset(&job, 0, sizeof(job));
    memset(&tops, 0, sizeof(tops));
    memset(&config, 0, sizeof(config));
    config.transport.name = "probe";
    job.plan.job = &config;
    tops.struct_size = sizeof(tops);
    tops.connect = probe_connect;
    job.transport.ops = &tops;
}

static void open_rank(const char *who)
{
    probe_job();
    job.rendezvous.store = join(who);
}

static void id_of(unsigned char *id, unsigned seed)
{
    for (int i = 0; i < ID_BYTES; i++)
        id[i] = (unsigned char)(seed * 31u + (unsigned)i * 7u);
}

/* The leader draws an id and waits for every follower's answer (in its
 * own program: no Check assertion). */
static wex_status leader(const wex_transport_exchange *ex)
{
    unsigned char id[ID_BYTES], ack[ID_BYTES + 8];
    uint64_t len = 0;
    wex_status st;

    if (ex->struct_size < WEX_TRANSPORT_EXCHANGE_SIZE_1_3)
        return wex__error(WEX_ERR_ABI, "an exchange smaller than ABI 1.3's");
    id_of(id, (unsigned)getpid());
    st = ex->publish(ex->ctx, "uid", id, sizeof(id));
    if (st == WEX_OK)
        st = ex->fetch(ex->ctx, "ack.1", ack, sizeof(ack), &len);
    if (st != WEX_OK)
        return st;
    if (len != ID_BYTES || memcmp(ack, id, ID_BYTES) != 0)
        return wex__error(WEX_ERR_INVALID, "the follower answered another id");
    return WEX_OK;
}

static unsigned char fetched[ID_BYTES];

static wex_status follower(const wex_transport_exchange *ex)
{
    uint64_t len = 0;
    wex_status st = ex->fetch(ex->ctx, "uid", fetched, sizeof(fetched), &len);

    if (st == WEX_OK && len != ID_BYTES)
        return wex__error(WEX_ERR_INVALID, "uid of %llu bytes",
                          (unsigned long long)len);
    if (st == WEX_OK)
        st = ex->publish(ex->ctx, "ack.1", fetched, len);
    return st;
}

static const char *self; /* this program, started again as the leader */

/* The leader's process (argv: --leader ADDRESS): exec'd, not forked, so
 * it holds no lock another thread of the test held at fork time. */
static int leader_main(const char *at)
{
    wex__store_client *c = NULL;

    probe_job();
    probe = leader;
    if (wex__store_connect(at, TOKEN, "destination/0", 5.0, &c) != WEX_OK) {
        fprintf(stderr, "leader: %s\n", wex__last_error());
        return 1;
    }
    job.rendezvous.store = c;
    pause_s(0.2); /* the follower starts first and waits */
    if (wex__transport_connect(&job, 5.0) != WEX_OK) {
        fprintf(stderr, "leader: %s\n", wex__last_error());
        return 1;
    }
    wex__store_close(c);
    return 0;
}

START_TEST(ranks_in_two_processes_share_what_one_draws)
{
    char *argv[] = {(char *)self, "--leader", address, NULL};
    unsigned char expect[ID_BYTES];
    void *raw = NULL;
    size_t raw_len = 0;
    int status = 0;
    pid_t child;

    ck_assert_int_eq(posix_spawn(&child, self, NULL, NULL, argv, environ), 0);
    open_rank("source/0");
    probe = follower;
    ck_assert_msg(wex__transport_connect(&job, 5.0) == WEX_OK, "%s",
                  wex__last_error());
    ck_assert_int_eq(waitpid(child, &status, 0), child);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                  "the leader's connect failed (status %d)", status);
    id_of(expect, (unsigned)child);
    ck_assert_mem_eq(fetched, expect, ID_BYTES);
    /* kept in the transport's own namespace */
    ck_assert_int_eq(wex__store_get(job.rendezvous.store, "transport/probe/uid",
                                    1.0, &raw, &raw_len),
                     WEX_OK);
    ck_assert_uint_eq(raw_len, ID_BYTES);
    ck_assert_mem_eq(raw, expect, ID_BYTES);
    free(raw);
    wex__store_close(job.rendezvous.store);
}
END_TEST

static wex_status refusals(const wex_transport_exchange *ex)
{
    static unsigned char big[WEX_TRANSPORT_KEY_MAX + 1];
    char long_name[66];
    unsigned char buf[4];
    uint64_t len = 0;

    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    ck_assert_int_eq(ex->publish(ex->ctx, "", "v", 1), WEX_ERR_INVALID);
    ck_assert_int_eq(ex->publish(ex->ctx, "a/b", "v", 1), WEX_ERR_INVALID);
    ck_assert_str_eq(wex__last_error(),
                     "publish: the name "
                     "\"a/b\" is not 1-64 characters of [A-Za-z0-9_.-]");
    ck_assert_int_eq(ex->publish(ex->ctx, long_name, "v", 1), WEX_ERR_INVALID);
    ck_assert_int_eq(ex->fetch(ex->ctx, NULL, buf, 4, &len), WEX_ERR_INVALID);
    ck_assert_int_eq(ex->publish(ex->ctx, "big", big, sizeof(big)),
                     WEX_ERR_INVALID);
    ck_assert_str_eq(wex__last_error(), "publish big: 4097 "
                                        "bytes (at most 4096)");
    ck_assert_int_eq(ex->fetch(ex->ctx, "never", buf, 4, &len),
                     WEX_ERR_TIMEOUT);
    ck_assert_ptr_nonnull(strstr(wex__last_error(), "waiting for \"never\""));
    /* a value longer than the caller's room: cut, its length told */
    ck_assert_int_eq(ex->publish(ex->ctx, "six", "abcdef", 6), WEX_OK);
    ck_assert_int_eq(ex->fetch(ex->ctx, "six", buf, 4, &len), WEX_OK);
    ck_assert_uint_eq(len, 6);
    ck_assert_mem_eq(buf, "abcd", 4);
    /* published again: replaced */
    ck_assert_int_eq(ex->publish(ex->ctx, "six", "xy", 2), WEX_OK);
    ck_assert_int_eq(ex->fetch(ex->ctx, "six", buf, 4, &len), WEX_OK);
    ck_assert_uint_eq(len, 2);
    ck_assert_mem_eq(buf, "xy", 2);
    return WEX_OK;
}

START_TEST(bad_names_values_and_absent_names_are_refused)
{
    open_rank("source/0");
    probe = refusals;
    ck_assert_msg(wex__transport_connect(&job, 0.3) == WEX_OK, "%s",
                  wex__last_error());
    wex__store_close(job.rendezvous.store);
}
END_TEST

static wex_status fails_quietly(const wex_transport_exchange *ex)
{
    (void)ex;
    return WEX_ERR_PEER;
}

static wex_status fails_saying_why(const wex_transport_exchange *ex)
{
    (void)ex;
    return wex__error(WEX_ERR_TIMEOUT, "rank 3 did not join");
}

START_TEST(a_transport_without_connect_or_failing_it)
{
    open_rank("source/0");
    tops.connect = NULL;
    ck_assert_int_eq(wex__transport_connect(&job, 1.0), WEX_OK);
    tops.connect = probe_connect;
    probe = fails_quietly;
    ck_assert_int_eq(wex__transport_connect(&job, 1.0), WEX_ERR_PEER);
    ck_assert_str_eq(wex__last_error(),
                     "transport probe: failed without a message");
    probe = fails_saying_why;
    ck_assert_int_eq(wex__transport_connect(&job, 1.0), WEX_ERR_TIMEOUT);
    ck_assert_str_eq(wex__last_error(), "transport probe: rank 3 did not join");
    wex__store_close(job.rendezvous.store);
}
END_TEST

int main(int argc, char **argv)
{
    Suite *s;
    TCase *t;

    if (argc == 3 && strcmp(argv[1], "--leader") == 0)
        return leader_main(argv[2]);
    self = argv[0];
    s = suite_create("transport_exchange");
    t = tcase_create("exchange");
    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 30);
    tcase_add_test(t, ranks_in_two_processes_share_what_one_draws);
    tcase_add_test(t, bad_names_values_and_absent_names_are_refused);
    tcase_add_test(t, a_transport_without_connect_or_failing_it);
    suite_add_tcase(s, t);
    return wex_test_run(s);
}
