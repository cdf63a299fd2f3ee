/*
 * Registries whose plugins get the host's services table
 * (services.c): the ones the runtime, the CLI and the tests use. The
 * process-wide one is the only global state in libwex.
 */
#ifndef WEX_HOST_HOST_REGISTRY_H
#define WEX_HOST_HOST_REGISTRY_H

#include "registry.h"

/* Scans the search path (reading the environment now). */
wex_status wex__registry_scan(wex__registry **registry_p);
/* The process-wide registry, scanned on first use and freed at exit. */
wex_status wex__registry_default(wex__registry **registry_p);

#endif /* WEX_HOST_HOST_REGISTRY_H */
