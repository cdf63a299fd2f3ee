/* Job configs: schema errors, plugin resolution, plugin options, defaults. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_run.h"
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "error.h"
#include "host_registry.h"
#include "job_config.h"
#include "json_file.h"

static wex__registry *registry(void)
{
    wex__registry *r = NULL;

    setenv("WEX_PLUGIN_MANIFESTS",
           WEX_FAKE_PLUGINS "/good:" WEX_FAKE_PLUGINS
                            "/policy:" WEX_FAKE_PLUGINS "/transport",
           1);
    ck_assert_int_eq(wex__registry_scan(&r), WEX_OK);
    return r;
}

#define JOB_HEAD "{\"model\": \"m/config.json\", "
#define GOOD_SIDES                                                             \
    "\"source\": {\"engine\": \"fake-good\", \"parallel\": {\"tp\": 2}}, "     \
    "\"destination\": {\"engine\": \"fake-good\"}, "

static wex_status parse(const char *text, wex__job_config **c, char **all)
{
    wex__registry *r = registry();
    wex_status status =
        wex__job_config_parse("job.json", text, "/jobs", r, 0, c, all);

    /* The config keeps pointers into the registry: free it last. */
    if (status == WEX_OK) {
        ck_assert_ptr_nonnull((*c)->source.plugin);
        ck_assert_str_eq((*c)->source.plugin->manifest.name, "fake-good");
        wex__job_config_free(*c);
    }
    wex__registry_free(r);
    return status;
}

START_TEST(valid_job_gets_defaults)
{
    wex__registry *r = registry();
    wex__job_config *c = NULL;
    const char *text = JOB_HEAD GOOD_SIDES
        "\"policy\": \"fake-policy\", \"transport\": {\"name\": "
        "\"fake-transport\", \"options\": {\"mode\": \"fast\"}}}";

    ck_assert_int_eq(
        wex__job_config_parse("job.json", text, "/jobs", r, 0, &c, NULL),
        WEX_OK);
    ck_assert_str_eq(c->model_path, "/jobs/m/config.json");
    ck_assert_str_eq(c->policy.name, "fake-policy");
    ck_assert_str_eq(c->transport.name, "fake-transport");
    ck_assert_int_eq(c->verify_digest, 1);
    ck_assert_uint_eq(c->staging_bytes, 64u << 20);
    ck_assert(c->connect_seconds == 60 && c->step_seconds == 300 &&
              c->peer_seconds == 10);
    ck_assert_int_eq(cJSON_GetObjectItem(c->source_parallel, "tp")->valueint,
                     2);
    ck_assert_int_eq(cJSON_GetObjectItem(c->source_parallel, "pp")->valueint,
                     1);
    wex__job_config_free(c);
    wex__registry_free(r);
}
END_TEST

START_TEST(schema_errors_are_all_reported)
{
    wex__job_config *c = NULL;
    char *all = NULL;
    const char *text = "{\"model\": \"\", \"source\": {\"engine\": "
                       "\"fake-good\", \"parallel\": {\"tp\": 0}},"
                       " \"destination\": {}, \"transport\": "
                       "\"fake-transport\", \"verify\": \"md5\","
                       " \"staging_bytes\": 4096}";

    ck_assert_int_eq(parse(text, &c, &all), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(all);
    ck_assert_ptr_nonnull(strstr(all, "job.json: /model: "));
    ck_assert_ptr_nonnull(strstr(all, "job.json: /source/parallel/tp: "));
    ck_assert_ptr_nonnull(strstr(
        all, "job.json: /destination: missing required property \"engine\""));
    ck_assert_ptr_nonnull(strstr(all, "job.json: /verify: "));
    ck_assert_ptr_nonnull(strstr(all, "job.json: /staging_bytes: "));
    /* The thread's error is the first line. */
    ck_assert_ptr_nonnull(strstr(all, wex__last_error()));
    free(all);
}
END_TEST

START_TEST(unknown_plugin_lists_the_available_ones)
{
    wex__job_config *c = NULL;
    char *all = NULL;
    const char *text = JOB_HEAD GOOD_SIDES
        "\"policy\": \"fake-policy\", \"transport\": \"rdma\"}";

    ck_assert_int_eq(parse(text, &c, &all), WEX_ERR_INVALID);
    ck_assert_str_eq(wex__last_error(),
                     "job.json: /transport: no transport plugin named \"rdma\" "
                     "(available: fake-transport)");
    free(all);
}
END_TEST

START_TEST(plugin_options_are_validated_against_the_manifest)
{
    wex__job_config *c = NULL;
    char *all = NULL;
    const char *text = JOB_HEAD
        "\"source\": {\"engine\": \"fake-good\", \"options\": {\"depth\": 9}}, "
        "\"destination\": {\"engine\": \"fake-good\", \"options\": "
        "{\"colour\": 1}}, "
        "\"policy\": \"fake-policy\", \"transport\": {\"name\": "
        "\"fake-transport\", \"options\": {\"mode\": \"slow\"}}}";

    ck_assert_int_eq(parse(text, &c, &all), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(all, "job.json: /source/options/depth: "));
    ck_assert_ptr_nonnull(strstr(
        all, "job.json: /destination/options: unknown property \"colour\""));
    ck_assert_ptr_nonnull(strstr(all, "job.json: /transport/options/mode: "));
    free(all);
}
END_TEST

START_TEST(default_policy_must_exist)
{
    wex__job_config *c = NULL;
    const char *text = JOB_HEAD GOOD_SIDES "\"transport\": \"fake-transport\"}";

    ck_assert_int_eq(parse(text, &c, NULL), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(strstr(
        wex__last_error(), "/policy: no policy plugin named \"balanced\""));
}
END_TEST

START_TEST(syntax_error_names_line_and_column)
{
    wex__job_config *c = NULL;

    ck_assert_int_eq(parse("{\n  \"model\": ,\n}", &c, NULL), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), "job.json:2:12: invalid JSON"));
}
END_TEST

START_TEST(missing_file_is_one_line)
{
    wex__registry *r = registry();
    wex__job_config *c = NULL;
    char *all = NULL;

    ck_assert_int_eq(
        wex__job_config_load("/nonexistent/job.json", r, 0, &c, &all),
        WEX_ERR_INVALID);
    ck_assert_str_eq(
        all, "/nonexistent/job.json: cannot open: No such file or directory\n");
    free(all);
    wex__registry_free(r);
}
END_TEST

static void json_refused(const char *text, size_t len, const char *why)
{
    cJSON *doc = NULL;

    if (len == 0)
        len = strlen(text);
    ck_assert_int_eq(wex__json_parse("job.json", text, len, &doc),
                     WEX_ERR_INVALID);
    ck_assert_ptr_null(doc);
    ck_assert_msg(strstr(wex__last_error(), why) != NULL, "want '%s', got '%s'",
                  why, wex__last_error());
    ck_assert_ptr_null(strchr(wex__last_error(), '\n'));
}

START_TEST(json_means_one_thing_to_wex_and_python)
{
    const char nul[] = "{\"a\": 1}\0{\"a\": 2}";
    cJSON *doc = NULL;

    /* duplicate keys: cJSON keeps the first, Python the last */
    json_refused(
        "{\"model\": \"a\", \"model\": \"b\"}", 0,
        "job.json: the top-level object: key \"model\" appears more than once");
    json_refused(
        "{\"source\": {\"parallel\": {\"tp\": 2, \"pp\": 1, \"tp\": 4}}}", 0,
        "job.json: /source/parallel: key \"tp\" appears more than once");
    json_refused("{\"a/b\": [0, {\"x~\": {\"k\": 1, \"k\": 2}}]}", 0,
                 "job.json: /a~1b/1/x~0: key \"k\" appears more than once");
    /* a NUL, and bytes after the value */
    json_refused(nul, sizeof(nul) - 1, "job.json: a NUL byte at offset 8");
    json_refused("{\"a\": 1} x", 0,
                 "job.json:1:10: bytes after the JSON value, from offset 9");
    json_refused("{\"a\": 1}\n{\"a\": 2}\n", 0,
                 "job.json:2:1: bytes after the JSON value, from offset 9");
    /* whitespace after the value, and equal keys in different objects, are fine */
    ck_assert_int_eq(
        wex__json_parse("job.json",
                        "{\"a\": {\"k\": 1}, \"b\": {\"k\": 1}}\n \t\r\n", 35,
                        &doc),
        WEX_OK);
    cJSON_Delete(doc);
}
END_TEST

START_TEST(an_input_that_is_not_a_regular_file_is_refused_at_once)
{
    char path[128];
    char *text = NULL;
    size_t len = 0;

    snprintf(path, sizeof(path), "/tmp/wex-test-job-config-fifo-%d",
             (int)getpid());
    unlink(path);
    ck_assert_int_eq(mkfifo(path, 0600), 0);
    /* no writer ever opens it: a blocking open would wait forever */
    ck_assert_int_eq(wex__read_file(path, &text, &len), WEX_ERR_INVALID);
    ck_assert_ptr_nonnull(
        strstr(wex__last_error(), ": not a regular file (a FIFO)"));
    ck_assert_ptr_nonnull(strstr(wex__last_error(), path));
    unlink(path);
    ck_assert_int_eq(wex__read_file("/dev/zero", &text, &len), WEX_ERR_INVALID);
    ck_assert_str_eq(wex__last_error(),
                     "/dev/zero: not a regular file (a character device)");
    ck_assert_int_eq(wex__read_file("/tmp", &text, &len), WEX_ERR_INVALID);
    ck_assert_str_eq(wex__last_error(),
                     "/tmp: not a regular file (a directory)");
    ck_assert_ptr_null(text);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("job_config");
    TCase *tc = tcase_create("job_config");

    tcase_add_test(tc, valid_job_gets_defaults);
    tcase_add_test(tc, schema_errors_are_all_reported);
    tcase_add_test(tc, unknown_plugin_lists_the_available_ones);
    tcase_add_test(tc, plugin_options_are_validated_against_the_manifest);
    tcase_add_test(tc, default_policy_must_exist);
    tcase_add_test(tc, syntax_error_names_line_and_column);
    tcase_add_test(tc, missing_file_is_one_line);
    tcase_add_test(tc, json_means_one_thing_to_wex_and_python);
    tcase_add_test(tc, an_input_that_is_not_a_regular_file_is_refused_at_once);
    tcase_set_timeout(tc, 20); /* a FIFO waited on fails, not hangs */
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
