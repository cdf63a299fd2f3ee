/*
 * The program the device encodes deltas with (delta_scan_chunks.h, run
 * by host/cuda/delta_kernels.cu a CUDA block a chunk), run here on the
 * CPU as a block of T threads runs it, its layout made by
 * wex__delta_slots: for every element size, fractions from none to all,
 * changes spread out and in runs, streams ending in a part of a chunk,
 * and a contiguous, a 2-D and a 3-D box read in place, it writes the
 * very payload the CPU's encoder writes, every byte of it, and leaves
 * the snapshot equal to the current bytes; a payload past its room
 * leaves the snapshot up to date all the same.
 */
#include <check.h>
#include <stdlib.h>
#include <string.h>

#include "box_runs.h"
#include "check_run.h"
#include "delta.h"
#include "delta_box.h"
#include "delta_chunks.h"
#include "delta_move.h"
#include "delta_scan_chunks.h"

/* The device's encoding of the box of `tensor` (as walk w places it)
 * against `snap`: the payload's length (-1 past cap). */
static int64_t encode_as_device(const uint8_t *tensor, const wex_delta_map *m,
                                uint8_t *snap, uint64_t n, uint32_t T,
                                uint8_t *payload, uint64_t cap)
{
    uint64_t chunks = (n + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK;
    uint32_t *counts = malloc((chunks + 1) * sizeof(*counts));
    wex_delta_slot *slots = malloc((chunks + 1) * sizeof(*slots));
    size_t count = 0;
    int64_t len;

    ck_assert_ptr_nonnull(counts);
    ck_assert_ptr_nonnull(slots);
    for (uint64_t c = 0; c < chunks; c++) {
        uint64_t base = c * WEX__DELTA_CHUNK;
        uint32_t u = (uint32_t)(n - base < WEX__DELTA_CHUNK ? n - base
                                                            : WEX__DELTA_CHUNK);
        counts[c] = wex_delta_scan_count_serial(tensor, m, snap, base, u, T);
    }
    len = wex__delta_slots(counts, n, m->elem, slots, &count);
    ck_assert_int_ge(len, 0);
    ck_assert_uint_le(count, chunks + 1);
    /* slots in reverse: blocks run in no order */
    for (size_t k = count; k-- > 0;)
        wex_delta_scan_write_serial(&slots[k], tensor, m, snap, T,
                                    (uint64_t)len <= cap ? payload : NULL);
    free(counts);
    free(slots);
    return (uint64_t)len <= cap ? len : -1;
}

/* Changes about `fraction` of the box's elements of `tensor` (in any of
 * their bytes), spread out or, `runs`, in runs of a few hundred. */
static void change(const box *bx, unsigned elem, uint8_t *tensor,
                   double fraction, int runs)
{
    uint64_t n = elements(bx);
    uint8_t *s = malloc(n * elem);

    ck_assert_ptr_nonnull(s);
    move_stream(bx, elem, s, tensor, 0);
    for (uint64_t i = 0; i < n; i++) {
        if ((double)(next() % 1000000) >= fraction * 1e6)
            continue;
        for (uint64_t r = 0; r < (runs ? 1 + next() % 400 : 1) && i < n;
             r++, i++)
            s[i * elem + next() % elem] ^= (uint8_t)(1 + next() % 255);
    }
    move_stream(bx, elem, s, tensor, 1);
    free(s);
}

START_TEST(the_device_encodes_what_the_cpu_encodes)
{
    static const unsigned elems[] = {1, 2, 4, 8};
    static const double fractions[] = {0, 0.001, 0.01, 0.1, 0.5, 1};
    static const uint32_t threads[] = {1, 3, 256};
    static const box boxes[] = {
        {1, {70001}, {0}, {70001}},
        {2, {40, 3000}, {0, 1000}, {40, 1500}},
        {3, {6, 20, 900}, {1, 5, 0}, {4, 10, 900}},
    };

    for (size_t a = 0; a < 4; a++)
        for (size_t f = 0; f < 6; f++)
            for (size_t x = 0; x < 3; x++) {
                const box *bx = &boxes[x];
                unsigned elem = elems[a];
                uint64_t n = elements(bx), bytes = tensor_bytes(bx, elem);
                size_t cap = wex__delta_bound(n, elem);
                uint8_t *tensor = malloc(bytes), *cur = malloc(n * elem);
                uint8_t *snap = malloc(n * elem), *dev_snap = malloc(n * elem);
                uint8_t *want = malloc(cap), *got = malloc(cap);
                int runs = (int)(x % 2);
                wex__delta_enc e;
                wex__box_runs w;
                wex_delta_map m;
                int64_t len;

                for (uint64_t i = 0; i < bytes; i++)
                    tensor[i] = (uint8_t)next();
                move_stream(bx, elem, snap, tensor, 0);
                change(bx, elem, tensor, fractions[f], runs);
                move_stream(bx, elem, cur, tensor, 0);
                memcpy(dev_snap, snap, n * elem);
                ck_assert_int_eq(wex__delta_enc_alloc(&e), 0);
                wex__delta_enc_start(&e, elem, want, cap);
                wex__delta_enc_feed(&e, cur, snap, n * elem);
                len = wex__delta_enc_end(&e);
                ck_assert_int_gt(len, 0);
                walk_of(bx, elem, &w);
                ck_assert_int_eq(wex__delta_map_of(&w, &m), 0);
                for (size_t t = 0; t < 3; t++) {
                    uint8_t *s = malloc(n * elem);
                    memcpy(s, dev_snap, n * elem);
                    memset(got, 0xa5, cap); /* every byte is written */
                    ck_assert_int_eq(encode_as_device(tensor, &m, s, n,
                                                      threads[t], got, cap),
                                     len);
                    ck_assert_msg(memcmp(got, want, (size_t)len) == 0,
                                  "elem %u, %.3f changed, box %zu, %u "
                                  "threads: another payload",
                                  elem, fractions[f], x, threads[t]);
                    ck_assert(memcmp(s, cur, n * elem) == 0);
                    /* the next step against it: nothing changed */
                    ck_assert_int_eq(encode_as_device(tensor, &m, s, n,
                                                      threads[t], got, cap),
                                     2);
                    free(s);
                }
                /* too little room: no payload, the snapshot up to date */
                ck_assert_int_eq(encode_as_device(tensor, &m, dev_snap, n, 3,
                                                  got, (uint64_t)len - 1),
                                 -1);
                ck_assert(memcmp(dev_snap, cur, n * elem) == 0);
                wex__delta_enc_free(&e);
                free(tensor);
                free(cur);
                free(snap);
                free(dev_snap);
                free(want);
                free(got);
            }
}
END_TEST

START_TEST(the_layout_refuses_counts_past_a_chunk)
{
    uint32_t counts[2] = {WEX__DELTA_CHUNK, 7};
    wex_delta_slot slots[3];
    size_t count = 0;

    /* the last chunk holds 5 elements */
    ck_assert_int_eq(
        wex__delta_slots(counts, WEX__DELTA_CHUNK + 5, 2, slots, &count), -1);
    counts[1] = 5;
    ck_assert_int_eq(
        wex__delta_slots(counts, WEX__DELTA_CHUNK + 5, 2, slots, &count),
        1 + WEX__DELTA_CHUNK * 2 + 1 + 5 * 2);
    ck_assert_uint_eq(count, 2);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("delta_scan");
    TCase *tc = tcase_create("scan");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, the_device_encodes_what_the_cpu_encodes);
    tcase_add_test(tc, the_layout_refuses_counts_past_a_chunk);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
