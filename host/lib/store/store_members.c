/*
 * The two rendezvous requests that know who is alive: the step barrier
 * (ARRIVE), which lets a step go on without dead sources that others
 * replicate and fixes, for everyone, which ones it went without; and the
 * verdict gather (GATHER), which waits for one value per owner and takes
 * an owner's death as its answer, so every rank reads the same verdicts.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store_server.h"

/* Who is alive and who has died, by rank, for one barrier's members. */
typedef struct store_roll {
    uint64_t ns, nd;
    uint64_t *live; /* serial of the live connection, 0 if none; [ns+nd] */
    size_t *died;   /* 1 + the index of its last death, 0: never; [ns+nd] */
} store_roll;

/* "source/12" -> 12 in the source range, "destination/3" -> ns + 3. */
static int member_index(const store_roll *r, const char *who, uint64_t *index_p)
{
    const char *digits;
    char *end;
    uint64_t i, base, count;

    if (strncmp(who, "source/", 7) == 0) {
        digits = who + 7, base = 0, count = r->ns;
    } else if (strncmp(who, "destination/", 12) == 0) {
        digits = who + 12, base = r->ns, count = r->nd;
    } else {
        return 0;
    }
    if (*digits < '0' || *digits > '9')
        return 0;
    i = strtoull(digits, &end, 10);
    if (*end != '\0' || i >= count)
        return 0;
    *index_p = base + i;
    return 1;
}

/* With s->mu held. */
static wex_status roll_call(const wex__store_server *s, store_roll *r)
{
    uint64_t n = r->ns + r->nd, i;

    r->live = calloc(n ? n : 1, sizeof(*r->live));
    r->died = calloc(n ? n : 1, sizeof(*r->died));
    if (r->live == NULL || r->died == NULL)
        return WEX_ERR_NOMEM;
    for (const wex__store_conn *c = s->conns; c != NULL; c = c->next)
        if (c->hello && !c->done && member_index(r, c->who, &i) &&
            c->serial > r->live[i])
            r->live[i] = c->serial; /* the newest, if a name connects twice */
    for (size_t d = 0; d < s->dead_count; d++)
        if (member_index(r, s->dead[d], &i))
            r->died[i] = d + 1;
    return WEX_OK;
}

static void roll_free(store_roll *r)
{
    free(r->live);
    free(r->died);
}

static const char *member_name(const store_roll *r, uint64_t i, char *buf,
                               size_t cap)
{
    if (i < r->ns)
        snprintf(buf, cap, "source/%llu", (unsigned long long)i);
    else
        snprintf(buf, cap, "destination/%llu", (unsigned long long)(i - r->ns));
    return buf;
}

/* Whether member i's live connection is the one that arrived. */
static int arrived(const wex__store_server *s, const char *key,
                   const store_roll *r, uint64_t i)
{
    char name[WEX__STORE_KEY_MAX + WEX__STORE_WHO_MAX + 2], who[48];
    const wex__store_entry *e;

    snprintf(name, sizeof(name), "%s@%s", key,
             member_name(r, i, who, sizeof(who)));
    e = wex__store_map_find(s, name);
    return e != NULL && e->len == 8 && r->live[i] != 0 &&
           wex__store_get_u64(e->value) == r->live[i];
}

enum { WEX__BARRIER_WAIT, WEX__BARRIER_DONE, WEX__BARRIER_FAILED };

/* Elastic destinations (WEX__ARRIVE_ELASTIC): a destination rank takes
 * part when its whole replica (`per` consecutive ranks) arrived; one
 * that is not connected is left out at once, one that is connected is
 * waited for until the barrier's timeout (`final`: the look at the
 * timeout, which leaves it out). The barrier passes once at least
 * `least` replicas are whole. per == 0: not elastic. */
typedef struct elastic_rule {
    uint64_t per, least;
    int final;
} elastic_rule;

/* With s->mu held: whether every rank of destination replica q arrived. */
static int replica_whole(const wex__store_server *s, const char *key,
                         const store_roll *r, const elastic_rule *el,
                         uint64_t q)
{
    for (uint64_t k = 0; k < el->per; k++)
        if (!arrived(s, key, r, r->ns + q * el->per + k))
            return 0;
    return 1;
}

/* With s->mu held: the elastic destinations' part of a look. Returns 1
 * while one that is connected has not arrived (its name in `missing`),
 * else 0 with the number of whole replicas in *whole_p. */
static int elastic_waiting(const wex__store_server *s, const char *key,
                           const store_roll *r, const elastic_rule *el,
                           uint64_t *whole_p, char *missing, size_t cap,
                           size_t *used_p)
{
    int waiting = 0;
    char who[48];

    *whole_p = 0;
    for (uint64_t i = r->ns; i < r->ns + r->nd; i++) {
        if (arrived(s, key, r, i) || r->live[i] == 0 || el->final)
            continue;
        waiting = 1;
        if (*used_p + 64 < cap)
            *used_p += (size_t)snprintf(missing + *used_p, cap - *used_p,
                                        "%s%s (connected)", *used_p ? ", " : "",
                                        member_name(r, i, who, sizeof(who)));
    }
    for (uint64_t q = 0; !waiting && q < r->nd / el->per; q++)
        *whole_p += replica_whole(s, key, r, el, q);
    return waiting;
}

/* With s->mu held: looks at every member. DONE stores the outcome under
 * `key` (u8 1, u64 deaths acknowledged, u64 N, N dead source ranks);
 * FAILED stores (u8 0, u64 deaths acknowledged, message); WAIT lists who
 * is missing in `missing`. A required member that is dead fails the
 * barrier when `fail_fast`, or when its death is news to this
 * connection; one whose death was already reported is waited for: it
 * may rejoin. With `fail_fast`, one that died since and is back fails
 * it too. */
/* With s->mu held: stores a failed outcome under `key`: u8 `kind` (0: a
 * member died, 2: too few elastic replicas), u64 deaths acknowledged,
 * the message. */
static int store_failure(wex__store_server *s, const char *key, uint8_t kind,
                         const char *text)
{
    size_t len = strlen(text);
    uint8_t *out = malloc(9 + len);

    if (out == NULL)
        return WEX__BARRIER_WAIT;
    out[0] = kind;
    wex__store_put_u64(out + 1, s->dead_count);
    memcpy(out + 9, text, len);
    wex__store_map_put(s, key, out, 9 + len);
    return WEX__BARRIER_FAILED;
}

static int barrier_look(const wex__store_conn *c, const char *key,
                        const store_roll *r, const uint8_t *optional,
                        const elastic_rule *el, int fail_fast, char *missing,
                        size_t cap)
{
    wex__store_server *s = c->server;
    uint64_t n = el->per ? r->ns : r->ns + r->nd, dead = 0, whole = 0;
    uint64_t absent = 0;
    size_t used = 0;
    int failed = 0, waiting = 0;
    uint8_t *out;
    char who[48];

    missing[0] = '\0';
    for (uint64_t i = 0; i < n; i++) {
        int may_skip = i < r->ns && (optional[i / 8] >> (i % 8)) & 1;
        int gone = r->live[i] == 0 && r->died[i] != 0;
        if (arrived(s, key, r, i))
            continue;
        /* An optional source that died and is back, but not here, may be
         * joining at a later step: the step goes on without it. */
        if (may_skip && r->died[i] != 0) {
            dead++;
            continue;
        }
        /* Died in this step and connected again: it starts over at a
         * later step, so a retry of this one (`fail_fast`) would wait
         * for it in vain. */
        int back = r->live[i] != 0 && r->died[i] > c->step_acked;
        int fails = fail_fast ? gone || back : gone && r->died[i] > c->acked;
        if (fails && !failed) {
            failed = 1;
            used = 0;
        }
        if (failed && !gone && !(fail_fast && back))
            continue;
        waiting = 1;
        if (used + 64 < cap)
            used += (size_t)snprintf(missing + used, cap - used, "%s%s%s",
                                     used ? ", " : "",
                                     member_name(r, i, who, sizeof(who)),
                                     gone   ? " (dead)"
                                     : back ? " (died in this step, back "
                                              "since)"
                                            : "");
    }
    if (!failed && el->per &&
        elastic_waiting(s, key, r, el, &whole, missing, cap, &used))
        waiting = 1;
    if (!failed && !waiting && el->per && whole < el->least) {
        /* too few replicas: wait for more to join, until the timeout */
        if (!el->final) {
            snprintf(missing, cap,
                     "destination replicas (%llu whole, min_replicas %llu)",
                     (unsigned long long)whole, (unsigned long long)el->least);
            return WEX__BARRIER_WAIT;
        }
        snprintf(missing, cap,
                 "%llu whole destination replica%s arrived, fewer than "
                 "min_replicas %llu",
                 (unsigned long long)whole, whole == 1 ? "" : "s",
                 (unsigned long long)el->least);
        return store_failure(s, key, 2, missing);
    }
    if (waiting && !failed)
        return WEX__BARRIER_WAIT;
    if (failed)
        return store_failure(s, key, 0, missing);
    if (el->per)
        absent = (r->nd / el->per - whole) * el->per;
    out = malloc(17 + 8 * dead + (el->per ? 8 + 8 * absent : 0));
    if (out == NULL)
        return WEX__BARRIER_WAIT;
    out[0] = 1;
    wex__store_put_u64(out + 1, s->dead_count);
    wex__store_put_u64(out + 9, dead);
    dead = 0;
    for (uint64_t i = 0; i < r->ns; i++)
        if (!arrived(s, key, r, i))
            wex__store_put_u64(out + 17 + 8 * dead++, i);
    if (el->per) {
        uint8_t *at = out + 17 + 8 * dead;
        wex__store_put_u64(at, absent);
        at += 8;
        for (uint64_t q = 0; q < r->nd / el->per; q++)
            if (!replica_whole(s, key, r, el, q))
                for (uint64_t k = 0; k < el->per; k++, at += 8)
                    wex__store_put_u64(at, q * el->per + k);
    }
    wex__store_map_put(s, key, out,
                       17 + 8 * dead + (el->per ? 8 + 8 * absent : 0));
    return WEX__BARRIER_DONE;
}

/* With s->mu held: how many names have arrived at barrier `key`. */
static uint64_t arrivals(const wex__store_server *s, const char *key)
{
    char name[WEX__STORE_KEY_MAX + 2];
    const wex__store_entry *e;

    snprintf(name, sizeof(name), "%s#", key);
    e = wex__store_map_find(s, name);
    return e != NULL && e->len == 8 ? wex__store_get_u64(e->value) : 0;
}

/* With s->mu held: records that this connection reached the barrier,
 * and counts the name the first time. */
static wex_status mark_arrival(wex__store_conn *c, const char *key)
{
    char name[WEX__STORE_KEY_MAX + WEX__STORE_WHO_MAX + 2];
    uint8_t *serial = malloc(8), *count;
    int first;

    if (serial == NULL)
        return WEX_ERR_NOMEM;
    wex__store_put_u64(serial, c->serial);
    snprintf(name, sizeof(name), "%s@%s", key, c->who);
    first = wex__store_map_find(c->server, name) == NULL;
    if (wex__store_map_put(c->server, name, serial, 8) != WEX_OK)
        return WEX_ERR_NOMEM;
    if (!first)
        return WEX_OK;
    if ((count = malloc(8)) == NULL)
        return WEX_ERR_NOMEM;
    wex__store_put_u64(count, arrivals(c->server, key) + 1);
    snprintf(name, sizeof(name), "%s#", key);
    return wex__store_map_put(c->server, name, count, 8);
}

/* With s->mu held: whether looking at every member could change
 * anything. Every change wakes every waiter, and a barrier of N ranks
 * makes N changes: the O(N) look is kept for when every member could
 * be accounted for (arrived or dead), or a death must be acted on. */
static int worth_a_look(const wex__store_conn *c, const char *key,
                        uint64_t members, int fail_fast, int elastic)
{
    const wex__store_server *s = c->server;

    /* elastic: who is connected decides, so every change may */
    return elastic || arrivals(s, key) + s->dead_count >= members ||
           s->dead_count > c->acked || (fail_fast && s->dead_count > 0);
}

/* With s->mu held: looks at every member (see barrier_look). */
static int look(wex__store_conn *c, const char *key, store_roll *r,
                const uint8_t *optional, const elastic_rule *el, int fail_fast,
                char *missing, size_t cap)
{
    roll_free(r);
    if (roll_call(c->server, r) != WEX_OK) {
        snprintf(missing, cap, "(out of memory)");
        return WEX__BARRIER_WAIT;
    }
    return barrier_look(c, key, r, optional, el, fail_fast, missing, cap);
}

/* With s->mu held: whether barrier `key` was passed (its outcome is
 * stored, and not a failure) without this connection among those that
 * arrived. A barrier serves one step's try: a rank coming to it late
 * would write into destinations that have moved on. */
static int passed_without(const wex__store_conn *c, const char *key)
{
    char name[WEX__STORE_KEY_MAX + WEX__STORE_WHO_MAX + 2];
    const wex__store_entry *done = wex__store_map_find(c->server, key), *mine;

    if (done == NULL || done->len < 9 || done->value[0] != 1)
        return 0;
    snprintf(name, sizeof(name), "%s@%s", key, c->who);
    mine = wex__store_map_find(c->server, name);
    return mine == NULL || mine->len != 8 ||
           wex__store_get_u64(mine->value) != c->serial;
}

int wex__store_on_arrive(wex__store_conn *c, const char *key, const char *shown,
                         const wex__store_request *req)
{
    wex__store_server *s = c->server;
    double deadline = wex__store_deadline(req->value);
    double wait = (double)wex__store_get_u64(req->value) / 1000.0;
    int fail_fast =
        (wex__store_get_u64(req->value + 8) & WEX__ARRIVE_FAIL_FAST) != 0;
    store_roll r = {wex__store_get_u64(req->value + 16),
                    wex__store_get_u64(req->value + 24), NULL, NULL};
    const uint8_t *optional = req->value + 32;
    elastic_rule el = {0, 0, 0};
    double next_check = 0;
    char missing[512] = "", text[WEX__ERROR_MAX];
    const wex__store_entry *e;
    int why;

    if (wex__store_get_u64(req->value + 8) & WEX__ARRIVE_ELASTIC) {
        const uint8_t *tail = req->value + req->value_len - 16;
        el.per = wex__store_get_u64(tail); /* checked: divides nd */
        el.least = wex__store_get_u64(tail + 8);
    }
    pthread_mutex_lock(&s->mu);
    if (passed_without(c, key)) {
        pthread_mutex_unlock(&s->mu);
        return wex__store_replyf(c, WEX__STORE_R_PASSED,
                                 "rendezvous: barrier '%s' was passed "
                                 "without %s: that step went on without it "
                                 "(a replayed step, or a rank that joined "
                                 "after it)",
                                 shown, c->who);
    }
    if (wex__store_map_find(s, key) == NULL && mark_arrival(c, key) != WEX_OK) {
        pthread_mutex_unlock(&s->mu);
        return wex__store_replyf(c, WEX__STORE_R_ERROR, "out of memory");
    }
    pthread_cond_broadcast(&s->changed);
    for (;;) {
        if ((e = wex__store_map_find(s, key)) != NULL)
            break;
        if (worth_a_look(c, key, r.ns + r.nd, fail_fast, el.per != 0) &&
            look(c, key, &r, optional, &el, fail_fast, missing,
                 sizeof(missing)) != WEX__BARRIER_WAIT) {
            pthread_cond_broadcast(&s->changed);
            continue;
        }
        why = wex__store_wait_step(c, deadline, &next_check, 0);
        if (why == WEX__STORE_WAIT_MORE)
            continue;
        /* Ending: one last look, which also says who is missing. */
        el.final = 1; /* elastic: those not here are left out */
        if (why == WEX__STORE_WAIT_TIMEOUT &&
            look(c, key, &r, optional, &el, fail_fast, missing,
                 sizeof(missing)) != WEX__BARRIER_WAIT) {
            pthread_cond_broadcast(&s->changed);
            continue;
        }
        roll_free(&r);
        snprintf(text, sizeof(text),
                 "rendezvous: barrier '%s': still "
                 "waiting after %.1f s for %s",
                 shown, wait, missing);
        return wex__store_end_wait(c, why, text);
    }
    roll_free(&r);
    if (e->len < 9 || e->value[0] > 2) {
        pthread_mutex_unlock(&s->mu);
        return wex__store_replyf(c, WEX__STORE_R_ERROR,
                                 "key '%s' holds something "
                                 "other than a barrier",
                                 shown);
    }
    /* Deaths up to the barrier are accounted for: its dead sources are
     * left out, every other member is there, alive; or the barrier
     * failed, naming them, and the next one waits for them to rejoin. */
    if (wex__store_get_u64(e->value + 1) > c->acked)
        c->acked = (size_t)wex__store_get_u64(e->value + 1);
    if (!fail_fast)
        c->step_acked = (size_t)wex__store_get_u64(e->value + 1);
    if (e->value[0] == 2) {
        snprintf(text, sizeof(text),
                 "rendezvous: barrier '%s': %.*s within %.1f s", shown,
                 (int)(e->len - 9), (const char *)e->value + 9, wait);
        pthread_mutex_unlock(&s->mu);
        return wex__store_reply(c, WEX__STORE_R_FEW, text, strlen(text));
    }
    if (e->value[0] == 0) {
        snprintf(text, sizeof(text),
                 "rendezvous: barrier '%s': %.*s "
                 "disconnected without saying goodbye",
                 shown, (int)(e->len - 9), (const char *)e->value + 9);
        pthread_mutex_unlock(&s->mu);
        return wex__store_reply(c, WEX__STORE_R_PEER_DEAD, text, strlen(text));
    }
    size_t len = e->len - 1;
    uint8_t *copy = malloc(len);
    if (copy != NULL) {
        memcpy(copy, e->value + 1, len);
        wex__store_put_u64(copy, c->acked);
    }
    pthread_mutex_unlock(&s->mu);
    if (copy == NULL)
        return wex__store_replyf(c, WEX__STORE_R_ERROR, "out of memory");
    int keep = wex__store_reply(c, WEX__STORE_R_OK, copy, len);
    free(copy);
    return keep;
}

/* With s->mu held: whether `owner` died after this connection's last
 * barrier. */
static int died_lately(const wex__store_conn *c, const char *owner)
{
    const wex__store_server *s = c->server;

    for (size_t d = c->acked; d < s->dead_count; d++)
        if (strcmp(s->dead[d], owner) == 0)
            return 1;
    return 0;
}

/* With s->mu held: the reply once every value is in or its owner died,
 * else NULL with *pending_p the first missing index. */
static uint8_t *gathered_records(const wex__store_conn *c, const char *prefix,
                                 uint64_t n, const char *owner_prefix,
                                 size_t *len_p, uint64_t *pending_p, int *nomem)
{
    char key[2 * WEX__STORE_KEY_MAX + 32];
    size_t len = 0;
    uint8_t *out;

    for (uint64_t i = 0; i < n; i++) {
        const wex__store_entry *e;
        snprintf(key, sizeof(key), "%s%llu", prefix, (unsigned long long)i);
        e = wex__store_map_find(c->server, key);
        if (e != NULL) {
            len += 5 + e->len;
            continue;
        }
        snprintf(key, sizeof(key), "%s%llu", owner_prefix,
                 (unsigned long long)i);
        if (!died_lately(c, key)) {
            *pending_p = i;
            return NULL;
        }
        len += 5;
    }
    out = malloc(len ? len : 1);
    if (out == NULL) {
        *nomem = 1;
        return NULL;
    }
    len = 0;
    for (uint64_t i = 0; i < n; i++) {
        const wex__store_entry *e;
        snprintf(key, sizeof(key), "%s%llu", prefix, (unsigned long long)i);
        e = wex__store_map_find(c->server, key);
        out[len] = e != NULL;
        wex__store_put_u32(out + len + 1, e ? (uint32_t)e->len : 0);
        if (e != NULL && e->len)
            memcpy(out + len + 5, e->value, e->len);
        len += 5 + (e ? e->len : 0);
    }
    *len_p = len;
    return out;
}

int wex__store_on_gather(wex__store_conn *c, const char *key, const char *shown,
                         const wex__store_request *req)
{
    wex__store_server *s = c->server;
    double deadline = wex__store_deadline(req->value);
    double wait = (double)wex__store_get_u64(req->value) / 1000.0;
    uint64_t n = wex__store_get_u64(req->value + 8), pending = 0;
    char owner[WEX__STORE_KEY_MAX + 1], text[WEX__ERROR_MAX];
    double next_check = 0;
    size_t len = 0;
    uint8_t *out;
    int why, nomem = 0;

    memcpy(owner, req->value + 16, req->value_len - 16);
    owner[req->value_len - 16] = '\0';
    pthread_mutex_lock(&s->mu);
    /* Deaths matter only as answers, never as a reason to stop. */
    while ((out = gathered_records(c, key, n, owner, &len, &pending, &nomem)) ==
               NULL &&
           !nomem) {
        why = wex__store_wait_step(c, deadline, &next_check, 0);
        if (why == WEX__STORE_WAIT_MORE)
            continue;
        snprintf(text, sizeof(text),
                 "rendezvous: '%s%llu' not set within "
                 "%.1f s",
                 shown, (unsigned long long)pending, wait);
        return wex__store_end_wait(c, why, text);
    }
    /* The verdicts are the step's outcome: a death so far either shows
     * in them or did not matter; either way it is old news now, and the
     * next barrier waits for the rank to rejoin. */
    if (out != NULL)
        c->acked = s->dead_count;
    pthread_mutex_unlock(&s->mu);
    if (out == NULL)
        return wex__store_replyf(c, WEX__STORE_R_ERROR, "out of memory");
    int keep = wex__store_reply(c, WEX__STORE_R_OK, out, len);
    free(out);
    return keep;
}
