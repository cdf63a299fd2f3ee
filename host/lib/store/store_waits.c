/*
 * What the rendezvous server's requests share (store_server.h): replies,
 * the record of clients that died, and the slice-by-slice wait that
 * notices a death, a timeout or the server stopping.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "store.h"
#include "store_proto.h"
#include "store_server.h"

/* Keys and names go into one-line messages: no control characters. */
void wex__store_printable(const char *in, char *out, size_t cap)
{
    size_t i = 0;

    for (; in[i] != '\0' && i + 1 < cap; i++)
        out[i] = ((unsigned char)in[i] < 0x20 || in[i] == 0x7f) ? '?' : in[i];
    out[i] = '\0';
}

/* Time taken depends only on the real token's length, never on how much
 * of a guess is right. */
int wex__store_reply(wex__store_conn *c, uint8_t status, const void *payload,
                     size_t len)
{
    uint8_t *msg;
    size_t n;
    wex_status st = wex__store_encode_response(status, payload, len, &msg, &n);

    if (st == WEX_OK) {
        st = wex__store_write_full(c->fd, msg, n,
                                   wex__now() + WEX__STORE_MESSAGE_S);
        free(msg);
    }
    return st == WEX_OK;
}

int wex__store_replyf(wex__store_conn *c, uint8_t status, const char *fmt, ...)
    WEX_PRINTF(3, 4);
int wex__store_replyf(wex__store_conn *c, uint8_t status, const char *fmt, ...)
{
    char text[WEX__ERROR_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    return wex__store_reply(c, status, text, strlen(text));
}

int wex__store_reply_i64(wex__store_conn *c, int64_t v)
{
    uint8_t b[8];

    wex__store_put_u64(b, (uint64_t)v);
    return wex__store_reply(c, WEX__STORE_R_OK, b, sizeof(b));
}

void wex__store_dead_message(const wex__store_server *s, size_t from, char *buf,
                             size_t cap)
{
    const char *tail = " disconnected without saying goodbye";
    size_t n = (size_t)snprintf(buf, cap, "rendezvous: "), shown = 0;

    for (size_t i = from; i < s->dead_count; i++) {
        int again = 0;
        /* Each name once, however often it died. */
        for (size_t j = from; j < i && !again; j++)
            again = strcmp(s->dead[j], s->dead[i]) == 0;
        if (again)
            continue;
        if (n + strlen(s->dead[i]) + strlen(tail) + 32 > cap) {
            n += (size_t)snprintf(buf + n, cap - n, " and more");
            break;
        }
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", shown++ ? ", " : "",
                              s->dead[i]);
    }
    snprintf(buf + n, cap - n, "%s", tail);
}

/* With s->mu held. The key "dead/<who>" lets anyone ask who died. */
void wex__store_record_death(wex__store_server *s, const char *who)
{
    char key[WEX__STORE_WHO_MAX + 8], **dead = NULL;
    char *name = NULL, *value = NULL;

    if (s->dead_count < WEX__STORE_MAX_DEATHS) {
        name = strdup(who);
        value = strdup(who);
        dead = realloc(s->dead, (s->dead_count + 1) * sizeof(*dead));
        if (dead != NULL)
            s->dead = dead;
    }
    if (dead == NULL || name == NULL || value == NULL) {
        /* Still wake everyone: a waiter sees no death and waits on, but
         * the waits are bounded, and memory is gone anyway. */
        free(name);
        free(value);
    } else {
        s->dead[s->dead_count++] = name;
        snprintf(key, sizeof(key), "dead/%s", who);
        wex__store_map_put(s, key, (uint8_t *)value, strlen(value));
    }
    wex__log(WEX_LOG_WARN, "rendezvous",
             "%s disconnected without saying "
             "goodbye",
             who);
    pthread_cond_broadcast(&s->changed);
}

/* Whether the client at the other end of fd has gone (closed or reset),
 * without reading anything it may have sent. */
static int client_gone(int fd)
{
    struct pollfd p = {fd, POLLIN | POLLRDHUP, 0};
    char byte;

    if (poll(&p, 1, 0) <= 0)
        return 0;
    if (p.revents & (POLLERR | POLLHUP | POLLRDHUP))
        return 1;
    return recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* *next_check (start at 0) spaces out the look at the client's socket:
 * every change wakes every waiter, and a barrier of N ranks makes N
 * changes. */
int wex__store_wait_step(wex__store_conn *c, double deadline,
                         double *next_check, int watch_deaths)
{
    wex__store_server *s = c->server;
    double now = wex__now(), until;
    struct timespec ts;

    if (s->stopping)
        return WEX__STORE_WAIT_GONE;
    if (now >= *next_check) {
        if (client_gone(c->fd))
            return WEX__STORE_WAIT_GONE;
        *next_check = now + WEX__STORE_SLICE_S;
    }
    if (watch_deaths && s->dead_count > c->acked)
        return WEX__STORE_WAIT_DEAD;
    if (now >= deadline)
        return WEX__STORE_WAIT_TIMEOUT;
    until = now + WEX__STORE_SLICE_S;
    if (deadline < until)
        until = deadline;
    ts.tv_sec = (time_t)until;
    ts.tv_nsec = (long)((until - (double)ts.tv_sec) * 1e9);
    pthread_cond_timedwait(&s->changed, &s->mu, &ts);
    return WEX__STORE_WAIT_MORE;
}

int wex__store_end_wait(wex__store_conn *c, int why, const char *timeout_text)
{
    char text[WEX__ERROR_MAX];

    if (why == WEX__STORE_WAIT_DEAD)
        wex__store_dead_message(c->server, c->acked, text, sizeof(text));
    pthread_mutex_unlock(&c->server->mu);
    if (why == WEX__STORE_WAIT_DEAD)
        return wex__store_reply(c, WEX__STORE_R_PEER_DEAD, text, strlen(text));
    if (why == WEX__STORE_WAIT_TIMEOUT)
        return wex__store_reply(c, WEX__STORE_R_TIMEOUT, timeout_text,
                                strlen(timeout_text));
    return 0;
}

double wex__store_deadline(const uint8_t *ms)
{
    return wex__now() + (double)wex__store_get_u64(ms) / 1000.0;
}
