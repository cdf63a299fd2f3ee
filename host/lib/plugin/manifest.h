/*
 * Plugin manifests: the JSON file beside each plugin library, read and
 * validated without loading any code.
 */
#ifndef WEX_HOST_MANIFEST_H
#define WEX_HOST_MANIFEST_H

#include <cjson/cJSON.h>
#include <wex/abi.h>

#define WEX__MANIFEST_FORMAT_MAJOR 1
#define WEX__MANIFEST_FORMAT_MINOR 0

typedef struct wex__manifest {
    char *path; /* the manifest file as found */
    char *name;
    uint32_t kind;     /* WEX_KIND_* */
    char *library;     /* resolved against the manifest's directory */
    char *entry_point; /* WEX_PLUGIN_ENTRY_NAME unless overridden */
    char *version;
    char *description; /* "" when absent */
    uint32_t abi_min;
    uint32_t abi_max;
    cJSON *json;                 /* the whole document, owned */
    const cJSON *options_schema; /* inside json; NULL when absent */
} wex__manifest;

/* Reads and validates a manifest. Errors name the file and the JSON
 * Pointer of the offending value. */
wex_status wex__manifest_load(const char *path, wex__manifest *manifest);
void wex__manifest_fini(wex__manifest *manifest);

/* "engine", "policy", "transport"; "unknown" otherwise. */
const char *wex__kind_name(uint32_t kind);
/* WEX_KIND_* for a name, 0 when unknown. */
uint32_t wex__kind_from_name(const char *name);

/* Parses "MAJOR.MINOR" into a WEX_MAKE_VERSION value; -1 when malformed. */
int wex__parse_abi_version(const char *text, uint32_t *version_p);

#endif /* WEX_HOST_MANIFEST_H */
