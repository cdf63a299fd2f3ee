/* The wex_host_services table handed to each plugin. */
#ifndef WEX_HOST_SERVICES_H
#define WEX_HOST_SERVICES_H

#include <wex/host.h>

/* Fills `services` for a plugin whose host context is `ctx`. */
void wex__services_init(wex_host_services *services, wex_host_ctx *ctx,
                        uint32_t abi_version);

#endif /* WEX_HOST_SERVICES_H */
