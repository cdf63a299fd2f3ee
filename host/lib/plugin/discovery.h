/* Where plugin manifests are looked for (see registry.h for the order). */
#ifndef WEX_HOST_DISCOVERY_H
#define WEX_HOST_DISCOVERY_H

#include <stddef.h>
#include <wex/abi.h>

typedef struct wex__path_list {
    char **paths;
    size_t count;
} wex__path_list;

/* The directories (or manifest files) to scan, in order, deduplicated by
 * real path; places that do not exist are left out. */
wex_status wex__search_path(wex__path_list *list);

/* Appends the manifests of one place: the file itself, or a directory's
 * *.json files in sorted order. */
wex_status wex__manifests_in(const char *place, wex__path_list *out);

void wex__path_list_free(wex__path_list *list);

#endif /* WEX_HOST_DISCOVERY_H */
