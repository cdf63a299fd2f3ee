/* Planning around dead sources: the host's planner with the balanced
 * policy on the Qwen3-0.6B sample, Megatron (data parallel or not) into
 * vLLM. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_run.h"
#include "error.h"
#include "plan.h"
#include "planner.h"
#include "host_registry.h"
#include "registry.h"

static wex__registry *registry;
static wex__planner planner;

static void open_text(const char *text)
{
    wex__job_config *job = NULL;

    ck_assert_int_eq(wex__registry_scan(&registry), WEX_OK);
    ck_assert_msg(wex__job_config_parse("failover job", text, ".", registry,
                                        WEX__JOB_PLAN_ONLY, &job,
                                        NULL) == WEX_OK,
                  "%s", wex__last_error());
    ck_assert_msg(wex__planner_open_job(&planner, registry, job) == WEX_OK,
                  "%s", wex__last_error());
}

/* source parallel config, e.g. "\"tp\": 2, \"dp\": 2" */
static void open_job(const char *source_parallel)
{
    char text[1024];

    snprintf(text, sizeof(text),
             "{\"model\": \"%s/models/Qwen3-0.6B.config.json\", "
             "\"source\": {\"engine\": \"megatron\", \"parallel\": {%s}}, "
             "\"destination\": {\"engine\": \"vllm\", \"parallel\": "
             "{\"tp\": 2, \"dp\": 2}}, \"transport\": \"shm\", "
             "\"topology\": {\"placement\": \"colocated\", "
             "\"gpus_per_host\": 4}}",
             WEX_SAMPLES_DIR, source_parallel);
    open_text(text);
}

static void close_job(void)
{
    wex__planner_close(&planner);
    wex__registry_free(registry);
}

static void plan(uint32_t side, uint64_t rank, const uint64_t *dead,
                 uint64_t dead_count, wex_plan_builder *b)
{
    wex__plan_builder_init(b, &planner.src, &planner.dst);
    ck_assert_msg(wex__planner_rank_without(&planner, side, rank, dead,
                                            dead_count, b) == WEX_OK,
                  "%s", wex__last_error());
}

static uint64_t bytes_from(const wex_plan_builder *b, uint64_t src)
{
    uint64_t n = 0;

    for (size_t i = 0; i < b->count; i++)
        if (src == UINT64_MAX || b->ops[i].src_rank == src)
            n += b->ops[i].bytes;
    return n;
}

/* Megatron TP2 x DP2: source 3 holds what source 1 holds. Without 1,
 * every destination still receives all its bytes, none from 1, and each
 * live source lists exactly what the destinations expect of it. */
START_TEST(replicas_take_over_a_dead_source)
{
    const uint64_t dead[] = {1};
    wex_plan_builder full, without, src;

    open_job("\"tp\": 2, \"dp\": 2");
    for (uint64_t d = 0; d < planner.dst.ranks; d++) {
        plan(WEX_SIDE_DESTINATION, d, NULL, 0, &full);
        plan(WEX_SIDE_DESTINATION, d, dead, 1, &without);
        ck_assert_uint_gt(bytes_from(&full, 1), 0);
        ck_assert_uint_eq(bytes_from(&without, 1), 0);
        ck_assert_uint_eq(bytes_from(&without, UINT64_MAX),
                          bytes_from(&full, UINT64_MAX));
        for (uint64_t s = 0; s < planner.src.ranks; s++) {
            uint64_t listed = 0;
            plan(WEX_SIDE_SOURCE, s, dead, 1, &src);
            for (size_t i = 0; i < src.count; i++)
                if (src.ops[i].dst_rank == d)
                    listed += src.ops[i].bytes;
            ck_assert_uint_eq(listed, bytes_from(&without, s));
            if (s == 1)
                ck_assert_uint_eq(src.count, 0);
            wex__plan_builder_fini(&src);
        }
        wex__plan_builder_fini(&full);
        wex__plan_builder_fini(&without);
    }
    close_job();
}
END_TEST

/* Megatron TP2 x PP2 holds each region once: a destination that needs
 * a dead source's shards cannot be planned for, and the error says so.
 * (Destination 0, vLLM TP rank 0, needs only TP rank 0's shards, which
 * source 0 holds: it still plans.) */
START_TEST(no_replica_is_refused_in_one_line)
{
    const uint64_t dead[] = {1};
    wex_plan_builder b;
    wex_status st;

    open_job("\"tp\": 2, \"pp\": 2");
    plan(WEX_SIDE_DESTINATION, 0, dead, 1, &b);
    ck_assert_uint_eq(bytes_from(&b, 1), 0);
    wex__plan_builder_fini(&b);
    wex__plan_builder_init(&b, &planner.src, &planner.dst);
    st = wex__planner_rank_without(&planner, WEX_SIDE_DESTINATION, 1, dead, 1,
                                   &b);
    ck_assert_int_eq(st, WEX_ERR_INVALID);
    ck_assert_msg(strstr(wex__last_error(), "no live source piece holds") &&
                      strstr(wex__last_error(), "its holders are dead") &&
                      !strchr(wex__last_error(), '\n'),
                  "%s", wex__last_error());
    wex__plan_builder_fini(&b);
    close_job();
}
END_TEST

/* A policy that ignores the dead (the conformance kit's small policy
 * takes every region from its first holder) is refused by the host, so
 * the step fails instead of waiting on a dead peer. */
START_TEST(a_policy_that_plans_from_the_dead_is_refused)
{
    const uint64_t dead[] = {0};
    char text[512];
    wex_plan_builder b;
    wex_status st;

    setenv("WEX_PLUGIN_MANIFESTS",
           WEX_BROKEN_PLUGINS
           "/ignores-dead/policy-ignores-dead.json:" WEX_BUILD_PLUGINS
           "/engine-hf.json",
           1);
    snprintf(text, sizeof(text),
             "{\"model\": \"%s/models/Qwen3-0.6B.config.json\", "
             "\"source\": {\"engine\": \"hf\"}, "
             "\"destination\": {\"engine\": \"hf\"}, "
             "\"policy\": {\"name\": \"ignores-dead\"}, "
             "\"transport\": \"shm\"}",
             WEX_SAMPLES_DIR);
    open_text(text);
    wex__plan_builder_init(&b, &planner.src, &planner.dst);
    st = wex__planner_rank_without(&planner, WEX_SIDE_DESTINATION, 0, dead, 1,
                                   &b);
    ck_assert_int_eq(st, WEX_ERR_UNSUPPORTED);
    ck_assert_msg(strstr(wex__last_error(), "policy ignores-dead cannot fail "
                                            "over: it planned an operation "
                                            "from dead source rank 0"),
                  "%s", wex__last_error());
    wex__plan_builder_fini(&b);
    close_job();
    unsetenv("WEX_PLUGIN_MANIFESTS");
}
END_TEST

int main(void)
{
    Suite *s = suite_create("failover_plan");
    TCase *t = tcase_create("plan");

    tcase_set_timeout(t, 60);
    tcase_add_test(t, replicas_take_over_a_dead_source);
    tcase_add_test(t, no_replica_is_refused_in_one_line);
    tcase_add_test(t, a_policy_that_plans_from_the_dead_is_refused);
    suite_add_tcase(s, t);
    return wex_test_run(s);
}
