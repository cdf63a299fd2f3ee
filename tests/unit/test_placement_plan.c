/* Experts that move: the host's planner with the balanced policy, an
 * FSDP trainer into two vLLM servers of TP4 = EP4 holding Qwen3-30B-A3B's
 * 128 experts in 144 slots. A new placement of replica 1 lays out its
 * ranks again; replica 0's operations stay byte for byte what they were,
 * on both sides, and a map that is not a placement changes nothing. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "check_run.h"
#include "error.h"
#include "host_registry.h"
#include "plan.h"
#include "planner.h"
#include "registry.h"

#define EXPERTS 128
#define SLOTS 144
#define LAYERS 48

static wex__registry *registry;
static wex__planner planner;

static void setup(void)
{
    char text[1024];
    wex__job_config *job = NULL;

    snprintf(text, sizeof(text),
             "{\"model\": \"%s/models/Qwen3-30B-A3B.config.json\", "
             "\"source\": {\"engine\": \"fsdp\", \"parallel\": {\"dp\": 4}}, "
             "\"destination\": {\"engine\": \"vllm\", \"parallel\": "
             "{\"tp\": 4, \"ep\": 4, \"dp\": 2}, \"options\": "
             "{\"redundant_experts\": 16}}, \"transport\": \"shm\"}",
             WEX_SAMPLES_DIR);
    ck_assert_int_eq(wex__registry_scan(&registry), WEX_OK);
    ck_assert_msg(wex__job_config_parse("placement job", text, ".", registry,
                                        WEX__JOB_PLAN_ONLY, &job,
                                        NULL) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_msg(wex__planner_open_job(&planner, registry, job) == WEX_OK,
                  "%s", wex__last_error());
}

static void teardown(void)
{
    wex__planner_close(&planner);
    wex__registry_free(registry);
}

/* Rank `rank`'s operations, written out, keeping those into the
 * destination ranks [lo, hi) only. */
static char *ops_text(uint32_t side, uint64_t rank, uint64_t lo, uint64_t hi)
{
    wex_plan_builder b;
    char *text = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&text, &len);
    size_t kept = 0;

    wex__plan_builder_init(&b, &planner.src, &planner.dst);
    ck_assert_msg(wex__planner_rank(&planner, side, rank, &b) == WEX_OK, "%s",
                  wex__last_error());
    for (size_t i = 0; i < b.count; i++)
        if (b.ops[i].dst_rank >= lo && b.ops[i].dst_rank < hi)
            b.ops[kept++] = b.ops[i];
    ck_assert_uint_gt(kept, 0);
    wex__plan_write_ops(out, b.ops, kept);
    fclose(out);
    wex__plan_builder_fini(&b);
    return text;
}

/* Every layer's slots holding experts (p * 7 + layer) % 128: each expert
 * in some slot, no layer placed as linear placement places it. */
static cJSON *shuffled(void)
{
    cJSON *doc = cJSON_CreateObject();
    cJSON *rows = cJSON_AddArrayToObject(doc, "physical_to_logical");

    for (int l = 0; l < LAYERS; l++) {
        int row[SLOTS];
        for (int p = 0; p < SLOTS; p++)
            row[p] = (p * 7 + l + 1) % EXPERTS;
        cJSON_AddItemToArray(rows, cJSON_CreateIntArray(row, SLOTS));
    }
    return doc;
}

START_TEST(a_moved_replica_leaves_the_others_plans_alone)
{
    char *before_src[4], *before_dst[4], *moved_before, *moved_after;
    cJSON *map = shuffled();
    wex__engine *engine = NULL;

    for (uint64_t r = 0; r < 4; r++) {
        before_src[r] = ops_text(WEX_SIDE_SOURCE, r, 0, 4);
        before_dst[r] = ops_text(WEX_SIDE_DESTINATION, r, 0, 4);
    }
    moved_before = ops_text(WEX_SIDE_DESTINATION, 5, 4, 8);
    ck_assert_msg(wex__planner_open_placed(&planner, map, &engine) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_msg(wex__planner_place(&planner, engine, 4, 4) == WEX_OK, "%s",
                  wex__last_error());
    wex__engine_close(engine);
    for (uint64_t r = 0; r < 4; r++) {
        char *src = ops_text(WEX_SIDE_SOURCE, r, 0, 4);
        char *dst = ops_text(WEX_SIDE_DESTINATION, r, 0, 4);
        ck_assert_msg(strcmp(src, before_src[r]) == 0,
                      "source %llu's operations into replica 0 changed",
                      (unsigned long long)r);
        ck_assert_msg(strcmp(dst, before_dst[r]) == 0,
                      "destination %llu's operations changed",
                      (unsigned long long)r);
        free(src);
        free(dst);
        free(before_src[r]);
        free(before_dst[r]);
    }
    moved_after = ops_text(WEX_SIDE_DESTINATION, 5, 4, 8);
    ck_assert_msg(strcmp(moved_before, moved_after) != 0,
                  "the moved replica's operations are what they were");
    free(moved_before);
    free(moved_after);
    cJSON_Delete(map);
}
END_TEST

START_TEST(a_map_that_is_no_placement_changes_nothing)
{
    char *before = ops_text(WEX_SIDE_DESTINATION, 5, 4, 8), *after;
    cJSON *map = shuffled();
    cJSON *row = cJSON_GetArrayItem(
        cJSON_GetObjectItemCaseSensitive(map, "physical_to_logical"), 2);
    wex__engine *engine = NULL;

    /* layer 2 loses the expert slot 9 held */
    cJSON_ReplaceItemInArray(row, 9, cJSON_CreateNumber(EXPERTS));
    ck_assert_int_eq(wex__planner_open_placed(&planner, map, &engine),
                     WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex__last_error(),
                                 "options/expert_placement/physical_to_logical"
                                 "/2/9: slot 9 of layer 2: expected a logical "
                                 "expert 0..127"));
    ck_assert_ptr_null(engine);
    after = ops_text(WEX_SIDE_DESTINATION, 5, 4, 8);
    ck_assert_str_eq(before, after);
    free(before);
    free(after);
    cJSON_Delete(map);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("placement_plan");
    TCase *tc = tcase_create("placement");

    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_moved_replica_leaves_the_others_plans_alone);
    tcase_add_test(tc, a_map_that_is_no_placement_changes_nothing);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return wex_test_run(suite());
}
