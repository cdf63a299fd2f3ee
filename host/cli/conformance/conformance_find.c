/*
 * What `wex conformance` needs before any check runs: the manifest of
 * the PLUGIN argument (a manifest, a library with its manifest beside
 * it, or a name on the search path), the hf engine's manifest for a
 * policy's job, and the sample model engines and policies are tried on.
 */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <wex/wex.h>

#include "conformance.h"
#include "tool_json.h"

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
            if (wex_tool_json_load(path, &doc) == WEX_OK &&
                cJSON_IsString(lib = cJSON_GetObjectItemCaseSensitive(
                                   doc, "library_path"))) {
                char *full = malloc(strlen(dir) + strlen(lib->valuestring) + 2);
                if (full != NULL) {
                    if (lib->valuestring[0] == '/')
                        strcpy(full, lib->valuestring);
                    else
                        sprintf(full, "%s/%s", dir, lib->valuestring);
                    if (realpath(full, got) != NULL && strcmp(got, want) == 0) {
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
        snprintf(err, cap, "no manifest in %s names %s as its library_path",
                 dir, library);
    free(dir);
    return found;
}

/* NAME or KIND/NAME on the search path. */
static char *manifest_by_name(const char *arg, char *err, size_t cap)
{
    const char *slash = strchr(arg, '/'), *name = slash ? slash + 1 : arg;
    uint32_t kind = 0;
    wex_tool_registry *r = NULL;
    wex_tool_plugin_info match, p;
    size_t matches = 0, count;
    char *found = NULL;

    if (slash != NULL) {
        char k[32];
        snprintf(k, sizeof(k), "%.*s", (int)(slash - arg), arg);
        kind = wex_tool_kind_from_name(k);
        if (kind == 0) {
            snprintf(err, cap,
                     "%s: unknown kind '%s' (engine, policy or "
                     "transport)",
                     arg, k);
            return NULL;
        }
    }
    if (wex_tool_registry_scan(&r) != WEX_OK) {
        snprintf(err, cap, "%s", wex_last_error());
        return NULL;
    }
    count = wex_tool_registry_count(r);
    for (size_t i = 0; i < count; i++) {
        wex_tool_plugin_get_info(wex_tool_registry_plugin(r, i), &p);
        if (strcmp(p.manifest.name, name) == 0 &&
            (kind == 0 || p.manifest.kind == kind)) {
            match = p;
            matches++;
        }
    }
    if (matches == 1) {
        found = strdup(match.manifest.path);
    } else if (matches > 1) {
        snprintf(err, cap,
                 "'%s' names plugins of several kinds; say "
                 "KIND/%s",
                 name, name);
    } else {
        size_t used = (size_t)snprintf(err, cap,
                                       "no plugin named '%s' on "
                                       "the search path (",
                                       arg);
        for (size_t i = 0; i < count && used < cap; i++) {
            wex_tool_plugin_get_info(wex_tool_registry_plugin(r, i), &p);
            used += (size_t)snprintf(
                err + used, cap - used, "%s%s/%s", i ? ", " : "",
                wex_tool_kind_name(p.manifest.kind), p.manifest.name);
        }
        if (used < cap)
            snprintf(err + used, cap - used, "%s)", count ? "" : "none found");
    }
    wex_tool_registry_free(r);
    return found;
}

char *conf_resolve_plugin(const char *arg, char *err, size_t cap)
{
    struct stat st;

    if (stat(arg, &st) == 0) {
        if (S_ISDIR(st.st_mode)) {
            snprintf(err, cap,
                     "%s is a directory: name a manifest, a "
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
            (slash != NULL && (wex_tool_kind_from_name(k) == 0 ||
                               strchr(slash + 1, '/') != NULL))) {
            snprintf(err, cap, "%s: %s", arg, strerror(ENOENT));
            return NULL;
        }
    }
    return manifest_by_name(arg, err, cap);
}

char *conf_hf_manifest(void)
{
    wex_tool_registry *r = NULL;
    wex_tool_plugin *p;
    wex_tool_plugin_info info;
    char *out = NULL;

    if (wex_tool_registry_scan(&r) != WEX_OK)
        return NULL;
    p = wex_tool_registry_find(r, WEX_KIND_ENGINE, "hf");
    if (p != NULL) {
        wex_tool_plugin_get_info(p, &info);
        out = strdup(info.manifest.path);
    }
    wex_tool_registry_free(r);
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

char *conf_find_model(const char *models)
{
    char exe[PATH_MAX], dir[PATH_MAX + 32];
    ssize_t n;
    char *found, *slash;

    if (models != NULL)
        return model_in(models);
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
