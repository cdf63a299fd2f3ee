/* Walking a box row by row (row_walk.h). */
#include <string.h>

#include "row_walk.h"

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
