/*
 * Delta steps on a destination: an inbox for each source peer, the
 * check of what came into it, and the apply at commit.
 *
 * A destination takes deltas when the transport writes into memory it
 * allocated (one-sided, with mem_alloc) and every tensor it holds is
 * host memory, or a CUDA tensor landing in the staging window when the
 * window takes them all in one pass: that pinned copy then mirrors the
 * device between steps, a delta is applied into it at commit and the
 * tensors it touched are copied to the device again (docs/gpu.md). Then
 * it keeps one inbox per source peer, the job's
 * inbox_bytes (5 % of what it holds, at least 1 MiB, by default) shared
 * out by the bytes each peer sends it. Its live tensors are not touched
 * by a delta until the step commits: the check digests the operation
 * as it will be once the payload is applied (live bytes where nothing
 * changed, the payload's elsewhere) without writing it, and only the
 * apply at commit writes.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "clock.h"
#include "delta_chunks.h"
#include "delta_groups.h"
#include "delta_move.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "log.h"
#include "parallel.h"

/* ---- inboxes ------------------------------------------------------------ */

int wex__delta_transport_carries(const wex_job *job)
{
    uint64_t need = WEX_TRANSPORT_CAP_ONE_SIDED | WEX_TRANSPORT_CAP_ALLOC;

    return (job->transport.ops->caps & need) == need &&
           !(job->transport.ops->caps & WEX_TRANSPORT_CAP_TWO_SIDED);
}

/* A CUDA tensor's pinned copy holds what the device holds between steps
 * only when no other tensor takes its place in the window: one pass, or
 * a copy of its own. */
static int mirrored(const wex_job *job, size_t t)
{
    return job->memory_kind[t] == WEX_MEMORY_CUDA &&
           job->bind[t].shadow != NULL &&
           (job->dst.passes <= 1 || job->bind[t].own_shadow);
}

/* A CUDA tensor whose place in the window holds other tensors between
 * its passes: its bytes are on the device only. */
static int in_passes(const wex_job *job, size_t t)
{
    return job->memory_kind[t] == WEX_MEMORY_CUDA &&
           job->bind[t].shadow != NULL && !mirrored(job, t);
}

/* Every tensor is host memory, mirrored, or on the device only with the
 * kernels there to read its deltas into it. */
static int can_take_deltas(wex_job *job)
{
    int device_only = 0;

    if (!job->plan.job->delta || job->side != WEX_SIDE_DESTINATION ||
        !wex__delta_transport_carries(job))
        return 0;
    for (size_t t = 0; t < job->layout->tensor_count; t++) {
        if (in_passes(job, t))
            device_only = 1;
        else if (job->memory_kind[t] != WEX_MEMORY_HOST && !mirrored(job, t))
            return 0;
    }
    if (device_only && !wex__device_kernels_ready(job->device)) {
        WEX__INFO("destination rank %llu: its CUDA tensors come through the "
                  "staging window in passes and %s: it takes every step "
                  "whole",
                  (unsigned long long)job->rank, wex__last_error());
        wex__error_clear();
        return 0;
    }
    return 1;
}

void wex__delta_dest_free(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;

    for (size_t k = 0; k < d->inbox_count; k++)
        if (d->inbox_mem[k] != NULL)
            job->transport.ops->mem_deregister(job->transport.ctx,
                                               d->inbox_mem[k]);
    free(d->inbox_rank);
    free(d->inbox);
    free(d->inbox_mem);
    free(d->inbox_size);
    free(d->apply);
    free(d->apply_at);
    free(d->chunk);
    free(d->landed);
    free(d->whole);
    memset(d, 0, sizeof(*d));
}

wex_status wex__delta_dest_prepare(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;
    size_t n = job->op_count + 1;

    free(d->apply);
    free(d->apply_at);
    free(d->chunk);
    free(d->landed);
    free(d->whole);
    d->landed = calloc(job->layout->tensor_count + 1, 1);
    d->whole = calloc(n, 1);
    d->apply = malloc(n * sizeof(*d->apply));
    d->apply_at = malloc(n * sizeof(*d->apply_at));
    d->chunk = malloc((size_t)WEX__DELTA_CHUNK * 8);
    d->apply_count = 0;
    if (d->apply == NULL || d->apply_at == NULL || d->chunk == NULL ||
        d->landed == NULL || d->whole == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    return WEX_OK;
}

wex_status wex__delta_inbox_open(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;
    uint64_t total = 0;
    size_t peers = job->peer_count;

    if (!can_take_deltas(job) || d->inbox != NULL)
        return WEX_OK;
    for (size_t i = 0; i < job->op_count; i++)
        total += job->ops[i].bytes;
    d->inbox_rank = calloc(peers + 1, sizeof(*d->inbox_rank));
    d->inbox = calloc(peers + 1, sizeof(*d->inbox));
    d->inbox_mem = calloc(peers + 1, sizeof(*d->inbox_mem));
    d->inbox_size = calloc(peers + 1, sizeof(*d->inbox_size));
    if (d->inbox_rank == NULL || d->inbox == NULL || d->inbox_mem == NULL ||
        d->inbox_size == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t p = 0; p < peers; p++) {
        uint64_t pair = 0, share;
        void *address = NULL;
        wex_status st;

        for (size_t i = 0; i < job->op_count; i++)
            if (job->op_peer_index[i] == p)
                pair += job->ops[i].bytes;
        share = wex__delta_inbox_share(job->plan.job->delta_inbox_bytes, pair,
                                       total);
        wex__error_clear();
        st = job->transport.ops->mem_alloc(job->transport.ctx, share, &address,
                                           &d->inbox_mem[d->inbox_count]);
        if (st != WEX_OK)
            return wex__error_prefix(st,
                                     "a %llu-byte delta inbox for source "
                                     "rank %llu",
                                     (unsigned long long)share,
                                     (unsigned long long)job->peers[p]);
        d->inbox_rank[d->inbox_count] = job->peers[p];
        d->inbox[d->inbox_count] = address;
        d->inbox_size[d->inbox_count++] = share;
    }
    return WEX_OK;
}

static size_t inbox_slot(const wex_job *job, uint64_t rank)
{
    const wex__job_destination_delta *d = &job->dst.delta;

    for (size_t k = 0; k < d->inbox_count; k++)
        if (d->inbox_rank[k] == rank)
            return k;
    return SIZE_MAX;
}

wex_transport_mem *wex__delta_inbox_of(const wex_job *job, uint64_t rank)
{
    size_t k = inbox_slot(job, rank);

    return k == SIZE_MAX ? NULL : job->dst.delta.inbox_mem[k];
}

uint64_t wex__delta_base(const wex_job *job)
{
    return job->dst.delta.inbox_count > 0 && !job->dst.dirty
               ? job->dst.committed
               : 0;
}

void wex__delta_try_start(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;

    d->apply_count = 0;
    if (d->landed != NULL)
        memset(d->landed, 0, job->layout->tensor_count);
    if (d->whole != NULL)
        memset(d->whole, 0, job->op_count);
    d->wire_bytes = d->changed = d->elems = d->delta_ops = 0;
    d->apply_seconds = 0;
}

/* ---- an operation's destination bytes, as a stream -------------------- */

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
    XXH3_state_t *h;
    uint8_t *chunk; /* WEX__DELTA_CHUNK elements */
    uint64_t pos, elem, elems, changed;
} virtual_digest;

static void hash_piece(void *arg, uint8_t *at, uint64_t n)
{
    wex__digest_update(arg, at, n);
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
        wex__digest_update(v->h, values, n * v->elem);
        v->pos = from + n * v->elem;
        return 0;
    }
    u = v->elems - base < WEX__DELTA_CHUNK ? v->elems - base : WEX__DELTA_CHUNK;
    cursor_visit(&v->c, from, from + u * v->elem, copy_piece, &to);
    wex__delta_scatter(v->chunk, pos, n, values, (unsigned)v->elem);
    wex__digest_update(v->h, v->chunk, u * v->elem);
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

/* ---- an operation on the device only, digested as it will be ---------- */

/* The operation's stream read from device memory a slice at a time into
 * staging (a part of a run longer than staging, or as many runs lying a
 * fixed pitch apart as fit: one copy each), the payload's values written
 * over it there, and the slice digested: the digest of the operation as
 * it will be once applied, the device untouched. */
typedef struct device_view {
    wex_job *job;
    uint8_t *base; /* the device tensor */
    wex__box_runs w;
    int more;         /* a run is left */
    uint64_t b, done; /* its offset in the tensor; bytes of it staged */
    uint8_t *slice;   /* staging: stream bytes [s0, s1) */
    uint64_t s0, s1;
    uint64_t elem, changed;
    XXH3_state_t *h;
    wex_status st;
} device_view;

static int view_next(device_view *v)
{
    wex__device *dev = v->job->device;
    const void *host = NULL;
    uint64_t a, n;

    if (v->slice != NULL)
        wex__digest_update(v->h, v->slice, v->s1 - v->s0);
    wex__device_stage_reset(dev);
    v->slice = NULL;
    v->s0 = v->s1;
    if (!v->more || v->st != WEX_OK)
        return 0;
    if (v->done > 0 || v->w.run_bytes > WEX__STAGING_BYTES) {
        n = v->w.run_bytes - v->done < WEX__STAGING_BYTES
                ? v->w.run_bytes - v->done
                : WEX__STAGING_BYTES;
        v->st = wex__device_stage_out(dev, v->base + v->b + v->done, n, &host);
        v->done += n;
        if (v->done == v->w.run_bytes) {
            v->done = 0;
            v->more = wex__box_runs_next(&v->w, &a, &v->b);
        }
    } else {
        uint64_t first = v->b, rows = 1, pitch = 0;
        v->more = wex__box_runs_next(&v->w, &a, &v->b);
        while (v->more && (rows + 1) * v->w.run_bytes <= WEX__STAGING_BYTES &&
               (rows == 1 ? v->b > first : v->b == first + rows * pitch)) {
            if (rows == 1)
                pitch = v->b - first;
            rows++;
            v->more = wex__box_runs_next(&v->w, &a, &v->b);
        }
        n = rows * v->w.run_bytes;
        v->st = rows == 1
                    ? wex__device_stage_out(dev, v->base + first, n, &host)
                    : wex__device_stage_rows(dev, v->base + first, pitch,
                                             v->w.run_bytes, rows, &host);
    }
    if (v->st == WEX_OK && host == NULL)
        v->st = wex__error(WEX_ERR_INTERNAL, "a slice does not fit staging");
    if (v->st != WEX_OK)
        return 0;
    v->slice = (uint8_t *)host; /* staging: ours to write over */
    v->s1 = v->s0 + n;
    return 1;
}

/* Writes n elements' values at stream element `first` over the slices. */
static int view_put(device_view *v, uint64_t first, const uint8_t *values,
                    uint64_t n)
{
    uint64_t at = first * v->elem, end = at + n * v->elem;

    while (at < end) {
        uint64_t k;
        while (at >= v->s1)
            if (!view_next(v))
                return -1;
        k = (end < v->s1 ? end : v->s1) - at;
        memcpy(v->slice + (at - v->s0), values, k);
        values += k;
        at += k;
    }
    return 0;
}

static int view_sink(void *arg, uint64_t base, const uint32_t *pos, uint32_t n,
                     const uint8_t *values)
{
    device_view *v = arg;

    v->changed += n;
    if (v->h == NULL)
        return 0;
    if (pos == NULL)
        return view_put(v, base, values, n);
    for (uint32_t i = 0; i < n; i++)
        if (view_put(v, base + pos[i], values + i * v->elem, 1) != 0)
            return -1;
    return 0;
}

/* The payload's walk over the operation's device bytes: 0, or -1 with
 * why said (a payload that does not decode, or the device). */
static int device_digest(wex_job *job, const wex__op *o, const uint8_t *payload,
                         uint64_t len, XXH3_state_t *h, uint64_t *digest,
                         uint64_t *changed, char *why, size_t cap)
{
    device_view v;
    char reason[256];
    uint64_t a;
    int rc;

    memset(&v, 0, sizeof(v));
    v.job = job;
    v.base = job->bind[o->dst_tensor].address;
    v.elem = o->dtype_size;
    v.h = h;
    wex__op_runs(job, o, &v.w);
    v.more = wex__box_runs_next(&v.w, &a, &v.b);
    if (h != NULL)
        XXH3_64bits_reset(h);
    rc = wex__delta_walk(payload, (size_t)len, o->dtype_size,
                         o->bytes / o->dtype_size, view_sink, &v, reason,
                         sizeof(reason));
    while (rc == 0 && h != NULL && (v.slice != NULL || v.more))
        (void)view_next(&v);
    wex__device_stage_reset(job->device);
    if (v.st != WEX_OK) {
        snprintf(why, cap, "reading device memory to check a delta: %s",
                 wex__last_error());
        return -1;
    }
    if (rc != 0) {
        snprintf(why, cap,
                 "source rank %llu sent a delta that does not decode: %s",
                 (unsigned long long)o->src_rank, reason);
        return -1;
    }
    *digest = h != NULL ? XXH3_64bits_digest(h) : 0;
    *changed = v.changed;
    return 0;
}

/* ---- checking and applying ---------------------------------------------- */

/* 0: checked and queued; 1: it landed differently; -1: refused, why
 * says so. */
static int check_payload(wex_job *job, size_t i, size_t slot,
                         const wex__delta_record *r, int verify, char *why,
                         size_t cap)
{
    wex__job_destination_delta *d = &job->dst.delta;
    const wex__op *o = &job->ops[i];
    const uint8_t *payload = d->inbox[slot] + r->offset;
    virtual_digest v;
    char reason[256];

    if (r->offset > d->inbox_size[slot] ||
        r->length > d->inbox_size[slot] - r->offset) {
        snprintf(why, cap,
                 "source rank %llu put a %llu-byte delta at %llu, "
                 "past its %llu-byte inbox",
                 (unsigned long long)o->src_rank, (unsigned long long)r->length,
                 (unsigned long long)r->offset,
                 (unsigned long long)d->inbox_size[slot]);
        return -1;
    }
    if (verify && XXH3_64bits(payload, (size_t)r->length) != r->payload_digest)
        return 1;
    if (in_passes(job, o->dst_tensor)) {
        uint64_t digest = 0, changed = 0;
        if (device_digest(job, o, payload, r->length,
                          verify ? job->scratch.hash : NULL, &digest, &changed,
                          why, cap) != 0)
            return -1;
        if (verify && digest != r->digest)
            return 1;
        v.changed = changed;
        goto queue;
    }
    memset(&v, 0, sizeof(v));
    cursor_init(&v.c, job, o);
    v.h = verify ? job->scratch.hash : NULL;
    v.chunk = d->chunk;
    v.elem = o->dtype_size;
    v.elems = o->bytes / o->dtype_size;
    if (v.h != NULL)
        XXH3_64bits_reset(v.h);
    if (wex__delta_walk(payload, (size_t)r->length, o->dtype_size,
                        o->bytes / o->dtype_size, hash_sink, &v, reason,
                        sizeof(reason)) != 0) {
        snprintf(why, cap,
                 "source rank %llu sent a delta that does not "
                 "decode: %s",
                 (unsigned long long)o->src_rank, reason);
        return -1;
    }
    if (v.h != NULL) {
        cursor_visit(&v.c, v.pos, o->bytes, hash_piece, v.h);
        if (XXH3_64bits_digest(v.h) != r->digest)
            return 1;
    }
queue:
    d->changed += v.changed;
    d->elems += o->bytes / o->dtype_size;
    d->wire_bytes += r->length;
    d->delta_ops++;
    d->apply[d->apply_count] = i;
    d->apply_at[d->apply_count][0] = slot;
    d->apply_at[d->apply_count][1] = r->offset;
    d->apply_at[d->apply_count++][2] = r->length;
    return 0;
}

wex__peer_outcome wex__delta_check(wex_job *job, uint64_t peer,
                                   const wex__delta_record *records, size_t n,
                                   int verify, char *why, size_t cap)
{
    wex__job_destination_delta *d = &job->dst.delta;
    size_t slot = inbox_slot(job, peer), k = 0;
    uint64_t bad = 0;

    for (size_t i = 0; i < job->op_count; i++) {
        const wex__delta_record *r;
        int how;

        if (job->ops[i].src_rank != peer)
            continue;
        if (k >= n) {
            bad++;
            continue;
        }
        r = &records[k++];
        if (r->mode == WEX__DELTA_OP_FULL) {
            d->live_written = 1;
            d->landed[job->ops[i].dst_tensor] = 1;
            d->whole[i] = 1;
            d->wire_bytes += job->ops[i].bytes;
            /* digested as its pass of the window drained, or now */
            bad += verify &&
                   (job->dst.early[i]
                        ? job->scratch.digests[i]
                        : wex__digest_landed(job, &job->ops[i])) != r->digest;
            continue;
        }
        if (r->mode != WEX__DELTA_OP_PAYLOAD || slot == SIZE_MAX) {
            snprintf(why, cap,
                     "source rank %llu posted a delta for an "
                     "operation %s",
                     (unsigned long long)peer,
                     slot == SIZE_MAX ? "but this destination keeps no inbox "
                                        "for it"
                                      : "of an unknown kind");
            return WEX__PEER_FAILED;
        }
        how = check_payload(job, i, slot, r, verify, why, cap);
        if (how < 0)
            return WEX__PEER_FAILED;
        bad += how;
    }
    if (bad == 0 && k == n)
        return WEX__PEER_OK;
    snprintf(why, cap,
             "source rank %llu sent bytes that landed differently "
             "(%llu operations)",
             (unsigned long long)peer, (unsigned long long)(bad ? bad : 1));
    return WEX__PEER_FAILED;
}

/* The CUDA tensors flagged whose pinned copies hold new bytes, copied
 * to the device: whole, one copy each, as the window's copies are. */
static wex_status copy_flagged(wex_job *job, const uint8_t *flag)
{
    wex_status st = WEX_OK;
    int any = 0;

    for (size_t t = 0; t < job->layout->tensor_count && st == WEX_OK; t++)
        if (flag[t] && job->bind[t].shadow != NULL) {
            st = wex__device_copy_in(job->device, job->bind[t].address,
                                     job->bind[t].shadow, job->bind[t].bytes);
            any = 1;
        }
    if (any && st == WEX_OK)
        st = wex__device_copy_in_end(job->device);
    return st;
}

/* An operation's runs from its tensor's pinned place to the device: runs
 * a fixed pitch apart as one strided copy each. */
static wex_status copy_op_in(wex_job *job, const wex__op *o)
{
    const wex__binding *bound = &job->bind[o->dst_tensor];
    uint8_t *dev = bound->address;
    const uint8_t *host = bound->shadow;
    uint64_t a, b, first = 0, rows = 0, pitch = 0;
    wex_status st = WEX_OK;
    wex__box_runs w;
    int more;

    wex__op_runs(job, o, &w);
    more = wex__box_runs_next(&w, &a, &b);
    while (st == WEX_OK && (more || rows > 0)) {
        if (more && (rows == 0 || (rows == 1 && b > first) ||
                     (rows > 1 && b == first + rows * pitch))) {
            if (rows == 0)
                first = b;
            else if (rows == 1)
                pitch = b - first;
            rows++;
            more = wex__box_runs_next(&w, &a, &b);
            continue;
        }
        st = rows == 1 ? wex__device_copy_in(job->device, dev + first,
                                             host + first, w.run_bytes)
                       : wex__device_copy_in_rows(job->device, dev + first,
                                                  host + first, pitch,
                                                  w.run_bytes, rows);
        rows = 0;
    }
    return st;
}

wex_status wex__delta_copy_pass(wex_job *job, uint32_t pass)
{
    wex__job_destination_delta *d = &job->dst.delta;
    size_t tensors = job->layout->tensor_count;
    uint32_t *ops = calloc(2 * tensors + 1, sizeof(*ops));
    uint32_t *whole = ops + tensors;
    wex_status st = WEX_OK;
    int any = 0;

    if (ops == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t i = 0; i < job->op_count; i++) {
        ops[job->ops[i].dst_tensor]++;
        whole[job->ops[i].dst_tensor] += d->whole[i];
    }
    for (size_t t = 0; t < tensors && st == WEX_OK; t++) {
        const wex__binding *bound = &job->bind[t];
        if (job->memory_kind[t] != WEX_MEMORY_CUDA || bound->shadow == NULL ||
            bound->pass != pass || whole[t] == 0)
            continue;
        any = 1;
        if (mirrored(job, t) || whole[t] == ops[t]) {
            st = wex__device_copy_in(job->device, bound->address, bound->shadow,
                                     bound->bytes);
            continue;
        }
        for (size_t i = 0; i < job->op_count && st == WEX_OK; i++)
            if (job->ops[i].dst_tensor == t && d->whole[i])
                st = copy_op_in(job, &job->ops[i]);
    }
    if (any && st == WEX_OK)
        st = wex__device_copy_in_end(job->device);
    free(ops);
    return st;
}

wex_status wex__delta_copy_landed(wex_job *job)
{
    return wex__delta_copy_pass(job,
                                job->dst.passes > 0 ? job->dst.passes - 1 : 0);
}

int wex__delta_map_of(const wex__box_runs *w, wex_delta_map *m)
{
    if (w->outer > WEX_DELTA_MAP_DIMS || w->elem == 0 || w->run_bytes == 0)
        return -1;
    memset(m, 0, sizeof(*m));
    m->base = w->b_base;
    m->elem = (uint32_t)w->elem;
    m->run_elems = w->run_bytes / w->elem;
    m->outer = w->outer;
    for (uint32_t d = 0; d < w->outer; d++) {
        m->extent[d] = w->extent[d];
        m->stride[d] = w->b_stride[d];
    }
    return 0;
}

/* The deltas into CUDA tensors applied on the device: the payload and
 * its chunks' index copied over and the kernel of libwex_cuda.so run (a
 * step's payload, not its tensors, then crosses the bus). A tensor with a
 * pinned copy of its own (mirrored) has the deltas in that copy too; where
 * there are no kernels, or a box they cannot place, the mirrored tensors
 * a delta touched are copied whole from their copies, as before the
 * kernels. A tensor on the device only (in passes) has the kernels, or
 * took no deltas. */
static wex_status apply_on_device(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;
    wex_status st = WEX_OK;
    int queued = 0;

    memset(d->landed, 0, job->layout->tensor_count);
    for (size_t e = 0; e < d->apply_count && st == WEX_OK; e++) {
        const wex__op *o = &job->ops[d->apply[e]];
        wex_delta_map map;
        wex__box_runs w;
        int mirror = mirrored(job, o->dst_tensor);
        if (job->memory_kind[o->dst_tensor] != WEX_MEMORY_CUDA)
            continue;
        wex__op_runs(job, o, &w);
        if (mirror && (d->whole_copies || wex__delta_map_of(&w, &map) != 0)) {
            d->landed[o->dst_tensor] = 1;
            continue;
        }
        if (!mirror && wex__delta_map_of(&w, &map) != 0) {
            st = wex__error(WEX_ERR_UNSUPPORTED,
                            "a box of more than %d outer dims on the device",
                            WEX_DELTA_MAP_DIMS);
            break;
        }
        st = wex__device_delta_apply(
            job->device, job->bind[o->dst_tensor].address, &map,
            d->inbox[d->apply_at[e][0]] + d->apply_at[e][1], d->apply_at[e][2],
            o->dtype_size, o->bytes / o->dtype_size);
        if (st == WEX_ERR_UNSUPPORTED && mirror) { /* no libwex_cuda.so */
            WEX__INFO("destination rank %llu: %s; CUDA tensors a delta "
                      "touches are copied whole at commit",
                      (unsigned long long)job->rank, wex__last_error());
            wex__error_clear();
            d->whole_copies = 1;
            d->landed[o->dst_tensor] = 1;
            st = WEX_OK;
            continue;
        }
        queued = 1;
    }
    if (st == WEX_OK && queued)
        st = wex__device_copy_in_end(job->device);
    if (st == WEX_OK)
        st = copy_flagged(job, d->landed);
    if (st != WEX_OK)
        wex__error_prefix(st, "applying the deltas on the device");
    return st;
}

/* The apply's work: each entry's payload cut into pieces that threads
 * take one at a time (pieces write disjoint elements). */
typedef struct apply_task {
    size_t entry;
    wex__delta_piece piece;
} apply_task;

typedef struct apply_work {
    wex_job *job;
    apply_task *tasks;
    pthread_mutex_t lock;
    char why[256]; /* the first failure's */
} apply_work;

static int apply_task_run(void *arg, size_t k, unsigned worker)
{
    (void)worker;
    apply_work *a = arg;
    wex_job *job = a->job;
    wex__job_destination_delta *d = &job->dst.delta;
    const apply_task *t = &a->tasks[k];
    const wex__op *o = &job->ops[d->apply[t->entry]];
    const uint8_t *payload =
        d->inbox[d->apply_at[t->entry][0]] + d->apply_at[t->entry][1];
    uint64_t elems = o->bytes / o->dtype_size;
    char why[256];
    writer w;
    int rc;

    memset(&w, 0, sizeof(w));
    cursor_init(&w.c, job, o);
    w.elem = o->dtype_size;
    if (w.c.valid && w.c.w.remaining == 0) /* a single run: written as
                                             * decoded */
        rc = wex__delta_apply_piece(payload, &t->piece, o->dtype_size, elems,
                                    w.c.base + w.c.b, why, sizeof(why));
    else
        rc = wex__delta_walk_piece(payload, &t->piece, o->dtype_size, elems,
                                   write_sink, &w, why, sizeof(why));
    if (rc != 0) {
        pthread_mutex_lock(&a->lock);
        if (a->why[0] == '\0')
            snprintf(a->why, sizeof(a->why), "%s", why);
        pthread_mutex_unlock(&a->lock);
    }
    return rc;
}

/* The pieces of this try's entries: with one thread an entry each, with
 * more about two a thread of the step's payload bytes, no piece under
 * 256 KiB. NULL when out of memory. */
static apply_task *apply_tasks(wex_job *job, unsigned threads, size_t *count)
{
    wex__job_destination_delta *d = &job->dst.delta;
    uint64_t total = 0, share;
    size_t n = 0, cap = 0;
    apply_task *tasks;

    for (size_t e = 0; e < d->apply_count; e++)
        total += d->apply_at[e][2];
    share = total / (2 * (uint64_t)threads);
    if (share < ((uint64_t)256 << 10))
        share = (uint64_t)256 << 10;
    for (size_t e = 0; e < d->apply_count; e++) {
        uint64_t want = threads > 1 ? d->apply_at[e][2] / share + 1 : 1;
        cap += want < 64 ? want : 64;
    }
    /* (a tensor on the device only is applied there alone) */
    tasks = malloc((cap + 1) * sizeof(*tasks));
    if (tasks == NULL)
        return NULL;
    for (size_t e = 0; e < d->apply_count; e++) {
        const wex__op *o = &job->ops[d->apply[e]];
        uint64_t want = threads > 1 ? d->apply_at[e][2] / share + 1 : 1;
        wex__delta_piece pieces[64];
        if (in_passes(job, o->dst_tensor))
            continue;
        size_t got = wex__delta_cut(
            d->inbox[d->apply_at[e][0]] + d->apply_at[e][1],
            (size_t)d->apply_at[e][2], o->dtype_size, o->bytes / o->dtype_size,
            want < 64 ? (size_t)want : 64, pieces);
        for (size_t k = 0; k < got; k++)
            tasks[n++] = (apply_task){e, pieces[k]};
    }
    *count = n;
    return tasks;
}

wex_status wex__delta_apply(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;
    double t0 = wex__now();
    unsigned threads = wex__delta_threads(job);
    apply_work a = {job, NULL, PTHREAD_MUTEX_INITIALIZER, ""};
    size_t count = 0;
    wex_status st;
    int rc;

    if (d->apply_count > 0 &&
        (a.tasks = apply_tasks(job, threads, &count)) == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    rc = wex__parallel(count, threads, apply_task_run, &a);
    free(a.tasks);
    pthread_mutex_destroy(&a.lock);
    /* checked at the step's verdict: it decodes */
    if (rc != 0)
        return wex__error(WEX_ERR_INTERNAL,
                          "applying a delta that was checked: %s", a.why);
    st = apply_on_device(job);
    d->apply_seconds = wex__now() - t0;
    d->apply_count = 0;
    return st;
}
