/* The read-only layout services and the plan builder service. */
#ifndef WEX_HOST_SERVICES_PLAN_H
#define WEX_HOST_SERVICES_PLAN_H

#include <wex/host.h>

/* Fills the layout_rank_count .. plan_add_op members of `services`. */
void wex__services_plan_init(wex_host_services *services);

#endif /* WEX_HOST_SERVICES_PLAN_H */
