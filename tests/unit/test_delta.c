/*
 * The delta encoding (host/lib/transform/delta.c): what a source sends
 * of the elements that changed, and a destination applies.
 *  - round trips: every element size, fractions from 0 to 1, streams
 *    that end inside a chunk, fed in pieces of any length; the snapshot
 *    equals the current bytes afterwards, and the payload applied to the
 *    old bytes gives the new ones;
 *  - sizes: 1 % of bf16 elements changed at random positions costs at
 *    most 1.6 % of the stream's bytes, none at most 0.1 %, half at most
 *    1.02 x;
 *  - a payload that outgrows its room is refused, the snapshot still
 *    brought up to date;
 *  - damaged payloads (cut at every length, bytes flipped) are refused
 *    or stay inside the stream, never read or write past it.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "delta.h"

static uint64_t rng = 88172645463325252ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* A stream of n elements and the same with a fraction f of them
 * changed at random positions. */
static void make(uint8_t *old, uint8_t *cur, uint64_t n, unsigned elem,
                 double f)
{
    for (uint64_t i = 0; i < n * elem; i++)
        old[i] = (uint8_t)next();
    memcpy(cur, old, n * elem);
    for (uint64_t i = 0; i < n; i++)
        if ((double)(next() % 1000000) < f * 1000000.0)
            cur[i * elem + next() % elem] ^= (uint8_t)(1 + next() % 255);
}

typedef struct target {
    uint8_t *buf;
    unsigned elem;
    uint64_t elems;
} target;

static int apply(void *arg, uint64_t base, const uint32_t *pos, uint32_t n,
                 const uint8_t *values)
{
    target *t = arg;

    for (uint32_t i = 0; i < n; i++) {
        uint64_t at = base + (pos != NULL ? pos[i] : i);
        if (at >= t->elems)
            return 1;
        memcpy(t->buf + at * t->elem, values + (size_t)i * t->elem, t->elem);
    }
    return 0;
}

/* Encodes cur against a snapshot of old, fed in random pieces; returns
 * the payload's length and checks the round trip. */
static int64_t round_trip(const uint8_t *old, const uint8_t *cur, uint64_t n,
                          unsigned elem, uint8_t *payload, size_t cap)
{
    uint8_t *snap = malloc(n * elem + 1), *applied = malloc(n * elem + 1);
    wex__delta_enc e;
    target t = {applied, elem, n};
    uint64_t done = 0;
    char why[200];
    int64_t len;

    ck_assert_int_eq(wex__delta_enc_alloc(&e), 0);
    memcpy(snap, old, n * elem);
    memcpy(applied, old, n * elem);
    wex__delta_enc_start(&e, elem, payload, cap);
    while (done < n) {
        uint64_t piece = 1 + next() % 40000;
        if (piece > n - done)
            piece = n - done;
        wex__delta_enc_feed(&e, cur + done * elem, snap + done * elem,
                            piece * elem);
        done += piece;
    }
    len = wex__delta_enc_end(&e);
    ck_assert_msg(memcmp(snap, cur, n * elem) == 0,
                  "the snapshot is the current bytes after encoding");
    ck_assert_uint_eq(e.elems, n);
    if (len >= 0) {
        ck_assert_msg(wex__delta_walk(payload, (size_t)len, elem, n, apply, &t,
                                      why, sizeof(why)) == 0,
                      "%s", why);
        ck_assert_msg(memcmp(applied, cur, n * elem) == 0,
                      "applying the payload gives the current bytes");
        /* and so does the direct apply, whole and in pieces */
        for (size_t max = 1; max <= 3; max += 2) {
            wex__delta_piece pieces[3];
            size_t count =
                wex__delta_cut(payload, (size_t)len, elem, n, max, pieces);
            memcpy(applied, old, n * elem);
            for (size_t k = 0; k < count; k++)
                ck_assert_msg(wex__delta_apply_piece(payload, &pieces[k], elem,
                                                     n, applied, why,
                                                     sizeof(why)) == 0,
                              "%s", why);
            ck_assert_msg(memcmp(applied, cur, n * elem) == 0,
                          "applying the payload directly in %zu pieces gives "
                          "the current bytes",
                          count);
        }
    }
    wex__delta_enc_free(&e);
    free(snap);
    free(applied);
    return len;
}

START_TEST(round_trips)
{
    static const unsigned elems[] = {1, 2, 4, 8};
    static const double fractions[] = {0, 0.0001, 0.01, 0.1, 0.3, 0.5, 1};
    static const uint64_t lengths[] = {0, 1, 31, 16384, 16385, 100003};

    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < sizeof(fractions) / sizeof(*fractions); b++)
            for (size_t c = 0; c < sizeof(lengths) / sizeof(*lengths); c++) {
                unsigned elem = elems[a];
                uint64_t n = lengths[c];
                size_t cap = wex__delta_bound(n, elem);
                uint8_t *old = malloc(n * elem + 1),
                        *cur = malloc(n * elem + 1);
                uint8_t *payload = malloc(cap);
                make(old, cur, n, elem, fractions[b]);
                ck_assert_int_ge(round_trip(old, cur, n, elem, payload, cap),
                                 0);
                free(old);
                free(cur);
                free(payload);
            }
}
END_TEST

/* The scalar, AVX2 and AVX-512 scans write the same payload byte for
 * byte and bring the snapshot up to date alike, fed in uneven pieces
 * (round_trip cuts the stream at random); paths this CPU lacks fall
 * back to the next one down. */
START_TEST(every_scan_writes_the_same_payload)
{
    static const unsigned elems[] = {1, 2, 4, 8};
    static const double fractions[] = {0.001, 0.02, 0.3, 1};
    uint64_t n = 70001;

    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 4; b++) {
            unsigned elem = elems[a];
            size_t cap = wex__delta_bound(n, elem);
            uint8_t *old = malloc(n * elem), *cur = malloc(n * elem);
            uint8_t *first = malloc(cap), *payload = malloc(cap);
            int64_t len0 = 0;

            make(old, cur, n, elem, fractions[b]);
            for (int isa = WEX__DELTA_ISA_AVX512; isa >= WEX__DELTA_ISA_SCALAR;
                 isa--) {
                int64_t len;
                uint64_t saved = rng;
                wex__delta_limit_isa(isa);
                len = round_trip(old, cur, n, elem,
                                 isa == WEX__DELTA_ISA_AVX512 ? first : payload,
                                 cap);
                rng = saved; /* the same cuts for every path */
                ck_assert_int_gt(len, 0);
                if (isa == WEX__DELTA_ISA_AVX512)
                    len0 = len;
                else
                    ck_assert_msg(len == len0 &&
                                      memcmp(first, payload, (size_t)len) == 0,
                                  "elem %u, %.3f changed: the payload of "
                                  "scan %d differs",
                                  elem, fractions[b], isa);
            }
            wex__delta_limit_isa(WEX__DELTA_ISA_AVX512);
            free(old);
            free(cur);
            free(first);
            free(payload);
        }
}
END_TEST

/* A payload cut into pieces walks, piece by piece and in any order, to
 * what the whole walk writes: the pieces follow one another, cover the
 * payload and the stream, and each sink call falls in its piece. */
typedef struct piece_target {
    target t;
    uint64_t first, end; /* the piece's chunks */
} piece_target;

static int apply_in_piece(void *arg, uint64_t base, const uint32_t *pos,
                          uint32_t n, const uint8_t *values)
{
    piece_target *p = arg;

    ck_assert_uint_ge(base / WEX__DELTA_CHUNK, p->first);
    ck_assert_uint_lt(base / WEX__DELTA_CHUNK, p->end);
    return apply(&p->t, base, pos, n, values);
}

START_TEST(pieces_walk_to_the_whole)
{
    static const double fractions[] = {0, 0.001, 0.01, 0.3, 1};
    static const size_t maxes[] = {1, 2, 3, 7, 64};
    uint64_t n = 16384 * 9 + 77;

    for (size_t a = 0; a < 5; a++) {
        size_t cap = wex__delta_bound(n, 2);
        uint8_t *old = malloc(n * 2), *cur = malloc(n * 2),
                *applied = malloc(n * 2), *payload = malloc(cap);
        int64_t len;

        make(old, cur, n, 2, fractions[a]);
        len = round_trip(old, cur, n, 2, payload, cap);
        ck_assert_int_ge(len, 0);
        for (size_t b = 0; b < 5; b++) {
            wex__delta_piece pieces[64];
            size_t count =
                wex__delta_cut(payload, (size_t)len, 2, n, maxes[b], pieces);
            char why[200];

            ck_assert_uint_ge(count, 1);
            ck_assert_uint_le(count, maxes[b]);
            if (fractions[a] >= 0.01 && maxes[b] > 1)
                ck_assert_msg(count > 1, "%.3f changed, %zu pieces asked: %zu",
                              fractions[a], maxes[b], count);
            ck_assert_uint_eq(pieces[0].offset, 0);
            ck_assert_uint_eq(pieces[0].first, 0);
            ck_assert_uint_eq(pieces[count - 1].end,
                              (n + WEX__DELTA_CHUNK - 1) / WEX__DELTA_CHUNK);
            ck_assert_uint_eq(pieces[count - 1].offset + pieces[count - 1].len,
                              (uint64_t)len);
            memcpy(applied, old, n * 2);
            for (size_t k = count; k-- > 0;) { /* last first */
                piece_target p = {
                    {applied, 2, n}, pieces[k].first, pieces[k].end};
                if (k > 0) {
                    ck_assert_uint_eq(pieces[k].offset,
                                      pieces[k - 1].offset + pieces[k - 1].len);
                    ck_assert_uint_eq(pieces[k].first, pieces[k - 1].end);
                }
                ck_assert_msg(wex__delta_walk_piece(payload, &pieces[k], 2, n,
                                                    apply_in_piece, &p, why,
                                                    sizeof(why)) == 0,
                              "%s", why);
            }
            ck_assert_msg(memcmp(applied, cur, n * 2) == 0,
                          "%.3f changed in %zu pieces: applied differs",
                          fractions[a], count);
        }
        free(old);
        free(cur);
        free(applied);
        free(payload);
    }
}
END_TEST

static double ratio_at(double f)
{
    uint64_t n = 1u << 22; /* 8 MiB of bf16 */
    size_t cap = wex__delta_bound(n, 2);
    uint8_t *old = malloc(n * 2), *cur = malloc(n * 2), *payload = malloc(cap);
    int64_t len;

    make(old, cur, n, 2, f);
    len = round_trip(old, cur, n, 2, payload, cap);
    free(old);
    free(cur);
    free(payload);
    return (double)len / (double)(n * 2);
}

START_TEST(sizes_meet_their_bounds)
{
    double none = ratio_at(0), one = ratio_at(0.01), half = ratio_at(0.5);

    printf("delta of 8 MiB of bf16: %.4f %% of the bytes with none changed, "
           "%.3f %% with 1 %%, %.1f %% with 50 %%\n",
           none * 100, one * 100, half * 100);
    ck_assert_msg(none <= 0.001, "0 %%: %.5f of the bytes", none);
    ck_assert_msg(one <= 0.016, "1 %%: %.5f of the bytes", one);
    ck_assert_msg(half <= 1.02, "50 %%: %.5f of the bytes", half);
    ck_assert_msg(ratio_at(1) <= 1.02, "all changed: within 1.02 x");
}
END_TEST

START_TEST(overflow_is_refused_and_the_snapshot_kept_current)
{
    uint64_t n = 50000;
    uint8_t *old = malloc(n * 2), *cur = malloc(n * 2), payload[64];

    make(old, cur, n, 2, 0.2);
    ck_assert_int_eq(round_trip(old, cur, n, 2, payload, sizeof(payload)), -1);
    free(old);
    free(cur);
}
END_TEST

START_TEST(damaged_payloads_stay_inside_the_stream)
{
    uint64_t n = 40000;
    size_t cap = wex__delta_bound(n, 2);
    uint8_t *old = malloc(n * 2), *cur = malloc(n * 2), *payload = malloc(cap);
    uint8_t *buf = malloc(n * 2);
    target t = {buf, 2, n};
    char why[200];
    int64_t len;

    make(old, cur, n, 2, 0.02);
    len = round_trip(old, cur, n, 2, payload, cap);
    ck_assert_int_gt(len, 8);
    for (int64_t cut = 0; cut < len; cut++) {
        wex__delta_piece pieces[3];
        size_t count;
        int refused = 0;

        ck_assert_msg(wex__delta_walk(payload, (size_t)cut, 2, n, apply, &t,
                                      why, sizeof(why)) != 0,
                      "a payload cut at %lld of %lld bytes is refused",
                      (long long)cut, (long long)len);
        /* and in pieces: some piece's walk refuses it */
        count = wex__delta_cut(payload, (size_t)cut, 2, n, 3, pieces);
        for (size_t k = 0; k < count; k++)
            refused |= wex__delta_walk_piece(payload, &pieces[k], 2, n, apply,
                                             &t, why, sizeof(why)) != 0;
        ck_assert_msg(refused, "a payload cut at %lld is refused in pieces",
                      (long long)cut);
    }
    /* a stream a chunk longer than the payload covers */
    ck_assert_int_ne(wex__delta_walk(payload, (size_t)len, 2,
                                     n + WEX__DELTA_CHUNK, apply, &t, why,
                                     sizeof(why)),
                     0);
    for (int k = 0; k < 2000; k++) {
        uint8_t *copy = malloc((size_t)len);
        memcpy(copy, payload, (size_t)len);
        copy[next() % (uint64_t)len] ^= (uint8_t)(1u << (next() % 8));
        {
            /* apply() bounds-checks; the vector and scalar decoders
             * refuse the same payloads */
            int vector = wex__delta_walk(copy, (size_t)len, 2, n, apply, &t,
                                         why, sizeof(why));
            int scalar;
            wex__delta_limit_isa(WEX__DELTA_ISA_SCALAR);
            scalar = wex__delta_walk(copy, (size_t)len, 2, n, apply, &t, why,
                                     sizeof(why));
            wex__delta_limit_isa(WEX__DELTA_ISA_AVX512);
            ck_assert_int_eq(vector, scalar);
        }
        { /* the direct apply stays inside the stream (ASan watches) */
            wex__delta_piece whole = {0, (size_t)len, 0,
                                      (n + WEX__DELTA_CHUNK - 1) /
                                          WEX__DELTA_CHUNK};
            (void)wex__delta_apply_piece(copy, &whole, 2, n, buf, why,
                                         sizeof(why));
        }
        {
            wex__delta_piece pieces[4];
            size_t count = wex__delta_cut(copy, (size_t)len, 2, n, 4, pieces);
            for (size_t j = 0; j < count; j++)
                (void)wex__delta_walk_piece(copy, &pieces[j], 2, n, apply, &t,
                                            why, sizeof(why));
        }
        free(copy);
    }
    free(old);
    free(cur);
    free(payload);
    free(buf);
}
END_TEST

static Suite *delta_suite(void)
{
    Suite *s = suite_create("delta");
    TCase *tc = tcase_create("delta");

    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, round_trips);
    tcase_add_test(tc, every_scan_writes_the_same_payload);
    tcase_add_test(tc, pieces_walk_to_the_whole);
    tcase_add_test(tc, sizes_meet_their_bounds);
    tcase_add_test(tc, overflow_is_refused_and_the_snapshot_kept_current);
    tcase_add_test(tc, damaged_payloads_stay_inside_the_stream);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(delta_suite());
}
