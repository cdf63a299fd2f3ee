/* Synthetic weights: a deterministic function of (canonical tensor,
 * element, step), written and checked through a rank's own layout. */
#include <string.h>

#include "box_runs.h"
#include "run.h"

static uint64_t value(uint64_t canonical, uint64_t element, uint64_t step)
{
    uint64_t z = canonical * 0x9e3779b97f4a7c15ull ^ element * 0xbf58476d1ce4e5b9ull ^
                 step * 0x94d049bb133111ebull;

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

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
        const wex__tensor *c = &model->tensors[p->canonical];
        unsigned char *base = job->bind[p->tensor].address;
        uint64_t esize = wex_dtype_size(t->dtype), a, b;
        wex__box_side local = {t->ndim, t->shape, p->at};
        wex__box_side canon = {c->ndim, c->shape, p->offset};
        wex__box_runs w;

        wex__box_runs_init(&w, p->ndim, p->extent, esize, &local, &canon);
        while (wex__box_runs_next(&w, &a, &b)) {
            uint64_t first = b / esize, n = w.run_bytes / esize;
            unsigned char *out = base + a;
            for (uint64_t e = 0; e < n; e++, out += esize) {
                uint64_t v = value(p->canonical, first + e, step);
                if (fill)
                    memcpy(out, &v, esize);
                else
                    mismatches += memcmp(out, &v, esize) != 0;
            }
        }
    }
    return mismatches;
}

void wex_run_fill(const wex_job *job, uint64_t step)
{
    walk(job, step, 1);
}

uint64_t wex_run_check(const wex_job *job, uint64_t step)
{
    return walk(job, step, 0);
}
