#include "host_registry.h"

#include <pthread.h>
#include <stdlib.h>

#include "services.h"

static pthread_mutex_t default_lock = PTHREAD_MUTEX_INITIALIZER;
static wex__registry *default_registry;

wex_status wex__registry_scan(wex__registry **registry_p)
{
    return wex__registry_create(wex__services_fill, registry_p);
}

static void free_default(void)
{
    wex__registry_free(default_registry);
    default_registry = NULL;
}

wex_status wex__registry_default(wex__registry **registry_p)
{
    wex_status status = WEX_OK;

    pthread_mutex_lock(&default_lock);
    if (default_registry == NULL) {
        status = wex__registry_scan(&default_registry);
        if (status == WEX_OK)
            atexit(free_default);
    }
    *registry_p = default_registry;
    pthread_mutex_unlock(&default_lock);
    return status;
}
