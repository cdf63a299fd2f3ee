/*
 * The rendezvous server's insides, shared by its files: store_server.c
 * (connections, SET/GET/ADD/WAIT_GE/DROP), store_members.c (the step
 * barrier and the verdict gather, which know who is alive),
 * store_waits.c (replies, deaths, waiting) and store_map.c (the keys).
 * Every name here is wex__store_* or WEX__STORE_*: they are the store's
 * alone.
 *
 * Deaths: a client that said HELLO and then went without BYE is
 * appended to `dead`; death number i (0-based) is "acknowledged" by a
 * connection whose `acked` > i. An ordinary wait fails on any death its
 * connection has not acknowledged. A connection acknowledges the deaths
 * that happened before it said HELLO, and those a step barrier it passed
 * accounted for: so a rank that died in one step fails that step for
 * everyone, and the next step, once it is over, can run.
 */
#ifndef WEX_HOST_STORE_SERVER_H
#define WEX_HOST_STORE_SERVER_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "error.h"
#include "store_proto.h"

/* A new connection must say HELLO this soon (short, so idle sockets that
 * never authenticate cannot pile up); a message, once started, must
 * arrive whole this soon. */
#define WEX__STORE_HELLO_S 2.0
#define WEX__STORE_MESSAGE_S 30.0
/* How often a waiting connection checks its own client is still there:
 * a rank killed in the middle of a barrier must be reported as dead to
 * the others waiting in it. */
#define WEX__STORE_SLICE_S 0.1
/* Clients that said HELLO with the right token. */
#define WEX__STORE_MAX_CONNS 4096
/* Connections not yet past HELLO have their own pool, so unauthenticated
 * sockets never take a client's place: when it is full the oldest
 * pending connection is dropped for the new one. */
#define WEX__STORE_MAX_PENDING 256
/* A flapping client cannot grow the record of deaths forever. */
#define WEX__STORE_MAX_DEATHS 65536
#define WEX__STORE_WHO_MAX 128
#define WEX__STORE_STACK (256u << 10)

typedef struct wex__store_entry {
    struct wex__store_entry *next;
    uint8_t *value;
    size_t len;
    char key[];
} wex__store_entry;

typedef struct wex__store_conn {
    struct wex__store_server *server;
    struct wex__store_conn *next;
    pthread_t thread;
    int fd;
    int done;          /* the thread has finished (under server->mu) */
    int hello;         /* said HELLO with the right token */
    int pending;       /* counted in pending_count (under server->mu) */
    int bye;           /* said BYE */
    uint64_t serial;   /* this connection, never reused in a server's life */
    size_t acked;      /* deaths this connection has acknowledged */
    size_t step_acked; /* ... when its last barrier that was no retry
                          passed: deaths after it are this step's */
    char who[WEX__STORE_WHO_MAX];
} wex__store_conn;

struct wex__store_server {
    int listen_fd;
    int wake[2]; /* written by stop, to wake the accept thread */
    char address[300];
    char *token;
    size_t token_len;
    pthread_t acceptor;
    pthread_mutex_t mu;
    pthread_cond_t changed; /* any key changed, a client died, or stop */
    int stopping;
    wex__store_entry **buckets;
    size_t bucket_count, entry_count;
    char **dead; /* every death, in order: a name may die more than once */
    size_t dead_count;
    wex__store_conn *conns;
    size_t conn_count;    /* every connection in `conns` */
    size_t pending_count; /* ... not yet past HELLO */
    size_t hello_count;   /* ... past HELLO and still open */
    uint64_t next_serial;
};

typedef struct wex__store_server wex__store_server;

enum {
    WEX__STORE_WAIT_MORE,
    WEX__STORE_WAIT_DEAD,
    WEX__STORE_WAIT_TIMEOUT,
    WEX__STORE_WAIT_GONE
};

/* The map (s->mu held). put takes `value` (malloc'd), even on failure. */
wex__store_entry *wex__store_map_find(const wex__store_server *s,
                                      const char *key);
wex_status wex__store_map_put(wex__store_server *s, const char *key,
                              uint8_t *value, size_t len);
/* Removes every key starting with `prefix`; returns how many. */
size_t wex__store_map_drop(wex__store_server *s, const char *prefix);
/* Frees every entry and the buckets. */
void wex__store_map_free(wex__store_server *s);

/* Keys and names go into one-line messages: no control characters. */
void wex__store_printable(const char *in, char *out, size_t cap);
/* Replies; return whether the connection is still good. */
int wex__store_reply(wex__store_conn *c, uint8_t status, const void *payload,
                     size_t len);
int wex__store_reply_i64(wex__store_conn *c, int64_t v);
int wex__store_replyf(wex__store_conn *c, uint8_t status, const char *fmt, ...)
    WEX_PRINTF(3, 4);

/* With s->mu held: records that client `who` went without BYE. */
void wex__store_record_death(wex__store_server *s, const char *who);
/* With s->mu held: "rendezvous: a, b disconnected without saying
 * goodbye", naming the deaths from number `from` on. */
void wex__store_dead_message(const wex__store_server *s, size_t from, char *buf,
                             size_t cap);
/* With s->mu held, for a wait not yet satisfied: says why it ends, or
 * sleeps for a change (at most one slice) and says to look again. A
 * wait that does not `watch_deaths` ends only on time, stop or its own
 * client going. */
int wex__store_wait_step(wex__store_conn *c, double deadline,
                         double *next_check, int watch_deaths);
/* Ends such a wait; s->mu is held on entry and released. */
int wex__store_end_wait(wex__store_conn *c, int why, const char *timeout_text);
/* now + the 8-byte little-endian milliseconds at `ms`. */
double wex__store_deadline(const uint8_t *ms);

/* store_keys.c */
int wex__store_on_set(wex__store_conn *c, const char *key,
                      const wex__store_request *req);
int wex__store_on_get(wex__store_conn *c, const char *key, const char *shown,
                      const wex__store_request *req);
int wex__store_on_add(wex__store_conn *c, const char *key, const char *shown,
                      const wex__store_request *req);
int wex__store_on_wait_ge(wex__store_conn *c, const char *key,
                          const char *shown, const wex__store_request *req);
int wex__store_on_drop(wex__store_conn *c, const char *prefix);

/* store_members.c */
int wex__store_on_arrive(wex__store_conn *c, const char *key, const char *shown,
                         const wex__store_request *req);
int wex__store_on_gather(wex__store_conn *c, const char *key, const char *shown,
                         const wex__store_request *req);

#endif /* WEX_HOST_STORE_SERVER_H */
