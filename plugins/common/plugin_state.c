#include "plugin_state.h"

#include <stdlib.h>

wex_status wp_plugin_init(const wex_host_services *host,
                          wex_plugin_state **state_p)
{
    wex_plugin_state *state = calloc(1, sizeof(*state));

    if (state == NULL)
        return WEX_ERR_NOMEM;
    state->host = host;
    *state_p = state;
    return WEX_OK;
}

void wp_plugin_fini(wex_plugin_state *state)
{
    free(state);
}
