/* Everything a plugin author includes. */
#ifndef WEX_PLUGIN_H
#define WEX_PLUGIN_H

#include <wex/abi.h>
#include <wex/host.h>
#include <wex/engine.h>
#include <wex/policy.h>
#include <wex/transport.h>
#include <wex/bytes.h>

#endif /* WEX_PLUGIN_H */
