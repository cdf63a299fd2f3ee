#include "manifest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "json_file.h"
#include "log.h"
#include "schema_store.h"

const char *wex__kind_name(uint32_t kind)
{
    switch (kind) {
    case WEX_KIND_ENGINE: return "engine";
    case WEX_KIND_POLICY: return "policy";
    case WEX_KIND_TRANSPORT: return "transport";
    default: return "unknown";
    }
}

uint32_t wex__kind_from_name(const char *name)
{
    for (uint32_t k = WEX_KIND_ENGINE; k <= WEX_KIND_TRANSPORT; k++)
        if (strcmp(name, wex__kind_name(k)) == 0)
            return k;
    return 0;
}

/* Parses a decimal number of at most 5 digits; returns the end or NULL. */
static const char *parse_number(const char *p, unsigned *value_p)
{
    unsigned v = 0;
    int digits = 0;

    while (*p >= '0' && *p <= '9' && digits < 6) {
        v = v * 10 + (unsigned)(*p - '0');
        p++;
        digits++;
    }
    if (digits == 0 || digits > 5)
        return NULL;
    *value_p = v;
    return p;
}

int wex__parse_abi_version(const char *text, uint32_t *version_p)
{
    unsigned major, minor;
    const char *p = parse_number(text, &major);

    if (p == NULL || *p != '.')
        return -1;
    p = parse_number(p + 1, &minor);
    if (p == NULL || *p != '\0' || major > 0xffff || minor > 0xffff)
        return -1;
    *version_p = WEX_MAKE_VERSION(major, minor);
    return 0;
}

/* Parses "MAJOR.MINOR.PATCH"; -1 when malformed. */
static int parse_format_version(const char *text, unsigned *major_p,
                                unsigned *minor_p)
{
    unsigned patch;
    const char *p = text ? parse_number(text, major_p) : NULL;

    if (p && *p == '.')
        p = parse_number(p + 1, minor_p);
    else
        p = NULL;
    if (p && *p == '.')
        p = parse_number(p + 1, &patch);
    else
        p = NULL;
    return p != NULL && *p == '\0' ? 0 : -1;
}

/* Checks "MAJOR.MINOR.PATCH": the major must be ours. */
static wex_status check_format_version(const char *path, const char *text)
{
    unsigned major, minor;

    if (parse_format_version(text, &major, &minor) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /file_format_version: expected "
                          "MAJOR.MINOR.PATCH, got \"%s\"",
                          path, text);
    if (major != WEX__MANIFEST_FORMAT_MAJOR)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /file_format_version: format %u is not "
                          "supported (this host reads %d.x.x)",
                          path, major, WEX__MANIFEST_FORMAT_MAJOR);
    return WEX_OK;
}

/* Nonzero when the manifest says it follows a newer minor format than
 * this host reads: such a manifest may carry fields added since. */
static int newer_minor(const cJSON *json)
{
    const cJSON *v =
        cJSON_GetObjectItemCaseSensitive(json, "file_format_version");
    unsigned major, minor;

    return cJSON_IsString(v) &&
           parse_format_version(v->valuestring, &major, &minor) == 0 &&
           major == WEX__MANIFEST_FORMAT_MAJOR &&
           minor > WEX__MANIFEST_FORMAT_MINOR;
}

/* `at` + "/" + `key` as a JSON Pointer (RFC 6901 escapes). */
static void pointer_append(char *out, size_t cap, const char *at,
                           const char *key)
{
    size_t n = (size_t)snprintf(out, cap, "%s/", at);

    for (; *key && n + 3 < cap; key++) {
        if (*key == '~' || *key == '/') {
            out[n++] = '~';
            out[n++] = *key == '~' ? '0' : '1';
        } else {
            out[n++] = *key;
        }
    }
    out[n < cap ? n : cap - 1] = '\0';
}

/* Removes from `obj` every member `schema` does not name in its
 * "properties", recursing into members whose own schema lists properties,
 * and appends the JSON Pointers of what it removed to `dropped`. */
static void drop_unknown(cJSON *obj, const cJSON *schema, const char *at,
                         char *dropped, size_t cap)
{
    const cJSON *props = cJSON_GetObjectItemCaseSensitive(schema, "properties");
    cJSON *m = obj ? obj->child : NULL;

    if (!cJSON_IsObject(obj) || !cJSON_IsObject(props))
        return;
    while (m != NULL) {
        cJSON *next = m->next;
        const cJSON *sub = cJSON_GetObjectItemCaseSensitive(props, m->string);
        char here[256];

        pointer_append(here, sizeof(here), at, m->string);
        if (sub == NULL) {
            size_t len = strlen(dropped);
            snprintf(dropped + len, cap - len, "%s%s", len ? ", " : "", here);
            cJSON_Delete(cJSON_DetachItemViaPointer(obj, m));
        } else {
            drop_unknown(m, sub, here, dropped, cap);
        }
        m = next;
    }
}

/* Vulkan's rule for manifests: a newer minor format may add fields, which
 * this host ignores (said once, at info level); the same or an older
 * minor must not carry fields the host does not know, so a misspelt
 * field is still an error. */
static wex_status tolerate_newer_minor(const char *path, cJSON *json)
{
    const cJSON *schema = wex__schema("manifest");
    char dropped[1024] = "";

    if (!newer_minor(json) || schema == NULL)
        return WEX_OK;
    drop_unknown(json, schema, "", dropped, sizeof(dropped));
    if (dropped[0] != '\0')
        WEX__INFO("%s: manifest format %s is newer than %d.%d; ignoring "
                  "what this host does not know: %s",
                  path,
                  cJSON_GetObjectItemCaseSensitive(json, "file_format_version")
                      ->valuestring,
                  WEX__MANIFEST_FORMAT_MAJOR, WEX__MANIFEST_FORMAT_MINOR,
                  dropped);
    return WEX_OK;
}

static const char *get_str(const cJSON *obj, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);

    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* The library path, relative to the manifest's own directory. */
static char *resolve_library(const char *manifest_path, const char *lib)
{
    const char *slash = strrchr(manifest_path, '/');
    size_t dir_len = slash ? (size_t)(slash - manifest_path) : 1;
    const char *dir = slash ? manifest_path : ".";
    char *out;

    if (lib[0] == '/')
        return strdup(lib);
    if (strncmp(lib, "./", 2) == 0)
        lib += 2;
    out = malloc(dir_len + strlen(lib) + 2);
    if (out != NULL)
        sprintf(out, "%.*s/%s", (int)dir_len, dir, lib);
    return out;
}

static wex_status parse_abi(const char *path, const cJSON *json,
                            wex__manifest *m)
{
    const cJSON *abi = cJSON_GetObjectItemCaseSensitive(json, "abi");
    const char *min = get_str(abi, "min");
    const char *max = get_str(abi, "max");

    if (wex__parse_abi_version(min, &m->abi_min) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /abi/min: expected MAJOR.MINOR, got \"%s\"",
                          path, min);
    if (wex__parse_abi_version(max, &m->abi_max) != 0)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /abi/max: expected MAJOR.MINOR, got \"%s\"",
                          path, max);
    if (m->abi_min > m->abi_max)
        return wex__error(WEX_ERR_INVALID,
                          "%s: /abi: min %s is newer than max %s", path, min,
                          max);
    return WEX_OK;
}

wex_status wex__manifest_load(const char *path, wex__manifest *m)
{
    wex_status status;
    cJSON *json = NULL;
    const char *entry, *desc;

    memset(m, 0, sizeof(*m));
    status = wex__json_load(path, &json);
    if (status != WEX_OK)
        return status;
    status = tolerate_newer_minor(path, json);
    if (status == WEX_OK)
        status = wex__schema_check("manifest", json, path, NULL);
    if (status != WEX_OK)
        goto out;
    status = check_format_version(path, get_str(json, "file_format_version"));
    if (status != WEX_OK)
        goto out;
    status = parse_abi(path, json, m);
    if (status != WEX_OK)
        goto out;
    entry = get_str(json, "entry_point");
    desc = get_str(json, "description");
    m->path = strdup(path);
    m->name = strdup(get_str(json, "name"));
    m->kind = wex__kind_from_name(get_str(json, "kind"));
    m->library = resolve_library(path, get_str(json, "library_path"));
    m->entry_point = strdup(entry ? entry : WEX_PLUGIN_ENTRY_NAME);
    m->version = strdup(get_str(json, "version"));
    m->description = strdup(desc ? desc : "");
    m->options_schema =
        cJSON_GetObjectItemCaseSensitive(json, "options_schema");
    m->json = json;
    json = NULL;
    if (!m->path || !m->name || !m->library || !m->entry_point || !m->version ||
        !m->description) {
        wex__manifest_fini(m);
        status = wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
    }
out:
    cJSON_Delete(json);
    return status;
}

void wex__manifest_fini(wex__manifest *m)
{
    free(m->path);
    free(m->name);
    free(m->library);
    free(m->entry_point);
    free(m->version);
    free(m->description);
    cJSON_Delete(m->json);
    memset(m, 0, sizeof(*m));
}
