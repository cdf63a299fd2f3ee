/* Each fp8 block's amax, before a step quantizes any of it: this
 * source's own, over all its operations (an operation's twins, which
 * read the same floats, take its amaxes instead of reading them again),
 * then agreed with the sources that hold the rest of a shared block
 * (transforms.h). */
#include "transforms.h"

#include <stdio.h>
#include <stdlib.h>

#include <wex/bytes.h>

#include "error.h"
#include "numbers.h"
#include "quantize.h"
#include "row_walk.h"
#include "step_failure.h"
#include "transforms_internal.h"

#define RECORD_BYTES 36u /* dst, piece, br, bc (u64 each), amax bits (u32) */

static int key_cmp(const qslot *a, const qslot *b)
{
    if (a->dst != b->dst)
        return a->dst < b->dst ? -1 : 1;
    if (a->piece != b->piece)
        return a->piece < b->piece ? -1 : 1;
    if (a->br != b->br)
        return a->br < b->br ? -1 : 1;
    if (a->bc != b->bc)
        return a->bc < b->bc ? -1 : 1;
    return 0;
}

static qslot *find_slot(struct wex__quant_state *q, const qslot *key)
{
    size_t lo = 0, hi = q->nslots;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = key_cmp(&q->slots[mid], key);
        if (c == 0)
            return &q->slots[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- amax ------------------------------------------------------------- */

static wex_status agree(wex_job *job, const char *prefix, double timeout)
{
    struct wex__quant_state *q = job->src.quant;
    unsigned char *mine;
    size_t n = 0;
    char key[160];
    wex_status st;

    for (size_t s = 0; s < q->nslots; s++)
        n += q->slots[s].npartners > 0;
    mine = malloc(n * RECORD_BYTES + 1);
    if (mine == NULL)
        return wex__error(WEX_ERR_NOMEM, "job: out of memory");
    n = 0;
    for (size_t s = 0; s < q->nslots; s++) {
        const qslot *sl = &q->slots[s];
        unsigned char *r = mine + n * RECORD_BYTES;
        if (sl->npartners == 0)
            continue;
        wex_put_le(r, sl->dst, 8);
        wex_put_le(r + 8, sl->piece, 8);
        wex_put_le(r + 16, sl->br, 8);
        wex_put_le(r + 24, sl->bc, 8);
        wex_put_le(r + 32, wex__f32_bits(sl->amax), 4);
        n++;
    }
    snprintf(key, sizeof(key), "%s%llu", prefix, (unsigned long long)job->rank);
    st = wex__store_set(job->rendezvous.store, key, mine, n * RECORD_BYTES);
    free(mine);
    for (size_t p = 0; st == WEX_OK && p < q->nreaders; p++) {
        unsigned char *theirs = NULL;
        size_t len = 0;
        const char *failed = NULL;

        snprintf(key, sizeof(key), "%s%llu", prefix,
                 (unsigned long long)q->readers[p]);
        st = wex__store_get(job->rendezvous.store, key, timeout,
                            (void **)&theirs, &len);
        if (st == WEX_OK &&
            (failed = wex__step_failure_reason(theirs, len, RECORD_BYTES)))
            st = wex__error(WEX_ERR_PEER, "source rank %llu failed: %s",
                            (unsigned long long)q->readers[p], failed);
        if (st != WEX_OK) {
            free(theirs);
            st = wex__error_prefix(st,
                                   "the block amaxes of source rank %llu "
                                   "(they share fp8 blocks with this one)",
                                   (unsigned long long)q->readers[p]);
            break;
        }
        for (size_t at = 0; at + RECORD_BYTES <= len; at += RECORD_BYTES) {
            const unsigned char *r = theirs + at;
            qslot k = {wex_get_le(r, 8),
                       wex_get_le(r + 8, 8),
                       wex_get_le(r + 16, 8),
                       wex_get_le(r + 24, 8),
                       0,
                       0,
                       0};
            qslot *hit = find_slot(q, &k);
            if (hit != NULL)
                hit->amax = wex__amax_max(
                    hit->amax,
                    wex__f32_of_bits((uint32_t)wex_get_le(r + 32, 4)));
        }
        free(theirs);
    }
    return st;
}

/* Tells the sources that share blocks with this one that its amaxes
 * will not come, so none waits out its timeout for them. */
static void amax_failed(wex_job *job, const char *prefix)
{
    char key[160], value[WEX__ERROR_MAX + 2];
    size_t n = wex__step_failure(value, wex__last_error(), RECORD_BYTES);

    snprintf(key, sizeof(key), "%s%llu", prefix, (unsigned long long)job->rank);
    wex__store_set(job->rendezvous.store, key, value, n);
}

/* Folds operation `from`'s own block amaxes into operation i's slots
 * (the same blocks: from is i, or the twin i reads the same floats as). */
static void fold(struct wex__quant_state *q, size_t i, size_t from)
{
    size_t n = q->op_blocks[i];

    for (size_t k = 0; k < n; k++) {
        qslot *sl = &q->slots[q->grid[q->op_grid[i] + k]];
        sl->amax = wex__amax_max(sl->amax, q->own[q->op_grid[from] + k]);
    }
}

/* Operation i's own amax of each of its blocks, read from host memory. */
static void own_amax(wex_job *job, size_t i)
{
    struct wex__quant_state *q = job->src.quant;
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *t = &job->layout->tensors[o->src_tensor];
    const unsigned char *base = job->bind[o->src_tensor].address;
    uint64_t esize = wex_dtype_size(t->dtype), b0[2], b1[2], nbc;
    float *own = q->own + q->op_grid[i];
    wex__rows w;

    wex__op_blocks(o, b0, b1);
    nbc = b1[1] - b0[1];
    for (size_t k = 0; k < q->op_blocks[i]; k++)
        own[k] = 0.0f;
    for (wex__rows_init(&w, o); w.left > 0; w.left--, wex__rows_next(&w)) {
        uint64_t e =
            wex__element_at(t->shape, t->ndim, o->src_off, o->ndim, w.idx);
        uint64_t br = (o->canon_off[0] + w.idx[0]) / WEX__QUANT_BLOCK;
        uint64_t col = o->canon_off[1];
        uint64_t done = 0;
        while (done < w.width) {
            uint64_t bc = (col + done) / WEX__QUANT_BLOCK;
            uint64_t n = (bc + 1) * WEX__QUANT_BLOCK - (col + done);
            float *a = &own[(br - b0[0]) * nbc + (bc - b0[1])];
            if (n > w.width - done)
                n = w.width - done;
            *a = wex__amax(t->dtype, base + (e + done) * esize, n, *a);
            done += n;
        }
    }
}

wex_status wex__transforms_amax(wex_job *job, const char *prefix,
                                double timeout)
{
    struct wex__quant_state *q = job->src.quant;

    if (q == NULL || q->nslots == 0)
        return WEX_OK;
    for (size_t s = 0; s < q->nslots; s++)
        q->slots[s].amax = 0.0f;
    for (size_t i = 0; i < job->op_count; i++) {
        if (job->ops[i].transform != WEX__OP_QUANTIZE)
            continue;
        if (wex__on_device(job, job->ops[i].src_tensor)) {
            wex_status st = wex__transforms_amax_device(job, i);
            if (st != WEX_OK && q->nreaders > 0)
                amax_failed(job, prefix);
            if (st != WEX_OK)
                return st;
            continue;
        }
        /* a leader comes before its twins, in plan order */
        if (q->leader[i] == i)
            own_amax(job, i);
        fold(q, i, q->leader[i]);
    }
    return q->nreaders > 0 ? agree(job, prefix, timeout) : WEX_OK;
}
