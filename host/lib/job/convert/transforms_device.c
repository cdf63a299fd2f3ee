/* Quantizing a CUDA source on its GPU (transforms_internal.h): the amaxes
 * and the fp8 bytes are computed by the kernels of libwex_cuda.so, and
 * only the bytes the destination holds (one per element) cross to the
 * host, through the job's pinned staging, before they are put. The
 * multipliers are the host's, from the agreed amaxes, as on the CPU
 * path: both paths put the same bytes (docs/gpu.md). */
#include <stdlib.h>

#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "numbers.h"
#include "transforms_internal.h"

/* Where operation i's box starts in device memory, its row pitch in
 * elements, and where its first element lies in its 128 x 128 block. A
 * quantizing operation's box is 2-D, over its tensor's last two
 * dimensions. */
static wex_status device_box(wex_job *job, size_t i, const unsigned char **src,
                             uint64_t *ld, uint32_t phase[2])
{
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *t = &job->layout->tensors[o->src_tensor];
    const uint64_t origin[2] = {0, 0};

    if (o->ndim != 2 || t->ndim < 2)
        return wex__error(WEX_ERR_INTERNAL,
                          "job: operation %zu quantizes "
                          "a %u-D box of %s",
                          i, o->ndim, t->name);
    *src = (const unsigned char *)job->bind[o->src_tensor].address +
           wex__element_at(t->shape, t->ndim, o->src_off, 2, origin) *
               wex_dtype_size(t->dtype);
    *ld = t->shape[t->ndim - 1];
    phase[0] = (uint32_t)(o->canon_off[0] % WEX__QUANT_BLOCK);
    phase[1] = (uint32_t)(o->canon_off[1] % WEX__QUANT_BLOCK);
    return WEX_OK;
}

static void op_cells(const wex__op *o, uint64_t *rows, uint64_t *cols)
{
    uint64_t b0[2], b1[2];

    wex__op_blocks(o, b0, b1);
    *rows = b1[0] - b0[0];
    *cols = b1[1] - b0[1];
}

wex_status wex__transforms_amax_device(wex_job *job, size_t i)
{
    const wex__op *o = &job->ops[i];
    const unsigned char *src;
    uint64_t ld, nbr, nbc;
    uint32_t phase[2];
    float *cells;
    wex_status st = device_box(job, i, &src, &ld, phase);

    if (st != WEX_OK)
        return st;
    op_cells(o, &nbr, &nbc);
    if ((cells = malloc(nbr * nbc * sizeof(*cells))) == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    st = wex__device_box_amax(
        job->device, src, job->layout->tensors[o->src_tensor].dtype, ld,
        o->extent[0], o->extent[1], phase[0], phase[1], cells);
    /* the larger |amax| as bits, NaN kept: as wex__amax folds */
    for (uint64_t r = 0; st == WEX_OK && r < nbr; r++)
        for (uint64_t c = 0; c < nbc; c++) {
            qslot *sl = wex__op_slot(job, i, r, c);
            uint32_t a = wex__f32_bits(cells[r * nbc + c]) & 0x7fffffffu;
            uint32_t m = wex__f32_bits(sl->amax) & 0x7fffffffu;
            sl->amax = wex__f32_of_bits(a > m ? a : m);
        }
    free(cells);
    if (st != WEX_OK)
        return wex__error_prefix(st, "local tensor %s",
                                 job->layout->tensors[o->src_tensor].name);
    return WEX_OK;
}

/* `n` quantized rows from box row `first`, `width` bytes each, staged at
 * `host`: rows that follow each other at the destination leave as one
 * put. */
static wex_status put_quantized(wex_job *job, size_t i, uint64_t first,
                                uint64_t n, uint64_t width,
                                const unsigned char *host, wex__digest *h)
{
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *dt =
        &job->theirs->layouts[o->dst_rank].tensors[o->dst_tensor];
    uint64_t start = 0, start_off = 0;
    wex_status st = WEX_OK;

    for (uint64_t k = 0; k <= n && st == WEX_OK; k++) {
        uint64_t idx[2] = {first + k, 0}, off = 0;
        if (k < n)
            off = wex__element_at(dt->shape, dt->ndim, o->dst_off, 2, idx) *
                  o->dtype_size;
        if (k == 0) {
            start_off = off;
            continue;
        }
        if (k < n && off == start_off + (k - start) * width &&
            wex__merge_rows(job))
            continue;
        st = job->transport.ops->put(job->transport.ctx, job->src.op_peer[i],
                                     start_off, host + start * width,
                                     (k - start) * width);
        job->src.puts++;
        start = k;
        start_off = off;
    }
    if (st == WEX_OK && h != NULL)
        wex__digest_add(h, host, n * width);
    return st;
}

wex_status wex__transforms_put_device(wex_job *job, size_t i, wex__digest *h)
{
    const wex__op *o = &job->ops[i];
    uint32_t dtype = job->layout->tensors[o->src_tensor].dtype, phase[2];
    uint64_t ld, nbr, nbc, rows = o->extent[0], cols = o->extent[1];
    uint64_t width = cols * o->dtype_size, per = 0, first = 0;
    const unsigned char *src;
    float *mult;
    wex_status st = device_box(job, i, &src, &ld, phase);

    if (st != WEX_OK)
        return st;
    per = width ? WEX__STAGING_BYTES / width : 0;
    if (per == 0)
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "local tensor %s: a row of "
                          "%llu fp8 bytes does not fit the %llu bytes of "
                          "staging",
                          job->layout->tensors[o->src_tensor].name,
                          (unsigned long long)width,
                          (unsigned long long)WEX__STAGING_BYTES);
    op_cells(o, &nbr, &nbc);
    if ((mult = malloc(nbr * nbc * sizeof(*mult))) == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    for (uint64_t r = 0; r < nbr; r++)
        for (uint64_t c = 0; c < nbc; c++)
            mult[r * nbc + c] =
                wex__quant_mult(wex__op_slot(job, i, r, c)->amax);
    while (st == WEX_OK && first < rows) {
        uint64_t n = rows - first < per ? rows - first : per;
        const void *host = NULL;
        st = wex__device_box_quantize_rows(job->device, src, dtype, ld, cols,
                                           phase[0], phase[1], mult, nbc, first,
                                           n, &host);
        if (st == WEX_OK && host == NULL) {
            /* staging is full: what was put from it must land first */
            st = job->transport.ops->flush(job->transport.ctx);
            wex__device_stage_reset(job->device);
            continue;
        }
        if (st == WEX_OK)
            st = put_quantized(job, i, first, n, width, host, h);
        first += n;
    }
    free(mult);
    return st;
}

wex_status wex__transforms_stage_row(wex_job *job, size_t i,
                                     const uint64_t *idx, uint64_t width,
                                     const unsigned char **host_p)
{
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *t = &job->layout->tensors[o->src_tensor];
    uint64_t esize = wex_dtype_size(t->dtype);
    const unsigned char *src =
        (const unsigned char *)job->bind[o->src_tensor].address +
        wex__element_at(t->shape, t->ndim, o->src_off, o->ndim, idx) * esize;
    const void *host = NULL;
    wex_status st =
        wex__device_stage_out(job->device, src, width * esize, &host);

    if (st == WEX_OK && host == NULL) {
        /* staging is full: what was put from it must land first */
        st = job->transport.ops->flush(job->transport.ctx);
        wex__device_stage_reset(job->device);
        if (st == WEX_OK)
            st = wex__device_stage_out(job->device, src, width * esize, &host);
        if (st == WEX_OK && host == NULL)
            st = wex__error(WEX_ERR_UNSUPPORTED,
                            "local tensor %s: a row of "
                            "%llu bytes does not fit the staging",
                            t->name, (unsigned long long)(width * esize));
    }
    *host_p = host;
    return st;
}

int wex__transforms_dequantize_from(const wex_job *job, uint64_t tensor)
{
    for (size_t i = 0; i < job->op_count; i++)
        if (job->ops[i].transform == WEX__OP_DEQUANTIZE &&
            (job->ops[i].src_tensor == tensor ||
             job->ops[i].scale_tensor == tensor))
            return 1;
    return 0;
}
