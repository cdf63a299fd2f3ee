/* The rendezvous store for the command (tool_store.h): store/store.h. */
#include "store.h"
#include "tool_store.h"

wex_status wex_tool_store_serve(const char *address, const char *token,
                                wex_tool_store_server **server_p)
{
    return wex__store_serve(address, token, server_p);
}

const char *wex_tool_store_address(const wex_tool_store_server *server)
{
    return wex__store_address(server);
}

size_t wex_tool_store_key_count(wex_tool_store_server *server)
{
    return wex__store_key_count(server);
}

void wex_tool_store_stop(wex_tool_store_server *server)
{
    wex__store_stop(server);
}

wex_status wex_tool_store_connect(const char *address, const char *token,
                                  const char *who, double timeout_s,
                                  wex_tool_store_client **client_p)
{
    return wex__store_connect(address, token, who, timeout_s, client_p);
}

wex_status wex_tool_store_set(wex_tool_store_client *client, const char *key,
                              const void *value, size_t len)
{
    return wex__store_set(client, key, value, len);
}

wex_status wex_tool_store_get(wex_tool_store_client *client, const char *key,
                              double timeout_s, void **value_p, size_t *len_p)
{
    return wex__store_get(client, key, timeout_s, value_p, len_p);
}

wex_status wex_tool_store_add(wex_tool_store_client *client, const char *key,
                              int64_t delta, int64_t *result_p)
{
    return wex__store_add(client, key, delta, result_p);
}

wex_status wex_tool_store_wait_ge(wex_tool_store_client *client,
                                  const char *key, int64_t target,
                                  double timeout_s)
{
    return wex__store_wait_ge(client, key, target, timeout_s);
}

void wex_tool_store_close(wex_tool_store_client *client)
{
    wex__store_close(client);
}
