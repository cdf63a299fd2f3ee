/* Synthetic weights: a deterministic function of (canonical tensor,
 * element, step), written and checked through a rank's own layout.
 *
 * Sources write wex__synth_value in the dtype they hold each tensor in.
 * A destination that holds a tensor in another form than its sources
 * (converted, quantized, dequantized: plan.h's transforms) expects what
 * the rule of quantize.h makes of the sources' values, so every byte of
 * every transform is checked, not only copies. */
#include <stdlib.h>
#include <string.h>

#include "synth_weights.h"

#include "box_runs.h"
#include "numbers.h"
#include "quantize.h"
#include "synth_values.h"

wex_status wex__synth_prepare(wex_job *job)
{
    if (job->side == WEX_SIDE_DESTINATION)
        return wex__job_complete_plan(job);
    return wex__planner_load_models(&job->plan);
}

/* What a destination piece holds of what the sources hold. */
enum held {
    HELD_SAME,       /* the sources' values, as they are */
    HELD_CONVERTED,  /* in another float dtype */
    HELD_QUANTIZED,  /* e4m3 of the sources' floats, by block amax */
    HELD_SCALES,     /* the scale_inv of each block the sources' floats
                         were quantized by */
    HELD_DEQUANTIZED /* the sources' e4m3 times their scale_inv */
};

typedef struct expect {
    enum held how;
    uint32_t from;          /* the sources' dtype of the values */
    uint64_t weight;        /* the fp8 weight whose blocks count */
    uint64_t cols;          /* the weight's columns */
    uint64_t scale;         /* its scale tensor */
    uint64_t scale_cols;    /* blocks in a row of the weight */
    float *amax;            /* QUANTIZED, SCALES: per block of the piece */
    uint64_t br0, bc0, nbc; /* the grid's first block and its width */
} expect;

/* The dtype the source side holds canonical tensor `c` in, or
 * UINT32_MAX when no source holds it (a trainer holds no block scales). */
static uint32_t source_dtype(const wex__side *src, uint64_t c)
{
    for (uint64_t k = src->canon_start[c]; k < src->canon_start[c + 1]; k++) {
        const wex__piece_ref *r = &src->canon_refs[k];
        const wex__rank_layout *l = &src->layouts[r->rank];
        return l->tensors[l->pieces[r->piece].tensor].dtype;
    }
    return UINT32_MAX;
}

/* The amax of every block of the weight that rows [r0, r1) x cols
 * [c0, c1) (in blocks) cover, from the sources' values. */
static int block_grid(expect *x, const wex_model *m, uint64_t step,
                      uint64_t br0, uint64_t br1, uint64_t bc0, uint64_t bc1)
{
    const wex__tensor *w = &m->tensors[x->weight];

    x->br0 = br0;
    x->bc0 = bc0;
    x->nbc = bc1 - bc0;
    x->amax = malloc(((br1 - br0) * x->nbc + 1) * sizeof(float));
    if (x->amax == NULL)
        return -1;
    for (uint64_t r = br0; r < br1; r++)
        for (uint64_t c = bc0; c < bc1; c++)
            x->amax[(r - br0) * x->nbc + (c - bc0)] = wex__synth_block_amax(
                x->from, x->weight, w->shape[0], w->shape[1], r, c, step);
    return 0;
}

/* How a destination piece relates to its sources, and the block amaxes
 * it needs. -1: out of memory. */
static int expect_of(const wex_job *job, const wex__piece *p, uint32_t dtype,
                     uint64_t step, expect *x)
{
    const wex_model *m = job->mine->model;
    uint64_t c = (uint64_t)p->canonical;
    int64_t w;

    memset(x, 0, sizeof(*x));
    x->from = dtype;
    if (job->side != WEX_SIDE_DESTINATION)
        return 0;
    x->from = source_dtype(job->theirs, c);
    if ((w = wex__weight_of_scale(m, c)) >= 0 && x->from == UINT32_MAX) {
        /* scales of a weight the sources hold as floats */
        x->how = HELD_SCALES;
        x->weight = (uint64_t)w;
        x->from = source_dtype(job->theirs, x->weight);
        x->cols = m->tensors[w].shape[1];
        return block_grid(x, m, step, p->offset[0], p->offset[0] + p->extent[0],
                          p->offset[1], p->offset[1] + p->extent[1]);
    }
    if (x->from == dtype || x->from == UINT32_MAX) {
        x->how = HELD_SAME;
        x->from = dtype;
        return 0;
    }
    x->weight = c;
    x->cols = m->tensors[c].shape[m->tensors[c].ndim - 1];
    if (dtype == WEX_DTYPE_F8_E4M3) {
        x->how = HELD_QUANTIZED;
        return block_grid(x, m, step, p->offset[0] / WEX__QUANT_BLOCK,
                          (p->offset[0] + p->extent[0] + WEX__QUANT_BLOCK - 1) /
                              WEX__QUANT_BLOCK,
                          p->offset[1] / WEX__QUANT_BLOCK,
                          (p->offset[1] + p->extent[1] + WEX__QUANT_BLOCK - 1) /
                              WEX__QUANT_BLOCK);
    }
    if (x->from == WEX_DTYPE_F8_E4M3) {
        x->how = HELD_DEQUANTIZED;
        x->scale = (uint64_t)wex__scale_of(m, c);
        x->scale_cols = m->tensors[x->scale].shape[1];
        return 0;
    }
    x->how = HELD_CONVERTED;
    return 0;
}

/* The bytes element `e` of canonical tensor `c` should hold, in `dtype`. */
static void expected(const expect *x, uint64_t c, uint64_t e, uint64_t step,
                     uint32_t dtype, unsigned char *out)
{
    unsigned char v[8];
    uint64_t row = e / (x->cols ? x->cols : 1),
             col = e % (x->cols ? x->cols : 1);
    float amax;

    switch (x->how) {
    case HELD_SAME: wex__synth_value(dtype, c, e, step, out); return;
    case HELD_CONVERTED:
        wex__synth_value(x->from, c, e, step, v);
        wex__convert_floats(x->from, v, 1, dtype, out);
        return;
    case HELD_QUANTIZED:
        amax = x->amax[(row / WEX__QUANT_BLOCK - x->br0) * x->nbc +
                       (col / WEX__QUANT_BLOCK - x->bc0)];
        wex__synth_value(x->from, c, e, step, v);
        wex__quantize_e4m3(x->from, v, 1, wex__quant_mult(amax), out);
        return;
    case HELD_SCALES: {
        /* e is an element of the scale tensor: (block row, block col) */
        uint64_t sc = (x->cols + WEX__QUANT_BLOCK - 1) / WEX__QUANT_BLOCK;
        float s;
        amax = x->amax[(e / sc - x->br0) * x->nbc + (e % sc - x->bc0)];
        s = wex__quant_scale_inv(amax);
        memcpy(out, &s, 4);
        return;
    }
    case HELD_DEQUANTIZED: {
        float s = wex__synth_float(WEX_DTYPE_F32, x->scale,
                                   (row / WEX__QUANT_BLOCK) * x->scale_cols +
                                       col / WEX__QUANT_BLOCK,
                                   step);
        wex__synth_value(WEX_DTYPE_F8_E4M3, c, e, step, v);
        wex__dequantize_e4m3(v, 1, s, dtype, out);
        return;
    }
    }
}

/* Elements whose expected bytes are made before one comparison: a
 * comparison per element cost more than making the values. */
#define CHECK_CHUNK 512
/* The widest element wex__synth_value writes (its default: 8 bytes). */
#define WIDEST_ELEMENT 8

/* Walks every piece of the rank as runs contiguous in both the local
 * tensor and the canonical one; `fill` writes, otherwise compares. */
static uint64_t walk(const wex_job *job, uint64_t step, int fill)
{
    const wex__rank_layout *l = job->layout;
    const wex_model *model = job->mine->model;
    uint64_t mismatches = 0;

    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        const wex__local_tensor *t = &l->tensors[p->tensor];
        unsigned char *base = job->bind[p->tensor].address;
        uint64_t esize = wex_dtype_size(t->dtype), a, b;
        wex__box_runs w;
        unsigned char want[CHECK_CHUNK * WIDEST_ELEMENT];
        expect x;

        if (expect_of(job, p, t->dtype, step, &x) != 0)
            return UINT64_MAX; /* out of memory: nothing can be vouched for */
        wex__piece_runs_init(&w, l, model, p);
        while (wex__box_runs_next(&w, &a, &b)) {
            uint64_t first = b / esize, n = w.run_bytes / esize;
            unsigned char *out = base + a;

            if (fill) {
                for (uint64_t e = 0; e < n; e++, out += esize)
                    wex__synth_value(t->dtype, p->canonical, first + e, step,
                                     out);
                continue;
            }
            for (uint64_t e0 = 0; e0 < n; e0 += CHECK_CHUNK) {
                uint64_t k = n - e0 < CHECK_CHUNK ? n - e0 : CHECK_CHUNK;
                unsigned char *got = out + e0 * esize;

                for (uint64_t e = 0; e < k; e++)
                    expected(&x, p->canonical, first + e0 + e, step, t->dtype,
                             want + e * esize);
                if (memcmp(got, want, k * esize) == 0)
                    continue;
                for (uint64_t e = 0; e < k; e++)
                    mismatches +=
                        memcmp(got + e * esize, want + e * esize, esize) != 0;
            }
        }
        free(x.amax);
    }
    return mismatches;
}

void wex__synth_fill(const wex_job *job, uint64_t step)
{
    walk(job, step, 1);
}

uint64_t wex__synth_check(const wex_job *job, uint64_t step)
{
    return walk(job, step, 0);
}

void wex__synth_scribble(const wex_job *job)
{
    const wex__rank_layout *l = job->layout;

    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        unsigned char *base = job->bind[p->tensor].address;
        wex__box_runs w;
        uint64_t a, b;

        wex__piece_runs_init(&w, l, job->mine->model, p);
        if (wex__box_runs_next(&w, &a, &b)) {
            base[a] ^= 1u;
            return;
        }
    }
}
