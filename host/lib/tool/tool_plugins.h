/*
 * Plugins as libwex finds and loads them (tool.h): the registry of every
 * manifest on the search path (docs/plugins.md), a plugin's manifest and
 * state, loading it exactly as a job does, and what the conformance kit
 * needs to put a plugin through the contract: its ops table, its own
 * init and fini, the host's ABI range and the host's rule for what a
 * transport's connect may publish.
 */
#ifndef WEX_TOOL_PLUGINS_H
#define WEX_TOOL_PLUGINS_H

#include <stddef.h>
#include <stdint.h>

#include <cjson/cJSON.h>
#include <wex/engine.h>
#include <wex/plugin.h>
#include <wex/transport.h>

typedef struct wex__registry wex_tool_registry;
typedef struct wex__plugin wex_tool_plugin;
typedef struct wex__manifest wex_tool_manifest;

/* A manifest, read and validated (borrowed from its registry entry or
 * its wex_tool_manifest). */
typedef struct wex_tool_manifest_info {
    const char *path; /* the manifest file as found */
    const char *name;
    const char *library;     /* resolved against the manifest's directory */
    const char *entry_point; /* wex_plugin_negotiate unless overridden */
    const char *version;
    const char *description; /* "" when absent */
    uint32_t kind;           /* WEX_KIND_* */
    uint32_t abi_min, abi_max;
    const cJSON *json;           /* the whole document */
    const cJSON *options_schema; /* inside json; NULL when absent */
} wex_tool_manifest_info;

/* Where a registry's plugin stands. */
#define WEX_TOOL_PLUGIN_FOUND 0u  /* manifest valid, library not loaded */
#define WEX_TOOL_PLUGIN_LOADED 1u /* negotiated and initialised */
#define WEX_TOOL_PLUGIN_FAILED 2u /* tried and failed: see error */

typedef struct wex_tool_plugin_info {
    wex_tool_manifest_info manifest;
    uint32_t state;        /* WEX_TOOL_PLUGIN_* */
    uint32_t abi_version;  /* negotiated, once loaded */
    const char *error;     /* one line when FAILED, else NULL */
    char *const *shadowed; /* manifest paths this plugin hides */
    size_t shadowed_count;
} wex_tool_plugin_info;

/* ---- the registry ------------------------------------------------------ */

/* Scans the search path, reading the environment now (WEX_PLUGIN_PATH,
 * WEX_PLUGIN_MANIFESTS); the plugins it loads get the host's services.
 * Free it with wex_tool_registry_free. */
wex_status wex_tool_registry_scan(wex_tool_registry **registry_p);
/* The process-wide registry jobs use: scanned on first use, freed at
 * exit (never by the caller). */
wex_status wex_tool_registry_default(wex_tool_registry **registry_p);
/* Finalises the plugins it loaded and frees it; NULL is a no-op. */
void wex_tool_registry_free(wex_tool_registry *registry);

/* Its plugins, in search order: the first of each kind and name. */
size_t wex_tool_registry_count(const wex_tool_registry *registry);
wex_tool_plugin *wex_tool_registry_plugin(const wex_tool_registry *registry,
                                          size_t index);
/* The plugin of that kind and name, or NULL. */
wex_tool_plugin *wex_tool_registry_find(wex_tool_registry *registry,
                                        uint32_t kind, const char *name);
/* "a, b, c": the names of a kind ("" when none), for "(available: ...)"
 * messages; malloc'd (free it), NULL when out of memory. */
char *wex_tool_registry_names(const wex_tool_registry *registry, uint32_t kind);
/* Manifests that could not be used: the file and why, one line. */
size_t wex_tool_registry_bad_count(const wex_tool_registry *registry);
void wex_tool_registry_bad(const wex_tool_registry *registry, size_t index,
                           const char **path_p, const char **error_p);
/* The directories (or files) scanned, in order. */
size_t wex_tool_registry_search_count(const wex_tool_registry *registry);
const char *wex_tool_registry_search(const wex_tool_registry *registry,
                                     size_t index);

/* ---- a plugin ---------------------------------------------------------- */

/* Loads, negotiates and initialises it once (later calls return the
 * first outcome), as a job would; errors name the file and the cause. */
wex_status wex_tool_plugin_load(wex_tool_registry *registry,
                                wex_tool_plugin *plugin);
void wex_tool_plugin_get_info(const wex_tool_plugin *plugin,
                              wex_tool_plugin_info *info);
/* A loaded plugin's ops table, as the host copied it at load (members
 * past the plugin's struct_size NULL): NULL for another kind. */
const wex_engine_ops *wex_tool_plugin_engine_ops(const wex_tool_plugin *p);
const wex_transport_ops *
wex_tool_plugin_transport_ops(const wex_tool_plugin *p);
/* What its init returned, for calling its ops. */
wex_plugin_state *wex_tool_plugin_state(const wex_tool_plugin *plugin);
/* The conformance kit's C13: the loaded plugin's own fini, then its init
 * again with the services the loader gave it. A failed init leaves the
 * plugin FAILED, so freeing the registry calls no fini for it. */
void wex_tool_plugin_fini(wex_tool_plugin *plugin);
wex_status wex_tool_plugin_init(wex_tool_plugin *plugin);

/* ---- a manifest on its own ---------------------------------------------- */

/* Reads and validates the manifest at `path` without loading anything;
 * errors name the file and the JSON Pointer of what is wrong. */
wex_status wex_tool_manifest_load(const char *path,
                                  wex_tool_manifest **manifest_p);
void wex_tool_manifest_get_info(const wex_tool_manifest *manifest,
                                wex_tool_manifest_info *info);
void wex_tool_manifest_free(wex_tool_manifest *manifest); /* NULL: no-op */

/* ---- the contract --------------------------------------------------------- */

/* "engine", "policy", "transport"; "unknown" for anything else. */
const char *wex_tool_kind_name(uint32_t kind);
/* WEX_KIND_* of a name, 0 when it is none. */
uint32_t wex_tool_kind_from_name(const char *name);
/* The ABI range this host offers plugins. */
void wex_tool_host_abi(uint32_t *min_p, uint32_t *max_p);
/* The host's rule for what a transport's connect may publish and fetch
 * through the rendezvous it is lent (ABI 1.3): names of 1 to 64
 * characters of [A-Za-z0-9_.-], values of at most WEX_TRANSPORT_KEY_MAX
 * bytes. WEX_OK, or WEX_ERR_INVALID told. */
wex_status wex_tool_transport_publish_check(const char *name, const void *value,
                                            uint64_t len);
wex_status wex_tool_transport_fetch_check(const char *name, const void *value,
                                          uint64_t cap, const uint64_t *len_p);

#endif /* WEX_TOOL_PLUGINS_H */
