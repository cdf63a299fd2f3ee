/* Running this rank's operations: contiguous runs of each box go
 * straight from the source's live buffer into the destination's through
 * the transport, digested on the way when the job verifies. Device
 * memory is read on the CPU only through pinned staging: to digest it,
 * and to hand it to a transport that moves host memory only. Over a
 * network transport, short runs a box reads strided from the source but
 * writes contiguously at the destination (a row-parallel split) are
 * packed into the job's staging and sent as one put. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "box_runs.h"
#include "delta_move.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "landing.h"
#include "job.h"
#include "transforms.h"
#include "window.h"

static int is_cuda(const wex_job *job, uint64_t tensor)
{
    return job->memory_kind != NULL &&
           job->memory_kind[tensor] == WEX_MEMORY_CUDA;
}

/* A device run, through staging, to a transport without device memory:
 * when staging is full, what was put from it must land before reuse. */
static wex_status put_staged(wex_job *job, size_t i, uint64_t offset,
                             const unsigned char *src, uint64_t bytes,
                             wex__digest *h)
{
    wex_status st = WEX_OK;

    while (bytes > 0 && st == WEX_OK) {
        uint64_t n = bytes < WEX__STAGING_BYTES ? bytes : WEX__STAGING_BYTES;
        const void *host = NULL;
        st = wex__device_stage_out(job->device, src, n, &host);
        if (st == WEX_OK && host == NULL) {
            st = job->transport.ops->flush(job->transport.ctx);
            wex__device_stage_reset(job->device);
            continue;
        }
        if (st == WEX_OK)
            st = job->transport.ops->put(job->transport.ctx,
                                         job->src.op_peer[i], offset, host, n);
        if (st == WEX_OK && h != NULL)
            wex__digest_add(h, host, n);
        offset += n;
        src += n;
        bytes -= n;
    }
    return st;
}

/* Rows staged together at most: bounds the destination offsets kept. */
#define STAGE_ROWS_MAX 4096u

/* Puts `rows` staged runs of `width` bytes, one after the other at
 * `host`, to destination offsets b[]: those that follow each other at
 * the destination as one put. */
static wex_status put_rows(wex_job *job, size_t i, const uint64_t *b,
                           uint64_t rows, uint64_t width,
                           const unsigned char *host, wex__digest *h)
{
    wex_status st = WEX_OK;

    for (uint64_t k = 0, n; k < rows && st == WEX_OK; k += n) {
        for (n = 1; k + n < rows && b[k + n] == b[k] + n * width; n++)
            ;
        st = job->transport.ops->put(job->transport.ctx, job->src.op_peer[i],
                                     b[k], host + k * width, n * width);
        job->src.puts++;
    }
    if (st == WEX_OK && h != NULL)
        wex__digest_add(h, host, rows * width);
    return st;
}

/* A device box, through staging, to a transport without device memory:
 * runs that lie a fixed pitch apart in device memory (the rows of a
 * row-parallel split) are staged with one strided copy and one
 * synchronisation, where each run used to take one of each, and runs
 * that follow each other at the destination leave as one put. */
static wex_status put_device_box(wex_job *job, size_t i,
                                 const unsigned char *base, wex__box_runs *w,
                                 wex__digest *h)
{
    uint64_t pitch = w->outer ? w->a_stride[w->outer - 1] : w->run_bytes;
    uint64_t b[STAGE_ROWS_MAX], first = 0, rows = 0, a, d;
    int more = wex__box_runs_next(w, &a, &d);
    wex_status st = WEX_OK;

    while (st == WEX_OK && (more || rows > 0)) {
        const void *host = NULL;
        if (more &&
            (rows == 0 || (rows < STAGE_ROWS_MAX && a == first + rows * pitch &&
                           (rows + 1) * w->run_bytes <= WEX__STAGING_BYTES))) {
            if (rows == 0)
                first = a;
            b[rows++] = d;
            more = wex__box_runs_next(w, &a, &d);
            continue;
        }
        st = wex__device_stage_rows(job->device, base + first, pitch,
                                    w->run_bytes, rows, &host);
        if (st == WEX_OK && host == NULL) {
            /* staging is full: what was put from it must land first */
            st = job->transport.ops->flush(job->transport.ctx);
            wex__device_stage_reset(job->device);
            continue;
        }
        if (st == WEX_OK)
            st = put_rows(job, i, b, rows, w->run_bytes, host, h);
        rows = 0;
    }
    return st;
}

/* ---- packing ------------------------------------------------------ */

/* Runs at least this long go out as they are: a put of them already
 * carries enough bytes to amortize its cost. */
#define PACK_RUN_MAX (64u << 10)

static void op_runs(const wex_job *job, const wex__op *o, wex__box_runs *w)
{
    wex__op_runs(job, o, w);
}

/* A host-memory copy over a one-sided network transport (a two-sided
 * one pairs each put with a recv the destination posts per run) whose
 * runs are short and follow each other at the destination. */
static int packs(const wex_job *job, const wex__op *o, const wex__box_runs *w)
{
    return (job->transport.ops->caps &
            (WEX_TRANSPORT_CAP_NETWORK | WEX_TRANSPORT_CAP_TWO_SIDED)) ==
               WEX_TRANSPORT_CAP_NETWORK &&
           o->transform == WEX__OP_COPY && !is_cuda(job, o->src_tensor) &&
           w->remaining > 1 && w->run_bytes <= PACK_RUN_MAX &&
           w->b_stride[w->outer - 1] == w->run_bytes;
}

void wex__pack_free(wex_job *job)
{
    if (job->src.pack_mem != NULL)
        job->transport.ops->mem_deregister(job->transport.ctx,
                                           job->src.pack_mem);
    job->src.pack_mem = NULL;
    free(job->src.pack);
    job->src.pack = NULL;
    job->src.pack_bytes = job->src.pack_used = 0;
}

wex_status wex__pack_prepare(wex_job *job)
{
    uint64_t need = 0, cap = job->plan.job->staging_bytes;
    wex_status st;

    wex__pack_free(job);
    if (job->side != WEX_SIDE_SOURCE || job->transport.ops == NULL)
        return WEX_OK;
    for (size_t i = 0; i < job->op_count && need < cap; i++) {
        wex__box_runs w;
        op_runs(job, &job->ops[i], &w);
        if (packs(job, &job->ops[i], &w))
            need += job->ops[i].bytes;
    }
    if (need == 0)
        return WEX_OK;
    job->src.pack_bytes = need < cap ? need : cap;
    job->src.pack = malloc(job->src.pack_bytes);
    if (job->src.pack == NULL)
        return wex__error(WEX_ERR_NOMEM,
                          "job: %llu bytes of staging "
                          "(staging_bytes): out of memory",
                          (unsigned long long)job->src.pack_bytes);
    if (!(job->transport.ops->caps & WEX_TRANSPORT_CAP_REGISTER_SOURCE))
        return WEX_OK;
    wex__error_clear();
    st = job->transport.ops->mem_register(job->transport.ctx, job->src.pack,
                                          job->src.pack_bytes, WEX_MEMORY_HOST,
                                          &job->src.pack_mem);
    if (st != WEX_OK) /* the transport's own class, not a guess */
        return wex__error_prefix(st, "registering %llu bytes of staging",
                                 (unsigned long long)job->src.pack_bytes);
    return WEX_OK;
}

/* Sends op i's runs as few puts as staging allows: runs that follow each
 * other at the destination are copied into staging and put together; a
 * full staging waits for what was put from it. Hashed from staging, in
 * run order, so the digest is the one the runs themselves would give. */
static wex_status put_packed(wex_job *job, size_t i, const unsigned char *base,
                             wex__box_runs *w, wex__digest *h)
{
    uint64_t a, b, start = 0, len = 0;
    unsigned char *pack = NULL;
    int more = wex__box_runs_next(w, &a, &b);
    wex_status st = WEX_OK;

    while (st == WEX_OK && (more || len > 0)) {
        if (len > 0 &&
            (!more || b != start + len ||
             job->src.pack_used + len + w->run_bytes > job->src.pack_bytes)) {
            st = job->transport.ops->put(job->transport.ctx,
                                         job->src.op_peer[i], start, pack, len);
            if (st == WEX_OK && h != NULL)
                wex__digest_add(h, pack, len);
            job->src.puts++;
            job->src.pack_used += len;
            len = 0;
            continue;
        }
        if (len == 0) {
            if (job->src.pack_used + w->run_bytes > job->src.pack_bytes) {
                st = job->transport.ops->flush(job->transport.ctx);
                job->src.pack_used = 0;
                continue;
            }
            pack = job->src.pack + job->src.pack_used;
            start = b;
        }
        memcpy(pack + len, base + a, w->run_bytes);
        len += w->run_bytes;
        more = wex__box_runs_next(w, &a, &b);
    }
    return st;
}

/* ---- running ------------------------------------------------------- */

/* What a source digests at once: well inside a core's L2. */
#define HASH_CHUNK (256u << 10)

static wex_status put_run(wex_job *job, size_t i, int cuda, int staged,
                          uint64_t offset, const unsigned char *src,
                          uint64_t bytes, wex__digest *h)
{
    wex_status st;

    if (staged)
        return put_staged(job, i, offset, src, bytes, h);
    if (h != NULL && !cuda) {
        /* Digested a chunk at a time, right after the chunk's put: a
         * copying transport has just read it, so the hash reads it from
         * cache instead of making a second pass over memory. */
        while (bytes > 0) {
            uint64_t n = bytes < HASH_CHUNK ? bytes : HASH_CHUNK;
            st = job->transport.ops->put(job->transport.ctx,
                                         job->src.op_peer[i], offset, src, n);
            job->src.puts++;
            if (st != WEX_OK)
                return st;
            wex__digest_add(h, src, n);
            offset += n;
            src += n;
            bytes -= n;
        }
        return WEX_OK;
    }
    st = job->transport.ops->put(job->transport.ctx, job->src.op_peer[i],
                                 offset, src, bytes);
    job->src.puts++;
    if (st != WEX_OK || h == NULL)
        return st;
    return wex__device_hash_run(job->device, h, src, bytes);
}

/* One copying op: its box as runs, packed, staged from the device or
 * put as they are, digested on the way when `h` (*digest_p: the
 * digest): one run of device memory that a device transport moves is
 * digested on the device where the kernels are, the others through
 * staging or as they are put. */
static wex_status put_copy(wex_job *job, size_t i, wex__digest *h,
                           uint64_t *digest_p)
{
    const wex__op *o = &job->ops[i];
    const unsigned char *base = job->bind[o->src_tensor].address;
    int cuda = is_cuda(job, o->src_tensor);
    int device_transport =
        (job->transport.ops->caps & WEX_TRANSPORT_CAP_CUDA_MEMORY) != 0;
    wex_status st = WEX_OK;
    wex__box_runs w;
    uint64_t a, b, first;

    op_runs(job, o, &w);
    if (h != NULL && cuda && device_transport &&
        wex__op_digest_on_device(job, o, 0, &first)) {
        while (st == WEX_OK && wex__box_runs_next(&w, &a, &b))
            st = put_run(job, i, 1, 0, b, base + a, w.run_bytes, NULL);
        return st == WEX_OK ? wex__device_digest(job->device, base + first,
                                                 o->bytes, digest_p)
                            : st;
    }
    if (job->src.pack != NULL && packs(job, o, &w))
        st = put_packed(job, i, base, &w, h);
    else if (cuda && !device_transport && w.run_bytes <= WEX__STAGING_BYTES)
        st = put_device_box(job, i, base, &w, h);
    while (st == WEX_OK && wex__box_runs_next(&w, &a, &b))
        st = put_run(job, i, cuda, cuda && !device_transport, b, base + a,
                     w.run_bytes, h);
    if (st == WEX_OK && h != NULL && cuda && device_transport)
        st = wex__device_hash_end(job->device, h);
    if (h != NULL)
        *digest_p = wex__digest_final(h);
    return st;
}

wex_status wex__execute_ops(wex_job *job, uint64_t *digests,
                            uint32_t landing_tag, const char *try_prefix,
                            double timeout)
{
    wex__digest *h = digests ? job->scratch.hash : NULL;
    uint32_t passes = wex__window_source_passes(job);
    char amax_prefix[128];
    wex_status st = WEX_OK;

    job->src.puts = 0;
    job->src.pack_used = 0;
    if (job->scratch.landed != NULL) /* counted again in every try */
        memset(job->scratch.landed, 0,
               (job->peer_count + 1) * sizeof(*job->scratch.landed));
    snprintf(amax_prefix, sizeof(amax_prefix), "%samax/", try_prefix);
    st = wex__transforms_amax(job, amax_prefix, timeout);
    for (uint32_t pass = 0; pass < passes && st == WEX_OK; pass++) {
        for (size_t k = 0; k < job->op_count && st == WEX_OK; k++) {
            size_t i = wex__transforms_nth(job, k); /* twins together */
            if (passes > 1 && job->src.op_pass[i] != pass)
                continue;
            if (wex__delta_put(job, i, &st)) { /* into its inbox */
                if (h != NULL)
                    digests[i] = job->src.delta.records[i].digest;
                continue;
            }
            if (h != NULL)
                wex__digest_reset(h);
            if (job->ops[i].transform != WEX__OP_COPY) {
                st = wex__transforms_put(job, i, h);
                if (h != NULL)
                    digests[i] = wex__digest_final(h);
            } else {
                uint64_t digest = 0;
                st = put_copy(job, i, h, &digest);
                if (h != NULL)
                    digests[i] = digest;
            }
            wex__delta_full_done(job, i, h != NULL ? digests[i] : 0);
            /* only a checking destination watches its board */
            if (st == WEX_OK && h != NULL)
                st = wex__landing_tell(job, i, landing_tag);
        }
        if (st == WEX_OK && pass + 1 < passes)
            st = wex__window_end_pass(job, pass, try_prefix, timeout);
    }
    if (st == WEX_OK)
        st = job->transport.ops->flush(job->transport.ctx);
    if (job->device != NULL)
        wex__device_stage_reset(job->device);
    wex__transforms_reset(job);
    return st;
}

wex_status wex__recv_op(wex_job *job, size_t i)
{
    const wex__op *o = &job->ops[i];
    wex_transport_mem *mem = job->bind[o->dst_tensor].mem;
    wex_status st = WEX_OK;
    wex__box_runs w;
    uint64_t a, d;

    if (o->transform != WEX__OP_COPY) /* made and put a row at a time */
        return wex__transforms_recv(job, i);
    /* The source's walk, so the runs pair up with its puts. */
    op_runs(job, o, &w);
    while (st == WEX_OK && wex__box_runs_next(&w, &a, &d))
        st = job->transport.ops->recv(job->transport.ctx, o->src_rank, mem, d,
                                      w.run_bytes);
    return st;
}

wex_status wex__post_receives(wex_job *job)
{
    wex_status st = WEX_OK;

    if (job->side != WEX_SIDE_DESTINATION ||
        !(job->transport.ops->caps & WEX_TRANSPORT_CAP_TWO_SIDED))
        return WEX_OK;
    if (job->transport.ops->recv == NULL)
        return wex__error(WEX_ERR_ABI, "the transport is two-sided but has "
                                       "no recv");
    wex__error_clear();
    for (size_t i = 0; i < job->op_count && st == WEX_OK; i++)
        st = wex__recv_op(job, i);
    if (st == WEX_OK)
        st = job->transport.ops->flush(job->transport.ctx);
    if (st != WEX_OK && wex__last_error()[0] == '\0')
        wex__error(st, "receiving failed without a message");
    return st;
}
