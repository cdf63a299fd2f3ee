/* A source's "failed" in a key that otherwise holds its digests
 * (step_failure.h): told apart from digests whatever the reason's length,
 * and a digest list that starts with '!' is still digests. */
#include <check.h>
#include <stdint.h>
#include <string.h>

#include "check_run.h"
#include "step_failure.h"

START_TEST(a_failure_of_any_length_is_never_taken_for_digests)
{
    static const size_t units[] = {8, 36}; /* digests, block amaxes */
    char why[80], value[96];

    for (size_t u = 0; u < 2; u++)
        for (size_t len = 0; len < 76; len++) {
            size_t n;
            memset(why, 'a' + (int)(len % 26), len);
            why[len] = '\0';
            memset(value, 0x5a, sizeof(value));
            n = wex__step_failure(value, why, units[u]);
            value[n] = '\0'; /* as the rendezvous returns values */
            ck_assert_uint_ne(n % units[u], 0);
            ck_assert_uint_le(n, len + 2);
            ck_assert_str_eq(wex__step_failure_reason(value, n, units[u]), why);
        }
}
END_TEST

START_TEST(digests_starting_with_a_bang_are_digests)
{
    uint64_t digests[3] = {0x2121212121212121ull, 7, 9}; /* "!!!!!!!!" */
    unsigned char value[3 * 8 + 1];

    memcpy(value, digests, sizeof(digests));
    value[sizeof(digests)] = '\0';
    for (size_t n = 1; n <= 3; n++)
        ck_assert_ptr_null(wex__step_failure_reason(value, n * 8, 8));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("step_failure");
    TCase *t = tcase_create("failure");

    tcase_add_test(t, a_failure_of_any_length_is_never_taken_for_digests);
    tcase_add_test(t, digests_starting_with_a_bang_are_digests);
    suite_add_tcase(s, t);
    return wex_test_run(s);
}
