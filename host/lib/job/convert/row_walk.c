/* Walking a box row by row (row_walk.h), and a destination receiving a
 * converting operation so (transforms.h). */
#include <string.h>

#include "row_walk.h"
#include "transforms.h"
#include "transforms_internal.h"

void wex__rows_init(wex__rows *w, const wex__op *o)
{
    memset(w, 0, sizeof(*w));
    w->o = o;
    w->width = o->extent[o->ndim - 1];
    w->left = 1;
    for (uint32_t d = 0; d + 1 < o->ndim; d++)
        w->left *= o->extent[d];
}

void wex__rows_next(wex__rows *w)
{
    for (uint32_t d = w->o->ndim - 1; d-- > 0;) {
        if (++w->idx[d] < w->o->extent[d])
            return;
        w->idx[d] = 0;
    }
}

wex_status wex__transforms_recv(wex_job *job, size_t i)
{
    const wex__op *o = &job->ops[i];
    const wex__local_tensor *t = &job->layout->tensors[o->dst_tensor];
    uint64_t row_bytes = o->extent[o->ndim - 1] * o->dtype_size;
    wex_status st = WEX_OK;
    wex__rows w;

    for (wex__rows_init(&w, o); st == WEX_OK && w.left > 0;
         w.left--, wex__rows_next(&w))
        st = job->transport.ops->recv(
            job->transport.ctx, o->src_rank, job->bind[o->dst_tensor].mem,
            wex__element_at(t->shape, t->ndim, o->dst_off, o->ndim, w.idx) *
                o->dtype_size,
            row_bytes);
    return st;
}
