/* The groups of a source whose tensors are CUDA memory (delta_encode.h):
 * encoded on the device against snapshots there where libwex_cuda.so's
 * kernels are, else read through pinned staging and encoded on the CPU. */
#include <stdint.h>

#include "box_runs.h"
#include "delta_chunks.h"
#include "delta_encode.h"
#include "delta_move.h"
#include "device_memory.h"
#include "error.h"
#include "job.h"
#include "log.h"

/* Stages `rows` runs of `width` bytes lying `pitch` apart in device
 * memory at `src` into pinned host staging (one strided copy) and feeds
 * them; the staging is free again after (a try's encoding comes before
 * any of its puts use it). */
static wex_status feed_device(wex_job *job, wex__delta_enc *e,
                              const uint8_t *src, uint64_t pitch,
                              uint64_t width, uint64_t rows, uint8_t **snap,
                              wex__digest *h)
{
    const void *host = NULL;
    wex_status st;

    wex__device_stage_reset(job->device);
    st = wex__device_stage_rows(job->device, src, pitch, width, rows, &host);
    if (st == WEX_OK && host == NULL)
        return wex__error(WEX_ERR_INTERNAL,
                          "job: %llu bytes do not fit the empty staging",
                          (unsigned long long)(width * rows));
    if (st == WEX_OK) {
        wex__delta_feed(e, host, *snap, width * rows, h);
        *snap += width * rows;
    }
    wex__device_stage_reset(job->device);
    return st;
}

/* A copying group whose source tensor is CUDA memory, its runs read
 * through pinned staging, those a fixed pitch apart (the rows of a
 * row-parallel split) as many at a time as staging holds, a run longer
 * than staging a part at a time, and fed to the encoder `e` against the
 * host snapshot. */
static wex_status stage_runs(wex_job *job, wex__delta_group *g,
                             wex__delta_enc *e, wex__digest *h)
{
    const wex__op *o = &job->ops[g->first_op];
    const uint8_t *base = job->bind[o->src_tensor].address;
    uint8_t *snap = job->src.delta.snapshots + g->snap_off;
    uint64_t a, b, first = 0, rows = 0, pitch;
    wex_status st = WEX_OK;
    wex__box_runs w;
    int more;

    wex__op_runs(job, o, &w);
    pitch = w.outer ? w.a_stride[w.outer - 1] : w.run_bytes;
    more = wex__box_runs_next(&w, &a, &b);
    while (st == WEX_OK && w.run_bytes > WEX__STAGING_BYTES && more) {
        for (uint64_t at = 0; st == WEX_OK && at < w.run_bytes;
             at += WEX__STAGING_BYTES) {
            uint64_t n = w.run_bytes - at < WEX__STAGING_BYTES
                             ? w.run_bytes - at
                             : WEX__STAGING_BYTES;
            st = feed_device(job, e, base + a + at, n, n, 1, &snap, h);
        }
        more = wex__box_runs_next(&w, &a, &b);
    }
    while (st == WEX_OK && (more || rows > 0)) {
        if (more &&
            (rows == 0 || (a == first + rows * pitch &&
                           (rows + 1) * w.run_bytes <= WEX__STAGING_BYTES))) {
            if (rows == 0)
                first = a;
            rows++;
            more = wex__box_runs_next(&w, &a, &b);
            continue;
        }
        st = feed_device(job, e, base + first, pitch, w.run_bytes, rows, &snap,
                         h);
        rows = 0;
    }
    return st;
}

/* ... encoded on the CPU, the snapshot in host memory: where the kernels
 * of libwex_cuda.so are not. */
wex_status wex__delta_encode_staged(wex_job *job, wex__delta_group *g,
                                    wex__digest *h)
{
    wex__delta_enc *e = &job->src.delta.encs[0];
    wex_status st;

    wex__delta_encode_start(job, e, g, h);
    st = stage_runs(job, g, e, h);
    wex__delta_encode_end(job, e, g, h);
    if (st != WEX_OK)
        g->payload_len = -1;
    return st;
}

/* ... encoded on the device against its snapshot there
 * (delta_scan_chunks.h), which then holds the current bytes' stream, and
 * with digests, that digested there too (digest_blocks.h): only the
 * payload and the blocks' digests cross the bus. */
wex_status wex__delta_encode_on_device(wex_job *job, wex__delta_group *g,
                                       wex__digest *h)
{
    wex__job_source_delta *d = &job->src.delta;
    const wex__op *o = &job->ops[g->first_op];
    uint64_t changed = 0, elems = o->bytes / o->dtype_size, digest = 0;
    int64_t len = -1;
    wex_delta_map map;
    wex__box_runs w;
    wex_status st;

    wex__op_runs(job, o, &w);
    if (wex__delta_source_map_of(&w, &map) != 0)
        st = wex__error(WEX_ERR_UNSUPPORTED,
                        "job: a box of more than %d outer dims on the device",
                        WEX_DELTA_MAP_DIMS);
    else
        st = wex__device_delta_encode(
            job->device, job->bind[o->src_tensor].address, &map,
            d->dev_snapshots + g->snap_off, elems, d->outbox + g->out_off,
            g->out_cap, &len, &changed);
    if (st == WEX_OK && h != NULL)
        st = wex__device_digest(job->device, d->dev_snapshots + g->snap_off,
                                o->bytes, &digest);
    wex__delta_settle(job, g, h != NULL, digest, st == WEX_OK ? len : -1,
                      changed, elems);
    return st;
}

wex_status wex__delta_device_snapshots(wex_job *job)
{
    wex__job_source_delta *d = &job->src.delta;
    int cuda = 0;

    if (job->device == NULL || !wex__delta_transport_carries(job))
        return WEX_OK;
    for (size_t k = 0; k < d->group_count && !cuda; k++) {
        const wex__op *o = &job->ops[d->groups[k].first_op];
        cuda = job->memory_kind[o->src_tensor] != WEX_MEMORY_HOST &&
               o->transform == WEX__OP_COPY;
    }
    if (!cuda || job->plan.job->delta_host_snapshots)
        return WEX_OK;
    if (!wex__device_kernels_ready(job->device) ||
        wex__device_alloc(job->device, d->snapshot_bytes,
                          (void **)&d->dev_snapshots) != WEX_OK) {
        WEX__INFO("source rank %llu: the deltas of its CUDA tensors are "
                  "encoded on the CPU, read through staging, their snapshots "
                  "in host memory: %s",
                  (unsigned long long)job->rank, wex__last_error());
        wex__error_clear();
        d->dev_snapshots = NULL;
    }
    return WEX_OK;
}
