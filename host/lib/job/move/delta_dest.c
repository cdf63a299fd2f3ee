/*
 * Delta steps on a destination: an inbox for each source peer, and the
 * check of what came into it (delta_dest.h names the other parts).
 *
 * A destination takes deltas when the transport writes into memory it
 * allocated (one-sided, with mem_alloc) and every tensor it holds is
 * host memory, or a CUDA tensor landing in the staging window: with one
 * pass (or a copy of its own) that pinned copy mirrors the device between
 * steps; with passes the device alone holds it and the kernels of
 * libwex_cuda.so must be there (docs/gpu.md). A transport of device
 * memory only (nccl, cuda-ipc) writes the CUDA tensors themselves and
 * the inboxes in device memory, registered, with a host copy each for
 * the check; the kernels apply there. Then it keeps one inbox per
 * source peer, the job's inbox_bytes (5 % of what it holds, at least
 * 1 MiB, by default) shared out by the bytes each peer sends it. Its live
 * tensors are not touched by a delta until the step commits: the check
 * digests the operation as it will be once the payload is applied (live
 * bytes where nothing changed, the payload's elsewhere) without writing
 * it, and only the apply at commit (delta_apply.c) writes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "delta_groups.h"
#include "delta_move.h"
#include "delta_dest.h"
#include "device_memory.h"
#include "error.h"
#include "log.h"

/* ---- inboxes ------------------------------------------------------------ */

int wex__delta_transport_carries(const wex_job *job)
{
    uint64_t need = WEX_TRANSPORT_CAP_ONE_SIDED | WEX_TRANSPORT_CAP_ALLOC;

    return ((job->transport.ops->caps & need) == need &&
            !(job->transport.ops->caps & WEX_TRANSPORT_CAP_TWO_SIDED)) ||
           wex__delta_device_inboxes(job);
}

int wex__delta_device_inboxes(const wex_job *job)
{
    uint64_t caps = job->transport.ops != NULL ? job->transport.ops->caps : 0;

    return (caps & WEX_TRANSPORT_CAP_CUDA_MEMORY) &&
           !(caps & WEX_TRANSPORT_CAP_HOST_MEMORY) &&
           (caps & (WEX_TRANSPORT_CAP_ONE_SIDED | WEX_TRANSPORT_CAP_TWO_SIDED));
}

int wex__delta_matched(const wex_job *job)
{
    uint64_t need = WEX_TRANSPORT_CAP_TWO_SIDED | WEX_TRANSPORT_CAP_CUDA_MEMORY;

    return job->transport.ops != NULL &&
           (job->transport.ops->caps & need) == need;
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
        if (job->memory_kind[t] == WEX_MEMORY_HOST)
            continue;
        if (wex__delta_on_device(job, t))
            device_only = 1;
        else if (!wex__delta_mirrored(job, t))
            return 0;
    }
    if (device_only &&
        (job->device == NULL || !wex__device_kernels_ready(job->device))) {
        WEX__INFO("destination rank %llu: its CUDA tensors are on the device "
                  "only (%s) and %s: it takes every step whole",
                  (unsigned long long)job->rank,
                  wex__delta_device_inboxes(job)
                      ? "the transport writes them"
                      : "the staging window takes them in passes",
                  job->device == NULL ? "no device is open"
                                      : wex__last_error());
        wex__error_clear();
        return 0;
    }
    return 1;
}

/* The check's per-thread scratch (wex__delta_digest_pending). */
static void free_check_workers(wex__job_destination_delta *d)
{
    for (unsigned w = 1; d->check_hashes != NULL && w < d->threads; w++)
        wex__digest_free(d->check_hashes[w]);
    free(d->check_hashes);
    free(d->check_chunks);
    d->check_hashes = NULL;
    d->check_chunks = NULL;
}

void wex__delta_dest_free(wex_job *job)
{
    wex__job_destination_delta *d = &job->dst.delta;

    for (size_t k = 0; k < d->inbox_count; k++) {
        if (d->inbox_mem[k] != NULL)
            job->transport.ops->mem_deregister(job->transport.ctx,
                                               d->inbox_mem[k]);
        if (d->inbox_dev != NULL && d->inbox_dev[k] != NULL) {
            wex__device_free(job->device, d->inbox_dev[k]);
            free(d->inbox[k]); /* its host copy */
        }
    }
    free(d->inbox_dev);
    free(d->layout);
    free(d->inbox_rank);
    free(d->inbox);
    free(d->inbox_mem);
    free(d->inbox_size);
    free(d->apply);
    free(d->apply_at);
    free(d->pending);
    free_check_workers(d);
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
    free(d->pending);
    free_check_workers(d);
    free(d->landed);
    free(d->whole);
    d->landed = calloc(job->layout->tensor_count + 1, 1);
    d->whole = calloc(n, 1);
    d->apply = malloc(n * sizeof(*d->apply));
    d->apply_at = malloc(n * sizeof(*d->apply_at));
    d->pending = malloc(n * sizeof(*d->pending));
    d->apply_count = 0;
    d->threads = wex__delta_threads(job);
    d->check_chunks = malloc((size_t)d->threads * WEX__DELTA_CHUNK * 8);
    d->check_hashes = calloc(d->threads, sizeof(*d->check_hashes));
    for (unsigned w = 1; d->check_hashes != NULL && w < d->threads; w++)
        if ((d->check_hashes[w] = wex__digest_create()) == NULL)
            return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    if (d->apply == NULL || d->apply_at == NULL || d->pending == NULL ||
        d->check_chunks == NULL || d->check_hashes == NULL ||
        d->landed == NULL || d->whole == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    return WEX_OK;
}

/* Over a transport of device memory only: the inbox it writes or
 * receives into is device memory, registered; the check reads its host
 * copy, `*host_p`. */
static wex_status device_inbox(wex_job *job, uint64_t bytes, void **host_p)
{
    wex__job_destination_delta *d = &job->dst.delta;
    size_t k = d->inbox_count;
    wex_status st =
        wex__device_alloc(job->device, bytes, (void **)&d->inbox_dev[k]);

    if (st != WEX_OK)
        return st;
    *host_p = malloc(bytes);
    if (*host_p == NULL)
        st = wex__error(WEX_ERR_NOMEM, "out of memory");
    else
        st = job->transport.ops->mem_register(
            job->transport.ctx, d->inbox_dev[k], bytes, WEX_MEMORY_CUDA,
            &d->inbox_mem[k]);
    if (st != WEX_OK) {
        free(*host_p);
        wex__device_free(job->device, d->inbox_dev[k]);
        d->inbox_dev[k] = NULL;
    }
    return st;
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
    d->inbox_dev = calloc(peers + 1, sizeof(*d->inbox_dev));
    if (wex__delta_matched(job)) /* the records before the sends */
        d->layout = calloc(job->op_count + 1, sizeof(*d->layout));
    if (d->inbox_rank == NULL || d->inbox == NULL || d->inbox_mem == NULL ||
        d->inbox_size == NULL || d->inbox_dev == NULL ||
        (wex__delta_matched(job) && d->layout == NULL))
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
        st = wex__delta_device_inboxes(job)
                 ? device_inbox(job, share, &address)
                 : job->transport.ops->mem_alloc(job->transport.ctx, share,
                                                 &address,
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

size_t wex__delta_inbox_slot(const wex_job *job, uint64_t rank)
{
    const wex__job_destination_delta *d = &job->dst.delta;

    for (size_t k = 0; k < d->inbox_count; k++)
        if (d->inbox_rank[k] == rank)
            return k;
    return SIZE_MAX;
}

wex_transport_mem *wex__delta_inbox_of(const wex_job *job, uint64_t rank)
{
    size_t k = wex__delta_inbox_slot(job, rank);

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

/* ---- checking ----------------------------------------------------------- */

/* Queues op i's checked payload for the apply at commit. */
static void queue_apply(wex_job *job, size_t i, size_t slot, uint64_t offset,
                        uint64_t len, uint64_t changed)
{
    wex__job_destination_delta *d = &job->dst.delta;
    const wex__op *o = &job->ops[i];

    d->changed += changed;
    d->elems += o->bytes / o->dtype_size;
    d->wire_bytes += len;
    d->delta_ops++;
    d->apply[d->apply_count] = i;
    d->apply_at[d->apply_count][0] = slot;
    d->apply_at[d->apply_count][1] = offset;
    d->apply_at[d->apply_count++][2] = len;
}

/* 0: checked and queued, or (an operation in host memory) left in
 * *later for the digests the check takes together; 1: it landed
 * differently; -1: refused, why says so. */
static int check_payload(wex_job *job, size_t i, size_t slot,
                         const wex__delta_record *r, int verify,
                         wex__delta_pending *later, size_t *later_count,
                         char *why, size_t cap)
{
    wex__job_destination_delta *d = &job->dst.delta;
    const wex__op *o = &job->ops[i];
    const uint8_t *payload = d->inbox[slot] + r->offset;
    wex__digest *h = verify ? job->scratch.hash : NULL;
    uint64_t digest = 0, changed = 0;

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
    /* a one-sided transport wrote it into the device's inbox: its bytes
     * to the host copy (over nccl they came with the receives) */
    if (d->inbox_dev[slot] != NULL && d->layout == NULL &&
        wex__delta_inbox_fetch(job, slot, r->offset, r->length) != WEX_OK) {
        snprintf(why, cap, "reading source rank %llu's delta: %s",
                 (unsigned long long)o->src_rank, wex__last_error());
        return -1;
    }
    if (verify && XXH3_64bits(payload, (size_t)r->length) != r->payload_digest)
        return 1;
    if (!wex__delta_on_device(job, o->dst_tensor)) {
        later[(*later_count)++] = (wex__delta_pending){
            i, slot, r->offset, r->length, r->digest, 0, 0};
        return 0;
    }
    if (wex__delta_digest_device(job, o, payload, r->length, h, &digest,
                                 &changed, why, cap) != 0)
        return -1;
    if (h != NULL && digest != r->digest)
        return 1;
    queue_apply(job, i, slot, r->offset, r->length, changed);
    return 0;
}

/* Over nccl: what a record says of where the op's bytes went. */
static int same_place(const wex__delta_record *a, const wex__delta_record *b)
{
    return a->mode == b->mode &&
           (a->mode != WEX__DELTA_OP_PAYLOAD ||
            (a->offset == b->offset && a->length == b->length));
}

wex__peer_outcome wex__delta_check(wex_job *job, uint64_t peer,
                                   const wex__delta_record *records, size_t n,
                                   int verify, char *why, size_t cap)
{
    wex__job_destination_delta *d = &job->dst.delta;
    size_t slot = wex__delta_inbox_slot(job, peer), k = 0, later = 0;
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
        if (d->layout != NULL && !same_place(r, &d->layout[i])) {
            snprintf(why, cap,
                     "source rank %llu's records say other than the layout "
                     "it posted before sending",
                     (unsigned long long)peer);
            return WEX__PEER_FAILED;
        }
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
        how = check_payload(job, i, slot, r, verify, d->pending, &later, why,
                            cap);
        if (how < 0)
            return WEX__PEER_FAILED;
        bad += how;
    }
    /* the operations in host memory, each digested as it will be once
     * applied, on the rank's threads */
    if (wex__delta_digest_pending(job, d->pending, later, verify, why, cap) !=
        0)
        return WEX__PEER_FAILED;
    for (size_t p = 0; p < later; p++) {
        const wex__delta_pending *q = &d->pending[p];
        if (verify && q->digest != q->want)
            bad++;
        else
            queue_apply(job, q->op, q->slot, q->offset, q->len, q->changed);
    }
    if (bad == 0 && k == n)
        return WEX__PEER_OK;
    snprintf(why, cap,
             "source rank %llu sent bytes that landed differently "
             "(%llu operations)",
             (unsigned long long)peer, (unsigned long long)(bad ? bad : 1));
    return WEX__PEER_FAILED;
}
