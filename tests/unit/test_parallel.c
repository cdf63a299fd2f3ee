/* Work split over threads (parallel.h): every task runs once, each on a
 * worker below the threads asked; a failing task's reason comes back
 * with the first failure, and the tasks not yet begun are not run. */
#include <check.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "check_run.h"
#include "parallel.h"

enum { TASKS = 1000 };

typedef struct tally {
    atomic_int runs[TASKS];
    atomic_uint highest_worker;
    size_t fail_at; /* the task that fails, or TASKS */
} tally;

static int count_task(void *arg, size_t k, unsigned worker, char *why,
                      size_t cap)
{
    tally *t = arg;
    unsigned seen = atomic_load(&t->highest_worker);

    atomic_fetch_add(&t->runs[k], 1);
    while (worker > seen &&
           !atomic_compare_exchange_weak(&t->highest_worker, &seen, worker))
        ;
    if (k != t->fail_at)
        return 0;
    snprintf(why, cap, "task %zu refused", k);
    return 7;
}

START_TEST(every_task_runs_once_on_a_worker_below_the_threads)
{
    static tally t;
    char why[64] = "stale";

    memset(&t, 0, sizeof(t));
    t.fail_at = TASKS;
    ck_assert_int_eq(wex__parallel(TASKS, 3, count_task, &t, why, sizeof(why)),
                     0);
    for (size_t k = 0; k < TASKS; k++)
        ck_assert_int_eq(atomic_load(&t.runs[k]), 1);
    ck_assert_uint_lt(atomic_load(&t.highest_worker), 3);
    ck_assert_str_eq(why, ""); /* nothing failed: nothing said */
}
END_TEST

START_TEST(the_first_failure_comes_back_with_its_reason)
{
    static tally t;
    char why[64];
    size_t ran = 0;

    for (unsigned threads = 1; threads <= 4; threads++) {
        memset(&t, 0, sizeof(t));
        t.fail_at = 10;
        ck_assert_int_eq(
            wex__parallel(TASKS, threads, count_task, &t, why, sizeof(why)), 7);
        ck_assert_str_eq(why, "task 10 refused");
        ran = 0;
        for (size_t k = 0; k < TASKS; k++) {
            ck_assert_int_le(atomic_load(&t.runs[k]), 1);
            ran += (size_t)atomic_load(&t.runs[k]);
        }
        for (size_t k = 0; k <= 10; k++) /* begun before it, or it */
            ck_assert_int_eq(atomic_load(&t.runs[k]), 1);
        /* one thread stops at once (with more, the others may run any
         * number while the failing task is descheduled) */
        if (threads == 1)
            ck_assert_uint_eq(ran, 11);
    }
    /* no buffer for the reason: the failure still comes back */
    memset(&t, 0, sizeof(t));
    t.fail_at = 0;
    ck_assert_int_eq(wex__parallel(TASKS, 2, count_task, &t, NULL, 0), 7);
}
END_TEST

START_TEST(no_tasks_run_nothing)
{
    static tally t;
    char why[8] = "x";

    memset(&t, 0, sizeof(t));
    t.fail_at = 0;
    ck_assert_int_eq(wex__parallel(0, 4, count_task, &t, why, sizeof(why)), 0);
    ck_assert_int_eq(atomic_load(&t.runs[0]), 0);
    ck_assert_str_eq(why, "");
}
END_TEST

static Suite *parallel_suite(void)
{
    Suite *s = suite_create("parallel");
    TCase *tc = tcase_create("parallel");

    tcase_add_test(tc, every_task_runs_once_on_a_worker_below_the_threads);
    tcase_add_test(tc, the_first_failure_comes_back_with_its_reason);
    tcase_add_test(tc, no_tasks_run_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(parallel_suite());
}
