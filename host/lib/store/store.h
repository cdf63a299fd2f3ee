/*
 * The rendezvous store: a small TCP key-value store that every rank of a
 * job (sources and destinations, separate processes) meets at, to swap
 * layout digests, transport memory keys, operation digests and step
 * barriers. One process serves it (a rank, or `wex store`); the wire
 * format is in store_proto.h.
 *
 * Every connection first presents the job's token. A client that said
 * hello and then disconnects without a goodbye is taken for dead: every
 * wait not yet satisfied, then and later, fails with WEX_ERR_PEER naming
 * it, so one crashed rank stops the whole job instead of leaving the
 * others waiting out their timeouts, until a step barrier (ARRIVE)
 * acknowledges the death: then the dead rank may rejoin, or the step go
 * on without it.
 *
 * A client is not thread-safe: one thread at a time may use it (each
 * request waits for its reply on the one connection). Threads that need
 * to wait concurrently open a client each.
 */
#ifndef WEX_HOST_STORE_H
#define WEX_HOST_STORE_H

#include <stddef.h>
#include <stdint.h>
#include <wex/abi.h>

#include "clock.h"

typedef struct wex__store_server wex__store_server;
typedef struct wex__store_client wex__store_client;

/* Serves on `address` ("HOST:PORT"; port 0 picks a free one; an empty
 * HOST means loopback) in a background thread. Every connection must
 * first present `token` (non-empty). */
wex_status wex__store_serve(const char *address, const char *token,
                            wex__store_server **server_p);
/* The bound address, e.g. "127.0.0.1:PORT". */
const char *wex__store_address(const wex__store_server *s);
/* How many keys it holds now. */
size_t wex__store_key_count(wex__store_server *s);
/* How many member deaths (connections gone without goodbye) it has
 * recorded so far. */
size_t wex__store_death_count(wex__store_server *s);
/* Closes every connection, joins every thread, frees. Clients still
 * connected see the connection close (WEX_ERR_PEER). */
void wex__store_stop(wex__store_server *s);

/* Connects (retrying until timeout_s: the server may start after the
 * client), presents the token and `who`, a name for messages
 * ("source/3", "destination/0"). A wrong token is WEX_ERR_INVALID
 * "rendezvous HOST:PORT refused the token". */
wex_status wex__store_connect(const char *address, const char *token,
                              const char *who, double timeout_s,
                              wex__store_client **client_p);
/* Sets (or replaces) `key`; wakes everyone waiting for it. */
wex_status wex__store_set(wex__store_client *c, const char *key,
                          const void *value, size_t len);
/* Waits until `key` exists (up to timeout_s) and returns a malloc'd copy
 * of its value, with a NUL byte after the last (not counted in *len_p)
 * so a string value can be used as one. */
wex_status wex__store_get(wex__store_client *c, const char *key,
                          double timeout_s, void **value_p, size_t *len_p);
/* Atomically adds `delta` to counter `key` (absent = 0); *result_p (may
 * be NULL) gets the new value. */
wex_status wex__store_add(wex__store_client *c, const char *key, int64_t delta,
                          int64_t *result_p);
/* Removes every key that starts with `prefix` (a finished step's);
 * *dropped_p (may be NULL) gets how many. */
wex_status wex__store_drop(wex__store_client *c, const char *prefix,
                           int64_t *dropped_p);
/* Waits until counter `key` >= target. */
wex_status wex__store_wait_ge(wex__store_client *c, const char *key,
                              int64_t target, double timeout_s);
/* Barrier: adds 1 to `key`, then waits until it reaches n. A key serves
 * one barrier; use a new key (e.g. with the step number) for each. */
wex_status wex__store_barrier(wex__store_client *c, const char *key, int64_t n,
                              double timeout_s);
/* A step barrier for a job's ranks, named "source/i" and
 * "destination/i" (i below `sources` and `destinations`); this client
 * must be one of them. It returns once every member has arrived alive,
 * except the sources marked in `optional` (bit i of byte i/8) that are
 * dead, or died and came back but are not at this barrier (they join a
 * later step): those are left out, listed in *dead_p (malloc'd;
 * ascending), the same list for every member. A required member that
 * died and came back counts once its new connection arrives. Without `fail_fast` a dead
 * member that is not optional is waited for until the timeout (it may
 * rejoin); with it the barrier fails at once, for every member, with
 * WEX_ERR_PEER naming it. Passing the barrier acknowledges every death
 * before it: later waits fail only on deaths after it. */
wex_status wex__store_arrive(wex__store_client *c, const char *key,
                             int fail_fast, uint64_t sources,
                             uint64_t destinations, const uint8_t *optional,
                             double timeout_s, uint64_t **dead_p,
                             uint64_t *dead_count_p);
/* Elastic destinations (docs/design.md, "Elastic replicas"): the
 * destinations form replicas of `replica_ranks` consecutive ranks and
 * take part by replica. One that is not connected is left out at once;
 * one that is connected is waited for until the timeout, then left out;
 * a replica takes part only when all its ranks arrived. The barrier
 * waits (until its timeout) for at least `min_replicas` whole replicas,
 * and fails naming how many there were. Out: the destination ranks left
 * out (malloc'd, ascending; the same list for every member), which
 * every member of a replica left out is told too. */
typedef struct wex__store_elastic {
    uint64_t replica_ranks; /* 0: not elastic */
    uint64_t min_replicas;
    uint64_t *absent; /* out */
    uint64_t absent_count;
    int too_few; /* out: it failed for too few whole replicas */
} wex__store_elastic;
wex_status wex__store_arrive_elastic(
    wex__store_client *c, const char *key, int fail_fast, uint64_t sources,
    uint64_t destinations, const uint8_t *optional, wex__store_elastic *elastic,
    double timeout_s, uint64_t **dead_p, uint64_t *dead_count_p);
/* Whether the last wex__store_arrive failed because its barrier had
 * already passed without this client (WEX_ERR_PEER): a step that went on
 * without it, which it may only skip. */
int wex__store_missed(const wex__store_client *c);
/* One value per owner: waits until, for each i < n, key PREFIX+i is set,
 * or the client named OWNER+i has died since this client's last
 * barrier (then .present = 0: it never will be). Deaths do not end the
 * wait; only the timeout does. Its answer acknowledges every death so
 * far, like a barrier. *items_p is one malloc'd block (free it once);
 * each value is NUL-terminated. */
typedef struct wex__store_gathered {
    int present;
    const char *value;
    size_t len;
} wex__store_gathered;
wex_status wex__store_gather(wex__store_client *c, const char *prefix,
                             uint64_t n, const char *owner_prefix,
                             double timeout_s, wex__store_gathered **items_p);
/* Says goodbye (so the server does not report this client as dead),
 * then closes and frees. NULL is allowed. */
void wex__store_close(wex__store_client *c);
/* Closes and frees without a goodbye: what a crash looks like to the
 * others. For tests. */
void wex__store_abandon(wex__store_client *c);

/* ---- socket helpers shared by the client and the server -------------
 * (store_socket.c). Deadlines are wex__now() seconds (fd_io.h); a
 * negative deadline waits forever. Failures set the last error: WEX_ERR_TIMEOUT,
 * WEX_ERR_PEER when the other end closed, WEX_ERR_SYSTEM. */
/* Waits until `fd` is ready for `events` (POLLIN, POLLOUT). */
wex_status wex__store_wait_fd(int fd, short events, double deadline);
wex_status wex__store_read_full(int fd, void *buf, size_t n, double deadline);
wex_status wex__store_write_full(int fd, const void *buf, size_t n,
                                 double deadline);
/* Splits "HOST:PORT" ("[V6]:PORT" too); an empty host becomes
 * 127.0.0.1. */
wex_status wex__store_split_address(const char *address, char *host,
                                    size_t host_cap, char *port,
                                    size_t port_cap);

#endif /* WEX_HOST_STORE_H */
