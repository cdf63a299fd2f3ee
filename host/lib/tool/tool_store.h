/*
 * The rendezvous store (tool.h): `wex run`'s launcher serves one (or
 * joins the one `wex store` serves) and reads what its workers post
 * there; a worker posts through its job's own connection (tool_job.h).
 * <wex/wex.h>'s wex_store serves one too, but says nothing of its keys.
 *
 * A client is one thread's at a time: each request waits for its reply
 * on the one connection.
 */
#ifndef WEX_TOOL_STORE_H
#define WEX_TOOL_STORE_H

#include <stddef.h>
#include <stdint.h>

#include <wex/abi.h>

typedef struct wex__store_server wex_tool_store_server;
typedef struct wex__store_client wex_tool_store_client;

/* Serves on `address` ("HOST:PORT"; port 0 picks a free one, an empty
 * HOST is loopback) on threads of its own, for clients that present
 * `token` (non-empty). */
wex_status wex_tool_store_serve(const char *address, const char *token,
                                wex_tool_store_server **server_p);
/* The bound "HOST:PORT". */
const char *wex_tool_store_address(const wex_tool_store_server *server);
/* How many keys it holds now: a long run's must not grow. */
size_t wex_tool_store_key_count(wex_tool_store_server *server);
/* Closes every connection, joins its threads, frees. */
void wex_tool_store_stop(wex_tool_store_server *server);

/* Connects (retrying until timeout_s: the server may start later),
 * presenting `token` and `who`, a name for messages. */
wex_status wex_tool_store_connect(const char *address, const char *token,
                                  const char *who, double timeout_s,
                                  wex_tool_store_client **client_p);
/* Sets (or replaces) `key`. */
wex_status wex_tool_store_set(wex_tool_store_client *client, const char *key,
                              const void *value, size_t len);
/* Waits until `key` exists (up to timeout_s) and returns a malloc'd copy
 * of its value with a NUL byte after it (not counted in *len_p). */
wex_status wex_tool_store_get(wex_tool_store_client *client, const char *key,
                              double timeout_s, void **value_p, size_t *len_p);
/* Adds `delta` to counter `key` (absent: 0); *result_p (may be NULL)
 * gets the new value. */
wex_status wex_tool_store_add(wex_tool_store_client *client, const char *key,
                              int64_t delta, int64_t *result_p);
/* Waits until counter `key` >= target. */
wex_status wex_tool_store_wait_ge(wex_tool_store_client *client,
                                  const char *key, int64_t target,
                                  double timeout_s);
/* Says goodbye (so the server does not take it for dead), closes and
 * frees; NULL is a no-op. */
void wex_tool_store_close(wex_tool_store_client *client);

#endif /* WEX_TOOL_STORE_H */
