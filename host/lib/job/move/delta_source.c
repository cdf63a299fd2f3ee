/*
 * Delta steps on a source: snapshots of the bytes last sent, one per
 * group of operations that read the same box, encoded once a step and
 * put into each destination's inbox that can take them.
 *
 * A destination takes deltas in a try when it holds the step the
 * snapshots hold (its base, which it posts before the try's barrier),
 * has an inbox for this source, and it is the step's first try; every
 * other one, and every operation whose payload is past max_fraction or
 * does not fit the room left in the inbox, gets the whole bytes as
 * without deltas. Every group is encoded every step, even when nobody
 * takes its delta, so the snapshot always holds what was last sent; the
 * snapshots count as a step's only once it commits (snap_step).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "box_runs.h"
#include "delta_encode.h"
#include "delta_groups.h"
#include "delta_move.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "job.h"
#include "log.h"
#include "parallel.h"
#include "transforms.h"

/* ---- groups ------------------------------------------------------------ */

static wex_status group_ops(wex_job *job)
{
    wex__job_source_delta *d = &job->src.delta;
    const wex__op **order = malloc((job->op_count + 1) * sizeof(*order));
    size_t n = 0;

    d->group_of = malloc((job->op_count + 1) * sizeof(*d->group_of));
    d->groups = calloc(job->op_count + 1, sizeof(*d->groups));
    if (order == NULL || d->group_of == NULL || d->groups == NULL) {
        free(order);
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    }
    for (size_t i = 0; i < job->op_count; i++) {
        d->group_of[i] = UINT32_MAX;
        if (wex__delta_eligible(&job->ops[i]))
            order[n++] = &job->ops[i];
    }
    wex__delta_sort(order, n);
    d->group_count = 0;
    d->snapshot_bytes = d->outbox_bytes = 0;
    for (size_t k = 0; k < n; k++) {
        const wex__op *o = order[k];
        size_t index = (size_t)(o - job->ops);
        wex__delta_group *g;
        if (k == 0 || !wex__delta_same_read(o, order[k - 1])) {
            g = &d->groups[d->group_count++];
            g->first_op = index;
            g->read = *o;
            g->snap_off = d->snapshot_bytes;
            g->bytes = o->bytes;
            g->out_off = d->outbox_bytes;
            g->out_cap =
                wex__delta_outbox_cap(o, job->plan.job->delta_max_fraction);
            g->payload_len = -1;
            d->snapshot_bytes += (o->bytes + 63) & ~(uint64_t)63;
            d->outbox_bytes += g->out_cap;
        }
        g = &d->groups[d->group_count - 1];
        if (index < g->first_op)
            g->first_op = index;
        d->group_of[index] = (uint32_t)(d->group_count - 1);
    }
    free(order);
    return WEX_OK;
}

/* ---- preparing and freeing -------------------------------------------- */

static void free_state(wex_job *job, wex__job_source_delta *d)
{
    if (d->outbox_mem != NULL)
        job->transport.ops->mem_deregister(job->transport.ctx, d->outbox_mem);
    if (d->dev_outbox != NULL)
        wex__device_free(job->device, d->dev_outbox);
    if (d->dev_snapshots != NULL)
        wex__device_free(job->device, d->dev_snapshots);
    free(d->group_of);
    free(d->groups);
    free(d->snapshots);
    free(d->outbox);
    free(d->inbox);
    free(d->inbox_size);
    free(d->inbox_used);
    free(d->peer_delta);
    free(d->records);
    free(d->pair_records);
    for (unsigned w = 0; d->encs != NULL && w < d->workers; w++)
        wex__delta_enc_free(&d->encs[w]);
    for (unsigned w = 0; d->hashes != NULL && w < d->workers; w++)
        if (d->hashes[w] != NULL)
            wex__digest_free(d->hashes[w]);
    free(d->encs);
    free(d->hashes);
    memset(d, 0, sizeof(*d));
}

static void free_source(wex_job *job)
{
    free_state(job, &job->src.delta);
}

/* A new plan (a dead source failed over, an elastic replica came or
 * went) keeps what the old snapshots hold: each new group reading what
 * an old one read takes its snapshot (the old buffer itself when every
 * group is the same), and a group new to this source is fresh, its ops
 * whole until a step commits, so the replicas that stayed keep their
 * deltas. */
static wex_status carry_snapshots(wex_job *job, wex__job_source_delta *old)
{
    wex__job_source_delta *d = &job->src.delta;
    size_t k = 0, same = 0;
    wex_status st = WEX_OK;

    if (old->snapshots == NULL || old->snap_step == 0)
        return WEX_OK;
    for (size_t g = 0; g < d->group_count; g++) {
        wex__delta_group *n = &d->groups[g];
        while (k < old->group_count &&
               wex__delta_read_cmp(&old->groups[k].read, &n->read) < 0)
            k++;
        n->fresh = k == old->group_count ||
                   wex__delta_read_cmp(&old->groups[k].read, &n->read) != 0 ||
                   old->groups[k].fresh;
        same += !n->fresh && old->groups[k].snap_off == n->snap_off;
    }
    if (same == d->group_count && old->snapshot_bytes == d->snapshot_bytes) {
        d->snapshots = old->snapshots; /* the same groups: taken whole */
        d->dev_snapshots = old->dev_snapshots;
        old->snapshots = old->dev_snapshots = NULL;
    } else if ((d->snapshots = calloc(d->snapshot_bytes + 1, 1)) == NULL) {
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    } else if (old->dev_snapshots != NULL &&
               wex__device_alloc(job->device, d->snapshot_bytes,
                                 (void **)&d->dev_snapshots) != WEX_OK) {
        /* no room on the GPU: the snapshots start again where make_room
         * can make them, every group whole once (none holds a step) */
        WEX__INFO("source rank %llu: no GPU memory for the new plan's delta "
                  "snapshots (%s): its CUDA tensors are encoded on the CPU, "
                  "after a step that sends them whole",
                  (unsigned long long)job->rank, wex__last_error());
        wex__error_clear();
        d->dev_snapshots = NULL;
        for (size_t g = 0; g < d->group_count; g++)
            d->groups[g].fresh = 1;
        return WEX_OK;
    }
    for (size_t g = 0, o = 0;
         st == WEX_OK && old->snapshots != NULL && g < d->group_count; g++) {
        const wex__delta_group *n = &d->groups[g];
        while (o < old->group_count &&
               wex__delta_read_cmp(&old->groups[o].read, &n->read) < 0)
            o++;
        if (n->fresh)
            continue;
        memcpy(d->snapshots + n->snap_off,
               old->snapshots + old->groups[o].snap_off, n->bytes);
        if (d->dev_snapshots != NULL)
            st = wex__device_copy_within(
                job->device, d->dev_snapshots + n->snap_off,
                old->dev_snapshots + old->groups[o].snap_off, n->bytes);
    }
    if (st != WEX_OK)
        return st;
    d->snap_step = old->snap_step;
    return WEX_OK;
}

void wex__delta_free(wex_job *job)
{
    if (job->side == WEX_SIDE_SOURCE)
        free_source(job);
    else
        wex__delta_dest_free(job);
}

/* An encoder for each thread a step's encoding runs on, and a digest
 * state for each but the first (which uses the step's). */
static wex_status make_workers(wex_job *job, wex__job_source_delta *d)
{
    unsigned n = wex__delta_threads(job);

    d->encs = calloc(n, sizeof(*d->encs));
    d->hashes = calloc(n, sizeof(*d->hashes));
    if (d->encs == NULL || d->hashes == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (; d->workers < n; d->workers++)
        if (wex__delta_enc_alloc(&d->encs[d->workers]) != 0 ||
            (d->workers > 0 &&
             (d->hashes[d->workers] = wex__digest_create()) == NULL)) {
            wex__delta_enc_free(&d->encs[d->workers]);
            return wex__error(WEX_ERR_NOMEM, "job: out of memory");
        }
    return WEX_OK;
}

wex_status wex__delta_prepare(wex_job *job)
{
    wex__job_source_delta *d = &job->src.delta, old;
    size_t peers = job->peer_count + 1;
    wex_status st;

    if (!job->plan.job->delta)
        return WEX_OK;
    if (job->side != WEX_SIDE_SOURCE)
        return wex__delta_dest_prepare(job);
    /* Replanned: the snapshots are carried over to the new groups. */
    old = *d;
    old.outbox_mem = NULL;
    if (d->outbox_mem != NULL)
        job->transport.ops->mem_deregister(job->transport.ctx, d->outbox_mem);
    memset(d, 0, sizeof(*d));
    if ((st = make_workers(job, d)) != WEX_OK) {
        free_state(job, &old);
        return st;
    }
    if ((d->records = calloc(job->op_count + 1, sizeof(*d->records))) == NULL ||
        (d->pair_records =
             calloc(job->op_count + 1, sizeof(*d->pair_records))) == NULL ||
        (d->inbox = calloc(peers, sizeof(*d->inbox))) == NULL ||
        (d->inbox_size = calloc(peers, sizeof(*d->inbox_size))) == NULL ||
        (d->inbox_used = calloc(peers, sizeof(*d->inbox_used))) == NULL ||
        (d->peer_delta = calloc(peers, 1)) == NULL)
        st = wex__error(WEX_ERR_NOMEM, "job: out of memory");
    else if ((st = group_ops(job)) == WEX_OK)
        st = carry_snapshots(job, &old);
    free_state(job, &old);
    return st;
}

/* The snapshots and the outbox, made when the first step needs them
 * (the tensors are bound by then) and registered with the transport
 * where it asks. */
static wex_status make_room(wex_job *job)
{
    wex__job_source_delta *d = &job->src.delta;
    wex_status st;

    if (d->outbox != NULL || d->group_count == 0)
        return WEX_OK;
    if (d->snapshots == NULL) /* else carried from the plan before */
        d->snapshots = calloc(d->snapshot_bytes + 1, 1);
    d->outbox = malloc(d->outbox_bytes + 1);
    if (d->snapshots == NULL || d->outbox == NULL)
        return wex__error(WEX_ERR_NOMEM,
                          "job: %llu bytes of delta "
                          "snapshots and %llu of outbox: out of memory",
                          (unsigned long long)d->snapshot_bytes,
                          (unsigned long long)d->outbox_bytes);
    if (d->dev_snapshots == NULL &&
        (st = wex__delta_device_snapshots(job)) != WEX_OK)
        return st;
    if (!(job->transport.ops->caps & WEX_TRANSPORT_CAP_REGISTER_SOURCE))
        return WEX_OK;
    wex__error_clear();
    st = job->transport.ops->mem_register(job->transport.ctx, d->outbox,
                                          d->outbox_bytes + 1, WEX_MEMORY_HOST,
                                          &d->outbox_mem);
    return st == WEX_OK ? WEX_OK
                        : wex__error_prefix(st, "registering the delta "
                                                "outbox");
}

/* ---- a try ------------------------------------------------------------- */

/* A copying group: its op's runs against its snapshot, into its room in
 * the outbox; and the digest of its current bytes. */
static void encode(wex_job *job, wex__delta_enc *e, wex__delta_group *g,
                   wex__digest *h)
{
    wex__job_source_delta *d = &job->src.delta;
    const wex__op *o = &job->ops[g->first_op];
    const uint8_t *base = job->bind[o->src_tensor].address;
    uint8_t *snap = d->snapshots + g->snap_off;
    wex__box_runs w;
    uint64_t a, b;

    wex__op_runs(job, o, &w);
    wex__delta_encode_start(job, e, g, h);
    while (wex__box_runs_next(&w, &a, &b)) {
        wex__delta_feed(e, base + a, snap, w.run_bytes, h);
        snap += w.run_bytes;
    }
    wex__delta_encode_end(job, e, g, h);
}

/* The host groups of a try, encoded on the source's threads, the
 * largest first (a group is one digest, so it is one task). */
typedef struct encode_work {
    wex_job *job;
    size_t *order;  /* group indices */
    wex__digest *h; /* worker 0's, when digesting */
} encode_work;

static int encode_task(void *arg, size_t k, unsigned worker, char *why,
                       size_t cap)
{
    encode_work *a = arg;
    wex__job_source_delta *d = &a->job->src.delta;
    wex__digest *h = a->h == NULL  ? NULL
                     : worker == 0 ? a->h
                                   : d->hashes[worker];

    (void)why;
    (void)cap;
    encode(a->job, &d->encs[worker], &d->groups[a->order[k]], h);
    return 0;
}

static int larger_first(const void *x, const void *y, void *groups)
{
    const wex__delta_group *g = groups;
    uint64_t a = g[*(const size_t *)x].bytes, b = g[*(const size_t *)y].bytes;

    return a < b ? 1 : a > b ? -1 : 0;
}

/* A quantizing group, when its first op runs (its blocks' amaxes are
 * known only then): its e4m3 bytes, made once for every twin, against
 * the snapshot of those it last sent. */
static wex_status encode_made(wex_job *job, size_t i, wex__delta_group *g)
{
    wex__job_source_delta *d = &job->src.delta;
    wex__digest *h = d->verify ? job->scratch.hash : NULL;
    const unsigned char *made = NULL;
    wex_status st = wex__transforms_made(job, i, &made);

    if (st != WEX_OK)
        return st;
    wex__delta_encode_start(job, &d->encs[0], g, h);
    wex__delta_feed(&d->encs[0], made, d->snapshots + g->snap_off,
                    job->ops[i].bytes, h);
    wex__delta_encode_end(job, &d->encs[0], g, h);
    d->changed += g->changed;
    d->elems += g->elems;
    g->made = 0;
    return WEX_OK;
}

wex_status wex__delta_begin(wex_job *job, uint64_t number,
                            const char *try_prefix, double timeout,
                            wex__digest *h)
{
    wex__job_source_delta *d = &job->src.delta;
    encode_work work = {0};
    size_t count = 0;
    int carries;
    wex_status st;

    d->wire_bytes = d->changed = d->elems = d->delta_ops = 0;
    if (!job->plan.job->delta || job->side != WEX_SIDE_SOURCE)
        return WEX_OK;
    if ((st = make_room(job)) != WEX_OK ||
        (st = wex__delta_read_bases(job, number, try_prefix, timeout)) !=
            WEX_OK)
        return st;
    d->verify = h != NULL;
    carries = wex__delta_transport_carries(job);
    d->matched = wex__delta_matched(job);
    d->decided = wex__delta_device_inboxes(job);
    if ((work.order = malloc((d->group_count + 1) * sizeof(size_t))) == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (size_t k = 0; k < d->group_count && st == WEX_OK; k++) {
        wex__delta_group *g = &d->groups[k];
        const wex__op *o = &job->ops[g->first_op];
        g->payload_len = -1;
        g->made = 0;
        g->changed = g->elems = 0;
        if (job->memory_kind[o->src_tensor] != WEX_MEMORY_HOST) {
            /* read through staging where a destination can take it;
             * quantized on the device: whole (not yet encoded there) */
            if (o->transform == WEX__OP_COPY && carries)
                st = d->dev_snapshots != NULL
                         ? wex__delta_encode_on_device(job, g, h)
                         : wex__delta_encode_staged(job, g, h);
            continue;
        }
        if (o->transform == WEX__OP_QUANTIZE)
            g->made = 1; /* once its amaxes are agreed (wex__delta_put) */
        else
            work.order[count++] = k;
    }
    if (st == WEX_OK) {
        qsort_r(work.order, count, sizeof(size_t), larger_first, d->groups);
        work.job = job;
        work.h = h;
        (void)wex__parallel(count, d->workers, encode_task, &work, NULL, 0);
    }
    free(work.order);
    for (size_t k = 0; k < d->group_count; k++) {
        d->changed += d->groups[k].changed;
        d->elems += d->groups[k].elems;
    }
    /* over a transport of device memory, decided now (over nccl a
     * destination receives by them) */
    if (st == WEX_OK && d->decided)
        st = wex__delta_send_layout(job, try_prefix);
    return st;
}

int wex__delta_put(wex_job *job, size_t i, wex_status *st_p)
{
    wex__job_source_delta *d = &job->src.delta;
    uint32_t gi = d->group_of != NULL ? d->group_of[i] : UINT32_MAX;
    size_t p = job->op_peer_index[i];
    wex__delta_record *r = &d->records[i];

    if (!job->plan.job->delta)
        return 0;
    /* encoded even when nobody takes it: the snapshot is what was sent */
    if (gi != UINT32_MAX && d->groups[gi].made &&
        (*st_p = encode_made(job, i, &d->groups[gi])) != WEX_OK)
        return 1;
    /* over nccl and cuda-ipc the record was decided before any put */
    if (d->decided ? r->mode != WEX__DELTA_OP_PAYLOAD
                   : !wex__delta_decide(job, i, r))
        return 0;
    *st_p = r->length == 0 ? WEX_OK
                           : job->transport.ops->put(
                                 job->transport.ctx, d->inbox[p], r->offset,
                                 wex__delta_payload_of(job, gi), r->length);
    job->src.puts += r->length != 0;
    d->wire_bytes += r->length;
    d->delta_ops++;
    return 1;
}
