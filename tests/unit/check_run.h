/* Runs a Check suite in fork mode and turns the outcome into an exit
 * status, so every test binary's main() is three lines. */
#ifndef WEX_TEST_CHECK_RUN_H
#define WEX_TEST_CHECK_RUN_H

#include <check.h>
#include <stdlib.h>

static inline int wex_test_run(Suite *suite)
{
    SRunner *runner = srunner_create(suite);
    int failed;

    srunner_run_all(runner, CK_NORMAL);
    failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif /* WEX_TEST_CHECK_RUN_H */
