/*
 * A run of the conformance kit: every check in order, each kind's own
 * only for that kind and only once the plugin loads, and the results as
 * text or JSON.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>

#include "conformance.h"

static const char *status_word(int status)
{
    switch (status) {
    case CONF_PASS: return "PASS";
    case CONF_FAIL: return "FAIL";
    case CONF_SKIP: return "SKIP";
    default: return "????";
    }
}

static void skip_rest(conf_ctx *ctx, int from, const char *why)
{
    for (int id = from; id <= CONF_LAST; id++)
        conf_set(ctx, id, CONF_SKIP, "%s", why);
}

static void run_kind(conf_ctx *ctx, uint32_t kind, const int *ids, size_t count,
                     void (*check)(conf_ctx *ctx))
{
    if (ctx->manifest.kind != kind) {
        for (size_t i = 0; i < count; i++)
            conf_set(ctx, ids[i], CONF_SKIP, "not %s %s",
                     kind == WEX_KIND_ENGINE ? "an" : "a",
                     wex_tool_kind_name(kind));
        return;
    }
    if (ctx->results[CONF_INIT_FINI].status != CONF_PASS) {
        for (size_t i = 0; i < count; i++)
            conf_set(ctx, ids[i], CONF_SKIP, "needs the plugin to load (C13)");
        return;
    }
    check(ctx);
}

/* Each kind's checks (C22 came after C21, so not always a range). */
static const int engine_ids[] = {CONF_ENGINE_DESCRIBE, CONF_ENGINE_COVERAGE,
                                 CONF_ENGINE_REFUSE};
static const int policy_ids[] = {CONF_POLICY_COVERAGE, CONF_POLICY_AGREE,
                                 CONF_POLICY_FAILOVER};
static const int transport_ids[] = {CONF_TRANSPORT_ROUNDTRIP,
                                    CONF_TRANSPORT_DEAD_PEER};

void conf_run_checks(conf_ctx *ctx)
{
    conf_check_manifest(ctx);
    if (!ctx->manifest_ok) {
        skip_rest(ctx, CONF_OPTIONS_SCHEMA, "needs a valid manifest (C01)");
        return;
    }
    conf_check_options_schema(ctx);
    if (ctx->results[CONF_MANIFEST].status != CONF_PASS) {
        skip_rest(ctx, CONF_EXPORTS, "needs the library (C01)");
        return;
    }
    conf_check_symbols(ctx);
    conf_check_negotiation(ctx);
    conf_check_init_fini(ctx);
    run_kind(ctx, WEX_KIND_ENGINE, engine_ids, 3, conf_check_engine);
    run_kind(ctx, WEX_KIND_POLICY, policy_ids, 3, conf_check_policy);
    run_kind(ctx, WEX_KIND_TRANSPORT, transport_ids, 2, conf_check_transport);
    if (ctx->stray_lines > 0)
        conf_set(ctx, CONF_SILENT, CONF_FAIL,
                 "printed %zu line%s itself instead of through host->log: "
                 "%s",
                 ctx->stray_lines, ctx->stray_lines == 1 ? "" : "s",
                 ctx->stray ? ctx->stray : "");
    else
        conf_set(ctx, CONF_SILENT, CONF_PASS,
                 "nothing printed outside the host's logger");
}

typedef struct tally {
    int passed, failed, skipped;
} tally;

static tally count_results(const conf_ctx *ctx)
{
    tally t = {0, 0, 0};

    for (int id = 1; id <= CONF_LAST; id++) {
        int s = ctx->results[id].status;
        t.passed += s == CONF_PASS;
        t.failed += s == CONF_FAIL || s == CONF_NOT_RUN;
        t.skipped += s == CONF_SKIP;
    }
    return t;
}

static void print_text(const conf_ctx *ctx, const char *arg, int verbose,
                       tally t)
{
    if (ctx->manifest_ok)
        printf("wex conformance: %s plugin '%s' (%s)\n",
               wex_tool_kind_name(ctx->manifest.kind), ctx->manifest.name,
               ctx->manifest_path);
    else
        printf("wex conformance: %s (%s)\n", arg, ctx->manifest_path);
    for (int id = 1; id <= CONF_LAST; id++) {
        const conf_result *r = &ctx->results[id];
        int detail = r->reason[0] && (r->status != CONF_PASS || verbose);
        printf("%s C%02d %s%s%s\n", status_word(r->status), id,
               conf_checks[id - 1].title, detail ? ": " : "",
               detail ? r->reason : "");
    }
    printf("summary: %d passed, %d failed, %d skipped: %s\n", t.passed,
           t.failed, t.skipped, t.failed ? "NOT conformant" : "conformant");
}

static void print_json(const conf_ctx *ctx, const char *arg, tally t)
{
    cJSON *doc = cJSON_CreateObject(), *plugin, *checks;
    char *text;

    plugin = cJSON_AddObjectToObject(doc, "plugin");
    cJSON_AddStringToObject(plugin, "argument", arg);
    cJSON_AddStringToObject(plugin, "manifest", ctx->manifest_path);
    if (ctx->manifest_ok) {
        cJSON_AddStringToObject(plugin, "name", ctx->manifest.name);
        cJSON_AddStringToObject(plugin, "kind",
                                wex_tool_kind_name(ctx->manifest.kind));
        cJSON_AddStringToObject(plugin, "version", ctx->manifest.version);
        cJSON_AddStringToObject(plugin, "library", ctx->manifest.library);
    }
    checks = cJSON_AddArrayToObject(doc, "checks");
    for (int id = 1; id <= CONF_LAST; id++) {
        const conf_result *r = &ctx->results[id];
        cJSON *c = cJSON_CreateObject();
        char name[16], status[8];

        snprintf(name, sizeof(name), "C%02d", id);
        snprintf(status, sizeof(status), "%s", status_word(r->status));
        for (char *s = status; *s; s++)
            *s = (char)(*s - 'A' + 'a');
        cJSON_AddStringToObject(c, "id", name);
        cJSON_AddStringToObject(c, "title", conf_checks[id - 1].title);
        cJSON_AddStringToObject(c, "rule", conf_checks[id - 1].rule);
        cJSON_AddStringToObject(c, "status", status);
        cJSON_AddStringToObject(c, "detail", r->reason);
        cJSON_AddItemToArray(checks, c);
    }
    cJSON_AddNumberToObject(doc, "passed", t.passed);
    cJSON_AddNumberToObject(doc, "failed", t.failed);
    cJSON_AddNumberToObject(doc, "skipped", t.skipped);
    cJSON_AddBoolToObject(doc, "conformant", t.failed == 0);
    text = cJSON_Print(doc);
    if (text)
        printf("%s\n", text);
    free(text);
    cJSON_Delete(doc);
}

int conf_print(const conf_ctx *ctx, const char *arg, int json, int verbose)
{
    tally t = count_results(ctx);

    if (json)
        print_json(ctx, arg, t);
    else
        print_text(ctx, arg, verbose, t);
    return t.failed;
}
