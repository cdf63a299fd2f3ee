/*
 * wt_rows (plugins/transports/common/row_batch.c), the batching behind
 * cuda-ipc's 2-D copies: whatever the runs, issuing the batches it hands
 * back (a 2-D copy each, done here on the CPU) writes exactly what the
 * runs written one by one would; a row-parallel split of a matrix, and
 * stacked experts at a constant pitch, become one batch; anything that
 * does not continue a batch at its pitch starts a new one.
 */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "row_batch.h"

enum { PEERS = 3, PEER_BYTES = 1 << 20 };

typedef struct fixture {
    unsigned char src[PEER_BYTES];
    unsigned char by_run[PEERS][PEER_BYTES];   /* each run copied alone */
    unsigned char by_batch[PEERS][PEER_BYTES]; /* each batch as a 2-D copy */
    wt_rows rows;
    size_t batches, runs;
} fixture;

static fixture *fixture_new(void)
{
    fixture *f = calloc(1, sizeof(*f));
    uint64_t x = 0x9e3779b97f4a7c15ull;

    ck_assert_ptr_nonnull(f);
    for (size_t i = 0; i < sizeof(f->src); i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        f->src[i] = (unsigned char)x;
    }
    return f;
}

static void copy_2d(fixture *f, const wt_rows *r)
{
    unsigned char *base = NULL;

    if (r->height == 0)
        return;
    for (int k = 0; k < PEERS; k++)
        if (r->peer == f->by_run[k])
            base = f->by_batch[k];
    ck_assert_ptr_nonnull(base);
    f->batches++;
    for (uint64_t i = 0; i < r->height; i++) {
        uint64_t d = r->dst + i * r->dst_pitch;
        const unsigned char *s = r->src + i * r->src_pitch;
        ck_assert_uint_le(d + r->width, PEER_BYTES);
        memcpy(base + d, s, r->width);
    }
}

/* One put: copied alone into by_run, and batched. */
static void put(fixture *f, int peer, uint64_t dst, uint64_t src,
                uint64_t bytes)
{
    wt_rows ready;

    memcpy(f->by_run[peer] + dst, f->src + src, bytes);
    f->runs++;
    wt_rows_put(&f->rows, f->by_run[peer], dst, f->src + src, bytes, &ready);
    copy_2d(f, &ready);
}

static void flush(fixture *f)
{
    wt_rows ready;

    wt_rows_take(&f->rows, &ready);
    copy_2d(f, &ready);
    ck_assert_uint_eq(f->rows.height, 0);
    ck_assert_mem_eq(f->by_batch, f->by_run, sizeof(f->by_run));
}

/* Columns [c0, c0 + w) of an r x c row-major matrix, rows in order, into
 * a contiguous r x w slice at `at`: what a TP rank's share of a
 * row-parallel weight is. */
static void column_slice(fixture *f, int peer, uint64_t base, uint64_t r,
                         uint64_t c, uint64_t c0, uint64_t w, uint64_t at)
{
    for (uint64_t i = 0; i < r; i++)
        put(f, peer, at + i * w, base + i * c + c0, w);
}

START_TEST(a_column_slice_is_one_batch)
{
    fixture *f = fixture_new();

    column_slice(f, 0, 0, 256, 1024, 512, 256, 4096);
    flush(f);
    ck_assert_uint_eq(f->runs, 256);
    ck_assert_uint_eq(f->batches, 1);
    free(f);
}
END_TEST

/* Stacked experts, each its own matrix right after the last: the rows
 * go on at the same pitch across experts, so one batch covers them. */
START_TEST(stacked_experts_at_one_pitch_are_one_batch)
{
    fixture *f = fixture_new();

    for (uint64_t e = 0; e < 4; e++)
        column_slice(f, 1, e * 64 * 512, 64, 512, 128, 128, e * 64 * 128);
    flush(f);
    ck_assert_uint_eq(f->runs, 256);
    ck_assert_uint_eq(f->batches, 1);
    free(f);
}
END_TEST

START_TEST(a_single_put_is_one_batch_of_one_row)
{
    fixture *f = fixture_new();
    wt_rows ready;

    put(f, 2, 100, 7, 1000);
    ck_assert_uint_eq(f->batches, 0); /* held until something ends it */
    wt_rows_take(&f->rows, &ready);
    ck_assert_uint_eq(ready.height, 1);
    ck_assert_uint_eq(ready.width, 1000);
    ck_assert_uint_eq(ready.dst, 100);
    copy_2d(f, &ready);
    ck_assert_mem_eq(f->by_batch, f->by_run, sizeof(f->by_run));
    wt_rows_take(&f->rows, &ready);
    ck_assert_uint_eq(ready.height, 0);
    free(f);
}
END_TEST

/* Each put after the first two rows breaks the batch in its own way. */
START_TEST(what_does_not_continue_starts_a_new_batch)
{
    fixture *f = fixture_new();

    put(f, 0, 0, 0, 64);
    put(f, 0, 128, 256, 64); /* pitches 128 and 256 */
    put(f, 0, 256, 512, 64); /* continues: 3 rows */
    put(f, 0, 384, 768, 32); /* another width */
    ck_assert_uint_eq(f->batches, 1);
    put(f, 1, 416, 800, 32); /* another peer */
    ck_assert_uint_eq(f->batches, 2);
    put(f, 1, 500, 900, 32);  /* second row: pitches 84 and 100 */
    put(f, 1, 600, 1000, 32); /* pitch 100, not 84 */
    ck_assert_uint_eq(f->batches, 3);
    put(f, 1, 10, 1100, 32); /* a row before the first: no pitch */
    ck_assert_uint_eq(f->batches, 4);
    put(f, 1, 20, 1200, 32); /* overlapping rows (pitch 10 < 32) */
    ck_assert_uint_eq(f->batches, 5);
    put(f, 1, 4000, 0, 32); /* the source going backwards */
    ck_assert_uint_eq(f->batches, 6);
    put(f, 2, 0, 0, 16);
    put(f, 2, 32, 64, 16);  /* pitches 32 and 64 */
    put(f, 2, 64, 100, 16); /* the destination's pitch, not the source's */
    ck_assert_uint_eq(f->batches, 8);
    put(f, 2, 100, 164, 16); /* ... nor the other way round */
    put(f, 2, 136, 228, 16); /* pitches 36 and 64 */
    put(f, 2, 160, 292, 16);
    ck_assert_uint_eq(f->batches, 9);
    flush(f);
    ck_assert_uint_eq(f->batches, 10);
    free(f);
}
END_TEST

START_TEST(pitches_past_the_limit_are_not_batched)
{
    static unsigned char peer;
    const uint64_t m = WT_ROWS_MAX_PITCH;
    wt_rows b, ready;

    /* Sources are never read here: addresses alone. */
#define AT(a) ((const void *)(uintptr_t)(4096 + (a)))
    memset(&b, 0, sizeof(b));
    wt_rows_put(&b, &peer, 0, AT(0), 16, &ready);
    wt_rows_put(&b, &peer, m, AT(16), 16, &ready); /* destination pitch */
    ck_assert_uint_eq(ready.height, 1);
    wt_rows_put(&b, &peer, m + 16, AT(16 + m), 16, &ready); /* source's */
    ck_assert_uint_eq(ready.height, 1);
    wt_rows_put(&b, &peer, m + 32, AT(32 + m), 16, &ready);
    ck_assert_uint_eq(ready.height, 0); /* pitches 16 and 16 */
    ck_assert_uint_eq(b.height, 2);
    ck_assert_uint_eq(b.dst_pitch, 16);
    ck_assert_uint_eq(b.src_pitch, 16);
#undef AT
}
END_TEST

/* Random boxes into random peers: batching never changes a byte. */
START_TEST(random_runs_land_as_they_would_alone)
{
    fixture *f = fixture_new();
    uint64_t x = 12345 + (uint64_t)_i;

    for (int n = 0; n < 200; n++) {
        uint64_t r, c, w, c0, at, base;
        int peer;
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        r = 1 + (x >> 33) % 32;
        c = 8 + (x >> 40) % 256;
        w = 1 + (x >> 20) % c;
        c0 = (x >> 10) % (c - w + 1);
        base = (x >> 5) % (PEER_BYTES - r * c);
        at = (x >> 45) % (PEER_BYTES - r * w);
        peer = (int)((x >> 60) % PEERS);
        column_slice(f, peer, base, r, c, c0, w, at);
    }
    flush(f);
    ck_assert_uint_le(f->batches, f->runs);
    free(f);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row_batch");
    TCase *t = tcase_create("core");

    tcase_add_test(t, a_column_slice_is_one_batch);
    tcase_add_test(t, stacked_experts_at_one_pitch_are_one_batch);
    tcase_add_test(t, a_single_put_is_one_batch_of_one_row);
    tcase_add_test(t, what_does_not_continue_starts_a_new_batch);
    tcase_add_test(t, pitches_past_the_limit_are_not_batched);
    tcase_add_loop_test(t, random_runs_land_as_they_would_alone, 0, 8);
    suite_add_tcase(s, t);
    return wex_test_run(s);
}
