/*
 * The chunk program the device applies deltas with (delta_chunks.h, run
 * by host/cuda/delta_kernels.cu a CUDA block a chunk), run here on the
 * CPU as a block of T threads runs it: every payload the encoder makes
 * (every element size, fractions from 0.1 % to all, streams ending in a
 * part of a chunk) lands, through the chunks' index (wex__delta_chunks)
 * and the map of its box (wex__delta_map_of), exactly where the CPU's
 * walk of the box's runs puts it: a contiguous box, a 2-D box (the rows
 * of a column split) and a 3-D one, with 1, 3, 32 and 256 threads.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "box_runs.h"
#include "delta.h"
#include "delta_chunks.h"
#include "delta_box.h"
#include "delta_move.h"

/* A block of T threads applying every chunk, as the kernel does. */
static void apply_as_device(const uint8_t *payload, const wex_delta_chunk *c,
                            int64_t count, const wex_delta_map *m, uint32_t T,
                            uint8_t *tensor)
{
    uint32_t *before = malloc(T * sizeof(*before));

    ck_assert_ptr_nonnull(before);
    for (int64_t k = 0; k < count; k++) {
        uint32_t sum = 0;
        for (uint32_t t = 0; t < T; t++)
            before[t] = wex_delta_count(&c[k], payload, t, T);
        for (uint32_t t = 0; t < T; t++) {
            uint32_t v = before[t];
            before[t] = sum;
            sum += v;
        }
        /* threads in reverse: the order of a block's threads is none */
        for (uint32_t t = T; t-- > 0;)
            wex_delta_emit(&c[k], payload, t, T, before[t], m, tensor);
    }
    free(before);
}

START_TEST(the_device_program_writes_what_the_cpu_writes)
{
    static const unsigned elems[] = {1, 2, 4, 8};
    static const double fractions[] = {0.001, 0.01, 0.1, 0.3, 1};
    static const uint32_t threads[] = {1, 3, 32, 256};
    /* contiguous; the rows of a column split; a 3-D box */
    static const box boxes[] = {
        {1, {70001}, {0}, {70001}},
        {2, {40, 3000}, {0, 1000}, {40, 1500}},
        {3, {6, 20, 900}, {1, 5, 0}, {4, 10, 900}},
    };

    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 5; b++)
            for (size_t x = 0; x < 3; x++) {
                const box *bx = &boxes[x];
                unsigned elem = elems[a];
                uint64_t n = elements(bx), bytes = tensor_bytes(bx, elem);
                uint8_t *old = malloc(bytes), *cur = malloc(n * elem);
                uint8_t *snap = malloc(n * elem), *want = malloc(bytes);
                uint8_t *got = malloc(bytes);
                size_t cap = wex__delta_bound(n, elem);
                uint8_t *payload = malloc(cap);
                uint64_t chunks = (n + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
                wex_delta_chunk *index = malloc(chunks * sizeof(*index));
                wex__delta_enc e;
                wex__box_runs w;
                wex_delta_map m;
                int64_t len, count;

                for (uint64_t i = 0; i < bytes; i++)
                    old[i] = (uint8_t)next();
                /* the stream now: some elements changed in any byte */
                move_stream(bx, elem, snap, old, 0);
                memcpy(cur, snap, n * elem);
                for (uint64_t i = 0; i < n; i++)
                    if ((double)(next() % 1000000) < fractions[b] * 1e6)
                        cur[i * elem + next() % elem] ^=
                            (uint8_t)(1 + next() % 255);
                ck_assert_int_eq(wex__delta_enc_alloc(&e), 0);
                wex__delta_enc_start(&e, elem, payload, cap);
                wex__delta_enc_feed(&e, cur, snap, n * elem);
                len = wex__delta_enc_end(&e);
                ck_assert_int_gt(len, 0);
                count = wex__delta_chunks(payload, (size_t)len, elem, n, index,
                                          (size_t)chunks);
                ck_assert_int_gt(count, 0);
                walk_of(bx, elem, &w);
                ck_assert_int_eq(wex__delta_map_of(&w, &m), 0);
                memcpy(want, old, bytes);
                move_stream(bx, elem, cur, want, 1);
                for (size_t t = 0; t < 4; t++) {
                    memcpy(got, old, bytes);
                    apply_as_device(payload, index, count, &m, threads[t], got);
                    ck_assert_msg(memcmp(got, want, bytes) == 0,
                                  "elem %u, %.3f changed, box %zu, %u "
                                  "threads: the device program writes other "
                                  "bytes",
                                  elem, fractions[b], x, threads[t]);
                }
                wex__delta_enc_free(&e);
                free(old);
                free(cur);
                free(snap);
                free(want);
                free(got);
                free(payload);
                free(index);
            }
}
END_TEST

START_TEST(the_index_refuses_what_the_walk_refuses)
{
    uint64_t n = 40000;
    size_t cap = wex__delta_bound(n, 2);
    uint8_t *cur = malloc(n * 2), *snap = malloc(n * 2), *payload = malloc(cap);
    wex_delta_chunk index[3];
    wex__delta_enc e;
    int64_t len;

    for (uint64_t i = 0; i < n * 2; i++)
        snap[i] = cur[i] = (uint8_t)next();
    for (uint64_t i = 0; i < n; i += 50)
        cur[i * 2] ^= 1;
    ck_assert_int_eq(wex__delta_enc_alloc(&e), 0);
    wex__delta_enc_start(&e, 2, payload, cap);
    wex__delta_enc_feed(&e, cur, snap, n * 2);
    len = wex__delta_enc_end(&e);
    ck_assert_int_eq(wex__delta_chunks(payload, (size_t)len, 2, n, index, 3),
                     3);
    /* too little room, a cut payload, a stream it does not cover */
    ck_assert_int_eq(wex__delta_chunks(payload, (size_t)len, 2, n, index, 2),
                     -1);
    for (int64_t cut = 0; cut < len; cut++)
        ck_assert_int_eq(
            wex__delta_chunks(payload, (size_t)cut, 2, n, index, 3), -1);
    ck_assert_int_eq(wex__delta_chunks(payload, (size_t)len, 2,
                                       n + WEX__DELTA_CHUNK, index, 3),
                     -1);
    wex__delta_enc_free(&e);
    free(cur);
    free(snap);
    free(payload);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("delta_chunks");
    TCase *tc = tcase_create("core");
    SRunner *sr;
    int failed;

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_device_program_writes_what_the_cpu_writes);
    tcase_add_test(tc, the_index_refuses_what_the_walk_refuses);
    suite_add_tcase(s, tc);
    sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
