/* The wex_host_services table handed to each plugin. */
#ifndef WEX_HOST_SERVICES_H
#define WEX_HOST_SERVICES_H

#include <wex/host.h>

/* Fills every service of `services` (a wex__services_fill_fn for
 * registries, plugin/registry.h). */
void wex__services_fill(wex_host_services *services);

#endif /* WEX_HOST_SERVICES_H */
