/* Deltas into CUDA tensors (delta_dest.h): checked against the device's
 * bytes read back through staging, the boxes that came whole copied in,
 * and applied on the device by the kernel of libwex_cuda.so at commit
 * (docs/gpu.md, "Deltas on the GPU"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "box_runs.h"
#include "delta_chunks.h"
#include "delta_dest.h"
#include "delta_move.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "log.h"

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
    uint64_t cap; /* the most bytes a slice: staging's */
    uint64_t elem, changed;
    wex__digest *h;
    wex_status st;
} device_view;

/* Staging's bytes; WEX_TEST_DEVICE_SLICE (tests) makes slices smaller,
 * a multiple of 64 bytes, so small tensors cross several. */
static uint64_t slice_cap(void)
{
    const char *asked = getenv("WEX_TEST_DEVICE_SLICE");
    uint64_t n = asked != NULL ? strtoull(asked, NULL, 10) / 64 * 64 : 0;

    return n >= 64 && n < WEX__STAGING_BYTES ? n : WEX__STAGING_BYTES;
}

static int view_next(device_view *v)
{
    wex__device *dev = v->job->device;
    const void *host = NULL;
    uint64_t a, n;

    if (v->slice != NULL)
        wex__digest_add(v->h, v->slice, v->s1 - v->s0);
    wex__device_stage_reset(dev);
    v->slice = NULL;
    v->s0 = v->s1;
    if (!v->more || v->st != WEX_OK)
        return 0;
    if (v->done > 0 || v->w.run_bytes > v->cap) {
        n = v->w.run_bytes - v->done < v->cap ? v->w.run_bytes - v->done
                                              : v->cap;
        v->st = wex__device_stage_out(dev, v->base + v->b + v->done, n, &host);
        v->done += n;
        if (v->done == v->w.run_bytes) {
            v->done = 0;
            v->more = wex__box_runs_next(&v->w, &a, &v->b);
        }
    } else {
        /* rows of the innermost outer dim lie its stride apart */
        uint64_t first = v->b, rows = 0;
        uint64_t pitch = v->w.outer ? v->w.b_stride[v->w.outer - 1] : 0;
        while (v->more && (rows + 1) * v->w.run_bytes <= v->cap &&
               v->b == first + rows * pitch) {
            rows++;
            v->more = wex__box_runs_next(&v->w, &a, &v->b);
        }
        n = rows * v->w.run_bytes;
        v->st = wex__device_stage_rows(dev, v->base + first, pitch,
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

int wex__delta_digest_device(wex_job *job, const wex__op *o,
                             const uint8_t *payload, uint64_t len,
                             wex__digest *h, uint64_t *digest,
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
    v.cap = slice_cap();
    wex__op_runs(job, o, &v.w);
    v.more = wex__box_runs_next(&v.w, &a, &v.b);
    if (h != NULL)
        wex__digest_reset(h);
    rc = wex__delta_walk(payload, (size_t)len, o->dtype_size,
                         o->bytes / o->dtype_size, view_sink, &v, reason,
                         sizeof(reason));
    while (rc == 0 && h != NULL && v.st == WEX_OK &&
           (v.slice != NULL || v.more))
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
    *digest = h != NULL ? wex__digest_final(h) : 0;
    *changed = v.changed;
    return 0;
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
    wex__box_runs w;
    uint64_t a, b, first, rows, pitch;
    wex_status st = WEX_OK;
    int more;

    wex__op_runs(job, o, &w);
    /* rows of the innermost outer dim lie its stride apart */
    pitch = w.outer ? w.b_stride[w.outer - 1] : w.run_bytes;
    more = wex__box_runs_next(&w, &a, &b);
    while (st == WEX_OK && more) {
        for (first = b, rows = 0; more && b == first + rows * pitch; rows++)
            more = wex__box_runs_next(&w, &a, &b);
        st = wex__device_copy_in_rows(job->device, dev + first, host + first,
                                      pitch, w.run_bytes, rows);
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
    /* whole[t] becomes 0 once the tensor is copied whole or left */
    for (size_t t = 0; t < tensors && st == WEX_OK; t++) {
        const wex__binding *bound = &job->bind[t];
        if (job->memory_kind[t] != WEX_MEMORY_CUDA || bound->shadow == NULL ||
            bound->pass != pass || whole[t] == 0) {
            whole[t] = 0;
            continue;
        }
        any = 1;
        if (wex__delta_mirrored(job, t) || whole[t] == ops[t]) {
            st = wex__device_copy_in(job->device, bound->address, bound->shadow,
                                     bound->bytes);
            whole[t] = 0;
        }
    }
    for (size_t i = 0; i < job->op_count && st == WEX_OK; i++)
        if (d->whole[i] && whole[job->ops[i].dst_tensor] != 0)
            st = copy_op_in(job, &job->ops[i]);
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

/* The map of one side of the walk: its first element and strides. */
static int map_of(const wex__box_runs *w, uint64_t base, const uint64_t *stride,
                  wex_delta_map *m)
{
    if (w->outer > WEX_DELTA_MAP_DIMS || w->elem == 0 || w->run_bytes == 0)
        return -1;
    memset(m, 0, sizeof(*m));
    m->base = base;
    m->elem = (uint32_t)w->elem;
    m->run_elems = w->run_bytes / w->elem;
    m->outer = w->outer;
    for (uint32_t d = 0; d < w->outer; d++) {
        m->extent[d] = w->extent[d];
        m->stride[d] = stride[d];
    }
    return 0;
}

int wex__delta_map_of(const wex__box_runs *w, wex_delta_map *m)
{
    return map_of(w, w->b_base, w->b_stride, m);
}

int wex__delta_source_map_of(const wex__box_runs *w, wex_delta_map *m)
{
    return map_of(w, w->a_base, w->a_stride, m);
}

/* The deltas into CUDA tensors applied on the device: the payload and
 * its chunks' index copied over and the kernel of libwex_cuda.so run (a
 * step's payload, not its tensors, then crosses the bus). A tensor with a
 * pinned copy of its own (mirrored) has the deltas in that copy too; where
 * there are no kernels, or a box they cannot place, the mirrored tensors
 * a delta touched are copied whole from their copies, as before the
 * kernels. A tensor on the device only (in passes) has the kernels, or
 * took no deltas. */
wex_status wex__delta_apply_device(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;
    wex_status st = WEX_OK;
    int queued = 0;

    memset(d->landed, 0, job->layout->tensor_count);
    for (size_t e = 0; e < d->apply_count && st == WEX_OK; e++) {
        const wex__op *o = &job->ops[d->apply[e]];
        wex_delta_map map;
        wex__box_runs w;
        int mirror = wex__delta_mirrored(job, o->dst_tensor);
        uint64_t slot;
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
        /* a device inbox (nccl, cuda-ipc) holds the payload already: the
         * kernel reads it there, the host copy gives its index */
        slot = d->apply_at[e][0];
        st = wex__device_delta_apply(
            job->device, job->bind[o->dst_tensor].address, &map,
            d->inbox[slot] + d->apply_at[e][1],
            d->inbox_dev != NULL && d->inbox_dev[slot] != NULL
                ? d->inbox_dev[slot] + d->apply_at[e][1]
                : NULL,
            d->apply_at[e][2], o->dtype_size, o->bytes / o->dtype_size);
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

wex_status wex__delta_inbox_fetch(wex_job *job, size_t slot, uint64_t from,
                                  uint64_t bytes)
{
    wex__job_destination_delta *d = &job->dst.delta;
    wex_status st = WEX_OK;

    for (uint64_t at = from; at < from + bytes && st == WEX_OK;
         at += WEX__STAGING_BYTES) {
        uint64_t n = from + bytes - at < WEX__STAGING_BYTES
                         ? from + bytes - at
                         : WEX__STAGING_BYTES;
        const void *host = NULL;
        wex__device_stage_reset(job->device);
        st = wex__device_stage_out(job->device, d->inbox_dev[slot] + at, n,
                                   &host);
        if (st == WEX_OK && host == NULL)
            st = wex__error(WEX_ERR_INTERNAL, "a slice does not fit staging");
        if (st == WEX_OK)
            memcpy(d->inbox[slot] + at, host, n);
    }
    wex__device_stage_reset(job->device);
    return st;
}
