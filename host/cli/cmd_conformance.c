/* wex conformance: put one plugin through the plugin contract's checks. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "conformance.h"
#include "error.h"
#include "json_file.h"
#include "registry.h"
#include "jsonschema.h"

static void usage(FILE *out)
{
    fprintf(out,
            "usage: wex conformance PLUGIN [--json] [--verbose] "
            "[--models DIR]\n"
            "                       [--options JSON] [--timeout S] "
            "[--deadline S]\n"
            "\n"
            "Puts one plugin through the numbered checks of the plugin "
            "contract\n(docs/plugins.md, docs/conformance.md) and prints "
            "PASS, FAIL or SKIP\nfor each, then a summary. PLUGIN is a "
            "manifest (.json), a library with\nits manifest beside it, or "
            "the name of a plugin on the search path\n(KIND/NAME when "
            "names collide). Plugin code only runs in child\nprocesses: a "
            "crash or a hang fails the check, not the kit.\n"
            "\n"
            "  --json        one JSON document on stdout\n"
            "  --verbose     details for passing checks too\n"
            "  --models DIR  where %s is (default: $WEX_MODELS_DIR,\n"
            "                the install's share/wex/models, the source "
            "tree's\n                samples/models, ./samples/models)\n"
            "  --options J   the plugin's options (JSON object) for its "
            "contexts\n                (default: none, as a job without "
            "options)\n"
            "  --timeout S   limit for each check process (default 120)\n"
            "  --deadline S  C20: how long a put + flush to a killed peer "
            "may take\n                (default 15)\n"
            "\n"
            "Exit status: 0 when no check fails, 1 when one does, 2 for "
            "bad arguments.\n"
            "\n"
            "Checks:\n",
            CONF_MODEL_FILE);
    for (int i = 0; i < CONF_LAST; i++) {
        const conf_check_info *c = &conf_checks[i];
        const char *p = c->help;
        int col = 6, fresh = 1;

        fprintf(out, "  C%02d %s\n      enforces: %s\n      ", c->id,
                c->title, c->rule);
        /* the explanation, wrapped at 78 columns */
        while (*p) {
            const char *sp = strchr(p, ' ');
            int len = sp ? (int)(sp - p) : (int)strlen(p);
            if (!fresh && col + 1 + len > 78) {
                fprintf(out, "\n      ");
                col = 6;
                fresh = 1;
            }
            if (!fresh) {
                fputc(' ', out);
                col++;
            }
            fprintf(out, "%.*s", len, p);
            col += len;
            fresh = 0;
            p += len;
            while (*p == ' ')
                p++;
        }
        fputc('\n', out);
    }
}

/* ---- finding the plugin ------------------------------------------------- */

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);

    return a >= b && strcmp(s + a - b, suffix) == 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The manifest in the library's directory whose library_path is it. */
static char *manifest_beside(const char *library, char *err, size_t cap)
{
    char want[PATH_MAX], got[PATH_MAX], *dir = strdup(library), *slash;
    char **names = NULL, *found = NULL;
    size_t count = 0;
    struct dirent *e;
    DIR *d;

    if (dir == NULL || realpath(library, want) == NULL) {
        snprintf(err, cap, "%s: %s", library, strerror(errno));
        free(dir);
        return NULL;
    }
    slash = strrchr(dir, '/');
    if (slash != NULL)
        slash[slash == dir ? 1 : 0] = '\0';
    else
        strcpy(dir, ".");
    d = opendir(dir);
    while (d != NULL && (e = readdir(d)) != NULL) {
        char **grown;
        if (!ends_with(e->d_name, ".json") ||
            (grown = realloc(names, (count + 1) * sizeof(*grown))) == NULL)
            continue;
        names = grown;
        names[count++] = strdup(e->d_name);
    }
    if (d != NULL)
        closedir(d);
    if (count > 0)
        qsort(names, count, sizeof(*names), cmp_str);
    for (size_t i = 0; i < count; i++) {
        char *path = malloc(strlen(dir) + strlen(names[i]) + 2);
        const cJSON *lib;
        cJSON *doc = NULL;
        if (found == NULL && path != NULL) {
            sprintf(path, "%s/%s", dir, names[i]);
            if (wex__json_load(path, &doc) == WEX_OK &&
                cJSON_IsString(lib = cJSON_GetObjectItemCaseSensitive(
                                   doc, "library_path"))) {
                char *full = malloc(strlen(dir) +
                                    strlen(lib->valuestring) + 2);
                if (full != NULL) {
                    if (lib->valuestring[0] == '/')
                        strcpy(full, lib->valuestring);
                    else
                        sprintf(full, "%s/%s", dir, lib->valuestring);
                    if (realpath(full, got) != NULL &&
                        strcmp(got, want) == 0) {
                        found = path;
                        path = NULL;
                    }
                }
                free(full);
            }
            cJSON_Delete(doc);
        }
        free(path);
        free(names[i]);
    }
    free(names);
    if (found == NULL)
        snprintf(err, cap,
                 "no manifest in %s names %s as its library_path", dir,
                 library);
    free(dir);
    return found;
}

/* NAME or KIND/NAME on the search path. */
static char *manifest_by_name(const char *arg, char *err, size_t cap)
{
    const char *slash = strchr(arg, '/'), *name = slash ? slash + 1 : arg;
    uint32_t kind = 0;
    wex__registry *r = NULL;
    wex__plugin *match = NULL;
    size_t matches = 0;
    char *found = NULL;

    if (slash != NULL) {
        char k[32];
        snprintf(k, sizeof(k), "%.*s", (int)(slash - arg), arg);
        kind = wex__kind_from_name(k);
        if (kind == 0) {
            snprintf(err, cap, "%s: unknown kind '%s' (engine, policy or "
                               "transport)",
                     arg, k);
            return NULL;
        }
    }
    if (wex__registry_scan(&r) != WEX_OK) {
        snprintf(err, cap, "%s", wex__last_error());
        return NULL;
    }
    for (size_t i = 0; i < r->count; i++) {
        const wex__manifest *m = &r->plugins[i]->manifest;
        if (strcmp(m->name, name) == 0 && (kind == 0 || m->kind == kind)) {
            match = r->plugins[i];
            matches++;
        }
    }
    if (matches == 1) {
        found = strdup(match->manifest.path);
    } else if (matches > 1) {
        snprintf(err, cap, "'%s' names plugins of several kinds; say "
                           "KIND/%s",
                 name, name);
    } else {
        size_t used = (size_t)snprintf(err, cap, "no plugin named '%s' on "
                                                 "the search path (",
                                       arg);
        for (size_t i = 0; i < r->count && used < cap; i++) {
            const wex__manifest *m = &r->plugins[i]->manifest;
            used += (size_t)snprintf(err + used, cap - used, "%s%s/%s",
                                     i ? ", " : "", wex__kind_name(m->kind),
                                     m->name);
        }
        if (used < cap)
            snprintf(err + used, cap - used, "%s)",
                     r->count ? "" : "none found");
    }
    wex__registry_free(r);
    return found;
}

static char *resolve_plugin(const char *arg, char *err, size_t cap)
{
    struct stat st;

    if (stat(arg, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, cap, "%s is a directory: name a manifest, a "
                               "library or a plugin",
                     arg);
            return NULL;
        }
        if (ends_with(arg, ".json"))
            return strdup(arg);
        return manifest_beside(arg, err, cap);
    }
    /* not a file: KIND/NAME or NAME, unless it can only be a path */
    {
        const char *slash = strchr(arg, '/');
        char k[32] = "";

        if (slash != NULL)
            snprintf(k, sizeof(k), "%.*s", (int)(slash - arg), arg);
        if (ends_with(arg, ".json") || ends_with(arg, ".so") ||
            (slash != NULL && (wex__kind_from_name(k) == 0 ||
                               strchr(slash + 1, '/') != NULL))) {
            snprintf(err, cap, "%s: %s", arg, strerror(ENOENT));
            return NULL;
        }
    }
    return manifest_by_name(arg, err, cap);
}

/* The hf engine's manifest, for planning a policy's job. */
static char *hf_manifest(void)
{
    wex__registry *r = NULL;
    wex__plugin *p;
    char *out = NULL;

    if (wex__registry_scan(&r) != WEX_OK)
        return NULL;
    p = wex__registry_find(r, WEX_KIND_ENGINE, "hf");
    if (p != NULL)
        out = strdup(p->manifest.path);
    wex__registry_free(r);
    return out;
}

/* ---- the sample model --------------------------------------------------- */

static char *model_in(const char *dir)
{
    char path[PATH_MAX], real[PATH_MAX];

    if (dir == NULL || dir[0] == '\0')
        return NULL;
    snprintf(path, sizeof(path), "%s/%s", dir, CONF_MODEL_FILE);
    if (access(path, R_OK) != 0 || realpath(path, real) == NULL)
        return NULL;
    return strdup(real);
}

static char *find_model(const char *option)
{
    char exe[PATH_MAX], dir[PATH_MAX + 32];
    ssize_t n;
    char *found, *slash;

    if (option != NULL)
        return model_in(option);
    if ((found = model_in(getenv("WEX_MODELS_DIR"))) != NULL)
        return found;
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        slash = strrchr(exe, '/');
        if (slash != NULL)
            *slash = '\0';
        /* installed: bin/wex -> share/wex/models; a build tree inside
         * the source tree: build/bin/wex -> samples/models */
        snprintf(dir, sizeof(dir), "%s/../share/wex/models", exe);
        if ((found = model_in(dir)) != NULL)
            return found;
        snprintf(dir, sizeof(dir), "%s/../../samples/models", exe);
        if ((found = model_in(dir)) != NULL)
            return found;
    }
    return model_in("samples/models");
}

/* ---- running and reporting ---------------------------------------------- */

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

static void run_kind(conf_ctx *ctx, uint32_t kind, const int *ids,
                     size_t count, void (*check)(conf_ctx *ctx))
{
    if (ctx->manifest.kind != kind) {
        for (size_t i = 0; i < count; i++)
            conf_set(ctx, ids[i], CONF_SKIP, "not %s %s",
                     kind == WEX_KIND_ENGINE ? "an" : "a",
                     wex__kind_name(kind));
        return;
    }
    if (ctx->results[CONF_INIT_FINI].status != CONF_PASS) {
        for (size_t i = 0; i < count; i++)
            conf_set(ctx, ids[i], CONF_SKIP,
                     "needs the plugin to load (C13)");
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

static void run_checks(conf_ctx *ctx)
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

static void print_text(const conf_ctx *ctx, const char *arg, int verbose)
{
    tally t = count_results(ctx);

    if (ctx->manifest_ok)
        printf("wex conformance: %s plugin '%s' (%s)\n",
               wex__kind_name(ctx->manifest.kind), ctx->manifest.name,
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
           t.failed, t.skipped,
           t.failed ? "NOT conformant" : "conformant");
}

static void print_json(const conf_ctx *ctx, const char *arg)
{
    cJSON *doc = cJSON_CreateObject(), *plugin, *checks;
    tally t = count_results(ctx);
    char *text;

    plugin = cJSON_AddObjectToObject(doc, "plugin");
    cJSON_AddStringToObject(plugin, "argument", arg);
    cJSON_AddStringToObject(plugin, "manifest", ctx->manifest_path);
    if (ctx->manifest_ok) {
        cJSON_AddStringToObject(plugin, "name", ctx->manifest.name);
        cJSON_AddStringToObject(plugin, "kind",
                                wex__kind_name(ctx->manifest.kind));
        cJSON_AddStringToObject(plugin, "version", ctx->manifest.version);
        cJSON_AddStringToObject(plugin, "library", ctx->manifest.library);
    }
    checks = cJSON_AddArrayToObject(doc, "checks");
    for (int id = 1; id <= CONF_LAST; id++) {
        const conf_result *r = &ctx->results[id];
        cJSON *c = cJSON_CreateObject();
        char name[8], status[8];

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

static int parse_seconds(const char *opt, const char *text, double *out)
{
    char *end;
    double v;

    errno = 0;
    v = strtod(text, &end);
    if (*end != '\0' || errno != 0 || !(v > 0) || v > 86400) {
        fprintf(stderr, "wex conformance: %s: expected seconds in (0, "
                        "86400], got '%s'\n",
                opt, text);
        return -1;
    }
    *out = v;
    return 0;
}

int wex_cmd_conformance(int argc, char **argv)
{
    const char *arg = NULL, *models = NULL, *options_text = NULL;
    int json = 0, verbose = 0, rc = WEX_EXIT_USAGE;
    cJSON *options = NULL;
    char err[1024];
    conf_ctx ctx;
    tally t;

    memset(&ctx, 0, sizeof(ctx));
    ctx.timeout_s = 120;
    ctx.deadline_s = 15;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(stdout);
            return WEX_EXIT_OK;
        } else if (strcmp(a, "--json") == 0) {
            json = 1;
        } else if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            verbose = 1;
        } else if (next != NULL && strcmp(a, "--models") == 0) {
            models = argv[++i];
        } else if (next != NULL && strcmp(a, "--options") == 0) {
            options_text = argv[++i];
        } else if (next != NULL && strcmp(a, "--timeout") == 0) {
            if (parse_seconds(a, argv[++i], &ctx.timeout_s) != 0)
                return WEX_EXIT_USAGE;
        } else if (next != NULL && strcmp(a, "--deadline") == 0) {
            if (parse_seconds(a, argv[++i], &ctx.deadline_s) != 0)
                return WEX_EXIT_USAGE;
        } else if (a[0] == '-') {
            fprintf(stderr, "wex conformance: unknown or incomplete option "
                            "'%s'\n",
                    a);
            usage(stderr);
            return WEX_EXIT_USAGE;
        } else if (arg == NULL) {
            arg = a;
        } else {
            fprintf(stderr, "wex conformance: one plugin at a time ('%s', "
                            "then '%s')\n",
                    arg, a);
            return WEX_EXIT_USAGE;
        }
    }
    if (arg == NULL) {
        usage(stderr);
        return WEX_EXIT_USAGE;
    }
    if (options_text != NULL) {
        options = cJSON_Parse(options_text);
        if (!cJSON_IsObject(options)) {
            fprintf(stderr, "wex conformance: --options: expected a JSON "
                            "object, got '%s'\n",
                    options_text);
            goto out;
        }
        ctx.options = options;
    }
    ctx.manifest_path = resolve_plugin(arg, err, sizeof(err));
    if (ctx.manifest_path == NULL) {
        fprintf(stderr, "wex conformance: %s\n", err);
        goto out;
    }
    /* what the kind checks need, before any check runs */
    {
        wex__manifest m;
        if (wex__manifest_load(ctx.manifest_path, &m) == WEX_OK) {
            if (m.kind == WEX_KIND_ENGINE || m.kind == WEX_KIND_POLICY) {
                ctx.model_path = find_model(models);
                if (ctx.model_path == NULL) {
                    fprintf(stderr,
                            "wex conformance: cannot find %s%s%s; pass "
                            "--models DIR (the source tree's "
                            "samples/models)\n",
                            CONF_MODEL_FILE, models ? " in " : "",
                            models ? models : "");
                    wex__manifest_fini(&m);
                    goto out;
                }
            }
            if (m.kind == WEX_KIND_POLICY)
                ctx.hf_manifest = hf_manifest();
            if (options != NULL && m.options_schema != NULL) {
                wex__schema_result res = {0, NULL};
                int bad = wex__schema_validate(m.options_schema, options,
                                               &res);
                if (bad != 0)
                    fprintf(stderr, "wex conformance: --options: %s: %s\n",
                            res.count && res.errors[0].pointer[0]
                                ? res.errors[0].pointer
                                : "(root)",
                            res.count ? res.errors[0].message
                                      : "cannot validate");
                wex__schema_result_free(&res);
                if (bad != 0) {
                    wex__manifest_fini(&m);
                    goto out;
                }
            }
            wex__manifest_fini(&m);
        }
    }
    run_checks(&ctx);
    if (json)
        print_json(&ctx, arg);
    else
        print_text(&ctx, arg, verbose);
    t = count_results(&ctx);
    rc = t.failed ? WEX_EXIT_FAILED : WEX_EXIT_OK;
out:
    if (ctx.manifest_ok)
        wex__manifest_fini(&ctx.manifest);
    free(ctx.manifest_path);
    free(ctx.model_path);
    free(ctx.hf_manifest);
    free(ctx.stray);
    cJSON_Delete(options);
    return rc;
}
