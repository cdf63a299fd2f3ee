/* A stream of LEB128 varints, written into a growing buffer and read
 * back with every read bounded by what is left (plan shares). */
#include "share_codec.h"

#include <stdlib.h>
#include <string.h>

void wex__put_bytes(wex__out_buf *o, const void *src, size_t n)
{
    if (o->failed)
        return;
    if (o->len + n > o->cap) {
        size_t cap = o->cap ? o->cap : 4096;
        unsigned char *grown;
        while (cap < o->len + n)
            cap *= 2;
        if ((grown = realloc(o->p, cap)) == NULL) {
            o->failed = 1;
            return;
        }
        o->p = grown;
        o->cap = cap;
    }
    memcpy(o->p + o->len, src, n);
    o->len += n;
}

/* LEB128: most fields are small, and a share is mostly fields. */
void wex__put_u64(wex__out_buf *o, uint64_t v)
{
    unsigned char b[10];
    size_t n = 0;

    do {
        b[n] = (unsigned char)(v & 0x7f);
        v >>= 7;
        b[n++] |= v ? 0x80 : 0;
    } while (v);
    wex__put_bytes(o, b, n);
}

void wex__put_i64(wex__out_buf *o, int64_t v)
{
    wex__put_u64(o, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

void wex__put_str(wex__out_buf *o, const char *s)
{
    size_t n = strlen(s);

    wex__put_u64(o, n);
    wex__put_bytes(o, s, n);
}

void wex__put_array(wex__out_buf *o, const uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        wex__put_u64(o, v[i]);
}

uint64_t wex__get_u64(wex__in_buf *in)
{
    uint64_t v = 0;

    for (unsigned shift = 0; !in->bad; shift += 7) {
        unsigned char b;
        if (in->at >= in->len || shift > 63) {
            in->bad = "a field runs past the end";
            break;
        }
        b = in->p[in->at++];
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    return 0;
}

int64_t wex__get_i64(wex__in_buf *in)
{
    uint64_t v = wex__get_u64(in);

    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

/* A count of things at least one byte each: never more than what is
 * left, so damage cannot ask for a huge allocation. */
size_t wex__get_count(wex__in_buf *in)
{
    uint64_t n = wex__get_u64(in);

    if (!in->bad && n > in->len - in->at) {
        in->bad = "a count exceeds the data";
        return 0;
    }
    return (size_t)n;
}

uint64_t wex__get_below(wex__in_buf *in, uint64_t limit, const char *what)
{
    uint64_t v = wex__get_u64(in);

    if (!in->bad && v >= limit) {
        in->bad = what;
        return 0;
    }
    return v;
}

char *wex__get_str(wex__in_buf *in)
{
    size_t n = wex__get_count(in);
    char *s;

    if (in->bad || (s = malloc(n + 1)) == NULL) {
        if (!in->bad)
            in->bad = "out of memory";
        return NULL;
    }
    memcpy(s, in->p + in->at, n);
    s[n] = '\0';
    in->at += n;
    return s;
}

void wex__get_array(wex__in_buf *in, uint64_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        v[i] = wex__get_u64(in);
}

void *wex__get_table(wex__in_buf *in, size_t n, size_t size)
{
    void *v;

    if (in->bad)
        return NULL;
    if ((v = calloc(n ? n : 1, size)) == NULL)
        in->bad = "out of memory";
    return v;
}
