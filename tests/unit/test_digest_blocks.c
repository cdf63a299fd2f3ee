/*
 * The device's digest program (digest_blocks.h, run by libwex_cuda.so a
 * thread a block) on the CPU: its XXH3-64 long path is the library's
 * XXH3_64bits for every length from 241 bytes to past two of its
 * internal blocks and around the digest's blocks, from any alignment;
 * and a stream digested block by block (a short last block digested by
 * the library, as the host does) gives the operation's digest
 * (wex__digest) for lengths at and around the blocks' edges.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <xxhash.h>

#include "check_run.h"
#include "digest_blocks.h"
#include "digest_update.h"

_Static_assert(WEX_DIGEST_BLOCK_BYTES == WEX__DIGEST_BLOCK,
               "the device's blocks are the host's");

static unsigned char *random_bytes(size_t n, uint64_t x)
{
    unsigned char *p = malloc(n ? n : 1);

    ck_assert_ptr_nonnull(p);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        p[i] = (unsigned char)x;
    }
    return p;
}

START_TEST(the_long_path_is_the_librarys)
{
    static const size_t larger[] = {4095,  4096,  16383, 16384,
                                    16385, 65536, 100003};
    unsigned char *p = random_bytes(100003 + 8, 5);

    for (size_t n = WEX_XXH3_MIDSIZE_MAX + 1; n <= 2200; n++)
        ck_assert_msg(wex_xxh3_long(p + n % 8, n) == XXH3_64bits(p + n % 8, n),
                      "%zu bytes", n);
    for (size_t i = 0; i < sizeof(larger) / sizeof(larger[0]); i++)
        ck_assert_msg(wex_xxh3_long(p, larger[i]) == XXH3_64bits(p, larger[i]),
                      "%zu bytes", larger[i]);
    free(p);
}
END_TEST

START_TEST(a_stream_by_its_blocks_is_the_operations_digest)
{
    static const size_t lengths[] = {1,
                                     240,
                                     241,
                                     WEX__DIGEST_BLOCK,
                                     WEX__DIGEST_BLOCK + 1,
                                     WEX__DIGEST_BLOCK + 240,
                                     WEX__DIGEST_BLOCK + 241,
                                     5 * WEX__DIGEST_BLOCK - 3};
    unsigned char *p = random_bytes(5 * WEX__DIGEST_BLOCK, 9);
    wex__digest *d = wex__digest_create();

    ck_assert_ptr_nonnull(d);
    for (size_t i = 0; i < sizeof(lengths) / sizeof(lengths[0]); i++) {
        size_t n = lengths[i], count = wex_digest_block_count(n);
        uint64_t digests[8];
        uint8_t tail[WEX_XXH3_MIDSIZE_MAX];
        for (size_t b = 0; b < count; b++)
            wex_digest_one_block(p, n, b, digests, tail);
        if (wex_digest_block_len(n, count - 1) <= WEX_XXH3_MIDSIZE_MAX)
            digests[count - 1] =
                XXH3_64bits(tail, wex_digest_block_len(n, count - 1));
        wex__digest_reset(d);
        wex__digest_add(d, p, n);
        ck_assert_msg(wex__digest_of_blocks(digests, count) ==
                          wex__digest_final(d),
                      "%zu bytes", n);
    }
    wex__digest_free(d);
    free(p);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("digest_blocks");
    TCase *tc = tcase_create("digest_blocks");

    tcase_add_test(tc, the_long_path_is_the_librarys);
    tcase_add_test(tc, a_stream_by_its_blocks_is_the_operations_digest);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
