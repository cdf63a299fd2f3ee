/*
 * What every rank of a job agrees on and computes at most once: a digest
 * of both sides' layouts, and which sources hold nothing only they hold.
 * A planner opened from a share reads both from it instead.
 */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "error.h"
#include "planner.h"

static void hash_side(XXH3_state_t *h, const wex__side *s)
{
    XXH3_64bits_update(h, &s->ranks, sizeof(s->ranks));
    for (uint64_t r = 0; r < s->ranks; r++) {
        const wex__rank_layout *l = &s->layouts[r];
        for (size_t t = 0; t < l->tensor_count; t++) {
            const wex__local_tensor *lt = &l->tensors[t];
            XXH3_64bits_update(h, lt->name, strlen(lt->name) + 1);
            XXH3_64bits_update(h, &lt->dtype, sizeof(lt->dtype));
            XXH3_64bits_update(h, lt->shape, lt->ndim * sizeof(uint64_t));
        }
        for (size_t p = 0; p < l->piece_count; p++) {
            const wex__piece *pc = &l->pieces[p];
            XXH3_64bits_update(h, &pc->canonical, sizeof(pc->canonical));
            XXH3_64bits_update(h, &pc->tensor, sizeof(pc->tensor));
            XXH3_64bits_update(h, pc->offset, pc->ndim * sizeof(uint64_t));
            XXH3_64bits_update(h, pc->extent, pc->ndim * sizeof(uint64_t));
            XXH3_64bits_update(h, pc->at, sizeof(pc->at));
        }
    }
}

uint64_t wex__planner_sides_digest(wex__planner *p)
{
    XXH3_state_t *h;

    if (p->sides_digest_known)
        return p->sides_digest;
    /* Out of memory for the state: a digest no rank matches, so
     * connecting fails on the mismatch rather than here. */
    if ((h = XXH3_createState()) == NULL)
        return 0;
    XXH3_64bits_reset(h);
    hash_side(h, &p->src);
    hash_side(h, &p->dst);
    p->sides_digest = XXH3_64bits_digest(h);
    p->sides_digest_known = 1;
    XXH3_freeState(h);
    return p->sides_digest;
}

static uint64_t elements(const wex__tensor *t)
{
    uint64_t n = 1;

    for (uint32_t d = 0; d < t->ndim; d++)
        n *= t->shape[d];
    return n;
}

static uint64_t piece_elements(const wex__piece *p)
{
    uint64_t n = 1;

    for (uint32_t d = 0; d < p->ndim; d++)
        n *= p->extent[d];
    return n;
}

const uint8_t *wex__planner_replicated(wex__planner *p)
{
    const wex__side *src = &p->src;
    const wex_model *model = src->model;
    uint64_t *held;

    if (p->replicated != NULL)
        return p->replicated;
    held = calloc(model->count ? model->count : 1, sizeof(*held));
    p->replicated = calloc((src->ranks + 7) / 8 + 1, 1);
    if (held == NULL || p->replicated == NULL) {
        free(held);
        free(p->replicated);
        p->replicated = NULL;
        wex__error(WEX_ERR_NOMEM, "plan: out of memory");
        return NULL;
    }
    /* Engines hold every element of a canonical tensor the same number
     * of times, so its total over all ranks says how often. */
    for (uint64_t r = 0; r < src->ranks; r++)
        for (size_t i = 0; i < src->layouts[r].piece_count; i++) {
            const wex__piece *pc = &src->layouts[r].pieces[i];
            held[pc->canonical] += piece_elements(pc);
        }
    for (uint64_t r = 0; r < src->ranks; r++) {
        int replicated = 1;
        for (size_t i = 0; i < src->layouts[r].piece_count && replicated; i++) {
            const wex__piece *pc = &src->layouts[r].pieces[i];
            replicated = held[pc->canonical] >=
                         2 * elements(&model->tensors[pc->canonical]);
        }
        if (replicated)
            p->replicated[r / 8] |= (uint8_t)(1u << (r % 8));
    }
    free(held);
    return p->replicated;
}
