#include "registry.h"

#include <stdlib.h>
#include <string.h>

#include "discovery.h"
#include "error.h"
#include "log.h"

static int add_bad(wex__registry *r, const char *path, const char *error)
{
    wex__bad_manifest *grown =
        realloc(r->bad, (r->bad_count + 1) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    r->bad = grown;
    grown[r->bad_count].path = strdup(path);
    grown[r->bad_count].error = strdup(error);
    r->bad_count++;
    return 0;
}

static int add_shadowed(wex__plugin *winner, const char *path)
{
    char **grown = realloc(winner->shadowed,
                           (winner->shadowed_count + 1) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    winner->shadowed = grown;
    grown[winner->shadowed_count] = strdup(path);
    winner->shadowed_count++;
    return 0;
}

static int add_plugin(wex__registry *r, wex__manifest *m)
{
    wex__plugin *existing = wex__registry_find(r, m->kind, m->name);
    wex__plugin **grown;
    wex__plugin *p;

    if (existing != NULL) {
        WEX__INFO("%s plugin '%s' at %s is shadowed by %s",
                  wex__kind_name(m->kind), m->name, m->path,
                  existing->manifest.path);
        int rc = add_shadowed(existing, m->path);
        wex__manifest_fini(m);
        return rc;
    }
    p = calloc(1, sizeof(*p));
    grown = realloc(r->plugins, (r->count + 1) * sizeof(*grown));
    if (p == NULL || grown == NULL) {
        free(p);
        if (grown != NULL)
            r->plugins = grown;
        wex__manifest_fini(m);
        return -1;
    }
    r->plugins = grown;
    p->manifest = *m;
    p->state = WEX__PLUGIN_FOUND;
    p->host_ctx.plugin = p;
    r->plugins[r->count++] = p;
    return 0;
}

static wex_status scan_place(wex__registry *r, const char *place)
{
    wex__path_list manifests;
    wex_status status;
    int rc = 0;

    memset(&manifests, 0, sizeof(manifests));
    status = wex__manifests_in(place, &manifests);
    for (size_t i = 0; status == WEX_OK && rc == 0 && i < manifests.count;
         i++) {
        wex__manifest m;
        if (wex__manifest_load(manifests.paths[i], &m) == WEX_OK) {
            rc = add_plugin(r, &m);
        } else {
            WEX__WARN("ignoring plugin manifest: %s", wex__last_error());
            rc = add_bad(r, manifests.paths[i], wex__last_error());
        }
    }
    wex__path_list_free(&manifests);
    if (status == WEX_OK && rc != 0)
        status = wex__error(WEX_ERR_NOMEM, "plugin registry: out of memory");
    return status;
}

wex_status wex__registry_create(wex__services_fill_fn fill,
                                wex__registry **registry_p)
{
    wex__path_list search;
    wex__registry *r;
    wex_status status;

    r = calloc(1, sizeof(*r));
    if (r == NULL)
        return wex__error(WEX_ERR_NOMEM, "plugin registry: out of memory");
    r->fill_services = fill;
    pthread_mutex_init(&r->lock, NULL);
    status = wex__search_path(&search);
    if (status != WEX_OK)
        goto out;
    for (size_t i = 0; status == WEX_OK && i < search.count; i++)
        status = scan_place(r, search.paths[i]);
    r->search = search.paths;
    r->search_count = search.count;
out:
    if (status != WEX_OK) {
        wex__registry_free(r);
        return status;
    }
    *registry_p = r;
    return WEX_OK;
}

static void plugin_free(wex__plugin *p)
{
    if (p->state == WEX__PLUGIN_LOADED && p->desc->fini != NULL)
        p->desc->fini(p->plugin_state);
    /* No dlclose: a plugin's threads, atexit handlers or TLS destructors
     * may still point into it, and sanitizers need its symbols. */
    for (size_t i = 0; i < p->shadowed_count; i++)
        free(p->shadowed[i]);
    free(p->shadowed);
    free(p->error);
    wex__manifest_fini(&p->manifest);
    free(p);
}

void wex__registry_free(wex__registry *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; i < r->count; i++)
        plugin_free(r->plugins[i]);
    free(r->plugins);
    for (size_t i = 0; i < r->bad_count; i++) {
        free(r->bad[i].path);
        free(r->bad[i].error);
    }
    free(r->bad);
    for (size_t i = 0; i < r->search_count; i++)
        free(r->search[i]);
    free(r->search);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

wex__plugin *wex__registry_find(wex__registry *r, uint32_t kind,
                                const char *name)
{
    for (size_t i = 0; i < r->count; i++)
        if (r->plugins[i]->manifest.kind == kind &&
            strcmp(r->plugins[i]->manifest.name, name) == 0)
            return r->plugins[i];
    return NULL;
}

char *wex__registry_names(const wex__registry *r, uint32_t kind)
{
    size_t len = 1;
    char *out;

    for (size_t i = 0; i < r->count; i++)
        if (r->plugins[i]->manifest.kind == kind)
            len += strlen(r->plugins[i]->manifest.name) + 2;
    out = malloc(len);
    if (out == NULL)
        return NULL;
    out[0] = '\0';
    for (size_t i = 0; i < r->count; i++)
        if (r->plugins[i]->manifest.kind == kind) {
            if (out[0])
                strcat(out, ", ");
            strcat(out, r->plugins[i]->manifest.name);
        }
    return out;
}
