/* The model-catalog and layout-builder services of wex_host_services. */
#ifndef WEX_HOST_SERVICES_MODEL_H
#define WEX_HOST_SERVICES_MODEL_H

#include <wex/host.h>

/* Fills the model_* and layout_* members of `services`. */
void wex__services_model_init(wex_host_services *services);

#endif /* WEX_HOST_SERVICES_MODEL_H */
