/*
 * The rendezvous store's key requests: SET, GET (waiting for the key),
 * ADD (counters), WAIT_GE and DROP, each under the server's one mutex,
 * waking every waiter on a change.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "store_proto.h"
#include "store_server.h"

int wex__store_on_set(wex__store_conn *c, const char *key,
                      const wex__store_request *req)
{
    wex__store_server *s = c->server;
    uint8_t *value = malloc(req->value_len ? req->value_len : 1);
    wex_status st;

    if (value == NULL)
        return wex__store_replyf(c, WEX__STORE_R_ERROR,
                                 "out of memory for %zu "
                                 "bytes",
                                 req->value_len);
    if (req->value_len)
        memcpy(value, req->value, req->value_len);
    pthread_mutex_lock(&s->mu);
    st = wex__store_map_put(s, key, value, req->value_len);
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    if (st != WEX_OK)
        return wex__store_replyf(c, WEX__STORE_R_ERROR, "%s",
                                 wex__last_error());
    return wex__store_reply(c, WEX__STORE_R_OK, NULL, 0);
}

int wex__store_on_get(wex__store_conn *c, const char *key, const char *shown,
                      const wex__store_request *req)
{
    wex__store_server *s = c->server;
    double deadline = wex__store_deadline(req->value);
    double wait = (double)wex__store_get_u64(req->value) / 1000.0;
    double next_check = 0;
    char text[WEX__ERROR_MAX];
    wex__store_entry *e;
    int why;

    pthread_mutex_lock(&s->mu);
    /* Satisfied before a death or a timeout is looked at: a value that is
     * there is always returned. */
    while ((e = wex__store_map_find(s, key)) == NULL) {
        why = wex__store_wait_step(c, deadline, &next_check, 1);
        if (why == WEX__STORE_WAIT_MORE)
            continue;
        snprintf(text, sizeof(text),
                 "rendezvous: key '%s' not set within "
                 "%.1f s",
                 shown, wait);
        return wex__store_end_wait(c, why, text);
    }
    uint8_t *copy = malloc(e->len ? e->len : 1);
    size_t len = e->len;
    if (copy != NULL && len)
        memcpy(copy, e->value, len);
    pthread_mutex_unlock(&s->mu);
    if (copy == NULL)
        return wex__store_replyf(c, WEX__STORE_R_ERROR,
                                 "out of memory for %zu "
                                 "bytes",
                                 len);
    int keep = wex__store_reply(c, WEX__STORE_R_OK, copy, len);
    free(copy);
    return keep;
}

/* With s->mu held: the counter's value (absent = 0), or -1 when the key
 * holds something else. */
static int counter_of(wex__store_server *s, const char *key, int64_t *v,
                      wex__store_entry **e_p)
{
    wex__store_entry *e = wex__store_map_find(s, key);

    *e_p = e;
    *v = 0;
    if (e == NULL)
        return 0;
    if (e->len != 8)
        return -1;
    *v = (int64_t)wex__store_get_u64(e->value);
    return 0;
}

int wex__store_on_add(wex__store_conn *c, const char *key, const char *shown,
                      const wex__store_request *req)
{
    wex__store_server *s = c->server;
    int64_t delta = (int64_t)wex__store_get_u64(req->value), v, sum;
    wex__store_entry *e;

    pthread_mutex_lock(&s->mu);
    if (counter_of(s, key, &v, &e) < 0) {
        size_t len = e->len;
        pthread_mutex_unlock(&s->mu);
        return wex__store_replyf(c, WEX__STORE_R_ERROR,
                                 "key '%s' holds %zu "
                                 "bytes, not a counter",
                                 shown, len);
    }
    if (__builtin_add_overflow(v, delta, &sum)) {
        pthread_mutex_unlock(&s->mu);
        return wex__store_replyf(c, WEX__STORE_R_ERROR,
                                 "counter '%s': %lld + "
                                 "%lld overflows",
                                 shown, (long long)v, (long long)delta);
    }
    if (e != NULL) {
        wex__store_put_u64(e->value, (uint64_t)sum);
    } else {
        uint8_t *value = malloc(8);
        if (value != NULL)
            wex__store_put_u64(value, (uint64_t)sum);
        if (value == NULL || wex__store_map_put(s, key, value, 8) != WEX_OK) {
            pthread_mutex_unlock(&s->mu);
            return wex__store_replyf(c, WEX__STORE_R_ERROR, "out of memory");
        }
    }
    pthread_cond_broadcast(&s->changed);
    pthread_mutex_unlock(&s->mu);
    return wex__store_reply_i64(c, sum);
}

int wex__store_on_wait_ge(wex__store_conn *c, const char *key,
                          const char *shown, const wex__store_request *req)
{
    wex__store_server *s = c->server;
    int64_t target = (int64_t)wex__store_get_u64(req->value), v;
    double deadline = wex__store_deadline(req->value + 8);
    double wait = (double)wex__store_get_u64(req->value + 8) / 1000.0;
    double next_check = 0;
    char text[WEX__ERROR_MAX];
    wex__store_entry *e;
    int why;

    pthread_mutex_lock(&s->mu);
    for (;;) {
        if (counter_of(s, key, &v, &e) < 0) {
            size_t len = e->len;
            pthread_mutex_unlock(&s->mu);
            return wex__store_replyf(c, WEX__STORE_R_ERROR,
                                     "key '%s' holds %zu "
                                     "bytes, not a counter",
                                     shown, len);
        }
        if (v >= target)
            break;
        why = wex__store_wait_step(c, deadline, &next_check, 1);
        if (why == WEX__STORE_WAIT_MORE)
            continue;
        snprintf(text, sizeof(text),
                 "rendezvous: counter '%s' is %lld, "
                 "not %lld, after %.1f s",
                 shown, (long long)v, (long long)target, wait);
        return wex__store_end_wait(c, why, text);
    }
    pthread_mutex_unlock(&s->mu);
    return wex__store_reply_i64(c, v);
}

int wex__store_on_drop(wex__store_conn *c, const char *prefix)
{
    size_t dropped;

    pthread_mutex_lock(&c->server->mu);
    dropped = wex__store_map_drop(c->server, prefix);
    pthread_mutex_unlock(&c->server->mu);
    return wex__store_reply_i64(c, (int64_t)dropped);
}

/* Serves one decoded request; returns whether to keep the connection. */
