/*
 * The plugin registry: every plugin manifest found on the search path,
 * and for each one whether it loaded, and why not. A registry is handed,
 * when it is created, what fills the services table each plugin gets at
 * init: the loader knows plugins, not models, layouts or plans (the
 * host's table is services/services.c; services/host_registry.h makes
 * registries with it, and keeps the process-wide one).
 *
 * Search order (docs/plugins.md):
 *   WEX_PLUGIN_MANIFESTS  exclusive: only these manifest files or dirs;
 *   otherwise WEX_PLUGIN_PATH (dirs, searched first), the install's
 *   plugin dir, then the plugin dir of the tree the running code comes
 *   from: lib/wex/plugins beside libwex.so, or ../lib/wex/plugins from
 *   a program that links the host statically (the wex command).
 * Directories are scanned in sorted order; the first plugin of a given
 * kind and name wins, and the copies it shadows are kept for listing.
 */
#ifndef WEX_HOST_REGISTRY_H
#define WEX_HOST_REGISTRY_H

#include <pthread.h>
#include <wex/plugin.h>

#include "manifest.h"

#define WEX__PLUGIN_FOUND 0u  /* manifest valid, library not loaded */
#define WEX__PLUGIN_LOADED 1u /* negotiated and initialised */
#define WEX__PLUGIN_FAILED 2u /* tried and failed; see error */

typedef struct wex__plugin wex__plugin;

struct wex_host_ctx {
    wex__plugin *plugin;
};

struct wex__plugin {
    wex__manifest manifest;
    uint32_t state;
    char *error;     /* one line, when FAILED */
    char **shadowed; /* manifest paths this entry hides */
    size_t shadowed_count;
    void *dl;
    const wex_plugin_desc *desc;
    uint32_t abi_version; /* negotiated */
    /* The plugin's ops table as this host knows it: copied once at load,
     * members past the plugin's struct_size zero (NULL). The host calls
     * through this copy only, so the size of a plugin's table is looked
     * at in one place (loader.c). struct_size stays the plugin's. */
    union {
        uint32_t struct_size;
        wex_engine_ops engine;
        wex_policy_ops policy;
        wex_transport_ops transport;
    } ops;
    wex_plugin_state *plugin_state;
    struct wex_host_ctx host_ctx;
    wex_host_services services;
};

/* A manifest that could not be used, kept so `wex plugins` can say why. */
typedef struct wex__bad_manifest {
    char *path;
    char *error;
} wex__bad_manifest;

/* Fills the function members of a plugin's services table; the loader
 * sets struct_size, abi_version and ctx itself. */
typedef void (*wex__services_fill_fn)(wex_host_services *services);

typedef struct wex__registry {
    wex__services_fill_fn fill_services;
    wex__plugin **plugins;
    size_t count;
    wex__bad_manifest *bad;
    size_t bad_count;
    char **search; /* the directories or files scanned, in order */
    size_t search_count;
    pthread_mutex_t lock; /* serialises loading, negotiate, init, fini */
} wex__registry;

/* Scans the search path (reading the environment now); the plugins it
 * loads get services filled by `fill`. */
wex_status wex__registry_create(wex__services_fill_fn fill,
                                wex__registry **registry_p);
/* Finalises loaded plugins (fini) and frees the registry. */
void wex__registry_free(wex__registry *registry);

/* The plugin of that kind and name, or NULL. */
wex__plugin *wex__registry_find(wex__registry *registry, uint32_t kind,
                                const char *name);

/* Loads, negotiates and initialises a plugin once; later calls return the
 * first outcome. Errors are one line naming the file and the cause. */
wex_status wex__plugin_load(wex__registry *registry, wex__plugin *plugin);

/* Comma-separated names of the plugins of a kind ("" when none), for
 * "no such plugin (available: ...)" messages. Caller frees. */
char *wex__registry_names(const wex__registry *registry, uint32_t kind);

/* ABI range this host accepts. */
#define WEX__HOST_ABI_MIN WEX_ABI_1_0
#define WEX__HOST_ABI_MAX WEX_ABI_CURRENT

#endif /* WEX_HOST_REGISTRY_H */
