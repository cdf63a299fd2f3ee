/*
 * wex__digest_update (host/lib/job/device/digest_update.c): whichever build of
 * xxHash's update it picks on this CPU, the digest is the library's
 * one-shot XXH3 of the same bytes, however the bytes are cut into
 * updates, and mixing it with the library's own update on one state
 * changes nothing. Ranks on CPUs with and without AVX2 or AVX-512 must
 * agree.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "digest_update.h"

enum { BIG = 3 << 20 };

static unsigned char *random_bytes(size_t n, unsigned seed)
{
    unsigned char *p = malloc(n ? n : 1);
    uint64_t x = 0x9e3779b97f4a7c15ull ^ seed;

    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)x;
    }
    return p;
}

/* Every length up to 2 KiB crosses XXH3's short-input, mid-size, stripe
 * and block boundaries. */
START_TEST(one_update_is_the_librarys_digest)
{
    unsigned char *p = random_bytes(BIG, 1);
    XXH3_state_t *h = XXH3_createState();
    static const size_t larger[] = {4095, 4096, 65537, 262144, BIG};

    for (size_t n = 0; n <= 2048; n++) {
        XXH3_64bits_reset(h);
        wex__digest_update(h, p + (n % 7), n); /* unaligned too */
        ck_assert_msg(XXH3_64bits_digest(h) == XXH3_64bits(p + (n % 7), n),
                      "%zu bytes", n);
    }
    for (size_t i = 0; i < sizeof(larger) / sizeof(larger[0]); i++) {
        XXH3_64bits_reset(h);
        wex__digest_update(h, p, larger[i]);
        ck_assert_msg(XXH3_64bits_digest(h) == XXH3_64bits(p, larger[i]),
                      "%zu bytes", larger[i]);
    }
    XXH3_freeState(h);
    free(p);
}
END_TEST

/* Cut at random places, each piece through one update or the other. */
START_TEST(pieces_and_mixed_updates_give_the_same_digest)
{
    unsigned char *p = random_bytes(BIG, 2);
    XXH3_state_t *h = XXH3_createState();
    uint64_t want = XXH3_64bits(p, BIG);
    unsigned seed = 7;

    for (int round = 0; round < 20; round++) {
        size_t at = 0;
        XXH3_64bits_reset(h);
        while (at < BIG) {
            size_t n = (size_t)rand_r(&seed) % (round < 10 ? 300 : 200000);
            if (n > BIG - at)
                n = BIG - at;
            if (rand_r(&seed) & 1)
                wex__digest_update(h, p + at, n);
            else
                XXH3_64bits_update(h, p + at, n);
            at += n;
        }
        ck_assert_msg(XXH3_64bits_digest(h) == want, "round %d", round);
    }
    XXH3_freeState(h);
    free(p);
}
END_TEST

#if defined(__x86_64__)
/* Each vector build this CPU runs, mixed piece by piece with the others
 * on one state: the library's digest. */
START_TEST(every_vector_build_gives_the_same_digest)
{
    void (*const builds[2])(void *, const void *, size_t) = {
        wex__digest_update_avx2, wex__digest_update_avx512};
    const int runs[2] = {__builtin_cpu_supports("avx2"),
                         __builtin_cpu_supports("avx512f")};
    unsigned char *p = random_bytes(BIG, 3);
    XXH3_state_t *h = XXH3_createState();
    unsigned seed = 11;
    size_t at = 0;

    XXH3_64bits_reset(h);
    for (int k = 0; at < BIG; k++) {
        size_t n = (size_t)rand_r(&seed) % 70000;
        int b = k % 3;
        if (n > BIG - at)
            n = BIG - at;
        if (b < 2 && runs[b])
            builds[b](h, p + at, n);
        else
            XXH3_64bits_update(h, p + at, n);
        at += n;
    }
    ck_assert(XXH3_64bits_digest(h) == XXH3_64bits(p, BIG));
    XXH3_freeState(h);
    free(p);
}
END_TEST
#endif

int main(void)
{
    Suite *s = suite_create("digest_update");
    TCase *tc = tcase_create("digest_update");

    tcase_add_test(tc, one_update_is_the_librarys_digest);
    tcase_add_test(tc, pieces_and_mixed_updates_give_the_same_digest);
#if defined(__x86_64__)
    tcase_add_test(tc, every_vector_build_gives_the_same_digest);
#endif
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
