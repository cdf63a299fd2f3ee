/* Plan shares: every rank opened from its share holds what planning it
 * whole gives (its operations, its layout, its peers' tensors, the fp8
 * cells it quantizes, the sides' digest, the replicated sources); a
 * share of another job, or a damaged one, is not used; a planner opened
 * from a share lays everything out on demand and keeps its rank's
 * layout where it was. */
#include <check.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_run.h"
#include "error.h"
#include "host_registry.h"
#include "plan_share.h"
#include "registry.h"
#include "job.h"

static wex__registry *registry;
static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/wex-test-shares-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    ck_assert_int_eq(wex__registry_scan(&registry), WEX_OK);
}

static void teardown(void)
{
    char cmd[128];

    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    wex__registry_free(registry);
}

static wex__job_config *read_job(const char *path)
{
    wex__job_config *job = NULL;

    ck_assert_msg(wex__job_config_load(path, registry, WEX__JOB_PLAN_ONLY, &job,
                                       NULL) == WEX_OK,
                  "%s", wex__last_error());
    return job;
}

static void open_full(wex__planner *p, const char *path)
{
    ck_assert_msg(wex__planner_open_job(p, registry, read_job(path)) == WEX_OK,
                  "%s", wex__last_error());
}

static void same_tensor(const wex__local_tensor *a, const wex__local_tensor *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_uint_eq(a->dtype, b->dtype);
    ck_assert_uint_eq(a->ndim, b->ndim);
    ck_assert_mem_eq(a->shape, b->shape, a->ndim * sizeof(uint64_t));
    ck_assert_uint_eq(a->bytes, b->bytes);
}

static void same_layout(const wex__rank_layout *a, const wex__rank_layout *b)
{
    ck_assert_uint_eq(a->coord_count, b->coord_count);
    for (size_t i = 0; i < a->coord_count; i++) {
        ck_assert_str_eq(a->coords[i].key, b->coords[i].key);
        ck_assert_int_eq(a->coords[i].value, b->coords[i].value);
    }
    ck_assert_uint_eq(a->tensor_count, b->tensor_count);
    for (size_t i = 0; i < a->tensor_count; i++)
        same_tensor(&a->tensors[i], &b->tensors[i]);
    ck_assert_uint_eq(a->piece_count, b->piece_count);
    ck_assert_mem_eq(a->pieces, b->pieces, a->piece_count * sizeof(*a->pieces));
    ck_assert_uint_eq(a->bytes, b->bytes);
}

/* Rank `rank` of `side` opened from its share against the full plan. */
static void check_rank(wex__planner *full, const char *path, uint32_t side,
                       uint64_t rank, int *quantized)
{
    wex__planner shared;
    wex_plan_builder want, got;
    const wex__side *mine = side == WEX_SIDE_SOURCE ? &shared.src : &shared.dst;
    const wex__side *theirs =
        side == WEX_SIDE_SOURCE ? &shared.dst : &shared.src;
    const wex__side *full_theirs =
        side == WEX_SIDE_SOURCE ? &full->dst : &full->src;
    wex__job_config *job = read_job(path);

    ck_assert_msg(wex__planner_open_share(&shared, registry, job, dir, side,
                                          rank, &got) == 1,
                  "%s rank %llu: no share opened", path,
                  (unsigned long long)rank);
    wex__plan_builder_init(&want, &full->src, &full->dst);
    ck_assert_int_eq(wex__planner_rank(full, side, rank, &want), WEX_OK);
    ck_assert_uint_eq(got.count, want.count);
    if (want.count)
        ck_assert_mem_eq(got.ops, want.ops, want.count * sizeof(*want.ops));
    ck_assert_uint_eq(shared.src.ranks, full->src.ranks);
    ck_assert_uint_eq(shared.dst.ranks, full->dst.ranks);
    ck_assert_mem_eq(shared.src.hosts, full->src.hosts,
                     full->src.ranks * sizeof(uint64_t));
    same_layout(
        &mine->layouts[rank],
        &(side == WEX_SIDE_SOURCE ? &full->src : &full->dst)->layouts[rank]);
    for (size_t i = 0; i < got.count; i++) {
        uint64_t r =
            side == WEX_SIDE_SOURCE ? got.ops[i].dst_rank : got.ops[i].src_rank;
        uint64_t t = side == WEX_SIDE_SOURCE ? got.ops[i].dst_tensor
                                             : got.ops[i].src_tensor;
        same_tensor(&theirs->layouts[r].tensors[t],
                    &full_theirs->layouts[r].tensors[t]);
        /* a source's: the one that quantizes */
        if (side == WEX_SIDE_SOURCE &&
            got.ops[i].transform == WEX__OP_QUANTIZE) {
            wex__qcell *a, *b;
            size_t na, nb;
            ck_assert_int_eq(wex__quantize_cells(&shared, got.ops[i].dst_rank,
                                                 got.ops[i].dst_piece, NULL, 0,
                                                 &a, &na),
                             WEX_OK);
            ck_assert_int_eq(wex__quantize_cells(full, got.ops[i].dst_rank,
                                                 got.ops[i].dst_piece, NULL, 0,
                                                 &b, &nb),
                             WEX_OK);
            ck_assert_uint_gt(na, 0);
            ck_assert_uint_eq(na, nb);
            for (size_t c = 0; c < na; c++) {
                ck_assert_mem_eq(a[c].lo, b[c].lo, sizeof(a[c].lo));
                ck_assert_mem_eq(a[c].hi, b[c].hi, sizeof(a[c].hi));
                ck_assert_uint_eq(a[c].src_rank, b[c].src_rank);
            }
            free(a);
            free(b);
            *quantized = 1;
        }
    }
    ck_assert_uint_eq(wex__planner_sides_digest(&shared),
                      wex__planner_sides_digest(full));
    ck_assert_mem_eq(wex__planner_replicated(&shared),
                     wex__planner_replicated(full),
                     (full->src.ranks + 7) / 8 + 1);
    wex__plan_builder_fini(&want);
    wex__plan_builder_fini(&got);
    wex__planner_close(&shared);
}

static void every_rank(const char *path, int expect_quantized)
{
    wex__planner full;
    int quantized = 0;

    open_full(&full, path);
    for (uint32_t side = 0; side < 2; side++) {
        uint64_t ranks =
            side == WEX_SIDE_SOURCE ? full.src.ranks : full.dst.ranks;
        for (uint64_t r = 0; r < ranks; r++) {
            ck_assert_msg(wex__share_make(&full, dir, side, r, NULL) == WEX_OK,
                          "%s", wex__last_error());
            check_rank(&full, path, side, r, &quantized);
        }
    }
    ck_assert_int_eq(quantized, expect_quantized);
    wex__planner_close(&full);
}

START_TEST(every_rank_replays_its_share)
{
    every_rank(
        WEX_SAMPLES_DIR "/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json", 0);
    /* bf16 into fp8 across shards: the sources' cells come from shares */
    every_rank(WEX_TEST_DATA "/jobs/fp8-megatron-tp4-to-vllm-tp2.json", 1);
    /* fp8 into bf16: dequantizing operations and their block scales */
    every_rank(WEX_TEST_DATA "/jobs/fp8-vllm-tp2-to-megatron-tp2.json", 0);
}
END_TEST

static const char *job_text =
    "{\"model\": \"%s\", \"source\": {\"engine\": \"megatron\", "
    "\"parallel\": {\"tp\": 2, \"dp\": %d}}, \"destination\": {\"engine\": "
    "\"vllm\", "
    "\"parallel\": {\"tp\": %d}}, \"transport\": \"shm\", "
    "\"rendezvous\": {\"address\": \"127.0.0.1:%d\", \"token\": "
    "\"sharetoken\"}, \"topology\": {\"placement\": \"colocated\", "
    "\"gpus_per_host\": 2}}";

static void write_job(const char *path, const char *model, int src_dp,
                      int dst_tp, int port)
{
    FILE *f = fopen(path, "w");

    ck_assert_ptr_nonnull(f);
    fprintf(f, job_text, model, src_dp, dst_tp, port);
    ck_assert_int_eq(fclose(f), 0);
}

static void copy_file(const char *from, const char *to)
{
    char cmd[1024];

    snprintf(cmd, sizeof(cmd), "cp %s %s", from, to);
    ck_assert_int_eq(system(cmd), 0);
}

static int opens(const char *job_path, uint32_t side, uint64_t rank)
{
    wex__planner p;
    wex_plan_builder b;
    wex__job_config *job = read_job(job_path);
    int found = wex__planner_open_share(&p, registry, job, dir, side, rank, &b);

    if (found) {
        wex__plan_builder_fini(&b);
        wex__planner_close(&p);
    } else {
        wex__job_config_free(job);
    }
    return found;
}

static void make_all(const char *job_path)
{
    wex__planner full;

    open_full(&full, job_path);
    for (uint64_t r = 0; r < full.dst.ranks; r++)
        ck_assert_int_eq(
            wex__share_make(&full, dir, WEX_SIDE_DESTINATION, r, NULL), WEX_OK);
    wex__planner_close(&full);
}

/* What the plan is a function of names the share: another model file,
 * another parallel config, finds none; the rendezvous does not count. */
START_TEST(share_of_another_job_is_not_found)
{
    char model[128], job[128];

    snprintf(model, sizeof(model), "%s/model.json", dir);
    snprintf(job, sizeof(job), "%s/job.json", dir);
    copy_file(WEX_SAMPLES_DIR "/models/Qwen3-0.6B.config.json", model);
    write_job(job, model, 1, 2, 29400);
    make_all(job);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 1), 1);
    /* the rendezvous moved: the same plan */
    write_job(job, model, 1, 2, 29401);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 1), 1);
    /* the model's bytes changed (a space more) */
    {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "echo ' ' >> %s", model);
        ck_assert_int_eq(system(cmd), 0);
    }
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 1), 0);
    copy_file(WEX_SAMPLES_DIR "/models/Qwen3-0.6B.config.json", model);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 1), 1);
    /* another parallel config */
    write_job(job, model, 1, 1, 29401);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 0), 0);
    /* a rank that has no share */
    write_job(job, model, 1, 2, 29401);
    ck_assert_int_eq(opens(job, WEX_SIDE_SOURCE, 0), 0);
}
END_TEST

static void share_file(const char *job, uint32_t side, uint64_t rank,
                       char *path, size_t cap)
{
    wex__job_config *cfg = read_job(job);

    ck_assert_int_eq(wex__share_path(cfg, dir, side, rank, path, cap), WEX_OK);
    wex__job_config_free(cfg);
}

/* A flipped byte, a cut file, another rank's file under this rank's
 * name: not used, and no crash. */
START_TEST(damaged_share_is_not_used)
{
    const char *job =
        WEX_SAMPLES_DIR "/jobs/qwen3-0.6b-megatron-to-vllm-colocated.json";
    char path[4096], other[4096];
    struct stat st;
    int fd;
    unsigned char byte;

    make_all(job);
    share_file(job, WEX_SIDE_DESTINATION, 2, path, sizeof(path));
    share_file(job, WEX_SIDE_DESTINATION, 3, other, sizeof(other));
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 2), 1);
    ck_assert_int_eq(stat(path, &st), 0);
    fd = open(path, O_RDWR);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(pread(fd, &byte, 1, st.st_size / 2), 1);
    byte ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &byte, 1, st.st_size / 2), 1);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 2), 0);
    byte ^= 0x10;
    ck_assert_int_eq(pwrite(fd, &byte, 1, st.st_size / 2), 1);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 2), 1);
    ck_assert_int_eq(ftruncate(fd, st.st_size - 7), 0);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 2), 0);
    ck_assert_int_eq(ftruncate(fd, 10), 0);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 2), 0);
    close(fd);
    ck_assert_int_eq(rename(other, path), 0);
    ck_assert_int_eq(opens(job, WEX_SIDE_DESTINATION, 2), 0);
}
END_TEST

/* Completing a shared planner: the whole plan, the operations of the
 * rank unchanged, its local tensors (their names) where they were, and
 * the sides' views of its pieces valid: planning around a dead source
 * gives what the full planner gives. */
START_TEST(complete_lays_out_and_keeps_the_rank)
{
    char job[128];
    wex__planner p, full;
    wex_plan_builder b, again;
    const char *name;
    const wex__local_tensor *tensors;

    /* Megatron TP2 DP2: source 3 holds what source 1 holds */
    snprintf(job, sizeof(job), "%s/job.json", dir);
    write_job(job, WEX_SAMPLES_DIR "/models/Qwen3-0.6B.config.json", 2, 2,
              29403);
    make_all(job);
    ck_assert_int_eq(wex__planner_open_share(&p, registry, read_job(job), dir,
                                             WEX_SIDE_DESTINATION, 1, &b),
                     1);
    ck_assert_ptr_null(p.dst.canon_start);
    ck_assert_ptr_null(p.src.model);
    tensors = p.dst.layouts[1].tensors;
    name = tensors[0].name;
    ck_assert_int_eq(wex__planner_complete(&p, WEX_SIDE_DESTINATION, 1),
                     WEX_OK);
    ck_assert_int_eq(p.from_share, 0);
    ck_assert_ptr_nonnull(p.dst.canon_start);
    ck_assert_ptr_nonnull(p.src.model);
    ck_assert_ptr_eq(p.dst.layouts[1].tensors, tensors);
    ck_assert_ptr_eq(p.dst.layouts[1].tensors[0].name, name);
    open_full(&full, job);
    same_layout(&p.src.layouts[3], &full.src.layouts[3]);
    ck_assert_uint_eq(wex__planner_sides_digest(&p),
                      wex__planner_sides_digest(&full));
    wex__plan_builder_init(&again, &p.src, &p.dst);
    ck_assert_int_eq(wex__planner_rank(&p, WEX_SIDE_DESTINATION, 1, &again),
                     WEX_OK);
    ck_assert_uint_eq(again.count, b.count);
    ck_assert_mem_eq(again.ops, b.ops, b.count * sizeof(*b.ops));
    {
        const uint64_t dead[] = {1};
        wex_plan_builder x, y;
        for (uint32_t side = 0; side < 2; side++)
            for (uint64_t r = 0; r < (side ? p.dst.ranks : p.src.ranks); r++) {
                if (side == WEX_SIDE_SOURCE && r == 1)
                    continue;
                wex__plan_builder_init(&x, &p.src, &p.dst);
                wex__plan_builder_init(&y, &full.src, &full.dst);
                ck_assert_int_eq(
                    wex__planner_rank_without(&p, side, r, dead, 1, &x),
                    WEX_OK);
                ck_assert_int_eq(
                    wex__planner_rank_without(&full, side, r, dead, 1, &y),
                    WEX_OK);
                ck_assert_uint_eq(x.count, y.count);
                if (x.count) /* a rank may have none */
                    ck_assert_mem_eq(x.ops, y.ops, x.count * sizeof(*x.ops));
                wex__plan_builder_fini(&x);
                wex__plan_builder_fini(&y);
            }
    }
    /* a second time: nothing to do */
    ck_assert_int_eq(wex__planner_complete(&p, WEX_SIDE_DESTINATION, 1),
                     WEX_OK);
    wex__plan_builder_fini(&again);
    wex__plan_builder_fini(&b);
    wex__planner_close(&full);
    wex__planner_close(&p);
}
END_TEST

/* wex_job_open with WEX_PLAN_SHARES: the first open of a rank plans and
 * leaves its share; the next opens from it, with the same operations. */
START_TEST(job_open_leaves_and_reads_its_share)
{
    char job[128], path[4096];
    wex_job *a = NULL, *b = NULL;

    snprintf(job, sizeof(job), "%s/job.json", dir);
    write_job(job, WEX_SAMPLES_DIR "/models/Qwen3-0.6B.config.json", 1, 2,
              29402);
    share_file(job, WEX_SIDE_SOURCE, 1, path, sizeof(path));
    setenv("WEX_PLAN_SHARES", dir, 1);
    ck_assert_msg(wex_job_open(job, WEX_SIDE_SOURCE, 1, NULL, &a) == WEX_OK,
                  "%s", wex_last_error());
    ck_assert_int_eq(a->plan.from_share, 0);
    ck_assert_int_eq(access(path, R_OK), 0);
    ck_assert_msg(wex_job_open(job, WEX_SIDE_SOURCE, 1, NULL, &b) == WEX_OK,
                  "%s", wex_last_error());
    ck_assert_int_eq(b->plan.from_share, 1);
    ck_assert_uint_eq(a->op_count, b->op_count);
    ck_assert_mem_eq(a->ops, b->ops, a->op_count * sizeof(*a->ops));
    ck_assert_uint_eq(a->peer_count, b->peer_count);
    ck_assert_mem_eq(a->peers, b->peers, a->peer_count * sizeof(*a->peers));
    ck_assert_uint_eq(wex_job_tensor_count(a), wex_job_tensor_count(b));
    /* what the share leaves out, laid out when asked */
    ck_assert_int_eq(wex__job_complete_plan(b), WEX_OK);
    ck_assert_int_eq(b->plan.from_share, 0);
    ck_assert_ptr_eq(b->layout, &b->plan.src.layouts[1]);
    wex_job_close(a);
    wex_job_close(b);
    unsetenv("WEX_PLAN_SHARES");
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("plan_share");
    TCase *tc = tcase_create("plan_share");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, every_rank_replays_its_share);
    tcase_add_test(tc, share_of_another_job_is_not_found);
    tcase_add_test(tc, damaged_share_is_not_used);
    tcase_add_test(tc, complete_lays_out_and_keeps_the_rank);
    tcase_add_test(tc, job_open_leaves_and_reads_its_share);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
