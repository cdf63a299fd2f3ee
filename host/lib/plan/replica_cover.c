/* Whether each replica holds a whole copy (replica_cover.h). */
#include <stdlib.h>
#include <string.h>

#include "error.h"
#include "replica_cover.h"

typedef struct box {
    uint64_t group;
    const wex__piece *piece;
} box;

static int cmp_box(const void *pa, const void *pb)
{
    const box *a = pa, *b = pb;
    int c;

    if (a->group != b->group)
        return a->group < b->group ? -1 : 1;
    c = memcmp(a->piece->offset, b->piece->offset,
               a->piece->ndim * sizeof(uint64_t));
    return c ? c
             : memcmp(a->piece->extent, b->piece->extent,
                      a->piece->ndim * sizeof(uint64_t));
}

static uint64_t volume(const wex__piece *p)
{
    uint64_t v = 1;

    for (uint32_t d = 0; d < p->ndim; d++)
        v *= p->extent[d];
    return v;
}

static int same_box(const box *a, const box *b)
{
    return a->group == b->group && cmp_box(a, b) == 0;
}

/* Elements of the distinct boxes of `n` sorted boxes, per group into
 * held[group]; the whole side's into *all_p. */
static void tally(box *boxes, size_t n, uint64_t groups, uint64_t *held,
                  uint64_t *all_p)
{
    memset(held, 0, groups * sizeof(*held));
    for (size_t i = 0; i < n; i++)
        if (i == 0 || !same_box(&boxes[i - 1], &boxes[i]))
            held[boxes[i].group] += volume(boxes[i].piece);
    /* the whole side: the same boxes, group set aside */
    for (size_t i = 0; i < n; i++)
        boxes[i].group = 0;
    qsort(boxes, n, sizeof(*boxes), cmp_box);
    *all_p = 0;
    for (size_t i = 0; i < n; i++)
        if (i == 0 || !same_box(&boxes[i - 1], &boxes[i]))
            *all_p += volume(boxes[i].piece);
}

wex_status wex__side_whole_replicas(const wex__side *side, uint64_t per,
                                    const char *where)
{
    uint64_t groups = per ? side->ranks / per : 0, all = 0;
    uint64_t *held = calloc(groups ? groups : 1, sizeof(*held));
    size_t most = 0;
    box *boxes;

    for (uint64_t c = 0; c < side->model->count; c++) {
        size_t n = side->canon_start[c + 1] - side->canon_start[c];
        most = n > most ? n : most;
    }
    boxes = malloc((most ? most : 1) * sizeof(*boxes));
    if (held == NULL || boxes == NULL) {
        free(held);
        free(boxes);
        return wex__error(WEX_ERR_NOMEM, "out of memory");
    }
    for (uint64_t c = 0; c < side->model->count; c++) {
        size_t n = side->canon_start[c + 1] - side->canon_start[c];
        for (size_t i = 0; i < n; i++) {
            const wex__piece_ref *r =
                &side->canon_refs[side->canon_start[c] + i];
            boxes[i].group = r->rank / per;
            boxes[i].piece = &side->layouts[r->rank].pieces[r->piece];
        }
        if (n == 0)
            continue;
        qsort(boxes, n, sizeof(*boxes), cmp_box);
        tally(boxes, n, groups, held, &all);
        for (uint64_t g = 0; g < groups; g++) {
            double share = 100.0 * (double)held[g] / (double)all;
            if (held[g] >= all)
                continue;
            free(held);
            free(boxes);
            return wex__error(
                WEX_ERR_INVALID,
                "%s: destination ranks %llu-%llu do not hold a whole copy "
                "(%.0f %% of %s): an elastic replica must be a full copy of "
                "the model, as serving engines' dp replicas are (fsdp's "
                "shards, or experts spread over dp, are one copy over every "
                "rank)",
                where, (unsigned long long)(g * per),
                (unsigned long long)(g * per + per - 1), share,
                side->model->tensors[c].name);
        }
    }
    free(held);
    free(boxes);
    return WEX_OK;
}
