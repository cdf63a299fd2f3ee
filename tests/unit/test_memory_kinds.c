/*
 * wex_job_bind_memory / wex_job_alloc_memory without a GPU: unknown kinds
 * are invalid, and CUDA memory on a host without a device fails with "no
 * CUDA" (on a GPU host it is allocated), on either side of a host
 * transport.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/wex.h>

#include "check_run.h"

static wex_job *open_job(uint32_t side)
{
    char config[1024];
    wex_job_options o;
    wex_job *job = NULL;

    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    snprintf(config, sizeof(config),
             "{\"model\": \"%s/Qwen3-0.6B.config.json\", "
             "\"source\": {\"engine\": \"hf\"}, "
             "\"destination\": {\"engine\": \"hf\"}, \"transport\": \"shm\"}",
             WEX_MODELS_DIR);
    memset(&o, 0, sizeof(o));
    o.struct_size = sizeof(o);
    o.token = "test-token";
    o.rendezvous = "127.0.0.1:1";
    ck_assert_msg(wex_job_open(config, side, 0, &o, &job) == WEX_OK, "%s",
                  wex_last_error());
    return job;
}

/* CUDA memory for tensor 0: allocated on a GPU host, else refused with
 * "no CUDA". */
static void alloc_cuda(wex_job *job)
{
    void *p = NULL;
    wex_status st = wex_job_alloc_memory(job, 0, WEX_MEMORY_CUDA, &p);

    if (st == WEX_OK)
        ck_assert_ptr_nonnull(p);
    else
        ck_assert_msg(st == WEX_ERR_UNSUPPORTED &&
                          strstr(wex_last_error(), "no CUDA") != NULL,
                      "%d: %s", st, wex_last_error());
}

START_TEST(destination_cuda_over_a_host_transport)
{
    wex_job *job = open_job(WEX_SIDE_DESTINATION);
    void *p = NULL;

    /* shm writes a pinned host copy, copied to the device once checked
     * (test_device_staging runs it without a GPU) */
    alloc_cuda(job);
    ck_assert_int_eq(wex_job_alloc_memory(job, 0, 7, &p), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(wex_last_error(), "unknown memory kind 7"));
    /* the host kind still works, through the same entry point */
    ck_assert_int_eq(wex_job_alloc_memory(job, 1, WEX_MEMORY_HOST, &p), WEX_OK);
    ck_assert_ptr_nonnull(p);
    wex_job_close(job);
}
END_TEST

START_TEST(source_cuda_needs_a_device)
{
    wex_job *job = open_job(WEX_SIDE_SOURCE);

    /* a source's device memory reaches shm through pinned staging */
    alloc_cuda(job);
    wex_job_close(job);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("memory_kinds");
    TCase *tc = tcase_create("kinds");

    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, destination_cuda_over_a_host_transport);
    tcase_add_test(tc, source_cuda_needs_a_device);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
