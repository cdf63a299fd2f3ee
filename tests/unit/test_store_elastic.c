/* The step barrier with elastic destinations (WEX__ARRIVE_ELASTIC): a
 * real server, members on threads of this process, a killed rank played
 * by abandoning its connection. Destinations take part by replica: one
 * not connected is left out at once, one connected is waited for until
 * the timeout, a replica takes part only whole, and the barrier waits
 * for min_replicas whole replicas. */
#include <check.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "error.h"
#include "store.h"
#include "store_proto.h"

#define TOKEN "elastic-token"
#include "store_fixture.h"

/* One source and four destinations in two replicas of two ranks. */
#define SOURCES 1
#define DESTINATIONS 4
#define PER 2

typedef struct member {
    char who[32];
    const char *key;
    int fail_fast;
    uint64_t least;
    double timeout;
    pthread_t thread;
    /* out */
    wex_status st;
    char error[512];
    uint64_t absent[DESTINATIONS], absent_count;
    int too_few;
} member;

static void *arrive_main(void *arg)
{
    member *m = arg;
    wex__store_client *c = NULL;
    wex__store_elastic el = {PER, m->least, NULL, 0, 0};
    uint64_t *dead = NULL, dead_count = 0;

    m->st = wex__store_connect(address, TOKEN, m->who, 10.0, &c);
    if (m->st == WEX_OK)
        m->st = wex__store_arrive_elastic(c, m->key, m->fail_fast, SOURCES,
                                          DESTINATIONS, NULL, &el, m->timeout,
                                          &dead, &dead_count);
    snprintf(m->error, sizeof(m->error), "%s", wex__last_error());
    m->absent_count = el.absent_count;
    m->too_few = el.too_few;
    for (uint64_t i = 0; i < el.absent_count && i < DESTINATIONS; i++)
        m->absent[i] = el.absent[i];
    free(el.absent);
    free(dead);
    wex__store_close(c);
    return NULL;
}

static void start(member *m, const char *who, const char *key, uint64_t least,
                  double timeout)
{
    memset(m, 0, sizeof(*m));
    snprintf(m->who, sizeof(m->who), "%s", who);
    m->key = key;
    m->least = least;
    m->timeout = timeout;
    ck_assert_int_eq(pthread_create(&m->thread, NULL, arrive_main, m), 0);
}

static void finish_ok(member *m, uint64_t absent_count)
{
    pthread_join(m->thread, NULL);
    ck_assert_msg(m->st == WEX_OK, "%s: %s", m->who, m->error);
    ck_assert_int_eq(m->too_few, 0);
    ck_assert_msg(m->absent_count == absent_count,
                  "%s: %llu destination ranks left out, expected %llu", m->who,
                  (unsigned long long)m->absent_count,
                  (unsigned long long)absent_count);
}

/* Replica 1 was never started: the step goes on at once without it. */
START_TEST(unstarted_replica_is_left_out_at_once)
{
    member m[3];
    double t0 = wex__now();

    start(&m[0], "source/0", "step/1/0/begin", 1, 20.0);
    start(&m[1], "destination/0", "step/1/0/begin", 1, 20.0);
    start(&m[2], "destination/1", "step/1/0/begin", 1, 20.0);
    for (int i = 0; i < 3; i++) {
        finish_ok(&m[i], 2);
        ck_assert_uint_eq(m[i].absent[0], 2);
        ck_assert_uint_eq(m[i].absent[1], 3);
    }
    ck_assert_double_lt(wex__now() - t0, 5.0);
}
END_TEST

/* Rank 3 of replica 1 is not started, rank 2 arrived: the half replica
 * is left out, and rank 2 is told so with everyone. (Rank 2 is connected
 * before the others arrive, so the barrier waits for it: its thread may
 * start last on a loaded machine.) */
START_TEST(half_a_replica_is_left_out)
{
    wex__store_client *early2 = join("destination/2");
    member m[4];

    start(&m[0], "source/0", "step/1/0/begin", 1, 20.0);
    start(&m[1], "destination/0", "step/1/0/begin", 1, 20.0);
    start(&m[2], "destination/1", "step/1/0/begin", 1, 20.0);
    start(&m[3], "destination/2", "step/1/0/begin", 1, 20.0);
    for (int i = 0; i < 4; i++) {
        finish_ok(&m[i], 2);
        ck_assert_uint_eq(m[i].absent[0], 2);
    }
    wex__store_close(early2);
}
END_TEST

/* A connected destination is waited for, so one a moment late still
 * takes part; one that never arrives is left out at the timeout. */
START_TEST(connected_destination_is_waited_for)
{
    wex__store_client *idle2 = join("destination/2");
    wex__store_client *idle3 = join("destination/3");
    member m[5];
    double t0 = wex__now();

    start(&m[0], "source/0", "step/1/0/begin", 1, 1.0);
    start(&m[1], "destination/0", "step/1/0/begin", 1, 1.0);
    start(&m[2], "destination/1", "step/1/0/begin", 1, 1.0);
    for (int i = 0; i < 3; i++)
        finish_ok(&m[i], 2);
    ck_assert_double_ge(wex__now() - t0, 0.9);
    /* the next step: replica 1, still connected, arrives 0.3 s after the
     * others (on new connections under the same names) */
    start(&m[0], "source/0", "step/2/0/begin", 1, 20.0);
    start(&m[1], "destination/0", "step/2/0/begin", 1, 20.0);
    start(&m[2], "destination/1", "step/2/0/begin", 1, 20.0);
    pause_s(0.3);
    start(&m[3], "destination/2", "step/2/0/begin", 1, 20.0);
    start(&m[4], "destination/3", "step/2/0/begin", 1, 20.0);
    for (int i = 0; i < 5; i++)
        finish_ok(&m[i], 0);
    wex__store_close(idle2);
    wex__store_close(idle3);
}
END_TEST

/* With no replica, the sources wait for min_replicas to join, and fail
 * at the timeout saying how many there were. */
START_TEST(too_few_replicas_fail_at_the_timeout)
{
    member src, late[3];
    double t0 = wex__now();

    start(&src, "source/0", "step/1/0/begin", 1, 0.5);
    pthread_join(src.thread, NULL);
    ck_assert_int_eq(src.st, WEX_ERR_TIMEOUT);
    ck_assert_int_eq(src.too_few, 1); /* told apart from other timeouts */
    ck_assert_msg(strstr(src.error, "0 whole destination replicas arrived, "
                                    "fewer than min_replicas 1") != NULL,
                  "%s", src.error);
    ck_assert_double_ge(wex__now() - t0, 0.4);
    /* a replica joining while the sources wait lets the step go on */
    start(&late[0], "source/0", "step/2/0/begin", 1, 20.0);
    pause_s(0.3);
    start(&late[1], "destination/2", "step/2/0/begin", 1, 20.0);
    start(&late[2], "destination/3", "step/2/0/begin", 1, 20.0);
    for (int i = 0; i < 3; i++) {
        finish_ok(&late[i], 2);
        ck_assert_uint_eq(late[i].absent[0], 0);
    }
}
END_TEST

/* A destination that dies does not fail a retry's barrier (fail_fast):
 * its replica is left out of it. (Rank 2, its replica's other half, is
 * connected before anyone arrives, so the barrier waits for it: its
 * thread may start last on a loaded machine.) */
START_TEST(dead_destination_leaves_its_replica_out_of_a_retry)
{
    wex__store_client *gone = join("destination/3");
    wex__store_client *early2 = join("destination/2");
    member m[5];

    abandon_and_wait(gone);
    start(&m[0], "source/0", "step/3/1/begin", 1, 20.0);
    m[0].fail_fast = 1;
    start(&m[1], "destination/0", "step/3/1/begin", 1, 20.0);
    m[1].fail_fast = 1;
    start(&m[2], "destination/1", "step/3/1/begin", 1, 20.0);
    m[2].fail_fast = 1;
    start(&m[3], "destination/2", "step/3/1/begin", 1, 20.0);
    m[3].fail_fast = 1;
    for (int i = 0; i < 4; i++) {
        finish_ok(&m[i], 2);
        ck_assert_uint_eq(m[i].absent[1], 3);
    }
    wex__store_close(early2);
}
END_TEST

/* Ranks per replica that do not divide the destinations, or more
 * replicas wanted than there are, are refused by the codec. */
START_TEST(codec_refuses_a_bad_replica_shape)
{
    const uint64_t shapes[4][2] = {{3, 1}, {0, 1}, {2, 3}, {2, 2}};
    uint8_t value[32 + 1 + 16], *msg;
    size_t len;

    for (int k = 0; k < 4; k++) {
        wex_status want = k == 3 ? WEX_OK : WEX_ERR_INVALID;
        memset(value, 0, sizeof(value));
        wex__store_put_u64(value, 1000);
        wex__store_put_u64(value + 8, WEX__ARRIVE_ELASTIC);
        wex__store_put_u64(value + 16, SOURCES);
        wex__store_put_u64(value + 24, DESTINATIONS);
        wex__store_put_u64(value + 33, shapes[k][0]);
        wex__store_put_u64(value + 41, shapes[k][1]);
        ck_assert_int_eq(wex__store_encode_request(WEX__STORE_ARRIVE, "b", 1,
                                                   value, sizeof(value), &msg,
                                                   &len),
                         want);
        if (want == WEX_OK)
            free(msg);
        else
            ck_assert_msg(strstr(wex__last_error(), "ranks per replica") !=
                              NULL,
                          "%s", wex__last_error());
    }
    /* elastic without its 16 bytes */
    ck_assert_int_eq(wex__store_encode_request(WEX__STORE_ARRIVE, "b", 1, value,
                                               33, &msg, &len),
                     WEX_ERR_INVALID);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("store_elastic");
    TCase *t = tcase_create("barrier");

    tcase_add_checked_fixture(t, setup, teardown);
    tcase_set_timeout(t, 60);
    tcase_add_test(t, unstarted_replica_is_left_out_at_once);
    tcase_add_test(t, half_a_replica_is_left_out);
    tcase_add_test(t, connected_destination_is_waited_for);
    tcase_add_test(t, too_few_replicas_fail_at_the_timeout);
    tcase_add_test(t, dead_destination_leaves_its_replica_out_of_a_retry);
    tcase_add_test(t, codec_refuses_a_bad_replica_shape);
    suite_add_tcase(s, t);
    return wex_test_run(s);
}
