#include "side.h"

#include <stdlib.h>
#include <string.h>

#include "error.h"

static void unhide(wex__side *s);

/* Counting sort of every piece by canonical tensor; within a tensor the
 * order is (rank, piece), which policies rely on for determinism. Index
 * arrays already there are reused when the pieces still fit them (a
 * placement change moves pieces, it seldom adds any). */
static wex_status index_pieces(wex__side *s)
{
    uint64_t count = s->model->count, total = 0;
    uint64_t *fill;

    if (s->canon_start == NULL)
        s->canon_start = calloc(count + 1, sizeof(*s->canon_start));
    else
        memset(s->canon_start, 0, (count + 1) * sizeof(*s->canon_start));
    fill = malloc((count + 1) * sizeof(*fill));
    if (s->canon_start == NULL || fill == NULL) {
        free(fill);
        return wex__error(WEX_ERR_NOMEM, "%s layout: out of memory", s->what);
    }
    for (uint64_t r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->layouts[r].piece_count; i++)
            s->canon_start[s->layouts[r].pieces[i].canonical + 1]++;
    for (uint64_t c = 0; c < count; c++)
        s->canon_start[c + 1] += s->canon_start[c];
    total = s->canon_start[count];
    if (s->canon_refs == NULL || total > s->canon_cap) {
        free(s->canon_refs);
        free(s->canon_views);
        s->canon_cap = total ? total : 1;
        s->canon_refs = malloc(s->canon_cap * sizeof(*s->canon_refs));
        s->canon_views = malloc(s->canon_cap * sizeof(*s->canon_views));
    }
    if (s->canon_refs == NULL || s->canon_views == NULL) {
        free(fill);
        return wex__error(WEX_ERR_NOMEM, "%s layout: out of memory", s->what);
    }
    memcpy(fill, s->canon_start, (count + 1) * sizeof(*fill));
    for (uint64_t r = 0; r < s->ranks; r++)
        for (size_t i = 0; i < s->layouts[r].piece_count; i++) {
            uint64_t c = s->layouts[r].pieces[i].canonical;
            wex_piece_view *v = &s->canon_views[fill[c]];
            s->canon_refs[fill[c]].rank = (uint32_t)r;
            s->canon_refs[fill[c]++].piece = (uint32_t)i;
            memset(v, 0, sizeof(*v));
            v->struct_size = sizeof(*v);
            wex__side_view(s, r, i, v);
        }
    free(fill);
    return WEX_OK;
}

wex_status wex__side_open(wex__side *s, const char *what,
                          wex__registry *registry, const char *engine,
                          const wex_model *model, const cJSON *parallel,
                          const cJSON *options)
{
    wex_status st;

    memset(s, 0, sizeof(*s));
    s->what = what;
    s->model = model;
    st = wex__engine_open(registry, engine, model, parallel, options,
                          &s->engine);
    if (st != WEX_OK)
        return wex__error_prefix(st, "%s", what);
    s->ranks = s->engine->ranks;
    /* The size guard (docs/limits.md), before laying out every rank:
     * "parallel:" so the planner names the job's field. */
    if (s->ranks > WEX__SIDE_RANKS_MAX)
        return wex__error(WEX_ERR_INVALID,
                          "%s: parallel: expected at most "
                          "%u ranks a side (docs/limits.md), got %llu",
                          what, WEX__SIDE_RANKS_MAX,
                          (unsigned long long)s->ranks);
    s->layouts = calloc(s->ranks, sizeof(*s->layouts));
    s->hosts = calloc(s->ranks, sizeof(*s->hosts));
    if (s->layouts == NULL || s->hosts == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s layout: out of memory", what);
    for (uint64_t r = 0; r < s->ranks; r++) {
        st = wex__engine_describe(s->engine, r, &s->layouts[r]);
        if (st != WEX_OK)
            return wex__error_prefix(st, "%s", what);
        /* Ranks are alike enough that rank 0's pieces, times the ranks,
         * estimate the side's. */
        if (r == 0 &&
            s->layouts[0].piece_count > WEX__SIDE_PIECES_MAX / s->ranks)
            return wex__error(
                WEX_ERR_INVALID,
                "%s: parallel: expected at "
                "most %u pieces a side (docs/limits.md), got "
                "about %llu (%llu ranks of %llu)",
                what, WEX__SIDE_PIECES_MAX,
                (unsigned long long)(s->ranks * s->layouts[0].piece_count),
                (unsigned long long)s->ranks,
                (unsigned long long)s->layouts[0].piece_count);
    }
    return index_pieces(s);
}

void wex__side_close(wex__side *s)
{
    if (s->layouts != NULL)
        for (uint64_t r = 0; r < s->ranks; r++)
            wex__rank_layout_fini(&s->layouts[r]);
    free(s->layouts);
    free(s->hosts);
    free(s->canon_start);
    free(s->canon_refs);
    free(s->canon_views);
    unhide(s);
    wex__engine_close(s->engine);
    memset(s, 0, sizeof(*s));
}

uint64_t wex__side_piece_bytes(const wex__side *s, uint64_t rank)
{
    const wex__rank_layout *l = &s->layouts[rank];
    uint64_t total = 0;

    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        uint64_t n = wex_dtype_size(l->tensors[p->tensor].dtype);
        for (uint32_t d = 0; d < p->ndim; d++)
            n *= p->extent[d];
        total += n;
    }
    return total;
}

void wex__side_view(const wex__side *s, uint64_t rank, uint64_t piece,
                    wex_piece_view *v)
{
    const wex__rank_layout *l = &s->layouts[rank];
    const wex__piece *p = &l->pieces[piece];

    v->ndim = p->ndim;
    v->local_ndim = l->tensors[p->tensor].ndim;
    v->rank = rank;
    v->tensor = p->tensor;
    v->canonical = p->canonical;
    v->offset = p->offset;
    v->extent = p->extent;
    v->at = p->at;
}

wex_status wex__side_hide(wex__side *s,
                          int (*hidden)(const wex__side *side, uint64_t rank,
                                        size_t piece, void *arg),
                          void *arg)
{
    uint64_t count = s->model->count, total = 0;
    uint64_t *fill = NULL;

    s->visible = calloc(s->ranks, sizeof(*s->visible));
    s->visible_count = calloc(s->ranks, sizeof(*s->visible_count));
    s->policy_canon_start = calloc(count + 1, sizeof(*s->policy_canon_start));
    fill = calloc(count + 1, sizeof(*fill));
    if (s->visible == NULL || s->visible_count == NULL ||
        s->policy_canon_start == NULL || fill == NULL)
        goto nomem;
    for (uint64_t r = 0; r < s->ranks; r++) {
        const wex__rank_layout *l = &s->layouts[r];
        s->visible[r] = malloc((l->piece_count ? l->piece_count : 1) *
                               sizeof(**s->visible));
        if (s->visible[r] == NULL)
            goto nomem;
        for (size_t i = 0; i < l->piece_count; i++)
            if (!hidden(s, r, i, arg)) {
                s->visible[r][s->visible_count[r]++] = (uint32_t)i;
                s->policy_canon_start[l->pieces[i].canonical + 1]++;
            }
    }
    for (uint64_t c = 0; c < count; c++)
        s->policy_canon_start[c + 1] += s->policy_canon_start[c];
    total = s->policy_canon_start[count];
    s->policy_canon_views =
        malloc((total ? total : 1) * sizeof(*s->policy_canon_views));
    if (s->policy_canon_views == NULL)
        goto nomem;
    memcpy(fill, s->policy_canon_start, (count + 1) * sizeof(*fill));
    for (uint64_t r = 0; r < s->ranks; r++)
        for (uint32_t k = 0; k < s->visible_count[r]; k++) {
            uint32_t i = s->visible[r][k];
            uint64_t c = s->layouts[r].pieces[i].canonical;
            wex_piece_view *v = &s->policy_canon_views[fill[c]++];
            memset(v, 0, sizeof(*v));
            v->struct_size = sizeof(*v);
            wex__side_view(s, r, i, v);
        }
    free(fill);
    return WEX_OK;
nomem:
    free(fill);
    return wex__error(WEX_ERR_NOMEM, "%s layout: out of memory", s->what);
}

/* Ranks' local tensors alike: names, dtypes and shapes, in order. */
static int same_tensors(const wex__rank_layout *a, const wex__rank_layout *b)
{
    if (a->tensor_count != b->tensor_count)
        return 0;
    for (size_t i = 0; i < a->tensor_count; i++) {
        const wex__local_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) != 0 || x->dtype != y->dtype ||
            x->ndim != y->ndim ||
            memcmp(x->shape, y->shape, x->ndim * sizeof(x->shape[0])) != 0)
            return 0;
    }
    return 1;
}

/* What a policy was shown (wex__side_hide), dropped. */
static void unhide(wex__side *s)
{
    if (s->visible != NULL)
        for (uint64_t r = 0; r < s->ranks; r++)
            free(s->visible[r]);
    free(s->visible);
    free(s->visible_count);
    free(s->policy_canon_start);
    free(s->policy_canon_views);
    s->visible = NULL;
    s->visible_count = NULL;
    s->policy_canon_start = NULL;
    s->policy_canon_views = NULL;
}

wex_status wex__side_replace_pieces(wex__side *s, wex__engine *engine,
                                    uint64_t first, uint64_t count)
{
    wex__rank_layout *fresh;
    wex_status st = WEX_OK;

    if (first + count > s->ranks || engine->ranks != s->ranks)
        return wex__error(WEX_ERR_INVALID,
                          "%s: ranks %llu..%llu are not the side's %llu",
                          s->what, (unsigned long long)first,
                          (unsigned long long)(first + count - 1),
                          (unsigned long long)s->ranks);
    fresh = calloc(count ? count : 1, sizeof(*fresh));
    if (fresh == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s layout: out of memory", s->what);
    for (uint64_t i = 0; i < count && st == WEX_OK; i++) {
        st = wex__engine_describe(engine, first + i, &fresh[i]);
        if (st == WEX_OK && !same_tensors(&s->layouts[first + i], &fresh[i]))
            st = wex__error(WEX_ERR_INVALID,
                            "%s rank %llu: the new layout changes its local "
                            "tensors; only their pieces may change",
                            s->what, (unsigned long long)(first + i));
    }
    /* All or nothing: the old pieces stay unless every rank described. */
    for (uint64_t i = 0; i < count && st == WEX_OK; i++) {
        wex__rank_layout *l = &s->layouts[first + i];
        wex__piece *pieces = l->pieces;
        size_t n = l->piece_count, cap = l->piece_cap;
        l->pieces = fresh[i].pieces;
        l->piece_count = fresh[i].piece_count;
        l->piece_cap = fresh[i].piece_cap;
        fresh[i].pieces = pieces;
        fresh[i].piece_count = n;
        fresh[i].piece_cap = cap;
    }
    for (uint64_t i = 0; i < count; i++)
        wex__rank_layout_fini(&fresh[i]);
    free(fresh);
    if (st != WEX_OK)
        return st;
    unhide(s);
    return index_pieces(s);
}
