/* The rendezvous's step barrier (ARRIVE) and verdict gather (GATHER):
 * a real server, clients on threads of this process, deaths played by
 * abandoning a connection (what a killed process looks like to it). */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check_run.h"
#include "error.h"
#include "store.h"
#include "store_proto.h"

#define TOKEN "members-token"
#include "store_fixture.h"

/* One member arriving on its own thread. */
typedef struct member {
    char who[32];
    const char *key;
    int fail_fast;
    uint64_t sources, destinations;
    uint8_t optional[4];
    double timeout;
    pthread_t thread;
    /* out */
    wex_status st;
    char error[512];
    uint64_t *dead, dead_count;
    int missed; /* wex__store_missed after the arrival */
} member;

static void *arrive_main(void *arg)
{
    member *m = arg;
    wex__store_client *c = NULL;

    /* Generous: on a loaded 2-core machine a thread may wait seconds to
     * run; the tests that time out pass their own short timeouts. */
    m->st = wex__store_connect(address, TOKEN, m->who, 10.0, &c);
    if (m->st == WEX_OK)
        m->st = wex__store_arrive(c, m->key, m->fail_fast, m->sources,
                                  m->destinations, m->optional, m->timeout,
                                  &m->dead, &m->dead_count);
    if (c != NULL)
        m->missed = wex__store_missed(c);
    snprintf(m->error, sizeof(m->error), "%s", wex__last_error());
    wex__store_close(c);
    return NULL;
}

static void start_with(member *m, const char *who, const char *key,
                       uint64_t sources, uint64_t destinations,
                       uint8_t optional, int fail_fast, double timeout)
{
    memset(m, 0, sizeof(*m));
    m->fail_fast = fail_fast;
    snprintf(m->who, sizeof(m->who), "%s", who);
    m->key = key;
    m->sources = sources;
    m->destinations = destinations;
    m->optional[0] = optional;
    m->timeout = timeout;
    ck_assert_int_eq(pthread_create(&m->thread, NULL, arrive_main, m), 0);
}

static void start(member *m, const char *who, const char *key, uint64_t sources,
                  uint64_t destinations, uint8_t optional)
{
    start_with(m, who, key, sources, destinations, optional, 0, 20.0);
}

static void finish(member *m)
{
    pthread_join(m->thread, NULL);
}

START_TEST(barrier_waits_for_every_member)
{
    member m[3];
    double t0 = wex__now();

    start(&m[0], "source/0", "step/1/0/begin", 1, 2, 0);
    start(&m[1], "destination/0", "step/1/0/begin", 1, 2, 0);
    pause_s(0.3);
    start(&m[2], "destination/1", "step/1/0/begin", 1, 2, 0);
    for (int i = 0; i < 3; i++) {
        finish(&m[i]);
        ck_assert_msg(m[i].st == WEX_OK, "%s: %s", m[i].who, m[i].error);
        ck_assert_uint_eq(m[i].dead_count, 0);
        free(m[i].dead);
    }
    ck_assert_double_ge(wex__now() - t0, 0.3);
}
END_TEST

/* A source that comes back to a barrier everyone passed (a trainer
 * syncing step 1 again after 1 and 2) is refused at once, so it never
 * writes into destinations that have moved on; so is a second process
 * under the same name arriving after the step went on. */
START_TEST(passed_barrier_refuses_a_late_arrival)
{
    member m[2], again, other;
    double t0;

    start(&m[0], "source/0", "step/1/0/begin", 1, 1, 0);
    start(&m[1], "destination/0", "step/1/0/begin", 1, 1, 0);
    for (int i = 0; i < 2; i++) {
        finish(&m[i]);
        ck_assert_msg(m[i].st == WEX_OK, "%s: %s", m[i].who, m[i].error);
        ck_assert_int_eq(m[i].missed, 0);
        free(m[i].dead);
    }
    t0 = wex__now();
    start_with(&again, "source/0", "step/1/0/begin", 1, 1, 0, 0, 5.0);
    finish(&again);
    ck_assert_int_eq(again.st, WEX_ERR_PEER);
    ck_assert_int_eq(again.missed, 1);
    ck_assert_msg(strstr(again.error, "was passed without source/0") != NULL,
                  "%s", again.error);
    ck_assert_double_lt(wex__now() - t0, 2.0);
    start_with(&other, "destination/0", "step/1/0/begin", 1, 1, 0, 0, 5.0);
    finish(&other);
    ck_assert_int_ne(other.st, WEX_OK);
    ck_assert_msg(strstr(other.error, "replayed step") != NULL, "%s",
                  other.error);
}
END_TEST

/* Source 1 dies; the sources the job replicates may be left out, and
 * every member is told the same. */
START_TEST(dead_optional_source_is_left_out_for_everyone)
{
    wex__store_client *gone = join("source/1");
    member m[3];

    abandon_and_wait(gone);
    start(&m[0], "source/0", "step/2/0/begin", 2, 2, 0x3);
    start(&m[1], "destination/0", "step/2/0/begin", 2, 2, 0x3);
    start(&m[2], "destination/1", "step/2/0/begin", 2, 2, 0x3);
    for (int i = 0; i < 3; i++) {
        finish(&m[i]);
        ck_assert_msg(m[i].st == WEX_OK, "%s: %s", m[i].who, m[i].error);
        ck_assert_uint_eq(m[i].dead_count, 1);
        ck_assert_uint_eq(m[i].dead[0], 1);
        free(m[i].dead);
    }
}
END_TEST

/* Source 1 died and is back, but at a later step: the barrier leaves it
 * out rather than wait for it. */
START_TEST(rejoined_optional_source_elsewhere_is_left_out)
{
    wex__store_client *gone = join("source/1"), *back;
    member m[2];

    abandon_and_wait(gone);
    back = join("source/1");
    start(&m[0], "source/0", "step/6/1/begin", 2, 1, 0x3);
    start(&m[1], "destination/0", "step/6/1/begin", 2, 1, 0x3);
    for (int i = 0; i < 2; i++) {
        finish(&m[i]);
        ck_assert_msg(m[i].st == WEX_OK, "%s: %s", m[i].who, m[i].error);
        ck_assert_uint_eq(m[i].dead_count, 1);
        ck_assert_uint_eq(m[i].dead[0], 1);
        free(m[i].dead);
    }
    wex__store_close(back);
}
END_TEST

/* A dead destination is waited for: it rejoins, arrives, and the step
 * goes on; its death no longer fails the others' waits. */
START_TEST(dead_required_member_is_waited_for_until_it_rejoins)
{
    wex__store_client *gone = join("destination/1"), *c;
    member m[2], back;
    void *value = NULL;
    size_t len;

    abandon_and_wait(gone);
    start(&m[0], "source/0", "step/3/0/begin", 1, 2, 0x1);
    start(&m[1], "destination/0", "step/3/0/begin", 1, 2, 0x1);
    pause_s(0.4);
    start(&back, "destination/1", "step/3/0/begin", 1, 2, 0x1);
    finish(&back);
    ck_assert_msg(back.st == WEX_OK, "%s", back.error);
    free(back.dead);
    for (int i = 0; i < 2; i++) {
        finish(&m[i]);
        ck_assert_msg(m[i].st == WEX_OK, "%s: %s", m[i].who, m[i].error);
        ck_assert_uint_eq(m[i].dead_count, 0);
        free(m[i].dead);
    }
    /* A connection that acknowledged the death (a gather's answer does,
     * as a barrier's would; a barrier everyone passed refuses a late
     * arrival) waits on time alone. */
    c = join("source/0");
    {
        wex__store_gathered *none = NULL;
        ck_assert_int_eq(
            wex__store_gather(c, "none/", 0, "destination/", 10.0, &none),
            WEX_OK);
        free(none);
    }
    ck_assert_int_eq(wex__store_get(c, "never", 0.2, &value, &len),
                     WEX_ERR_TIMEOUT);
    wex__store_close(c);
}
END_TEST

START_TEST(fail_fast_names_the_dead_member_to_everyone)
{
    wex__store_client *gone = join("destination/1");
    member m[2];
    double t0 = wex__now();

    abandon_and_wait(gone);
    start_with(&m[0], "source/0", "step/4/1/begin", 1, 2, 0x1, 1, 5.0);
    start(&m[1], "destination/0", "step/4/1/begin", 1, 2, 0x1);
    for (int i = 0; i < 2; i++) {
        finish(&m[i]);
        if (i == 0)
            ck_assert_int_eq(m[i].st, WEX_ERR_PEER);
        if (m[i].st != WEX_OK)
            ck_assert_msg(strstr(m[i].error, "destination/1 (dead)") != NULL,
                          "%s", m[i].error);
        free(m[i].dead);
    }
    ck_assert_double_lt(wex__now() - t0, 3.0);
}
END_TEST

/* A death this connection has not heard of fails the barrier, for every
 * member, naming it; once reported, the next barrier waits for the
 * member to rejoin. */
START_TEST(news_of_a_death_fails_the_barrier_once)
{
    wex__store_client *s0 = join("source/0"), *d0 = join("destination/0");
    wex__store_client *gone = join("source/1"), *back;
    uint64_t *dead = NULL, n = 0;
    double t0;

    abandon_and_wait(gone);
    t0 = wex__now();
    ck_assert_int_eq(
        wex__store_arrive(s0, "step/8/0/begin", 0, 2, 1, NULL, 5.0, &dead, &n),
        WEX_ERR_PEER);
    ck_assert_msg(strstr(wex__last_error(), "source/1 (dead)") != NULL, "%s",
                  wex__last_error());
    ck_assert_int_eq(
        wex__store_arrive(d0, "step/8/0/begin", 0, 2, 1, NULL, 5.0, &dead, &n),
        WEX_ERR_PEER);
    ck_assert_double_lt(wex__now() - t0, 1.0);
    /* The next step: source 1 comes back while the others wait. */
    member m[2];
    start_with(&m[0], "source/0", "step/9/0/begin", 2, 1, 0, 0, 5.0);
    start_with(&m[1], "destination/0", "step/9/0/begin", 2, 1, 0, 0, 5.0);
    pause_s(0.3);
    back = join("source/1");
    ck_assert_msg(wex__store_arrive(back, "step/9/0/begin", 0, 2, 1, NULL, 5.0,
                                    &dead, &n) == WEX_OK,
                  "%s", wex__last_error());
    free(dead);
    for (int i = 0; i < 2; i++) {
        finish(&m[i]);
        ck_assert_msg(m[i].st == WEX_OK, "%s: %s", m[i].who, m[i].error);
        free(m[i].dead);
    }
    wex__store_close(back);
    wex__store_close(s0);
    wex__store_close(d0);
}
END_TEST

/* A member arriving with a connection of its own, on its own thread. */
typedef struct held {
    wex__store_client *c;
    const char *key;
    pthread_t thread;
    wex_status st;
    char error[512];
} held;

static void *held_main(void *arg)
{
    held *h = arg;
    uint64_t *dead = NULL, n = 0;

    h->st = wex__store_arrive(h->c, h->key, 0, 2, 1, NULL, 10.0, &dead, &n);
    snprintf(h->error, sizeof(h->error), "%s", wex__last_error());
    free(dead);
    return NULL;
}

/* Step `key` with source 0 and destination 0 on threads and `third` here:
 * every one passes. */
static void step_of_three(wex__store_client *s0, wex__store_client *d0,
                          wex__store_client *third, const char *key)
{
    held h[2] = {{.c = s0, .key = key}, {.c = d0, .key = key}};
    uint64_t *dead = NULL, n = 0;

    for (int i = 0; i < 2; i++)
        ck_assert_int_eq(pthread_create(&h[i].thread, NULL, held_main, &h[i]),
                         0);
    ck_assert_msg(
        wex__store_arrive(third, key, 0, 2, 1, NULL, 10.0, &dead, &n) == WEX_OK,
        "%s", wex__last_error());
    free(dead);
    for (int i = 0; i < 2; i++) {
        pthread_join(h[i].thread, NULL);
        ck_assert_msg(h[i].st == WEX_OK, "%s", h[i].error);
    }
}

/* Source 1 dies inside step 10 and connects again at once: it starts
 * over at a later step, so the step's retry fails at once naming it
 * instead of waiting for it to its timeout; the next step has it. */
START_TEST(retry_fails_for_a_source_back_from_a_death_in_the_step)
{
    wex__store_client *s0 = join("source/0"), *d0 = join("destination/0");
    wex__store_client *s1 = join("source/1"), *back;
    uint64_t *dead = NULL, n = 0;
    double t0;

    step_of_three(s0, d0, s1, "step/10/0/begin");
    abandon_and_wait(s1);
    back = join("source/1");
    t0 = wex__now();
    ck_assert_int_eq(
        wex__store_arrive(s0, "step/10/1/begin", 1, 2, 1, NULL, 5.0, &dead, &n),
        WEX_ERR_PEER);
    ck_assert_double_lt(wex__now() - t0, 2.0);
    ck_assert_msg(strstr(wex__last_error(), "source/1 (died in this step, "
                                            "back since)") != NULL,
                  "%s", wex__last_error());
    ck_assert_int_eq(
        wex__store_arrive(d0, "step/10/1/begin", 1, 2, 1, NULL, 5.0, &dead, &n),
        WEX_ERR_PEER);
    step_of_three(s0, d0, back, "step/11/0/begin");
    wex__store_close(back);
    wex__store_close(s0);
    wex__store_close(d0);
}
END_TEST

START_TEST(barrier_timeout_lists_who_is_missing)
{
    member m;

    start_with(&m, "destination/0", "step/5/0/begin", 2, 1, 0, 0, 0.5);
    finish(&m);
    ck_assert_int_eq(m.st, WEX_ERR_TIMEOUT);
    ck_assert_msg(strstr(m.error, "source/0, source/1") != NULL, "%s", m.error);
}
END_TEST

/* Destination 0 posts its verdict, destination 1 dies without one: every
 * reader gets the one verdict and learns the other will never come. */
START_TEST(gather_takes_a_death_as_the_answer)
{
    wex__store_client *d0 = join("destination/0"), *d1 = join("destination/1");
    wex__store_client *s0 = join("source/0");
    wex__store_gathered *g = NULL;
    double t0;

    ck_assert_int_eq(wex__store_set(d0, "verdict/0", "ok", 2), WEX_OK);
    t0 = wex__now();
    wex__store_abandon(d1);
    ck_assert_msg(
        wex__store_gather(s0, "verdict/", 2, "destination/", 5.0, &g) == WEX_OK,
        "%s", wex__last_error());
    ck_assert_double_lt(wex__now() - t0, 1.0);
    ck_assert_int_eq(g[0].present, 1);
    ck_assert_str_eq(g[0].value, "ok");
    ck_assert_int_eq(g[1].present, 0);
    ck_assert_uint_eq(g[1].len, 0);
    free(g);
    wex__store_close(d0);
    wex__store_close(s0);
}
END_TEST

START_TEST(gather_times_out_naming_the_missing_key)
{
    wex__store_client *c = join("source/0");
    wex__store_gathered *g = NULL;

    ck_assert_int_eq(wex__store_set(c, "v/0", "a", 1), WEX_OK);
    ck_assert_int_eq(wex__store_gather(c, "v/", 2, "destination/", 0.3, &g),
                     WEX_ERR_TIMEOUT);
    ck_assert_msg(strstr(wex__last_error(), "'v/1'") != NULL, "%s",
                  wex__last_error());
    wex__store_close(c);
}
END_TEST

/* A finished step's keys go, and only its: "step/1/" is not "step/10/". */
START_TEST(drop_removes_a_finished_steps_keys)
{
    wex__store_client *c = join("source/0");
    const char *keys[] = {"step/1/0/begin", "step/1/0/done/0/1", "step/10/0/x",
                          "step/2/0/begin", "mem/0/1"};
    int64_t dropped = -1;
    void *value = NULL;
    size_t len;

    for (size_t i = 0; i < 5; i++)
        ck_assert_int_eq(wex__store_set(c, keys[i], "v", 1), WEX_OK);
    ck_assert_uint_eq(wex__store_key_count(server), 5);
    ck_assert_int_eq(wex__store_drop(c, "step/1/", &dropped), WEX_OK);
    ck_assert_int_eq(dropped, 2);
    ck_assert_uint_eq(wex__store_key_count(server), 3);
    ck_assert_int_eq(wex__store_get(c, "step/1/0/begin", 0, &value, &len),
                     WEX_ERR_TIMEOUT);
    for (size_t i = 2; i < 5; i++) {
        ck_assert_int_eq(wex__store_get(c, keys[i], 0, &value, &len), WEX_OK);
        free(value);
    }
    ck_assert_int_eq(wex__store_drop(c, "nothing/", &dropped), WEX_OK);
    ck_assert_int_eq(dropped, 0);
    wex__store_close(c);
}
END_TEST

START_TEST(codec_refuses_malformed_member_requests)
{
    uint8_t arg[40] = {0}, *msg;
    size_t len;

    /* ARRIVE: 9 sources need a 2-byte bitmap. */
    wex__store_put_u64(arg + 16, 9);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_ARRIVE, "b", 1, arg,
                                               33, &msg, &len),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_ARRIVE, "b", 1, arg,
                                               34, &msg, &len),
                     WEX_OK);
    free(msg);
    wex__store_put_u64(arg + 24, (uint64_t)WEX__STORE_MEMBERS_MAX + 1);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_ARRIVE, "b", 1, arg,
                                               34, &msg, &len),
                     WEX_ERR_INVALID);
    /* GATHER: an owner prefix is required, without NUL bytes. */
    memset(arg, 0, sizeof(arg));
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_GATHER, "p", 1, arg,
                                               16, &msg, &len),
                     WEX_ERR_INVALID);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_GATHER, "p", 1, arg,
                                               18, &msg, &len),
                     WEX_ERR_INVALID);
    memcpy(arg + 16, "d/", 2);
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_GATHER, "p", 1, arg,
                                               18, &msg, &len),
                     WEX_OK);
    free(msg);
    /* DROP: a prefix, nothing else. */
    ck_assert_int_eq(
        wex__store_encode_request(WEX__STORE_DROP, "p", 1, arg, 1, &msg, &len),
        WEX_ERR_INVALID);
    ck_assert_int_eq(
        wex__store_encode_request(WEX__STORE_DROP, "", 0, NULL, 0, &msg, &len),
        WEX_ERR_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_members");
    TCase *t = tcase_create("members");

    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, barrier_waits_for_every_member);
    tcase_add_test(t, passed_barrier_refuses_a_late_arrival);
    tcase_add_test(t, dead_optional_source_is_left_out_for_everyone);
    tcase_add_test(t, rejoined_optional_source_elsewhere_is_left_out);
    tcase_add_test(t, dead_required_member_is_waited_for_until_it_rejoins);
    tcase_add_test(t, fail_fast_names_the_dead_member_to_everyone);
    tcase_add_test(t, news_of_a_death_fails_the_barrier_once);
    tcase_add_test(t, retry_fails_for_a_source_back_from_a_death_in_the_step);
    tcase_add_test(t, barrier_timeout_lists_who_is_missing);
    tcase_add_test(t, gather_takes_a_death_as_the_answer);
    tcase_add_test(t, gather_times_out_naming_the_missing_key);
    tcase_add_test(t, drop_removes_a_finished_steps_keys);
    tcase_add_test(t, codec_refuses_malformed_member_requests);
    suite_add_tcase(s, t);
    return wex_test_run(s);
}
