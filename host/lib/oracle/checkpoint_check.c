#include "checkpoint_check.h"

#include <string.h>

#include "box_runs.h"
#include "quantize.h"

/* The element at canonical byte offset `b` of `c` as the rank's dtype. */
static void expect(const wex__checkpoint *ck, uint64_t c, uint64_t e,
                   uint32_t dtype, unsigned char *out)
{
    const wex__tensor *t = &ck->model->tensors[c];
    const unsigned char *src = wex__checkpoint_data(ck, c);
    uint32_t esize = wex_dtype_size(t->dtype);

    if (t->dtype == dtype) {
        memcpy(out, src + e * esize, esize);
    } else if (t->dtype == WEX_DTYPE_F8_E4M3) {
        int64_t s = wex__scale_of(ck->model, c);
        uint64_t cols = t->shape[1], row = e / cols, col = e % cols;
        uint64_t scols = ck->model->tensors[s].shape[1];
        float scale;
        memcpy(&scale,
               wex__checkpoint_data(ck, (uint64_t)s) +
                   ((row / WEX__QUANT_BLOCK) * scols + col / WEX__QUANT_BLOCK) *
                       4,
               4);
        wex__dequantize_e4m3(src + e, 1, scale, dtype, out);
    } else {
        wex__convert_floats(t->dtype, src + e * esize, 1, dtype, out);
    }
}

uint64_t wex__checkpoint_mismatches(const wex_job *job,
                                    const wex__checkpoint *ck)
{
    const wex__rank_layout *l = job->layout;
    const wex_model *model = job->mine->model;
    uint64_t mismatches = 0;

    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        const wex__local_tensor *t = &l->tensors[p->tensor];
        const wex__tensor *c = &model->tensors[p->canonical];
        const unsigned char *base = job->bind[p->tensor].address;
        uint64_t esize = wex_dtype_size(t->dtype), a, b;
        wex__box_runs w;
        unsigned char want[8];

        wex__piece_runs_init(&w, l, model, p);
        while (wex__box_runs_next(&w, &a, &b)) {
            uint64_t first = b / esize, n = w.run_bytes / esize;
            if (t->dtype == c->dtype) {
                if (memcmp(base + a, wex__checkpoint_data(ck, p->canonical) + b,
                           w.run_bytes) == 0)
                    continue;
            }
            for (uint64_t e = 0; e < n; e++) {
                expect(ck, p->canonical, first + e, t->dtype, want);
                mismatches += memcmp(base + a + e * esize, want, esize) != 0;
            }
        }
    }
    return mismatches;
}
