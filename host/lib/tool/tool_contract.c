/* The plugin contract's names and rules the conformance kit holds
 * plugins to (tool_plugins.h): kinds, the host's ABI range, and what a
 * transport's connect may publish (job/connect/transport_exchange.c). */
#include "manifest.h"
#include "registry.h"
#include "tool_plugins.h"
#include "transport_exchange.h"

const char *wex_tool_kind_name(uint32_t kind)
{
    return wex__kind_name(kind);
}

uint32_t wex_tool_kind_from_name(const char *name)
{
    return wex__kind_from_name(name);
}

void wex_tool_host_abi(uint32_t *min_p, uint32_t *max_p)
{
    *min_p = WEX__HOST_ABI_MIN;
    *max_p = WEX__HOST_ABI_MAX;
}

wex_status wex_tool_transport_publish_check(const char *name, const void *value,
                                            uint64_t len)
{
    return wex__transport_publish_check(name, value, len);
}

wex_status wex_tool_transport_fetch_check(const char *name, const void *value,
                                          uint64_t cap, const uint64_t *len_p)
{
    return wex__transport_fetch_check(name, value, cap, len_p);
}
