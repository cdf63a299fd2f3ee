/* wex.h: serving a rendezvous in this process (wex_store_*). */
#include <stdlib.h>

#include "error.h"
#include "job.h"
#include "store.h"

struct wex_store {
    wex__store_server *server;
};

wex_status wex_store_open(const char *listen, const char *token,
                          wex_store **store_p)
{
    wex_store *store;
    wex_status st;

    if (store_p == NULL || token == NULL || token[0] == '\0')
        return wex__error(WEX_ERR_INVALID,
                          "wex_store_open: expected a "
                          "token (every client must present it) and a "
                          "store pointer");
    *store_p = NULL;
    store = calloc(1, sizeof(*store));
    if (store == NULL)
        return wex__error(WEX_ERR_NOMEM, "wex_store_open: out of memory");
    st = wex__store_serve(listen ? listen : "127.0.0.1:0", token,
                          &store->server);
    if (st != WEX_OK) {
        free(store);
        return st;
    }
    *store_p = store;
    return WEX_OK;
}

const char *wex_store_address(const wex_store *store)
{
    return store ? wex__store_address(store->server) : NULL;
}

void wex_store_close(wex_store *store)
{
    if (store == NULL)
        return;
    wex__store_stop(store->server);
    free(store);
}
