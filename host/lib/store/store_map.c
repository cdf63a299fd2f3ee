/*
 * The rendezvous server's keys: a chained hash map, its bucket count a
 * power of two that doubles as entries grow. Callers hold the server's
 * mutex.
 */
#include <stdlib.h>
#include <string.h>

#include "store_server.h"

static size_t key_hash(const char *key)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */

    for (; *key; key++)
        h = (h ^ (uint8_t)*key) * 1099511628211ull;
    return (size_t)h;
}

wex__store_entry *wex__store_map_find(const wex__store_server *s,
                                      const char *key)
{
    wex__store_entry *e = s->buckets[key_hash(key) & (s->bucket_count - 1)];

    while (e != NULL && strcmp(e->key, key) != 0)
        e = e->next;
    return e;
}

static void map_grow(wex__store_server *s)
{
    size_t count = s->bucket_count * 2;
    wex__store_entry **b = calloc(count, sizeof(*b));

    if (b == NULL)
        return; /* longer chains, still correct */
    for (size_t i = 0; i < s->bucket_count; i++) {
        while (s->buckets[i] != NULL) {
            wex__store_entry *e = s->buckets[i];
            size_t j = key_hash(e->key) & (count - 1);
            s->buckets[i] = e->next;
            e->next = b[j];
            b[j] = e;
        }
    }
    free(s->buckets);
    s->buckets = b;
    s->bucket_count = count;
}

/* Stores `value` (malloc'd; the map takes it) under `key`. */
wex_status wex__store_map_put(wex__store_server *s, const char *key,
                              uint8_t *value, size_t len)
{
    wex__store_entry *e = wex__store_map_find(s, key);
    size_t key_len = strlen(key), i;

    if (e == NULL) {
        e = malloc(sizeof(*e) + key_len + 1);
        if (e == NULL) {
            free(value);
            return wex__error(WEX_ERR_NOMEM, "out of memory for key '%s'", key);
        }
        memcpy(e->key, key, key_len + 1);
        e->value = NULL;
        if (s->entry_count >= 2 * s->bucket_count)
            map_grow(s);
        i = key_hash(key) & (s->bucket_count - 1);
        e->next = s->buckets[i];
        s->buckets[i] = e;
        s->entry_count++;
    }
    free(e->value);
    e->value = value;
    e->len = len;
    return WEX_OK;
}

/* Removes every key starting with `prefix`; returns how many. */
size_t wex__store_map_drop(wex__store_server *s, const char *prefix)
{
    size_t len = strlen(prefix), dropped = 0;

    for (size_t i = 0; i < s->bucket_count; i++) {
        wex__store_entry **pp = &s->buckets[i], *e;
        while ((e = *pp) != NULL) {
            if (strncmp(e->key, prefix, len) != 0) {
                pp = &e->next;
                continue;
            }
            *pp = e->next;
            free(e->value);
            free(e);
            s->entry_count--;
            dropped++;
        }
    }
    return dropped;
}

void wex__store_map_free(wex__store_server *s)
{
    for (size_t i = 0; s->buckets != NULL && i < s->bucket_count; i++) {
        while (s->buckets[i] != NULL) {
            wex__store_entry *e = s->buckets[i];
            s->buckets[i] = e->next;
            free(e->value);
            free(e);
        }
    }
    free(s->buckets);
    s->buckets = NULL;
}
