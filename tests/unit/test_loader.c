/*
 * The plugin loader against fake plugins that each break one rule of the
 * contract (tests/plugins/fake_plugin.c), and against broken manifests
 * (tests/data/manifests/). Every failure must be one clear line.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>

#include "check_run.h"
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "error.h"
#include "host_registry.h"
#include "registry.h"

/* Scans exactly `places` (colon-separated, relative to the fake dir). */
static wex__registry *scan_fakes(const char *places)
{
    char value[4096] = "";
    char *copy = strdup(places), *save = NULL;
    wex__registry *r = NULL;

    for (char *t = strtok_r(copy, ":", &save); t;
         t = strtok_r(NULL, ":", &save)) {
        strcat(value, value[0] ? ":" : "");
        strcat(value, t[0] == '/' ? "" : WEX_FAKE_PLUGINS "/");
        strcat(value, t);
    }
    free(copy);
    ck_assert_int_eq(setenv("WEX_PLUGIN_MANIFESTS", value, 1), 0);
    ck_assert_int_eq(wex__registry_scan(&r), WEX_OK);
    return r;
}

/* Loads the one plugin of a fake dir; returns the status, error in buf. */
static wex_status load_one(const char *dir, const char *name, char *error,
                           size_t cap)
{
    wex__registry *r = scan_fakes(dir);
    wex__plugin *p = NULL;
    wex_status status;

    for (uint32_t k = WEX_KIND_ENGINE; k <= WEX_KIND_TRANSPORT && !p; k++)
        p = wex__registry_find(r, k, name);
    ck_assert_msg(p != NULL, "plugin %s not found in %s", name, dir);
    status = wex__plugin_load(r, p);
    snprintf(error, cap, "%s", status == WEX_OK ? "" : wex__last_error());
    /* The registry remembers the outcome and reports it again. */
    if (status != WEX_OK) {
        ck_assert_int_eq(p->state, WEX__PLUGIN_FAILED);
        ck_assert_str_eq(p->error, error);
        ck_assert_int_eq(wex__plugin_load(r, p),
                         status < 0 ? WEX_ERR_INVALID : status);
    }
    wex__registry_free(r);
    return status;
}

#define ASSERT_HAS(hay, needle)                                                \
    ck_assert_msg(strstr((hay), (needle)) != NULL, "'%s' lacks '%s'", (hay),   \
                  (needle))
#define ASSERT_ONE_LINE(s)                                                     \
    ck_assert_msg(strchr((s), '\n') == NULL, "not one line: %s", (s))

START_TEST(good_plugin_loads_and_negotiates)
{
    wex__registry *r = scan_fakes("good");
    wex__plugin *p = wex__registry_find(r, WEX_KIND_ENGINE, "fake-good");

    ck_assert_ptr_nonnull(p);
    ck_assert_int_eq(p->state, WEX__PLUGIN_FOUND);
    ck_assert_int_eq(wex__plugin_load(r, p), WEX_OK);
    ck_assert_int_eq(p->state, WEX__PLUGIN_LOADED);
    ck_assert_uint_eq(p->abi_version, WEX_ABI_1_0);
    ck_assert_str_eq(p->desc->name, "fake-good");
    ck_assert_ptr_nonnull(p->plugin_state);
    ck_assert_uint_eq(p->services.struct_size, sizeof(wex_host_services));
    /* Loading twice is a no-op. */
    ck_assert_int_eq(wex__plugin_load(r, p), WEX_OK);
    ck_assert_str_eq(p->manifest.version, "0.0.1");
    ck_assert_ptr_nonnull(p->manifest.options_schema);
    wex__registry_free(r);
}
END_TEST

START_TEST(first_plugin_of_a_name_wins_and_shadows)
{
    wex__registry *r = scan_fakes("good-copy:good");
    wex__plugin *p = wex__registry_find(r, WEX_KIND_ENGINE, "fake-good");

    ck_assert_uint_eq(r->count, 1);
    ck_assert_ptr_nonnull(strstr(p->manifest.path, "/good-copy/"));
    ck_assert_uint_eq(p->shadowed_count, 1);
    ck_assert_ptr_nonnull(strstr(p->shadowed[0], "/good/"));
    wex__registry_free(r);
}
END_TEST

START_TEST(plugin_path_is_searched_before_the_rest)
{
    wex__registry *r = NULL;

    unsetenv("WEX_PLUGIN_MANIFESTS");
    setenv("WEX_PLUGIN_PATH",
           WEX_FAKE_PLUGINS "/good:" WEX_FAKE_PLUGINS "/policy", 1);
    ck_assert_int_eq(wex__registry_scan(&r), WEX_OK);
    ck_assert_uint_ge(r->search_count, 2);
    ck_assert_ptr_nonnull(strstr(r->search[0], "/fake/good"));
    ck_assert_ptr_nonnull(strstr(r->search[1], "/fake/policy"));
    ck_assert_ptr_nonnull(wex__registry_find(r, WEX_KIND_ENGINE, "fake-good"));
    ck_assert_ptr_nonnull(
        wex__registry_find(r, WEX_KIND_POLICY, "fake-policy"));
    ck_assert_ptr_null(wex__registry_find(r, WEX_KIND_ENGINE, "fake-policy"));
    wex__registry_free(r);
}
END_TEST

START_TEST(disjoint_abi_range_is_refused_before_loading)
{
    char e[1024];

    ck_assert_int_eq(
        load_one("abi-disjoint", "fake-abi-disjoint", e, sizeof(e)),
        WEX_ERR_ABI);
    ASSERT_HAS(e, "ABI ranges are disjoint: the plugin implements 2.0..3.0, "
                  "this host accepts 1.0..1.6");
    ASSERT_ONE_LINE(e);
}
END_TEST

START_TEST(plugin_refusing_every_version)
{
    char e[1024];

    ck_assert_int_eq(load_one("refuse", "fake-refuse", e, sizeof(e)),
                     WEX_ERR_ABI);
    ASSERT_HAS(e, "the plugin refused ABI 1.0..1.0");
}
END_TEST

START_TEST(plugin_choosing_a_version_outside_the_offer)
{
    char e[1024];

    ck_assert_int_eq(
        load_one("out-of-range", "fake-out-of-range", e, sizeof(e)),
        WEX_ERR_ABI);
    ASSERT_HAS(e, "outside the offered 1.0..1.0");
}
END_TEST

START_TEST(missing_entry_symbol)
{
    char e[1024];

    ck_assert_int_eq(load_one("no-entry", "fake-no-entry", e, sizeof(e)),
                     WEX_ERR_INVALID);
    ASSERT_HAS(e, "no entry symbol 'wex_plugin_negotiate'");
    ASSERT_HAS(e, "libwex-engine-fake-no-entry.so");
}
END_TEST

START_TEST(entry_symbol_from_a_dependency)
{
    char e[1024];

    ck_assert_int_eq(
        load_one("borrowed-entry", "fake-borrowed-entry", e, sizeof(e)),
        WEX_ERR_INVALID);
    ASSERT_HAS(e, "is defined by");
    ASSERT_HAS(e, "libfake_dep.so, not by the plugin itself");
}
END_TEST

START_TEST(kind_mismatch)
{
    char e[1024];

    ck_assert_int_eq(
        load_one("kind-mismatch", "fake-kind-mismatch", e, sizeof(e)),
        WEX_ERR_INVALID);
    ASSERT_HAS(
        e, "kind mismatch: the manifest says engine, the library says policy");
}
END_TEST

START_TEST(name_mismatch)
{
    char e[1024];

    ck_assert_int_eq(
        load_one("name-mismatch", "fake-name-mismatch", e, sizeof(e)),
        WEX_ERR_INVALID);
    ASSERT_HAS(e, "name mismatch: the manifest says 'fake-name-mismatch', the "
                  "library says 'other-name'");
}
END_TEST

START_TEST(init_failure_carries_the_plugins_message)
{
    char e[1024];

    ck_assert_int_eq(load_one("init-fails", "fake-init-fails", e, sizeof(e)),
                     WEX_ERR_INVALID);
    ASSERT_HAS(e,
               "init failed (system error): cannot reach the license server");
    ASSERT_ONE_LINE(e);
}
END_TEST

START_TEST(descriptor_too_small)
{
    char e[1024];

    ck_assert_int_eq(load_one("small-desc", "fake-small-desc", e, sizeof(e)),
                     WEX_ERR_ABI);
    ASSERT_HAS(e, "descriptor struct_size 16 is smaller");
}
END_TEST

/* Loads a fake engine and drives it through the host's copy of its ops
 * table: one rank, rank 0 described, rank 1 refused. */
static wex__plugin *load_and_use(wex__registry *r, const char *name)
{
    wex__plugin *p = wex__registry_find(r, WEX_KIND_ENGINE, name);
    wex_engine_args args;
    wex_engine_ctx *ctx = NULL;
    uint64_t ranks = 0;

    ck_assert_ptr_nonnull(p);
    ck_assert_msg(wex__plugin_load(r, p) == WEX_OK, "%s: %s", name,
                  wex__last_error());
    memset(&args, 0, sizeof(args));
    args.struct_size = sizeof(args);
    ck_assert_int_eq(p->ops.engine.ctx_create(p->plugin_state, &args, &ctx),
                     WEX_OK);
    ck_assert_int_eq(p->ops.engine.rank_count(ctx, &ranks), WEX_OK);
    ck_assert_uint_eq(ranks, 1);
    ck_assert_int_eq(p->ops.engine.describe_rank(ctx, 0, NULL), WEX_OK);
    ck_assert_int_eq(p->ops.engine.describe_rank(ctx, 1, NULL),
                     WEX_ERR_INVALID);
    p->ops.engine.ctx_destroy(ctx);
    return p;
}

START_TEST(smallest_legal_1_0_tables_load_and_work)
{
    wex__registry *r = scan_fakes("min-tables");
    wex__plugin *p = load_and_use(r, "fake-min-tables");

    ck_assert_uint_eq(p->desc->struct_size, WEX_PLUGIN_DESC_SIZE_1_0);
    ck_assert_uint_eq(p->ops.struct_size, WEX_ENGINE_OPS_SIZE_1_0);
    wex__registry_free(r);
}
END_TEST

START_TEST(tables_larger_than_the_host_knows_load)
{
    wex__registry *r = scan_fakes("big-tables");
    wex__plugin *p = load_and_use(r, "fake-big-tables");

    ck_assert_uint_gt(p->desc->struct_size, sizeof(wex_plugin_desc));
    /* the host keeps the plugin's size but copies only what it knows */
    ck_assert_uint_gt(p->ops.struct_size, sizeof(wex_engine_ops));
    ck_assert_ptr_eq(p->ops.engine.describe_rank,
                     ((const wex_engine_ops *)p->desc->ops)->describe_rank);
    wex__registry_free(r);
}
END_TEST

START_TEST(ops_table_smaller_than_1_0_is_refused)
{
    char e[1024];

    ck_assert_int_eq(load_one("short-ops", "fake-short-ops", e, sizeof(e)),
                     WEX_ERR_ABI);
    ASSERT_HAS(e,
               "engine ops table missing or smaller than ABI 1.0's 48 bytes");
    ASSERT_ONE_LINE(e);
}
END_TEST

START_TEST(library_missing)
{
    char e[1024];

    ck_assert_int_eq(load_one(WEX_TEST_DATA "/manifests/missing-library",
                              "missing-library", e, sizeof(e)),
                     WEX_ERR_INVALID);
    ASSERT_HAS(e,
               "libwex-engine-nowhere.so is missing (named by /library_path)");
}
END_TEST

START_TEST(dlopen_error_is_verbatim)
{
    char e[1024];

    ck_assert_int_eq(
        load_one(WEX_TEST_DATA "/manifests/not-elf", "not-elf", e, sizeof(e)),
        WEX_ERR_SYSTEM);
    ASSERT_HAS(e, "dlopen failed: ");
    ASSERT_HAS(e, "not-elf.so");
    /* dlerror's own words for a text file */
    ASSERT_HAS(e, "invalid ELF header");
}
END_TEST

/* Each broken manifest is listed as invalid, with its file and pointer. */
static void expect_bad_manifest(const char *file, const char *message)
{
    char place[1024];
    wex__registry *r;

    snprintf(place, sizeof(place), WEX_TEST_DATA "/manifests/bad/%s", file);
    r = scan_fakes(place);
    ck_assert_uint_eq(r->count, 0);
    ck_assert_uint_eq(r->bad_count, 1);
    ASSERT_HAS(r->bad[0].error, file);
    ASSERT_HAS(r->bad[0].error, message);
    ASSERT_ONE_LINE(r->bad[0].error);
    wex__registry_free(r);
}

START_TEST(manifest_errors_name_file_and_pointer)
{
    expect_bad_manifest("syntax.json", "syntax.json:4:3: invalid JSON");
    expect_bad_manifest("missing-name.json",
                        ": : missing required property \"name\"");
    expect_bad_manifest("bad-kind.json", ": /kind: ");
    expect_bad_manifest("bad-abi.json",
                        ": /abi/min: expected MAJOR.MINOR, got \"one\"");
    expect_bad_manifest("abi-reversed.json",
                        ": /abi: min 1.2 is newer than max 1.0");
    expect_bad_manifest("future-format.json",
                        ": /file_format_version: format 2 is not supported");
    expect_bad_manifest("extra-field.json",
                        ": : unknown property \"libary_path\"");
    expect_bad_manifest("empty.json", "empty.json:1:1: invalid JSON");
    /* a field the host does not know, in a format it fully knows */
    expect_bad_manifest("unknown-field-same-minor.json",
                        ": : unknown property \"priority\"");
}
END_TEST

/* A manifest of a newer minor format may carry fields added since: the
 * host reads it, ignores them, and says so once at info level. */
START_TEST(newer_minor_manifest_fields_are_ignored)
{
    char log_path[] = "/tmp/wex-test-loader-XXXXXX";
    int fd = mkstemp(log_path), saved = dup(2);
    char text[4096] = "";
    wex__registry *r;
    wex__plugin *p;
    FILE *f;
    size_t n;

    ck_assert_int_ge(fd, 0);
    setenv("WEX_LOG_LEVEL", "info", 1);
    ck_assert_int_ge(dup2(fd, 2), 0);
    r = scan_fakes(WEX_TEST_DATA "/manifests/newer-minor");
    fflush(stderr);
    dup2(saved, 2);
    f = fdopen(fd, "r");
    rewind(f);
    n = fread(text, 1, sizeof(text) - 1, f);
    text[n] = '\0';
    fclose(f);
    unlink(log_path);

    ck_assert_uint_eq(r->bad_count, 0);
    ck_assert_uint_eq(r->count, 1);
    p = wex__registry_find(r, WEX_KIND_ENGINE, "newer-minor");
    ck_assert_ptr_nonnull(p);
    ck_assert_str_eq(p->manifest.version, "2.0.0");
    ck_assert_uint_eq(p->manifest.abi_max, WEX_MAKE_VERSION(1, 1));
    ck_assert_ptr_null(
        cJSON_GetObjectItemCaseSensitive(p->manifest.json, "priority"));
    ASSERT_HAS(
        text,
        "engine-newer-minor.json: manifest format 1.1.0 is newer than 1.0; "
        "ignoring what this host does not know: /abi/preferred, /priority");
    /* once: one line for the manifest */
    ck_assert_ptr_null(strstr(strstr(text, "ignoring") + 1, "ignoring"));
    wex__registry_free(r);
}
END_TEST

START_TEST(abi_version_parsing)
{
    uint32_t v = 0;

    ck_assert_int_eq(wex__parse_abi_version("1.0", &v), 0);
    ck_assert_uint_eq(v, WEX_ABI_1_0);
    ck_assert_int_eq(wex__parse_abi_version("2.15", &v), 0);
    ck_assert_uint_eq(v, WEX_MAKE_VERSION(2, 15));
    ck_assert_int_eq(wex__parse_abi_version("1", &v), -1);
    ck_assert_int_eq(wex__parse_abi_version("1.0.0", &v), -1);
    ck_assert_int_eq(wex__parse_abi_version("x.1", &v), -1);
    ck_assert_int_eq(wex__parse_abi_version("70000.1", &v), -1);
}
END_TEST

START_TEST(registry_names_lists_a_kind)
{
    wex__registry *r = scan_fakes("good:policy:transport");
    char *names = wex__registry_names(r, WEX_KIND_ENGINE);

    ck_assert_str_eq(names, "fake-good");
    free(names);
    names = wex__registry_names(r, WEX_KIND_TRANSPORT);
    ck_assert_str_eq(names, "fake-transport");
    free(names);
    wex__registry_free(r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("loader");
    TCase *tc = tcase_create("loader");

    tcase_add_test(tc, good_plugin_loads_and_negotiates);
    tcase_add_test(tc, first_plugin_of_a_name_wins_and_shadows);
    tcase_add_test(tc, plugin_path_is_searched_before_the_rest);
    tcase_add_test(tc, disjoint_abi_range_is_refused_before_loading);
    tcase_add_test(tc, plugin_refusing_every_version);
    tcase_add_test(tc, plugin_choosing_a_version_outside_the_offer);
    tcase_add_test(tc, missing_entry_symbol);
    tcase_add_test(tc, entry_symbol_from_a_dependency);
    tcase_add_test(tc, kind_mismatch);
    tcase_add_test(tc, name_mismatch);
    tcase_add_test(tc, init_failure_carries_the_plugins_message);
    tcase_add_test(tc, descriptor_too_small);
    tcase_add_test(tc, smallest_legal_1_0_tables_load_and_work);
    tcase_add_test(tc, tables_larger_than_the_host_knows_load);
    tcase_add_test(tc, ops_table_smaller_than_1_0_is_refused);
    tcase_add_test(tc, library_missing);
    tcase_add_test(tc, dlopen_error_is_verbatim);
    tcase_add_test(tc, manifest_errors_name_file_and_pointer);
    tcase_add_test(tc, newer_minor_manifest_fields_are_ignored);
    tcase_add_test(tc, abi_version_parsing);
    tcase_add_test(tc, registry_names_lists_a_kind);
    suite_add_tcase(s, tc);
    return wex_test_run(s);
}
