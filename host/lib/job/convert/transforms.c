#include "transforms.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <wex/bytes.h>

#include "delta_groups.h"
#include "device_memory.h"
#include "digest_update.h"
#include "error.h"
#include "log.h"
#include "numbers.h"
#include "quantize.h"
#include "quantize_plan.h"
#include "row_walk.h"
#include "step_failure.h"
#include "transforms_internal.h"

static int quantizing(const wex__op *o)
{
    return o->transform == WEX__OP_QUANTIZE || o->transform == WEX__OP_SCALE;
}

void wex__transforms_free(wex_job *job)
{
    struct wex__quant_state *q = job->src.quant;

    if (q == NULL)
        return;
    free(q->slots);
    free(q->partner_ranks);
    free(q->readers);
    free(q->op_grid);
    free(q->op_blocks);
    free(q->grid);
    free(q->own);
    free(q->leader);
    free(q->order);
    free(q->made);
    free(q->made_gen);
    if (q->arena_pinned)
        wex__device_free_pinned(job->device, q->arena);
    else
        free(q->arena);
    free(q);
    job->src.quant = NULL;
}

static int add_u64(uint64_t **list, size_t *n, uint64_t v)
{
    uint64_t *grown;

    for (size_t i = 0; i < *n; i++)
        if ((*list)[i] == v)
            return 0;
    grown = realloc(*list, (*n + 1) * sizeof(**list));
    if (grown == NULL)
        return -1;
    *list = grown;
    (*list)[(*n)++] = v;
    return 0;
}

/* Which other sources write part of each block of the piece whose slots
 * are slots[first..end) (one destination piece this rank quantizes). */
static wex_status find_partners(wex_job *job, size_t first, size_t end,
                                const uint64_t *dead, uint64_t ndead)
{
    struct wex__quant_state *q = job->src.quant;
    wex__qcell *cells = NULL;
    size_t n = 0;
    wex_status st =
        wex__quantize_cells(&job->plan, q->slots[first].dst,
                            q->slots[first].piece, dead, ndead, &cells, &n);

    for (size_t s = first; st == WEX_OK && s < end; s++) {
        qslot *sl = &q->slots[s];
        uint64_t lo[2] = {sl->br * WEX__QUANT_BLOCK, sl->bc * WEX__QUANT_BLOCK};
        sl->partners = (uint32_t)q->npartner_ranks;
        for (size_t c = 0; c < n; c++) {
            const wex__qcell *cell = &cells[c];
            int meets = cell->src_rank != job->rank;
            for (int k = 0; k < 2 && meets; k++)
                meets = cell->lo[k] < lo[k] + WEX__QUANT_BLOCK &&
                        cell->hi[k] > lo[k];
            if (!meets)
                continue;
            /* once per slot */
            int seen = 0;
            for (uint32_t p = 0; p < sl->npartners && !seen; p++)
                seen = q->partner_ranks[sl->partners + p] == cell->src_rank;
            if (seen)
                continue;
            if (q->npartner_ranks == q->partner_cap) {
                size_t cap = q->partner_cap ? 2 * q->partner_cap : 64;
                uint64_t *grown =
                    realloc(q->partner_ranks, cap * sizeof(*grown));
                if (grown == NULL) {
                    st = wex__error(WEX_ERR_NOMEM, "job: out of memory");
                    break;
                }
                q->partner_ranks = grown;
                q->partner_cap = cap;
            }
            if (add_u64(&q->readers, &q->nreaders, cell->src_rank) != 0) {
                st = wex__error(WEX_ERR_NOMEM, "job: out of memory");
                break;
            }
            q->partner_ranks[q->npartner_ranks++] = cell->src_rank;
            sl->npartners++;
        }
    }
    free(cells);
    return st;
}

/* Quantizing operations' indices, by (destination, piece) then plan
 * order (qsort_r over the job's operations). */
static int by_piece(const void *a, const void *b, void *ops)
{
    const wex__op *x = &((const wex__op *)ops)[*(const size_t *)a];
    const wex__op *y = &((const wex__op *)ops)[*(const size_t *)b];

    if (x->dst_rank != y->dst_rank)
        return x->dst_rank < y->dst_rank ? -1 : 1;
    if (x->dst_piece != y->dst_piece)
        return x->dst_piece < y->dst_piece ? -1 : 1;
    return *(const size_t *)a < *(const size_t *)b ? -1 : 1;
}

/* The slots of one destination piece: every block the operations
 * idx[0..n) touch, in (row, column) order after the slots before, and
 * each operation's blocks in the grid. A dense map over the blocks the
 * operations span finds each block's slot, where sorting every block of
 * every operation used to (Kimi-K2's sources: 0.4-1.4 s at open). */
static wex_status piece_slots(wex_job *job, const size_t *idx, size_t n,
                              size_t **map, size_t *map_cap)
{
    struct wex__quant_state *q = job->src.quant;
    const wex__op *first = &job->ops[idx[0]];
    uint64_t lo[2] = {UINT64_MAX, UINT64_MAX}, hi[2] = {0, 0}, w, cells;

    for (size_t k = 0; k < n; k++) {
        uint64_t b0[2], b1[2];
        wex__op_blocks(&job->ops[idx[k]], b0, b1);
        for (int d = 0; d < 2; d++) {
            lo[d] = b0[d] < lo[d] ? b0[d] : lo[d];
            hi[d] = b1[d] > hi[d] ? b1[d] : hi[d];
        }
    }
    w = hi[1] - lo[1];
    cells = (hi[0] - lo[0]) * w;
    if (cells > *map_cap) {
        size_t *grown = realloc(*map, cells * sizeof(*grown));
        if (grown == NULL)
            return wex__error(WEX_ERR_NOMEM, "job: out of memory");
        *map = grown;
        *map_cap = cells;
    }
    for (uint64_t c = 0; c < cells; c++)
        (*map)[c] = SIZE_MAX;
    for (size_t k = 0; k < n; k++) {
        uint64_t b0[2], b1[2];
        wex__op_blocks(&job->ops[idx[k]], b0, b1);
        for (uint64_t r = b0[0]; r < b1[0]; r++)
            for (uint64_t c = b0[1]; c < b1[1]; c++)
                (*map)[(r - lo[0]) * w + (c - lo[1])] = 0;
    }
    for (uint64_t c = 0; c < cells; c++) {
        qslot *sl;
        if ((*map)[c] == SIZE_MAX)
            continue;
        (*map)[c] = q->nslots;
        sl = &q->slots[q->nslots++];
        memset(sl, 0, sizeof(*sl));
        sl->dst = first->dst_rank;
        sl->piece = first->dst_piece;
        sl->br = lo[0] + c / w;
        sl->bc = lo[1] + c % w;
    }
    for (size_t k = 0; k < n; k++) {
        size_t at = q->op_grid[idx[k]];
        uint64_t b0[2], b1[2];
        wex__op_blocks(&job->ops[idx[k]], b0, b1);
        for (uint64_t r = b0[0]; r < b1[0]; r++)
            for (uint64_t c = b0[1]; c < b1[1]; c++)
                q->grid[at++] = (*map)[(r - lo[0]) * w + (c - lo[1])];
    }
    return WEX_OK;
}

wex_status wex__transforms_prepare(wex_job *job, const uint64_t *dead,
                                   uint64_t ndead)
{
    struct wex__quant_state *q;
    size_t nkeys = 0, k = 0, nq = 0, map_cap = 0, *idx, *map = NULL;
    wex_status st = WEX_OK;

    wex__transforms_free(job);
    if (job->side != WEX_SIDE_SOURCE)
        return WEX_OK;
    for (size_t i = 0; i < job->op_count; i++) {
        uint64_t b0[2], b1[2];
        if (job->ops[i].transform == WEX__OP_COPY)
            continue;
        if (quantizing(&job->ops[i])) {
            wex__op_blocks(&job->ops[i], b0, b1);
            nkeys += (b1[0] - b0[0]) * (b1[1] - b0[1]);
            nq++;
        }
        k++;
    }
    if (k == 0)
        return WEX_OK;
    q = job->src.quant = calloc(1, sizeof(*q));
    idx = malloc((nq ? nq : 1) * sizeof(*idx));
    if (q == NULL || idx == NULL ||
        (q->slots = malloc((nkeys ? nkeys : 1) * sizeof(*q->slots))) == NULL ||
        (q->op_grid = calloc(job->op_count, sizeof(*q->op_grid))) == NULL ||
        (q->op_blocks = calloc(job->op_count, sizeof(*q->op_blocks))) == NULL ||
        (q->own = malloc((nkeys ? nkeys : 1) * sizeof(*q->own))) == NULL ||
        (q->grid = malloc((nkeys ? nkeys : 1) * sizeof(*q->grid))) == NULL) {
        free(idx);
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    }
    /* each operation's blocks, in plan order, in the grid */
    nq = 0;
    nkeys = 0;
    for (size_t i = 0; i < job->op_count; i++) {
        uint64_t b0[2], b1[2];
        if (!quantizing(&job->ops[i]))
            continue;
        wex__op_blocks(&job->ops[i], b0, b1);
        q->op_grid[i] = nkeys;
        q->op_blocks[i] = (b1[0] - b0[0]) * (b1[1] - b0[1]);
        nkeys += q->op_blocks[i];
        idx[nq++] = i;
    }
    qsort_r(idx, nq, sizeof(*idx), by_piece, job->ops);
    /* slots piece by piece: sorted by key, as find_slot needs; then the
     * partners of every (destination, piece) quantized here */
    for (size_t g = 0, end; st == WEX_OK && g < nq; g = end) {
        size_t first_slot = q->nslots;
        for (end = g + 1;
             end < nq &&
             job->ops[idx[end]].dst_rank == job->ops[idx[g]].dst_rank &&
             job->ops[idx[end]].dst_piece == job->ops[idx[g]].dst_piece;
             end++)
            ;
        st = piece_slots(job, idx + g, end - g, &map, &map_cap);
        if (st == WEX_OK)
            st = find_partners(job, first_slot, q->nslots, dead, ndead);
    }
    free(map);
    free(idx);
    return st == WEX_OK ? wex__twins_prepare(job) : st;
}

/* ---- making and putting ---------------------------------------------------- */

/* Room for `bytes` more in the arena: flushes what was put from it
 * first when it is full. */
static wex_status arena_take(wex_job *job, uint64_t bytes, unsigned char **p)
{
    struct wex__quant_state *q = job->src.quant;
    wex_status st;

    if (q->arena == NULL) {
        /* what it makes is put from there: pinned where the transport
         * moves device memory only */
        q->arena_pinned =
            job->device != NULL &&
            !(job->transport.ops->caps & WEX_TRANSPORT_CAP_HOST_MEMORY);
        st = q->arena_pinned
                 ? wex__device_alloc_pinned(job->device, WEX__STAGING_BYTES,
                                            (void **)&q->arena)
             : (q->arena = malloc(WEX__STAGING_BYTES)) == NULL
                 ? wex__error(WEX_ERR_NOMEM, "job: out of memory for staging")
                 : WEX_OK;
        if (st != WEX_OK) {
            q->arena = NULL;
            return st;
        }
    }
    if (q->arena_used + bytes > WEX__STAGING_BYTES) {
        st = job->transport.ops->flush(job->transport.ctx);
        if (st != WEX_OK)
            return st;
        q->arena_used = 0;
        q->gen++; /* what twins' bytes lay there is overwritten */
    }
    *p = q->arena + q->arena_used;
    q->arena_used += bytes;
    return WEX_OK;
}

/* One row's destination bytes, made from the source (from `staged`, the
 * row's source bytes copied to the host, where it is not NULL). */
static void make_row(wex_job *job, size_t i, const wex__rows *w,
                     unsigned char *out, const unsigned char *staged)
{
    const wex__op *o = &job->ops[i];
    struct wex__quant_state *q = job->src.quant;
    const wex__local_tensor *t = &job->layout->tensors[o->src_tensor];
    const unsigned char *base = job->bind[o->src_tensor].address;
    uint32_t sdt = t->dtype;
    uint32_t ddt =
        job->theirs->layouts[o->dst_rank].tensors[o->dst_tensor].dtype;
    uint64_t esize = wex_dtype_size(sdt), b0[2], b1[2], done = 0, col;

    if (o->transform == WEX__OP_SCALE) {
        float *f = (float *)out;
        wex__op_blocks(o, b0, b1);
        for (uint64_t j = 0; j < w->width; j++)
            f[j] = wex__quant_scale_inv(
                q->slots[q->grid[q->op_grid[i] + w->idx[0] * (b1[1] - b0[1]) +
                                 j]]
                    .amax);
        return;
    }
    base +=
        wex__element_at(t->shape, t->ndim, o->src_off, o->ndim, w->idx) * esize;
    if (staged != NULL)
        base = staged;
    if (o->transform == WEX__OP_CONVERT) {
        wex__convert_floats(sdt, base, w->width, ddt, out);
        return;
    }
    col = o->canon_off[1];
    if (o->transform == WEX__OP_QUANTIZE) {
        uint64_t br = (o->canon_off[0] + w->idx[0]) / WEX__QUANT_BLOCK;
        wex__op_blocks(o, b0, b1);
        while (done < w->width) {
            uint64_t bc = (col + done) / WEX__QUANT_BLOCK;
            uint64_t n = (bc + 1) * WEX__QUANT_BLOCK - (col + done);
            const qslot *sl;
            if (n > w->width - done)
                n = w->width - done;
            sl = &q->slots[q->grid[q->op_grid[i] +
                                   (br - b0[0]) * (b1[1] - b0[1]) +
                                   (bc - b0[1])]];
            wex__quantize_e4m3(sdt, base + done * esize, n,
                               wex__quant_mult(sl->amax), out + done);
            done += n;
        }
        return;
    }
    /* DEQUANTIZE: each block by its scale_inv, from the source's scales */
    {
        const wex__local_tensor *st = &job->layout->tensors[o->scale_tensor];
        const float *scales = job->bind[o->scale_tensor].address;
        uint64_t br = (o->canon_off[0] + w->idx[0]) / WEX__QUANT_BLOCK;
        uint32_t dsize = wex_dtype_size(ddt);
        while (done < w->width) {
            uint64_t bc = (col + done) / WEX__QUANT_BLOCK;
            uint64_t n = (bc + 1) * WEX__QUANT_BLOCK - (col + done);
            uint64_t at[WEX_MAX_DIMS], blk[2];
            if (n > w->width - done)
                n = w->width - done;
            memcpy(at, o->scale_at, sizeof(at));
            blk[0] = br - o->scale_block[0];
            blk[1] = bc - o->scale_block[1];
            wex__dequantize_e4m3(
                base + done, n,
                scales[wex__element_at(st->shape, st->ndim, at, 2, blk)], ddt,
                out + done * dsize);
            done += n;
        }
    }
}

/* Puts `len` bytes made for operation i to destination offset `at`. */
static wex_status put_span(wex_job *job, size_t i, uint64_t at,
                           const unsigned char *bytes, uint64_t len,
                           wex__digest *h)
{
    wex_status st = job->transport.ops->put(
        job->transport.ctx, job->src.op_peer[i], at, bytes, len);

    job->src.puts++;
    if (st == WEX_OK && h != NULL)
        wex__digest_add(h, bytes, len);
    return st;
}

/* Puts operation i's rows, made one after the other at `block`: rows
 * that follow each other at the destination as one put. */
static wex_status put_block(wex_job *job, size_t i, const unsigned char *block,
                            wex__digest *h)
{
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *dt =
        &job->theirs->layouts[o->dst_rank].tensors[o->dst_tensor];
    uint64_t row_bytes = o->extent[o->ndim - 1] * o->dtype_size;
    uint64_t at = 0, first = 0, start = 0, len = 0;
    wex_status st = WEX_OK;
    wex__rows w;

    for (wex__rows_init(&w, o); st == WEX_OK && w.left > 0;
         w.left--, wex__rows_next(&w), at += row_bytes) {
        uint64_t off =
            wex__element_at(dt->shape, dt->ndim, o->dst_off, o->ndim, w.idx) *
            o->dtype_size;
        if (len > 0 && off == start + len && wex__merge_rows(job)) {
            len += row_bytes;
            continue;
        }
        if (len > 0)
            st = put_span(job, i, start, block + first, len, h);
        start = off;
        first = at;
        len = row_bytes;
    }
    if (st == WEX_OK && len > 0)
        st = put_span(job, i, start, block + first, len, h);
    return st;
}

/* A delta of a QUANTIZE operation is encoded from its bytes made whole. */
_Static_assert(WEX__DELTA_MADE_MAX <= WEX__STAGING_BYTES,
               "a QUANTIZE operation that goes as a delta fits the arena");

wex_status wex__transforms_made(wex_job *job, size_t i,
                                const unsigned char **bytes_p)
{
    struct wex__quant_state *q = job->src.quant;
    const wex__op *o = &job->ops[i];
    size_t lead = q->leader[i];
    uint64_t row_bytes = o->extent[o->ndim - 1] * o->dtype_size, at = 0;
    unsigned char *out = NULL;
    wex_status st;
    wex__rows w;

    if (q->made_gen[lead] == q->gen) {
        if (q->made_op != i) /* not its own, made for its delta */
            q->reused_bytes += o->src_bytes;
        *bytes_p = q->made[lead];
        return WEX_OK;
    }
    if ((st = arena_take(job, o->bytes, &out)) != WEX_OK)
        return st;
    for (wex__rows_init(&w, o); w.left > 0;
         w.left--, wex__rows_next(&w), at += row_bytes)
        make_row(job, i, &w, out + at, NULL);
    q->made[lead] = out;
    q->made_gen[lead] = q->gen;
    q->made_op = i;
    q->made_bytes += o->src_bytes;
    *bytes_p = out;
    return WEX_OK;
}

/* A QUANTIZE operation on host memory that fits the arena: made whole
 * there once for it and its twins, and put from there. */
static wex_status put_quantized(wex_job *job, size_t i, wex__digest *h)
{
    const unsigned char *made = NULL;
    wex_status st = wex__transforms_made(job, i, &made);

    return st == WEX_OK ? put_block(job, i, made, h) : st;
}

wex_status wex__transforms_put(wex_job *job, size_t i, wex__digest *h)
{
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *dt =
        &job->theirs->layouts[o->dst_rank].tensors[o->dst_tensor];
    uint64_t row_bytes = o->extent[o->ndim - 1] * o->dtype_size;
    uint64_t group_off = 0, group_len = 0;
    unsigned char *group = NULL, *out = NULL;
    const unsigned char *staged = NULL;
    wex_status st = WEX_OK;
    wex__rows w;

    if (job->src.quant == NULL)
        return wex__error(WEX_ERR_INTERNAL,
                          "job: operation %zu converts "
                          "but nothing was prepared",
                          i);
    if (o->transform == WEX__OP_QUANTIZE && wex__on_device(job, o->src_tensor))
        return wex__transforms_put_device(job, i, h);
    if (o->transform == WEX__OP_QUANTIZE && o->bytes <= WEX__STAGING_BYTES)
        return put_quantized(job, i, h);
    if ((o->transform == WEX__OP_DEQUANTIZE &&
         wex__on_device(job, o->src_tensor)) ||
        (o->transform == WEX__OP_DEQUANTIZE &&
         wex__on_device(job, o->scale_tensor)))
        return wex__error(WEX_ERR_UNSUPPORTED,
                          "local tensor %s: %s on the "
                          "way is done on host memory only (on the device, "
                          "wex quantizes bf16, f16 and f32 into fp8)",
                          job->layout->tensors[o->src_tensor].name,
                          "dequantizing fp8");
    for (wex__rows_init(&w, o); st == WEX_OK && w.left > 0;
         w.left--, wex__rows_next(&w)) {
        uint64_t off =
            wex__element_at(dt->shape, dt->ndim, o->dst_off, o->ndim, w.idx) *
            o->dtype_size;
        /* consecutive rows that are consecutive in the destination go
         * out as one put */
        if (group != NULL && off == group_off + group_len &&
            wex__merge_rows(job) &&
            job->src.quant->arena_used + row_bytes <= WEX__STAGING_BYTES) {
            st = arena_take(job, row_bytes, &out);
        } else {
            if (group != NULL) {
                st = job->transport.ops->put(job->transport.ctx,
                                             job->src.op_peer[i], group_off,
                                             group, group_len);
                job->src.puts++;
                if (st == WEX_OK && h != NULL)
                    wex__digest_add(h, group, group_len);
                group = NULL;
            }
            if (st == WEX_OK)
                st = arena_take(job, row_bytes, &out);
            group = out;
            group_off = off;
            group_len = 0;
        }
        if (st == WEX_OK && o->transform == WEX__OP_CONVERT &&
            wex__on_device(job, o->src_tensor))
            st = wex__transforms_stage_row(job, i, w.idx, w.width, &staged);
        if (st != WEX_OK)
            break;
        make_row(job, i, &w, out, staged);
        group_len += row_bytes;
    }
    if (st == WEX_OK && group != NULL) {
        st = job->transport.ops->put(job->transport.ctx, job->src.op_peer[i],
                                     group_off, group, group_len);
        job->src.puts++;
        if (st == WEX_OK && h != NULL)
            wex__digest_add(h, group, group_len);
    }
    return st;
}

void wex__transforms_reset(wex_job *job)
{
    struct wex__quant_state *q = job->src.quant;

    if (q == NULL)
        return;
    if (q->made_bytes > 0)
        WEX__DEBUG("source rank %llu: quantized %llu bytes of floats; %llu "
                   "more were twins' (another destination replica's same "
                   "cell) and were not read again",
                   (unsigned long long)job->rank,
                   (unsigned long long)q->made_bytes,
                   (unsigned long long)q->reused_bytes);
    q->arena_used = 0;
    q->gen++;
    q->made_bytes = q->reused_bytes = 0;
}
