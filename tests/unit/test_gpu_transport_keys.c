/*
 * What the cuda-ipc and nccl transports decide without a GPU: their key
 * codecs (round trips, every corruption refused with a reason), the
 * cuda-ipc allocation table that merges tensors sharing an allocation,
 * and the nccl communicator's ranks: one per rank of the job.
 * The plugins' sources are compiled in, so this runs everywhere.
 */
#include <check.h>
#include <string.h>

#include <wex/transport.h>

#include "check_run.h"

#include "cuda_ipc_allocs.h"
#include "cuda_ipc_key.h"
#include "nccl_key.h"

static cuda_ipc_key sample_ipc(void)
{
    cuda_ipc_key k;

    memset(&k, 0, sizeof(k));
    k.pid = 4242;
    k.device = 3;
    k.rank = 7;
    k.alloc_base = 0x7f0000000000ull;
    k.alloc_size = 1ull << 30;
    k.offset = 4096;
    k.bytes = 1ull << 20;
    for (unsigned i = 0; i < CUDA_IPC_HANDLE_BYTES; i++)
        k.handle[i] = (unsigned char)(i * 37 + 1);
    return k;
}

START_TEST(ipc_key_round_trips)
{
    cuda_ipc_key k = sample_ipc(), back;
    unsigned char buf[256];
    char why[160];
    size_t len = cuda_ipc_key_encode(&k, buf, sizeof(buf));

    ck_assert_uint_eq(len, CUDA_IPC_KEY_BYTES);
    ck_assert_int_eq(cuda_ipc_key_decode(buf, len, &back, why, sizeof(why)), 0);
    ck_assert_int_eq(memcmp(&k, &back, sizeof(k)), 0);
    ck_assert_uint_eq(cuda_ipc_key_encode(&k, buf, CUDA_IPC_KEY_BYTES - 1), 0);
}
END_TEST

START_TEST(ipc_key_refuses_corruption)
{
    cuda_ipc_key k = sample_ipc(), back;
    unsigned char buf[256], bad[256];
    char why[160];
    size_t len = cuda_ipc_key_encode(&k, buf, sizeof(buf));
    struct {
        size_t at;
        unsigned char value;
        const char *reason;
    } cases[] = {
        {0, 'X', "magic"},
        {4, 9, "version"},
        {6, 1, "reserved"},
    };

    ck_assert_int_eq(cuda_ipc_key_decode(buf, len - 1, &back, why, sizeof(why)),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "bytes"));
    for (size_t i = 0; i < 3; i++) {
        memcpy(bad, buf, len);
        bad[cases[i].at] = cases[i].value;
        ck_assert_int_eq(cuda_ipc_key_decode(bad, len, &back, why, sizeof(why)),
                         -1);
        ck_assert_msg(strstr(why, cases[i].reason) != NULL, "%s", why);
    }
    k.pid = 0;
    cuda_ipc_key_encode(&k, bad, sizeof(bad));
    ck_assert_int_eq(cuda_ipc_key_decode(bad, len, &back, why, sizeof(why)),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "pid"));
    k = sample_ipc();
    k.offset = k.alloc_size - 10; /* the buffer runs past its allocation */
    cuda_ipc_key_encode(&k, bad, sizeof(bad));
    ck_assert_int_eq(cuda_ipc_key_decode(bad, len, &back, why, sizeof(why)),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "overruns"));
}
END_TEST

START_TEST(allocs_merge_tensors_of_one_allocation)
{
    ipc_allocs t = {NULL};
    ipc_alloc *pool = ipc_allocs_add(&t, 0, 0x1000, 0x10000);
    ipc_alloc *other = ipc_allocs_add(&t, 0, 0x20000, 0x100);

    /* three tensors inside the pool find it; one straddling its end and
     * one of another owner do not */
    ck_assert_ptr_eq(ipc_allocs_containing(&t, 0, 0x1000, 16), pool);
    ck_assert_ptr_eq(ipc_allocs_containing(&t, 0, 0x8000, 0x100), pool);
    ck_assert_ptr_eq(ipc_allocs_containing(&t, 0, 0x10f00, 0x100), pool);
    ck_assert_ptr_null(ipc_allocs_containing(&t, 0, 0x10f00, 0x101));
    ck_assert_ptr_null(ipc_allocs_containing(&t, 9, 0x1000, 16));
    ck_assert_ptr_eq(ipc_allocs_containing(&t, 0, 0x20000, 0x100), other);
    ck_assert_ptr_eq(ipc_allocs_find(&t, 0, 0x1000), pool);
    ck_assert_ptr_null(ipc_allocs_find(&t, 0, 0x1001));

    pool->refs += 2; /* three tensors share it */
    ck_assert_int_eq(ipc_allocs_release(&t, pool), 0);
    ck_assert_int_eq(ipc_allocs_release(&t, pool), 0);
    ck_assert_ptr_eq(ipc_allocs_find(&t, 0, 0x1000), pool);
    ck_assert_int_eq(ipc_allocs_release(&t, pool), 1); /* last: unlinked */
    ck_assert_ptr_null(ipc_allocs_find(&t, 0, 0x1000));
    free(pool);
    ck_assert_int_eq(ipc_allocs_release(&t, other), 1);
    ck_assert_ptr_null(t.head);
    free(other);
}
END_TEST

static nccl_key sample_nccl(void)
{
    nccl_key k;

    memset(&k, 0, sizeof(k));
    k.rank = 3;
    k.bytes = 12345;
    k.group_size = 384;
    return k;
}

START_TEST(nccl_key_round_trips)
{
    nccl_key k = sample_nccl(), back;
    unsigned char buf[512];
    char why[160];
    size_t len = nccl_key_encode(&k, buf, sizeof(buf));

    ck_assert_uint_eq(len, NCCL_KEY_BYTES);
    ck_assert_int_eq(nccl_key_decode(buf, len, &back, why, sizeof(why)), 0);
    ck_assert_uint_eq(back.rank, 3);
    ck_assert_uint_eq(back.bytes, 12345);
    ck_assert_uint_eq(back.group_size, 384);
    ck_assert_uint_eq(nccl_key_encode(&k, buf, NCCL_KEY_BYTES - 1), 0);
}
END_TEST

/* One communicator per job: destinations first, then sources. */
START_TEST(nccl_group_numbers_every_rank_of_the_job_once)
{
    const uint64_t S = 256, D = 128; /* Kimi-K2's sample */
    unsigned char seen[384] = {0};

    ck_assert_int_eq(nccl_group_size(S, D), 384);
    for (uint64_t r = 0; r < D; r++) {
        int64_t g = nccl_group_rank(WEX_SIDE_DESTINATION, r, S, D);
        ck_assert_int_eq(g, (int64_t)r);
        seen[g]++;
    }
    for (uint64_t r = 0; r < S; r++) {
        int64_t g = nccl_group_rank(WEX_SIDE_SOURCE, r, S, D);
        ck_assert_int_eq(g, (int64_t)(D + r));
        seen[g]++;
    }
    for (int g = 0; g < 384; g++)
        ck_assert_int_eq(seen[g], 1);
    ck_assert_int_eq(nccl_group_rank(WEX_SIDE_SOURCE, S, S, D), -1);
    ck_assert_int_eq(nccl_group_rank(WEX_SIDE_DESTINATION, D, S, D), -1);
    ck_assert_int_eq(nccl_group_rank(7, 0, S, D), -1);
    ck_assert_int_eq(nccl_group_size(0, D), -1);
    ck_assert_int_eq(nccl_group_size(1ull << 31, 1), -1);
    ck_assert_int_eq(nccl_group_size((1ull << 31) - 2, 1), (1ll << 31) - 1);
    ck_assert_int_eq(nccl_group_rank(WEX_SIDE_SOURCE, 0, 1ull << 31, 1), -1);
}
END_TEST

START_TEST(nccl_key_refuses_corruption)
{
    nccl_key k = sample_nccl(), back;
    unsigned char buf[512], bad[512];
    char why[160];
    size_t len = nccl_key_encode(&k, buf, sizeof(buf));

    ck_assert_uint_gt(len, 0);
    ck_assert_int_eq(nccl_key_decode(buf, len + 1, &back, why, sizeof(why)),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "41 bytes, not 40"));
    ck_assert_int_eq(nccl_key_decode(buf, len - 1, &back, why, sizeof(why)),
                     -1);
    ck_assert_ptr_nonnull(strstr(why, "header"));
    memcpy(bad, buf, len);
    bad[1] ^= 0xff;
    ck_assert_int_eq(nccl_key_decode(bad, len, &back, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "magic"));
    memcpy(bad, buf, len);
    bad[4] = 1; /* the version of the keys that carried the id */
    ck_assert_int_eq(nccl_key_decode(bad, len, &back, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "version"));
    memcpy(bad, buf, len);
    bad[32] = 1;
    ck_assert_int_eq(nccl_key_decode(bad, len, &back, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "reserved"));
    memcpy(bad, buf, len);
    memset(bad + 16, 0, 8); /* zero-byte buffer */
    ck_assert_int_eq(nccl_key_decode(bad, len, &back, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "size 0"));
    memcpy(bad, buf, len);
    bad[8] = 0x80;
    bad[9] = 0x01; /* destination rank 384 of 384 */
    ck_assert_int_eq(nccl_key_decode(bad, len, &back, why, sizeof(why)), -1);
    ck_assert_ptr_nonnull(strstr(why, "rank 384 in a group of 384"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gpu_transport_keys");
    TCase *tc = tcase_create("keys");

    tcase_add_test(tc, ipc_key_round_trips);
    tcase_add_test(tc, ipc_key_refuses_corruption);
    tcase_add_test(tc, allocs_merge_tensors_of_one_allocation);
    tcase_add_test(tc, nccl_key_round_trips);
    tcase_add_test(tc, nccl_group_numbers_every_rank_of_the_job_once);
    tcase_add_test(tc, nccl_key_refuses_corruption);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
