/*
 * The rendezvous server's insides, shared by its files: store_server.c
 * (connections, SET/GET/ADD/WAIT_GE/DROP), store_map.c (the keys) and
 * store_members.c (the step barrier and the verdict gather, which know
 * who is alive).
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

#define WEX__HELLO_S 10.0   /* a new connection must say HELLO this soon */
#define WEX__MESSAGE_S 30.0 /* a message, once started, must arrive whole */
/* How often a waiting connection checks its own client is still there:
 * a rank killed in the middle of a barrier must be reported as dead to
 * the others waiting in it. */
#define WEX__SLICE_S 0.1
#define WEX__MAX_CONNS 4096
#define WEX__MAX_DEATHS 65536 /* a flapping client cannot grow it forever */
#define WEX__WHO_MAX 128
#define WEX__STACK (256u << 10)

typedef struct wex__entry {
    struct wex__entry *next;
    uint8_t *value;
    size_t len;
    char key[];
} wex__entry;

typedef struct wex__conn {
    struct wex__store_server *server;
    struct wex__conn *next;
    pthread_t thread;
    int fd;
    int done;       /* the thread has finished (under server->mu) */
    int hello;      /* said HELLO with the right token */
    int bye;        /* said BYE */
    uint64_t serial; /* this connection, never reused in a server's life */
    size_t acked;   /* deaths this connection has acknowledged */
    char who[WEX__WHO_MAX];
} wex__conn;

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
    wex__entry **buckets;
    size_t bucket_count, entry_count;
    char **dead; /* every death, in order: a name may die more than once */
    size_t dead_count;
    wex__conn *conns;
    size_t conn_count;
    uint64_t next_serial;
};

typedef struct wex__store_server wex__store_server;

enum { WEX__WAIT_MORE, WEX__WAIT_DEAD, WEX__WAIT_TIMEOUT, WEX__WAIT_GONE };

/* The map (s->mu held). put takes `value` (malloc'd), even on failure. */
wex__entry *wex__map_find(const wex__store_server *s, const char *key);
wex_status wex__map_put(wex__store_server *s, const char *key,
                        uint8_t *value, size_t len);
/* Removes every key starting with `prefix`; returns how many. */
size_t wex__map_drop(wex__store_server *s, const char *prefix);
/* Frees every entry and the buckets. */
void wex__map_free(wex__store_server *s);

/* Keys and names go into one-line messages: no control characters. */
void wex__printable(const char *in, char *out, size_t cap);
/* Replies; return whether the connection is still good. */
int wex__reply(wex__conn *c, uint8_t status, const void *payload,
               size_t len);
int wex__replyf(wex__conn *c, uint8_t status, const char *fmt, ...)
    WEX_PRINTF(3, 4);

/* With s->mu held: "rendezvous: a, b disconnected without saying
 * goodbye", naming the deaths from number `from` on. */
void wex__dead_message(const wex__store_server *s, size_t from, char *buf,
                       size_t cap);
/* With s->mu held, for a wait not yet satisfied: says why it ends, or
 * sleeps for a change (at most one slice) and says to look again. A
 * wait that does not `watch_deaths` ends only on time, stop or its own
 * client going. */
int wex__wait_step(wex__conn *c, double deadline, double *next_check,
                   int watch_deaths);
/* Ends such a wait; s->mu is held on entry and released. */
int wex__end_wait(wex__conn *c, int why, const char *timeout_text);
/* now + the 8-byte little-endian milliseconds at `ms`. */
double wex__deadline(const uint8_t *ms);

/* store_members.c */
int wex__on_arrive(wex__conn *c, const char *key, const char *shown,
                   const wex__store_request *req);
int wex__on_gather(wex__conn *c, const char *key, const char *shown,
                   const wex__store_request *req);

#endif /* WEX_HOST_STORE_SERVER_H */
