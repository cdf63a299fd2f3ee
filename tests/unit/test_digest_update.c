/*
 * An operation's digest (wex__digest, host/lib/job/device/digest_update.c)
 * is XXH3-64 of its blocks' XXH3-64 digests, however its bytes are cut
 * into additions, for every length around the blocks' edges; the same
 * from the blocks' digests (what a GPU hands the host).
 *
 * wex__digest_update: whichever build of
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

/* The definition, the library's way: XXH3-64 of the blocks' XXH3-64s. */
static uint64_t by_definition(const unsigned char *p, size_t n)
{
    size_t count = (n + WEX__DIGEST_BLOCK - 1) / WEX__DIGEST_BLOCK;
    uint64_t *blocks = malloc((count + 1) * sizeof(*blocks)), d;

    ck_assert_ptr_nonnull(blocks);
    for (size_t b = 0; b < count; b++) {
        size_t at = b * WEX__DIGEST_BLOCK;
        blocks[b] = XXH3_64bits(
            p + at, n - at < WEX__DIGEST_BLOCK ? n - at : WEX__DIGEST_BLOCK);
    }
    d = XXH3_64bits(blocks, count * sizeof(*blocks));
    ck_assert(d == wex__digest_of_blocks(blocks, count));
    free(blocks);
    return d;
}

START_TEST(an_operations_digest_is_its_blocks_digest)
{
    static const size_t lengths[] = {0,
                                     1,
                                     240,
                                     241,
                                     WEX__DIGEST_BLOCK - 1,
                                     WEX__DIGEST_BLOCK,
                                     WEX__DIGEST_BLOCK + 1,
                                     2 * WEX__DIGEST_BLOCK + 240,
                                     2 * WEX__DIGEST_BLOCK + 241,
                                     BIG};
    unsigned char *p = random_bytes(BIG + 8, 4);
    wex__digest *d = wex__digest_create();
    unsigned seed = 13;

    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        size_t n = lengths[i];
        uint64_t want = by_definition(p + 3, n);
        for (int round = 0; round < 6; round++) {
            size_t at = 0;
            wex__digest_reset(d);
            while (at < n) { /* whole, or cut at random places */
                size_t k = round == 0 ? n
                                      : 1 + (size_t)rand_r(&seed) %
                                                (round < 3 ? 300 : 40000);
                if (k > n - at)
                    k = n - at;
                wex__digest_add(d, p + 3 + at, k);
                at += k;
            }
            ck_assert_msg(wex__digest_final(d) == want, "%zu bytes, round %d",
                          n, round);
        }
    }
    wex__digest_free(d);
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
    tcase_add_test(tc, an_operations_digest_is_its_blocks_digest);
#if defined(__x86_64__)
    tcase_add_test(tc, every_vector_build_gives_the_same_digest);
#endif
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
