/* Finding plugin manifests: the search path and the directory scans. */
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "discovery.h"
#include "error.h"
#include "self_dir.h"

static int push(wex__path_list *list, const char *path)
{
    char **grown;

    for (size_t i = 0; i < list->count; i++)
        if (strcmp(list->paths[i], path) == 0)
            return 0; /* the same place reached twice: scan it once */
    grown = realloc(list->paths, (list->count + 1) * sizeof(*grown));
    if (grown == NULL)
        return -1;
    list->paths = grown;
    list->paths[list->count] = strdup(path);
    if (list->paths[list->count] == NULL)
        return -1;
    list->count++;
    return 0;
}

/* Adds an existing place by its real path so aliases collapse. */
static int push_real(wex__path_list *list, const char *path)
{
    char real[PATH_MAX];

    if (realpath(path, real) == NULL)
        return 0; /* a missing directory on the path is not an error */
    return push(list, real);
}

static int push_colon_list(wex__path_list *list, const char *value)
{
    char *copy = strdup(value);
    char *save = NULL;
    int rc = 0;

    if (copy == NULL)
        return -1;
    for (char *tok = strtok_r(copy, ":", &save); tok && rc == 0;
         tok = strtok_r(NULL, ":", &save))
        if (*tok)
            rc = push_real(list, tok);
    free(copy);
    return rc;
}

/* The plugin directory of the installation (or build tree) the code
 * running now belongs to. That code is either libwex.so, in LIBDIR, whose
 * plugins are in LIBDIR/wex/plugins, or a program linked with the host
 * statically (the wex command, the tests), in BINDIR, whose plugins are
 * WEX_BINDIR_TO_PLUGINDIR away from it. Both are tried; the one that
 * does not exist is skipped. */
static int push_beside_binary(wex__path_list *list)
{
    static const char *const relative[] = {
        "wex/plugins",
#ifdef WEX_BINDIR_TO_PLUGINDIR
        WEX_BINDIR_TO_PLUGINDIR,
#endif
    };
    char self[PATH_MAX], dir[PATH_MAX];
    int rc = 0;

    if (wex__self_dir(self, sizeof(self)) != 0)
        return 0;
    for (size_t i = 0; rc == 0 && i < sizeof(relative) / sizeof(relative[0]);
         i++)
        if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", self, relative[i]) <
            sizeof(dir))
            rc = push_real(list, dir);
    return rc;
}

wex_status wex__search_path(wex__path_list *list)
{
    const char *exclusive = secure_getenv("WEX_PLUGIN_MANIFESTS");
    const char *prepend = secure_getenv("WEX_PLUGIN_PATH");
    int rc = 0;

    memset(list, 0, sizeof(*list));
    if (exclusive != NULL && *exclusive) {
        rc = push_colon_list(list, exclusive);
        goto out;
    }
    if (prepend != NULL)
        rc = push_colon_list(list, prepend);
#ifdef WEX_INSTALL_PLUGINDIR
    if (rc == 0)
        rc = push_real(list, WEX_INSTALL_PLUGINDIR);
#endif
    if (rc == 0)
        rc = push_beside_binary(list);
out:
    if (rc != 0) {
        wex__path_list_free(list);
        return wex__error(WEX_ERR_NOMEM, "plugin search path: out of memory");
    }
    return WEX_OK;
}

static int is_manifest_name(const struct dirent *entry)
{
    size_t len = strlen(entry->d_name);

    return entry->d_name[0] != '.' && len > 5 &&
           strcmp(entry->d_name + len - 5, ".json") == 0;
}

wex_status wex__manifests_in(const char *place, wex__path_list *out)
{
    struct dirent **entries = NULL;
    struct stat st;
    int n, rc = 0;

    if (stat(place, &st) != 0)
        return WEX_OK;
    if (!S_ISDIR(st.st_mode))
        return push(out, place) == 0 ? WEX_OK
                                     : wex__error(WEX_ERR_NOMEM, "oom");
    /* alphasort: readdir order differs between file systems, and the
     * first plugin of a name wins, so the order must be stable. */
    n = scandir(place, &entries, is_manifest_name, alphasort);
    if (n < 0)
        return WEX_OK;
    for (int i = 0; i < n; i++) {
        char path[PATH_MAX];
        if (rc == 0 && snprintf(path, sizeof(path), "%s/%s", place,
                                entries[i]->d_name) < (int)sizeof(path))
            rc = push(out, path);
        free(entries[i]);
    }
    free(entries);
    return rc == 0 ? WEX_OK : wex__error(WEX_ERR_NOMEM, "oom");
}

void wex__path_list_free(wex__path_list *list)
{
    for (size_t i = 0; i < list->count; i++)
        free(list->paths[i]);
    free(list->paths);
    memset(list, 0, sizeof(*list));
}
