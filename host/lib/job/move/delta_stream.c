/* An operation's destination bytes as the stream a delta payload
 * describes (delta_dest.h): digested as they will be, and written. */
#include <stdio.h>
#include <string.h>
#include <xxhash.h>

#include "box_runs.h"
#include "delta_dest.h"
#include "delta_move.h"
#include "digest_update.h"

int wex__delta_mirrored(const wex_job *job, size_t t)
{
    return job->memory_kind[t] == WEX_MEMORY_CUDA &&
           job->bind[t].shadow != NULL &&
           (job->dst.passes <= 1 || job->bind[t].own_shadow);
}

int wex__delta_on_device(const wex_job *job, size_t t)
{
    return job->memory_kind[t] == WEX_MEMORY_CUDA &&
           !wex__delta_mirrored(job, t);
}

typedef struct cursor {
    wex__box_runs w;
    uint8_t *base;  /* the destination tensor */
    uint64_t start; /* stream offset of the current run */
    uint64_t b;     /* the current run's offset in the tensor */
    int valid;
} cursor;

static void cursor_init(cursor *c, wex_job *job, const wex__op *o)
{
    uint64_t a;

    wex__op_runs(job, o, &c->w);
    /* a CUDA tensor's deltas go into its pinned copy (can_take_deltas) */
    c->base = job->bind[o->dst_tensor].shadow != NULL
                  ? job->bind[o->dst_tensor].shadow
                  : job->bind[o->dst_tensor].address;
    c->start = 0;
    c->valid = wex__box_runs_next(&c->w, &a, &c->b);
}

/* Calls fn on each piece of the tensor that stream bytes [from, to)
 * occupy; from never goes back. */
static void cursor_visit(cursor *c, uint64_t from, uint64_t to,
                         void (*fn)(void *, uint8_t *, uint64_t), void *arg)
{
    uint64_t a;

    while (from < to && c->valid) {
        uint64_t n;
        while (c->valid && from >= c->start + c->w.run_bytes) {
            c->start += c->w.run_bytes;
            c->valid = wex__box_runs_next(&c->w, &a, &c->b);
        }
        if (!c->valid)
            return;
        n = (to < c->start + c->w.run_bytes ? to : c->start + c->w.run_bytes) -
            from;
        fn(arg, c->base + c->b + (from - c->start), n);
        from += n;
    }
}

/* Digests the operation as it will be with the payload applied: the
 * live bytes where nothing changed, the payload's elsewhere. A chunk
 * with changes is put together in `chunk` (its live bytes, the changed
 * elements over them) and digested in one update, where digesting the
 * pieces between changed elements would be an update for every few. */
typedef struct virtual_digest {
    cursor c;
    wex__digest *h;
    uint8_t *chunk; /* WEX__DELTA_CHUNK elements */
    uint64_t pos, elem, elems, changed;
} virtual_digest;

static void hash_piece(void *arg, uint8_t *at, uint64_t n)
{
    wex__digest_add(arg, at, n);
}

static void copy_piece(void *arg, uint8_t *at, uint64_t n)
{
    uint8_t **to = arg;

    memcpy(*to, at, n);
    *to += n;
}

/* n elements of `elem` bytes from values to to + pos[i] * elem. */
static int hash_sink(void *arg, uint64_t base, const uint32_t *pos, uint32_t n,
                     const uint8_t *values)
{
    virtual_digest *v = arg;
    uint64_t from = base * v->elem, u;
    uint8_t *to = v->chunk;

    v->changed += n;
    if (v->h == NULL)
        return 0;
    /* the unchanged chunks before this one, as they are */
    cursor_visit(&v->c, v->pos, from, hash_piece, v->h);
    if (pos == NULL) { /* dense: every element of the chunk */
        wex__digest_add(v->h, values, n * v->elem);
        v->pos = from + n * v->elem;
        return 0;
    }
    u = v->elems - base < WEX__DELTA_CHUNK ? v->elems - base : WEX__DELTA_CHUNK;
    cursor_visit(&v->c, from, from + u * v->elem, copy_piece, &to);
    wex__delta_scatter(v->chunk, pos, n, values, (unsigned)v->elem);
    wex__digest_add(v->h, v->chunk, u * v->elem);
    v->pos = from + u * v->elem;
    return 0;
}

/* Writes the payload's elements into the live tensor: straight into it
 * where the operation is one run there, else run by run. */
typedef struct writer {
    cursor c;
    uint8_t *whole; /* the operation's bytes when they are one run */
    const uint8_t *values;
    uint64_t elem;
} writer;

static void write_piece(void *arg, uint8_t *at, uint64_t n)
{
    writer *w = arg;

    memcpy(at, w->values, n);
    w->values += n;
}

static int write_sink(void *arg, uint64_t base, const uint32_t *pos, uint32_t n,
                      const uint8_t *values)
{
    writer *w = arg;
    uint64_t elem = w->elem;

    if (pos == NULL) {
        w->values = values;
        if (w->whole != NULL)
            memcpy(w->whole + base * elem, values, n * elem);
        else
            cursor_visit(&w->c, base * elem, (base + n) * elem, write_piece, w);
        return 0;
    }
    if (w->whole != NULL) {
        wex__delta_scatter(w->whole + base * elem, pos, n, values,
                           (unsigned)elem);
        return 0;
    }
    for (uint32_t i = 0; i < n; i++) {
        uint64_t at = (base + pos[i]) * elem;
        w->values = values + i * elem;
        cursor_visit(&w->c, at, at + elem, write_piece, w);
    }
    return 0;
}

int wex__delta_digest_host(wex_job *job, const wex__op *o,
                           const uint8_t *payload, uint64_t len, wex__digest *h,
                           uint8_t *chunk, uint64_t *digest, uint64_t *changed,
                           char *why, size_t cap)
{
    virtual_digest v;
    char reason[256];

    memset(&v, 0, sizeof(v));
    cursor_init(&v.c, job, o);
    v.h = h;
    v.chunk = chunk;
    v.elem = o->dtype_size;
    v.elems = o->bytes / o->dtype_size;
    if (v.h != NULL)
        wex__digest_reset(v.h);
    if (wex__delta_walk(payload, (size_t)len, o->dtype_size,
                        o->bytes / o->dtype_size, hash_sink, &v, reason,
                        sizeof(reason)) != 0) {
        snprintf(why, cap,
                 "source rank %llu sent a delta that does not "
                 "decode: %s",
                 (unsigned long long)o->src_rank, reason);
        return -1;
    }
    if (v.h != NULL)
        cursor_visit(&v.c, v.pos, o->bytes, hash_piece, v.h);
    *digest = v.h != NULL ? wex__digest_final(v.h) : 0;
    *changed = v.changed;
    return 0;
}

int wex__delta_write_piece(wex_job *job, const wex__op *o,
                           const uint8_t *payload, const wex__delta_piece *p,
                           char *why, size_t cap)
{
    uint64_t elems = o->bytes / o->dtype_size;
    writer w;

    memset(&w, 0, sizeof(w));
    cursor_init(&w.c, job, o);
    w.elem = o->dtype_size;
    if (w.c.valid && w.c.w.remaining == 0) /* a single run: written as
                                             * decoded */
        return wex__delta_apply_piece(payload, p, o->dtype_size, elems,
                                      w.c.base + w.c.b, why, cap);
    return wex__delta_walk_piece(payload, p, o->dtype_size, elems, write_sink,
                                 &w, why, cap);
}
