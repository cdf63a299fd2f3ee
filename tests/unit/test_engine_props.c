/*
 * Property tests of the engine adapters. For every in-tree engine that is
 * built and every model config in WEX_MODELS_DIR, seeded random parallel
 * configs are offered to the engine; for each one it accepts, every rank
 * is described and checked:
 *   1. coverage: over all ranks, every element of every canonical tensor
 *      is held the same number of times c >= 1 (c may differ per tensor);
 *   2. no two pieces of one local tensor overlap, and every piece lies
 *      inside its local tensor;
 *   3. byte totals: a rank's bytes are the sum of its local tensors', its
 *      pieces fit in them, and all pieces together hold sum(c_t * bytes_t);
 *   4. describing a rank twice gives the same layout.
 * Boxes are checked with coordinate compression (the distinct boundaries
 * per dimension cut the tensor into a grid of cells, each counted once),
 * never per element: a trillion-parameter model must check in seconds.
 * The checker is itself tested on hand-built layouts that break each rule.
 */
#include <check.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_run.h"
#include "engine.h"
#include "error.h"
#include "host_registry.h"

#define WHY_MAX 1024
#define SUB_MAX 256 /* an inner message, quoted inside a WHY_MAX one */

/* A passing ck_assert writes its location to Check's log file: millions
 * of syscalls over a big model. The checker calls Check only on failure. */
#define need(cond)                                                             \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg("failed: %s", #cond);                                 \
    } while (0)
#define need_msg(cond, ...)                                                    \
    do {                                                                       \
        if (!(cond))                                                           \
            ck_abort_msg(__VA_ARGS__);                                         \
    } while (0)
#define GRID_MAX_CELLS (1u << 24) /* a sane layout needs far fewer */

/* ------------------------------------------------------------------ */
/* Grids: how many boxes cover each cell                               */
/* ------------------------------------------------------------------ */

typedef struct box {
    uint64_t lo[WEX_MAX_DIMS], ext[WEX_MAX_DIMS];
    uint64_t weight; /* identical boxes counted once, `weight` times */
    uint64_t tag;    /* the caller's: a rank or a piece index */
} box;

typedef struct grid {
    uint32_t nd;
    uint64_t *cut[WEX_MAX_DIMS]; /* sorted distinct boundaries, 0..shape */
    size_t ncut[WEX_MAX_DIMS];
    uint64_t *count; /* per cell, row-major over the cuts */
    size_t cells;
} grid;

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

    return x < y ? -1 : x > y;
}

/* Most cut lists are a handful of values (two per box): insertion sort
 * beats qsort's indirect calls there; stacked experts make long ones. */
static void sort_u64(uint64_t *v, size_t n)
{
    if (n > 32) {
        qsort(v, n, sizeof(*v), cmp_u64);
        return;
    }
    for (size_t i = 1; i < n; i++) {
        uint64_t x = v[i];
        size_t j = i;
        for (; j > 0 && v[j - 1] > x; j--)
            v[j] = v[j - 1];
        v[j] = x;
    }
}

/* Index of `v` in the sorted cut list (it is always there). */
static size_t cut_index(const uint64_t *cut, size_t n, uint64_t v)
{
    size_t lo = 0, hi = n;

    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cut[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void grid_free(grid *g)
{
    for (uint32_t d = 0; d < g->nd; d++)
        free(g->cut[d]);
    free(g->count);
    memset(g, 0, sizeof(*g));
}

/* Counts, per cell of [0, shape), the weight of the boxes covering it.
 * Fails (writing `why`) when a box leaves the domain or the grid is too
 * fine to count. */
static int grid_build(grid *g, uint32_t nd, const uint64_t *shape,
                      const box *boxes, size_t n, char *why)
{
    memset(g, 0, sizeof(*g));
    g->nd = nd;
    g->cells = 1;
    for (uint32_t d = 0; d < nd; d++) {
        uint64_t *cut = malloc((2 * n + 2) * sizeof(*cut));
        size_t k = 0;
        need(cut != NULL);
        cut[k++] = 0;
        cut[k++] = shape[d];
        for (size_t i = 0; i < n; i++) {
            if (boxes[i].ext[d] == 0 ||
                boxes[i].lo[d] + boxes[i].ext[d] > shape[d]) {
                snprintf(why, SUB_MAX,
                         "box dim %u [%llu, +%llu) leaves "
                         "[0, %llu)",
                         d, (unsigned long long)boxes[i].lo[d],
                         (unsigned long long)boxes[i].ext[d],
                         (unsigned long long)shape[d]);
                free(cut);
                return -1;
            }
            cut[k++] = boxes[i].lo[d];
            cut[k++] = boxes[i].lo[d] + boxes[i].ext[d];
        }
        sort_u64(cut, k);
        g->ncut[d] = 1;
        for (size_t i = 1; i < k; i++)
            if (cut[i] != cut[g->ncut[d] - 1])
                cut[g->ncut[d]++] = cut[i];
        g->cut[d] = cut;
        g->cells *= g->ncut[d] - 1;
        if (g->cells > GRID_MAX_CELLS) {
            snprintf(why, SUB_MAX, "pieces cut it into over %u cells",
                     GRID_MAX_CELLS);
            return -1;
        }
    }
    g->count = calloc(g->cells, sizeof(*g->count));
    need(g->count != NULL);
    for (size_t i = 0; i < n; i++) {
        size_t first[WEX_MAX_DIMS], end[WEX_MAX_DIMS], at[WEX_MAX_DIMS];
        for (uint32_t d = 0; d < nd; d++) {
            first[d] = cut_index(g->cut[d], g->ncut[d], boxes[i].lo[d]);
            end[d] = cut_index(g->cut[d], g->ncut[d],
                               boxes[i].lo[d] + boxes[i].ext[d]);
            at[d] = first[d];
        }
        for (;;) { /* odometer over the box's cells */
            size_t cell = 0;
            uint32_t d = nd;
            for (uint32_t e = 0; e < nd; e++)
                cell = cell * (g->ncut[e] - 1) + at[e];
            g->count[cell] += boxes[i].weight;
            while (d > 0 && ++at[d - 1] == end[d - 1]) {
                at[d - 1] = first[d - 1];
                d--;
            }
            if (d == 0)
                break;
        }
    }
    return 0;
}

/* The first element of `cell`, as "[i, j, ...]". */
static const char *cell_origin(const grid *g, size_t cell, uint64_t *coord,
                               char *buf, size_t size)
{
    size_t len = 0;

    for (uint32_t d = g->nd; d-- > 0;) {
        coord[d] = g->cut[d][cell % (g->ncut[d] - 1)];
        cell /= g->ncut[d] - 1;
    }
    for (uint32_t d = 0; d < g->nd && len < size; d++)
        len += (size_t)snprintf(buf + len, size - len, "%s%llu", d ? ", " : "[",
                                (unsigned long long)coord[d]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

static int box_holds(const box *b, uint32_t nd, const uint64_t *coord)
{
    for (uint32_t d = 0; d < nd; d++)
        if (coord[d] < b->lo[d] || coord[d] >= b->lo[d] + b->ext[d])
            return 0;
    return 1;
}

/* ------------------------------------------------------------------ */
/* Property 1 and the global byte total: coverage over all ranks       */
/* ------------------------------------------------------------------ */

/* Per canonical tensor, its distinct boxes over all ranks. Data-parallel
 * replicas repeat the same boxes, so a box seen again only bumps its
 * weight: memory follows the sharding, not the replica count. */
typedef struct cover {
    const wex_model *model;
    box **boxes;              /* per canonical tensor */
    unsigned char *converted; /* per canonical tensor: held as values */
    int no_mtp; /* the engine's main model holds no MTP layer (vLLM, SGLang) */
    size_t *count, *cap;
    uint64_t piece_bytes; /* over all pieces of all ranks */
} cover;

static void cover_init(cover *c, const wex_model *model)
{
    c->model = model;
    c->boxes = calloc(model->count, sizeof(*c->boxes));
    c->count = calloc(model->count, sizeof(*c->count));
    c->cap = calloc(model->count, sizeof(*c->cap));
    c->converted = calloc(model->count, 1);
    c->no_mtp = 0;
    c->piece_bytes = 0;
    need(c->boxes && c->count && c->cap && c->converted);
}

static void cover_fini(cover *c)
{
    for (uint64_t t = 0; t < c->model->count; t++)
        free(c->boxes[t]);
    free(c->boxes);
    free(c->count);
    free(c->cap);
    free(c->converted);
}

static void cover_add(cover *c, const wex__rank_layout *l)
{
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        const wex__tensor *t = &c->model->tensors[p->canonical];
        box *set = c->boxes[p->canonical], *hit = NULL;
        uint64_t elements = 1;
        size_t *n = &c->count[p->canonical];

        for (uint32_t d = 0; d < p->ndim; d++)
            elements *= p->extent[d];
        c->piece_bytes += elements * wex_dtype_size(t->dtype);
        c->converted[p->canonical] |= p->transform == WEX_TRANSFORM_CONVERT;
        for (size_t k = 0; k < *n && hit == NULL; k++)
            if (memcmp(set[k].lo, p->offset, p->ndim * 8) == 0 &&
                memcmp(set[k].ext, p->extent, p->ndim * 8) == 0)
                hit = &set[k];
        if (hit != NULL) {
            hit->weight++;
            continue;
        }
        if (*n == c->cap[p->canonical]) {
            c->cap[p->canonical] = *n ? 2 * *n : 4;
            set = realloc(set, c->cap[p->canonical] * sizeof(*set));
            need(set != NULL);
            c->boxes[p->canonical] = set;
        }
        memset(&set[*n], 0, sizeof(*set));
        memcpy(set[*n].lo, p->offset, p->ndim * 8);
        memcpy(set[*n].ext, p->extent, p->ndim * 8);
        set[*n].weight = 1;
        set[(*n)++].tag = l->rank;
    }
}

/* Per canonical tensor, the fp8 weight whose block scales it is, or -1;
 * malloc'd. */
static int64_t *weights_of_scales(const wex_model *m)
{
    int64_t *owner = malloc((m->count ? m->count : 1) * sizeof(*owner));

    need(owner != NULL);
    for (uint64_t t = 0; t < m->count; t++)
        owner[t] = -1;
    for (uint64_t w = 0; w < m->count; w++) {
        int64_t s = wex__scale_of(m, w);
        if (s >= 0)
            owner[s] = (int64_t)w;
    }
    return owner;
}

/* The checkpoint's copies of the embedding and output head inside an
 * MTP layer (DeepSeek-V3's model.layers.61.embed_tokens.weight and
 * shared_head.head.weight): Megatron-Core's MTP layers share the model's
 * own (megatron/core/transformer/multi_token_prediction.py), so an engine
 * may hold none of them. */
static int mtp_shared_copy(const char *name)
{
    static const char *const ends[] = {".embed_tokens.weight",
                                       ".shared_head.head.weight"};
    size_t n = strlen(name);

    if (strncmp(name, "model.layers.", 13) != 0)
        return 0;
    for (size_t i = 0; i < 2; i++)
        if (n > strlen(ends[i]) &&
            strcmp(name + n - strlen(ends[i]), ends[i]) == 0)
            return 1;
    return 0;
}

/* A tensor of a multi-token-prediction layer (model.layers.<n>. with n
 * >= num_hidden_layers): vLLM and SGLang load those into a separate
 * drafter model (their engine option model: "mtp-drafter"), so the main
 * model's layout holds none of them. */
static int mtp_layer_tensor(const wex_model *m, const char *name)
{
    const cJSON *layers =
        cJSON_GetObjectItemCaseSensitive(m->config, "num_hidden_layers");
    char *end;
    long n;

    if (strncmp(name, "model.layers.", 13) != 0 || !cJSON_IsNumber(layers))
        return 0;
    n = strtol(name + 13, &end, 10);
    return *end == '.' && n >= (long)layers->valuedouble;
}

/* Every canonical tensor covered uniformly, at least once (block scales
 * excepted where their weight is held as converted values: floats carry
 * no scales, MTP layers' copies of shared tensors, and every MTP layer
 * tensor for vLLM and SGLang); then the pieces' bytes are
 * sum(c_t * bytes_t). 0, or -1 with `why` naming the tensor, an
 * element and ranks holding it. */
static int cover_check(const cover *c, char *why)
{
    int64_t *owner = weights_of_scales(c->model);
    uint64_t expect = 0;
    int rc = -1;

    for (uint64_t t = 0; t < c->model->count; t++) {
        const wex__tensor *ct = &c->model->tensors[t];
        size_t lo = 0, hi = 0;
        uint64_t coord[WEX_MAX_DIMS];
        char at_lo[128], at_hi[128], sub[SUB_MAX];
        grid g;

        if (c->count[t] == 0) {
            if ((owner[t] >= 0 && c->converted[owner[t]]) ||
                mtp_shared_copy(ct->name) ||
                (c->no_mtp && mtp_layer_tensor(c->model, ct->name)))
                continue;
            snprintf(why, WHY_MAX, "tensor %s: no rank holds any of it",
                     ct->name);
            goto out;
        }
        if (grid_build(&g, ct->ndim, ct->shape, c->boxes[t], c->count[t],
                       sub) != 0) {
            snprintf(why, WHY_MAX, "tensor %s: %s", ct->name, sub);
            grid_free(&g);
            goto out;
        }
        for (size_t k = 1; k < g.cells; k++) {
            lo = g.count[k] < g.count[lo] ? k : lo;
            hi = g.count[k] > g.count[hi] ? k : hi;
        }
        if (g.count[lo] == 0 || g.count[lo] != g.count[hi]) {
            size_t len = 0;
            cell_origin(&g, lo, coord, at_lo, sizeof(at_lo));
            cell_origin(&g, hi, coord, at_hi, sizeof(at_hi));
            for (size_t k = 0; k < c->count[t] && len < SUB_MAX - 32; k++)
                if (box_holds(&c->boxes[t][k], ct->ndim, coord))
                    len += (size_t)snprintf(
                        sub + len, sizeof(sub) - len, " %llu",
                        (unsigned long long)c->boxes[t][k].tag);
            sub[len] = '\0';
            snprintf(why, WHY_MAX,
                     "tensor %s: element %s is held %llu "
                     "times but element %s %llu times (by ranks%s)",
                     ct->name, at_lo, (unsigned long long)g.count[lo], at_hi,
                     (unsigned long long)g.count[hi], sub);
            grid_free(&g);
            goto out;
        }
        expect += g.count[lo] * ct->bytes;
        grid_free(&g);
    }
    if (c->piece_bytes != expect) {
        snprintf(why, WHY_MAX,
                 "pieces hold %llu bytes, the coverage "
                 "implies %llu",
                 (unsigned long long)c->piece_bytes,
                 (unsigned long long)expect);
        goto out;
    }
    rc = 0;
out:
    free(owner);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Properties 2 and 3 within one rank                                  */
/* ------------------------------------------------------------------ */

/* A piece's box in its local tensor: at[] on every dim, width 1 on the
 * leading (stacking) dims, the piece's extent on the trailing ones. */
static void local_box(const wex__local_tensor *t, const wex__piece *p, box *b)
{
    uint32_t lead = t->ndim - p->ndim;

    memset(b, 0, sizeof(*b));
    for (uint32_t d = 0; d < t->ndim; d++) {
        b->lo[d] = p->at[d];
        b->ext[d] = d < lead ? 1 : p->extent[d - lead];
    }
}

/* Pieces of one local tensor never overlap. `idx` lists them. */
static int check_overlap(const wex__rank_layout *l, const wex_model *m,
                         const wex__local_tensor *t, const size_t *idx,
                         size_t n, char *why)
{
    box *boxes = calloc(n, sizeof(*boxes));
    uint64_t coord[WEX_MAX_DIMS];
    char sub[SUB_MAX], at[128];
    int rc = 0;
    grid g;

    need(boxes != NULL);
    for (size_t i = 0; i < n; i++) {
        local_box(t, &l->pieces[idx[i]], &boxes[i]);
        boxes[i].weight = 1;
        boxes[i].tag = idx[i];
    }
    if (grid_build(&g, t->ndim, t->shape, boxes, n, sub) != 0) {
        snprintf(why, WHY_MAX, "rank %llu: local tensor %s: %s",
                 (unsigned long long)l->rank, t->name, sub);
        rc = -1;
    }
    for (size_t k = 0; rc == 0 && k < g.cells; k++) {
        const char *names[2] = {"?", "?"};
        int found = 0;
        if (g.count[k] <= 1)
            continue;
        cell_origin(&g, k, coord, at, sizeof(at));
        for (size_t i = 0; i < n && found < 2; i++)
            if (box_holds(&boxes[i], t->ndim, coord))
                names[found++] =
                    m->tensors[l->pieces[boxes[i].tag].canonical].name;
        snprintf(why, WHY_MAX,
                 "rank %llu: local tensor %s: element %s is "
                 "in %llu pieces (of %s and %s)",
                 (unsigned long long)l->rank, t->name, at,
                 (unsigned long long)g.count[k], names[0], names[1]);
        rc = -1;
    }
    grid_free(&g);
    free(boxes);
    return rc;
}

/* Checks one rank on its own. 0, or -1 with `why` naming the rank and
 * the tensor. */
static int check_rank(const wex_model *m, const wex__rank_layout *l, char *why)
{
    uint64_t bytes = 0, piece_bytes = 0;
    /* Pieces grouped by local tensor (a counting sort): tensor i's are
     * order[first[i] .. first[i + 1]). */
    size_t *first = calloc(l->tensor_count + 1, sizeof(*first));
    size_t *cursor = calloc(l->tensor_count + 1, sizeof(*cursor));
    size_t *order = calloc(l->piece_count + 1, sizeof(*order));
    int rc = 0;

    need(first && cursor && order);
    for (size_t i = 0; i < l->tensor_count; i++) {
        const wex__local_tensor *t = &l->tensors[i];
        uint64_t elements = 1;
        for (uint32_t d = 0; d < t->ndim; d++)
            elements *= t->shape[d];
        if (t->bytes != elements * wex_dtype_size(t->dtype)) {
            snprintf(why, WHY_MAX,
                     "rank %llu: local tensor %s: %llu bytes "
                     "for %llu elements",
                     (unsigned long long)l->rank, t->name,
                     (unsigned long long)t->bytes,
                     (unsigned long long)elements);
            rc = -1;
            goto out;
        }
        bytes += t->bytes;
    }
    if (bytes != l->bytes) {
        snprintf(why, WHY_MAX,
                 "rank %llu: %llu bytes, its local tensors "
                 "hold %llu",
                 (unsigned long long)l->rank, (unsigned long long)l->bytes,
                 (unsigned long long)bytes);
        rc = -1;
        goto out;
    }
    /* Each piece inside its local tensor, and counted for the grouping. */
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        const wex__local_tensor *t;
        uint64_t elements = 1;
        box b;
        need(p->tensor < l->tensor_count);
        need(p->canonical < m->count);
        t = &l->tensors[p->tensor];
        /* plain pieces, or values converted to the local tensor's float
         * dtype (a trainer's), which the layout builder checked */
        if ((p->transform != WEX_TRANSFORM_NONE &&
             (p->transform != WEX_TRANSFORM_CONVERT ||
              !wex__convertible(m, p->canonical, t->dtype))) ||
            p->ndim > t->ndim) {
            snprintf(why, WHY_MAX,
                     "rank %llu: local tensor %s: piece of "
                     "%s has transform %u and %u dims (this test knows "
                     "only plain and converted pieces)",
                     (unsigned long long)l->rank, t->name,
                     m->tensors[p->canonical].name, p->transform, p->ndim);
            rc = -1;
            goto out;
        }
        local_box(t, p, &b);
        for (uint32_t d = 0; d < t->ndim; d++)
            if (b.lo[d] + b.ext[d] > t->shape[d]) {
                snprintf(why, WHY_MAX,
                         "rank %llu: local tensor %s: piece "
                         "of %s leaves it in dim %u (%llu + %llu > %llu)",
                         (unsigned long long)l->rank, t->name,
                         m->tensors[p->canonical].name, d,
                         (unsigned long long)b.lo[d],
                         (unsigned long long)b.ext[d],
                         (unsigned long long)t->shape[d]);
                rc = -1;
                goto out;
            }
        for (uint32_t d = 0; d < p->ndim; d++)
            elements *= p->extent[d];
        piece_bytes += elements * wex_dtype_size(t->dtype);
        first[p->tensor + 1]++;
    }
    if (piece_bytes > l->bytes) {
        snprintf(why, WHY_MAX,
                 "rank %llu: pieces hold %llu bytes, more "
                 "than the rank's %llu",
                 (unsigned long long)l->rank, (unsigned long long)piece_bytes,
                 (unsigned long long)l->bytes);
        rc = -1;
        goto out;
    }
    for (size_t i = 0; i < l->tensor_count; i++)
        first[i + 1] += first[i];
    memcpy(cursor, first, (l->tensor_count + 1) * sizeof(*cursor));
    for (size_t i = 0; i < l->piece_count; i++)
        order[cursor[l->pieces[i].tensor]++] = i;
    for (size_t i = 0; i < l->tensor_count && rc == 0; i++)
        if (first[i + 1] - first[i] > 1) /* one piece cannot overlap */
            rc = check_overlap(l, m, &l->tensors[i], order + first[i],
                               first[i + 1] - first[i], why);
out:
    free(first);
    free(cursor);
    free(order);
    return rc;
}

/* Property 4: two descriptions of one rank are identical. */
static int same_layout(const wex__rank_layout *a, const wex__rank_layout *b,
                       char *why)
{
    const char *what = NULL;

    if (a->rank != b->rank || a->bytes != b->bytes)
        what = "rank or bytes";
    else if (a->coord_count != b->coord_count)
        what = "coordinate count";
    else if (a->tensor_count != b->tensor_count)
        what = "local tensor count";
    else if (a->piece_count != b->piece_count)
        what = "piece count";
    for (size_t i = 0; what == NULL && i < a->coord_count; i++)
        if (strcmp(a->coords[i].key, b->coords[i].key) != 0 ||
            a->coords[i].value != b->coords[i].value)
            what = a->coords[i].key;
    for (size_t i = 0; what == NULL && i < a->tensor_count; i++) {
        const wex__local_tensor *x = &a->tensors[i], *y = &b->tensors[i];
        if (strcmp(x->name, y->name) != 0 || x->dtype != y->dtype ||
            x->ndim != y->ndim || x->bytes != y->bytes ||
            memcmp(x->shape, y->shape, x->ndim * 8) != 0)
            what = x->name;
    }
    for (size_t i = 0; what == NULL && i < a->piece_count; i++) {
        const wex__piece *x = &a->pieces[i], *y = &b->pieces[i];
        uint32_t local = a->tensors[x->tensor].ndim;
        if (x->canonical != y->canonical || x->tensor != y->tensor ||
            x->transform != y->transform || x->ndim != y->ndim ||
            memcmp(x->offset, y->offset, x->ndim * 8) != 0 ||
            memcmp(x->extent, y->extent, x->ndim * 8) != 0 ||
            memcmp(x->at, y->at, local * 8) != 0)
            what = a->tensors[x->tensor].name;
    }
    if (what == NULL)
        return 0;
    snprintf(why, WHY_MAX,
             "rank %llu: described twice, the two differ "
             "(first in %s)",
             (unsigned long long)a->rank, what);
    return -1;
}

/* ------------------------------------------------------------------ */
/* The checker on hand-built layouts of Qwen3-0.6B                      */
/* ------------------------------------------------------------------ */

static wex_model *qwen;
static const char *const Q =
    "model.layers.0.self_attn.q_proj.weight"; /* [2048, 1024] */
static const char *const K =
    "model.layers.0.self_attn.k_proj.weight"; /* [1024, 1024] */

static void qwen_load(void)
{
    ck_assert_int_eq(
        wex__model_load(WEX_MODELS_DIR "/Qwen3-0.6B.config.json", &qwen),
        WEX_OK);
}

static void qwen_free(void)
{
    wex__model_free(qwen);
}

static uint64_t add_local(wex__rank_layout *l, const char *name, uint64_t rows,
                          uint64_t cols)
{
    const uint64_t shape[2] = {rows, cols};
    wex_local_tensor_desc d = {sizeof(d), WEX_DTYPE_BF16, 2, 0, name, shape};
    wex_layout_builder b = {qwen, l};
    uint64_t t;

    ck_assert_int_eq(wex__layout_add_tensor(&b, &d, &t), WEX_OK);
    return t;
}

/* Rows [row, row + rows) of canonical `name` at local row `at`. */
static void add_rows(wex__rank_layout *l, uint64_t t, const char *name,
                     uint64_t row, uint64_t rows, uint64_t at)
{
    int64_t c = wex__model_find(qwen, name);
    const uint64_t off[2] = {row, 0}, ext[2] = {rows, 1024}, loc[2] = {at, 0};
    wex_piece_desc p = {sizeof(p), WEX_TRANSFORM_NONE, (uint64_t)c, off, ext,
                        loc};
    wex_layout_builder b = {qwen, l};

    ck_assert_int_ge(c, 0);
    ck_assert_int_eq(wex__layout_add_piece(&b, t, &p), WEX_OK);
}

/* Every canonical tensor whole in its own local tensor (the hf layout),
 * except `skip` (NULL: none), which the test lays out itself. */
static void whole_except(wex__rank_layout *l, uint64_t rank, const char *skip)
{
    static const uint64_t zeros[WEX_MAX_DIMS];
    wex_layout_builder b = {qwen, l};

    wex__rank_layout_init(l, rank);
    for (uint64_t i = 0; i < qwen->count; i++) {
        const wex__tensor *c = &qwen->tensors[i];
        wex_local_tensor_desc d = {sizeof(d), c->dtype, c->ndim,
                                   0,         c->name,  c->shape};
        wex_piece_desc p = {sizeof(p), WEX_TRANSFORM_NONE, i,
                            zeros,     c->shape,           zeros};
        uint64_t t;
        if (skip != NULL && strcmp(c->name, skip) == 0)
            continue;
        ck_assert_int_eq(wex__layout_add_tensor(&b, &d, &t), WEX_OK);
        ck_assert_int_eq(wex__layout_add_piece(&b, t, &p), WEX_OK);
    }
}

/* Checks the ranks as the engine test does; returns the first verdict. */
static int check_ranks(wex__rank_layout *ranks, size_t n, char *why)
{
    cover c;
    int rc = 0;

    cover_init(&c, qwen);
    for (size_t r = 0; r < n && rc == 0; r++) {
        rc = check_rank(qwen, &ranks[r], why);
        cover_add(&c, &ranks[r]);
    }
    if (rc == 0)
        rc = cover_check(&c, why);
    cover_fini(&c);
    for (size_t r = 0; r < n; r++)
        wex__rank_layout_fini(&ranks[r]);
    return rc;
}

START_TEST(checker_accepts_a_split_and_replicas)
{
    wex__rank_layout l[3];
    char why[WHY_MAX] = "";

    /* Rows of q_proj split over two ranks, everything else on both. */
    whole_except(&l[0], 0, Q);
    add_rows(&l[0], add_local(&l[0], "q0", 1024, 1024), Q, 0, 1024, 0);
    whole_except(&l[1], 1, Q);
    add_rows(&l[1], add_local(&l[1], "q1", 1024, 1024), Q, 1024, 1024, 0);
    ck_assert_msg(check_ranks(l, 2, why) == 0, "%s", why);
    /* Three replicas: c = 3 for every tensor. */
    for (int r = 0; r < 3; r++)
        whole_except(&l[r], (uint64_t)r, NULL);
    ck_assert_msg(check_ranks(l, 3, why) == 0, "%s", why);
}
END_TEST

START_TEST(checker_finds_a_gap)
{
    wex__rank_layout l[1];
    char why[WHY_MAX] = "";

    whole_except(&l[0], 0, Q);
    add_rows(&l[0], add_local(&l[0], "q", 2048, 1024), Q, 0, 1536, 0);
    ck_assert_int_eq(check_ranks(l, 1, why), -1);
    ck_assert_msg(
        strstr(why,
               "tensor model.layers.0.self_attn.q_proj.weight: element "
               "[1536, 0] is held 0 times but element [0, 0] 1 times") != NULL,
        "%s", why);
}
END_TEST

START_TEST(checker_finds_a_tensor_no_rank_holds)
{
    wex__rank_layout l[2];
    char why[WHY_MAX] = "";

    whole_except(&l[0], 0, K);
    whole_except(&l[1], 1, K);
    ck_assert_int_eq(check_ranks(l, 2, why), -1);
    ck_assert_msg(
        strstr(why, "tensor model.layers.0.self_attn.k_proj.weight: no rank") !=
            NULL,
        "%s", why);
}
END_TEST

START_TEST(checker_finds_a_part_held_twice)
{
    wex__rank_layout l[2];
    char why[WHY_MAX] = "";

    /* Rank 1 holds q_proj rows [512, 1024) again, in its own tensor. */
    whole_except(&l[0], 0, NULL);
    whole_except(&l[1], 1, Q);
    add_rows(&l[1], add_local(&l[1], "q", 512, 1024), Q, 512, 512, 0);
    ck_assert_int_eq(check_ranks(l, 2, why), -1);
    ck_assert_msg(
        strstr(why, "q_proj.weight: element [0, 0] is held 1 times but element "
                    "[512, 0] 2 times (by ranks 0 1)") != NULL,
        "%s", why);
}
END_TEST

START_TEST(checker_finds_an_overlap_in_a_local_tensor)
{
    wex__rank_layout l[1];
    char why[WHY_MAX] = "";
    uint64_t t;

    /* A fused [q; k] tensor whose k rows start 512 rows too early. */
    whole_except(&l[0], 0, Q);
    t = add_local(&l[0], "qk", 3072, 1024);
    add_rows(&l[0], t, Q, 0, 2048, 0);
    add_rows(&l[0], t, K, 0, 1024, 1536);
    ck_assert_int_eq(check_ranks(l, 1, why), -1);
    ck_assert_msg(
        strstr(why, "rank 0: local tensor qk: element [1536, 0] is in 2 pieces "
                    "(of model.layers.0.self_attn.q_proj.weight and "
                    "model.layers.0.self_attn.k_proj.weight)") != NULL,
        "%s", why);
}
END_TEST

START_TEST(checker_finds_wrong_bytes_and_a_stray_piece)
{
    wex__rank_layout l[1];
    char why[WHY_MAX] = "";

    whole_except(&l[0], 4, NULL);
    l[0].bytes += 2;
    ck_assert_int_eq(check_rank(qwen, &l[0], why), -1);
    ck_assert_msg(strstr(why, "rank 4: ") &&
                      strstr(why, "bytes, its local tensors hold"),
                  "%s", why);
    l[0].bytes -= 2;
    l[0].pieces[3].at[0] = 1; /* past what the builder allowed */
    ck_assert_int_eq(check_rank(qwen, &l[0], why), -1);
    ck_assert_msg(strstr(why, "leaves it in dim 0") != NULL, "%s", why);
    wex__rank_layout_fini(&l[0]);
}
END_TEST

START_TEST(checker_compares_two_descriptions)
{
    wex__rank_layout a, b;
    char why[WHY_MAX] = "";

    whole_except(&a, 0, NULL);
    whole_except(&b, 0, NULL);
    ck_assert_int_eq(same_layout(&a, &b, why), 0);
    b.pieces[5].offset[0] = 1;
    ck_assert_int_eq(same_layout(&a, &b, why), -1);
    ck_assert_msg(strstr(why, "rank 0: described twice") != NULL, "%s", why);
    wex__rank_layout_fini(&a);
    wex__rank_layout_fini(&b);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Seeded random parallel configs                                      */
/* ------------------------------------------------------------------ */

static uint64_t next(uint64_t *s) /* splitmix64 */
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15u);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
    return z ^ (z >> 31);
}

static uint64_t size_of(uint64_t *s)
{
    static const uint64_t sizes[] = {1, 2, 3, 4, 8};

    return sizes[next(s) % 5];
}

/* A value dividing `n`, drawn from the same sizes. */
static uint64_t divisor_of(uint64_t *s, uint64_t n)
{
    uint64_t v;

    do
        v = size_of(s);
    while (n % v != 0);
    return v;
}

/* Size 1 is left out half the time, so engines' defaults are used too. */
static void put(cJSON *o, uint64_t *s, const char *key, uint64_t v)
{
    if (v != 1 || next(s) % 2)
        cJSON_AddNumberToObject(o, key, (double)v);
}

/* What the config generator knows of a model. */
typedef struct facts {
    int moe;         /* has routed experts */
    uint64_t layers; /* num_hidden_layers */
} facts;

/* first/last_stage_layers for a pipeline that `pp` does not divide
 * evenly (61 layers), chosen so the middle stages share the rest evenly;
 * with two stages, first and last are the whole model. */
static void uneven_stages(cJSON *o, uint64_t *s, uint64_t layers, uint64_t pp)
{
    uint64_t first = pp == 2 ? layers / 2 : 1 + next(s) % 3, last;

    if (layers % pp == 0 || layers < 2 * pp) /* even, or too few to split */
        return;
    last = pp == 2 ? layers - first : (layers - first) % (pp - 2);
    cJSON_AddNumberToObject(o, "first_stage_layers", (double)first);
    cJSON_AddNumberToObject(o, "last_stage_layers",
                            (double)(last ? last : pp - 2));
}

/* One parallel config for `engine`. Sizes are drawn so that most obey
 * the engine's rules (an EP size only for a model with experts, grids
 * that tile, stages that split the layers), but one draw in five ignores
 * them: refusals are tested too. */
static cJSON *candidate(const char *engine, const facts *f, uint64_t *s)
{
    int moe = f->moe;
    cJSON *o = cJSON_CreateObject();
    uint64_t tp = size_of(s), pp = size_of(s), dp = size_of(s);
    int wild = next(s) % 5 == 0;

    if (strcmp(engine, "fsdp") == 0) {
        put(o, s, "dp", dp);
    } else if (strcmp(engine, "megatron") == 0) {
        /* Megatron regroups each stage's tp x dp ranks as etp x ep x edp. */
        uint64_t etp = wild ? size_of(s) : divisor_of(s, tp);
        uint64_t ep = wild  ? size_of(s)
                      : moe ? divisor_of(s, tp * dp / etp)
                            : 1;
        put(o, s, "tp", tp);
        put(o, s, "pp", pp);
        put(o, s, "ep", ep);
        put(o, s, "etp", etp);
        put(o, s, "dp", dp);
        if (!wild) {
            uneven_stages(o, s, f->layers, pp);
        } else if (pp > 1) {
            if (next(s) % 2)
                put(o, s, "first_stage_layers", 1 + next(s) % 3);
            if (next(s) % 2)
                put(o, s, "last_stage_layers", 1 + next(s) % 3);
        }
    } else if (strcmp(engine, "vllm") == 0) {
        /* vLLM's expert parallelism spans all tp x dp ranks. */
        put(o, s, "tp", tp);
        put(o, s, "pp", pp);
        put(o, s, "dp", dp);
        put(o, s, "ep", wild ? size_of(s) : moe && next(s) % 2 ? tp * dp : 1);
    } else if (strcmp(engine, "sglang") == 0) {
        /* SGLang's ep and DP attention both subdivide the tp group. */
        put(o, s, "tp", tp);
        put(o, s, "pp", pp);
        put(o, s, "ep", wild ? size_of(s) : moe ? divisor_of(s, tp) : 1);
        put(o, s, "attn_dp", wild ? size_of(s) : divisor_of(s, tp));
        put(o, s, "dp", dp);
    }
    need(o != NULL);
    return o;
}

/* ------------------------------------------------------------------ */
/* Every (engine, model) pair                                          */
/* ------------------------------------------------------------------ */

static const char *const engines[] = {"hf", "fsdp", "megatron", "vllm",
                                      "sglang"};
#define ENGINES (sizeof(engines) / sizeof(engines[0]))
#define CANDIDATES 40
/* A piece costs a few microseconds (two describes and the checks), and
 * a rank holds about one piece per canonical tensor. Accepted configs are
 * checked in draw order while ranks x tensors fits this budget, so the
 * biggest models take seconds, not minutes; the cheapest of the rest then
 * make up the minimum below. Small models check every accepted config. */
#define PIECE_BUDGET 1000000u

static char *models[64];
static size_t model_count;
static const char *pairs[ENGINES * 64][2]; /* engine, model file */
static size_t pair_count;

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static const char *models_dir(void)
{
    const char *dir = getenv("WEX_MODELS_DIR");

    return dir && dir[0] ? dir : WEX_MODELS_DIR;
}

/* Configs an engine must accept per model so the test cannot pass
 * vacuously: hf has exactly one; the others accept most small sizes. */
static size_t min_accepted(const char *engine)
{
    return strcmp(engine, "hf") == 0 ? 1 : 3;
}

/* Describes every rank of `e` (twice), checking all four properties.
 * Returns the pieces described. */
static uint64_t check_engine(wex__engine *e, const wex_model *m,
                             const char *ctx)
{
    char why[WHY_MAX] = "";
    uint64_t pieces = 0;
    cover c;

    cover_init(&c, m);
    c.no_mtp = strcmp(e->plugin->manifest.name, "vllm") == 0 ||
               strcmp(e->plugin->manifest.name, "sglang") == 0;
    for (uint64_t r = 0; r < e->ranks; r++) {
        wex__rank_layout a, b;
        need_msg(wex__engine_describe(e, r, &a) == WEX_OK, "%s: rank %llu: %s",
                 ctx, (unsigned long long)r, wex__last_error());
        need_msg(wex__engine_describe(e, r, &b) == WEX_OK,
                 "%s: rank %llu again: %s", ctx, (unsigned long long)r,
                 wex__last_error());
        need_msg(check_rank(m, &a, why) == 0, "%s: %s", ctx, why);
        need_msg(same_layout(&a, &b, why) == 0, "%s: %s", ctx, why);
        cover_add(&c, &a);
        pieces += a.piece_count;
        wex__rank_layout_fini(&a);
        wex__rank_layout_fini(&b);
    }
    need_msg(cover_check(&c, why) == 0, "%s: over all %llu ranks: %s", ctx,
             (unsigned long long)e->ranks, why);
    cover_fini(&c);
    return pieces;
}

typedef struct cand {
    cJSON *parallel;
    char *text;
    uint64_t ranks; /* 0: refused or over the rank cap */
    int checked;
} cand;

/* One (engine, model) pair: draw distinct candidates, open each (cheap:
 * that is where engines refuse), then describe and check accepted ones
 * within the budget. */
typedef struct pair_run {
    const char *engine;
    const wex_model *m;
    wex__registry *registry;
    char model[256];
    cand c[CANDIDATES];
    size_t tried, accepted, refused, over_cap, checked;
    uint64_t cap, ranks, pieces;
    char refusal[512]; /* the first, for the "too few accepted" message */
} pair_run;

static void context(const pair_run *run, const cand *c, char *ctx, size_t size)
{
    snprintf(ctx, size, "engine %s, model %s, parallel %s", run->engine,
             run->model, c->text);
}

/* WEX_PROPS_VERBOSE=1 prints every candidate's verdict. */
static void open_candidate(pair_run *run, cand *c)
{
    int verbose = getenv("WEX_PROPS_VERBOSE") != NULL;
    wex__engine *e = NULL;
    char ctx[1024];

    context(run, c, ctx, sizeof(ctx));
    if (wex__engine_open(run->registry, run->engine, run->m, c->parallel, NULL,
                         &e) != WEX_OK) {
        /* A refusal is fine; a silent one is not (the host fills in
         * "failed without a message" for a plugin that said nothing). */
        const char *msg = wex__last_error();
        need_msg(msg[0] != '\0' &&
                     strstr(msg, "failed without a message") == NULL,
                 "%s: refused without saying why: '%s'", ctx, msg);
        if (verbose)
            printf("  %s: refused: %s\n", ctx, msg);
        if (run->refused++ == 0)
            snprintf(run->refusal, sizeof(run->refusal), "%s: %s", c->text,
                     msg);
        return;
    }
    need_msg(e->ranks > 0, "%s: accepted with 0 ranks", ctx);
    if (verbose)
        printf("  %s: %llu ranks\n", ctx, (unsigned long long)e->ranks);
    if (e->ranks > run->cap) {
        run->over_cap++;
    } else {
        c->ranks = e->ranks;
        run->accepted++;
    }
    wex__engine_close(e);
}

static void check_candidate(pair_run *run, cand *c)
{
    wex__engine *e = NULL;
    char ctx[1024];

    context(run, c, ctx, sizeof(ctx));
    need_msg(wex__engine_open(run->registry, run->engine, run->m, c->parallel,
                              NULL, &e) == WEX_OK,
             "%s: accepted once, refused now: %s", ctx, wex__last_error());
    need_msg(e->ranks == c->ranks, "%s: %llu ranks, then %llu", ctx,
             (unsigned long long)c->ranks, (unsigned long long)e->ranks);
    run->pieces += check_engine(e, run->m, ctx);
    run->ranks += e->ranks;
    run->checked++;
    c->checked = 1;
    wex__engine_close(e);
}

static facts facts_of(const wex_model *m)
{
    const cJSON *layers =
        cJSON_GetObjectItemCaseSensitive(m->config, "num_hidden_layers");
    facts f = {0, cJSON_IsNumber(layers) ? (uint64_t)layers->valuedouble : 1};

    for (uint64_t i = 0; i < m->count && !f.moe; i++)
        f.moe = strstr(m->tensors[i].name, ".experts.") != NULL;
    return f;
}

static void run_pair(pair_run *run, uint64_t seed)
{
    facts f = facts_of(run->m);
    size_t want = min_accepted(run->engine);

    for (int draw = 0; draw < (strcmp(run->engine, "hf") == 0 ? 1 : CANDIDATES);
         draw++) {
        cand *c = &run->c[run->tried];
        int dup = 0;
        c->parallel = candidate(run->engine, &f, &seed);
        c->text = cJSON_PrintUnformatted(c->parallel);
        need(c->text != NULL);
        for (size_t k = 0; k < run->tried && !dup; k++)
            dup = strcmp(run->c[k].text, c->text) == 0;
        if (dup) {
            cJSON_Delete(c->parallel);
            free(c->text);
            continue;
        }
        run->tried++;
        open_candidate(run, c);
    }
    for (size_t k = 0; k < run->tried; k++) {
        cand *c = &run->c[k];
        if (c->ranks > 0 &&
            run->pieces + c->ranks * run->m->count <= PIECE_BUDGET)
            check_candidate(run, c);
    }
    while (run->checked < want) { /* the cheapest unchecked, if any */
        cand *best = NULL;
        for (size_t k = 0; k < run->tried; k++)
            if (run->c[k].ranks > 0 && !run->c[k].checked &&
                (best == NULL || run->c[k].ranks < best->ranks))
                best = &run->c[k];
        if (best == NULL)
            break;
        check_candidate(run, best);
    }
}

START_TEST(engine_properties)
{
    const char *file = pairs[_i][1];
    uint64_t seed = 0x77657870726f7073u;
    pair_run *run = calloc(1, sizeof(*run));
    char path[4096];
    wex_model *m = NULL;
    struct timespec t0, t1;

    clock_gettime(CLOCK_MONOTONIC, &t0);
    need(run != NULL);
    run->engine = pairs[_i][0];
    snprintf(path, sizeof(path), "%s/%s", models_dir(), file);
    snprintf(run->model, sizeof(run->model), "%.*s",
             (int)(strlen(file) - strlen(".config.json")), file);
    ck_assert_msg(wex__model_load(path, &m) == WEX_OK, "%s", wex__last_error());
    run->m = m;
    setenv("WEX_PLUGIN_MANIFESTS", WEX_BUILD_PLUGINS, 1);
    ck_assert_int_eq(wex__registry_scan(&run->registry), WEX_OK);
    /* Every rank is described: fewer of them for the biggest models. */
    run->cap = m->total_bytes > 100000000000u ? 16 : 64;
    /* Seeded per pair, by name, so adding a model changes no other pair. */
    for (const char *p = run->engine; *p; p++)
        seed = (seed ^ (uint8_t)*p) * 0x100000001b3u;
    for (const char *p = file; *p; p++)
        seed = (seed ^ (uint8_t)*p) * 0x100000001b3u;

    run_pair(run, seed);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("engine %-8s %-20s configs: %2zu tried, %2zu accepted, %2zu "
           "checked, %2zu refused, "
           "%2zu over %2llu ranks; %3llu ranks and %7llu pieces described, "
           "%.1f s\n",
           run->engine, run->model, run->tried, run->accepted, run->checked,
           run->refused, run->over_cap, (unsigned long long)run->cap,
           (unsigned long long)run->ranks, (unsigned long long)run->pieces,
           (double)(t1.tv_sec - t0.tv_sec) +
               (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
    fflush(stdout);
    ck_assert_msg(run->accepted >= min_accepted(run->engine),
                  "engine %s, model %s: only %zu of %zu configs accepted (%zu "
                  "over %llu ranks), "
                  "need %zu; first refusal: %s",
                  run->engine, run->model, run->accepted, run->tried,
                  run->over_cap, (unsigned long long)run->cap,
                  min_accepted(run->engine), run->refusal);
    for (size_t k = 0; k < run->tried; k++) {
        cJSON_Delete(run->c[k].parallel);
        free(run->c[k].text);
    }
    wex__registry_free(run->registry);
    wex__model_free(m);
    free(run);
}
END_TEST

/* The (engine, model) pairs to test: engines whose plugin is built,
 * times every model config; WEX_PROPS_ONLY=vllm/Qwen3-8B (a substring of
 * "engine/model.config.json") narrows them when chasing a failure. */
static void find_pairs(void)
{
    const char *only = getenv("WEX_PROPS_ONLY");
    DIR *dir = opendir(models_dir());
    struct dirent *d;

    while (dir != NULL && (d = readdir(dir)) != NULL) {
        size_t n = strlen(d->d_name);
        if (n > 12 && strcmp(d->d_name + n - 12, ".config.json") == 0 &&
            model_count < 64)
            models[model_count++] = strdup(d->d_name);
    }
    if (dir != NULL)
        closedir(dir);
    qsort(models, model_count, sizeof(*models), by_name);
    for (size_t e = 0; e < ENGINES; e++) {
        char manifest[4096];
        snprintf(manifest, sizeof(manifest), "%s/engine-%s.json",
                 WEX_BUILD_PLUGINS, engines[e]);
        if (access(manifest, R_OK) != 0)
            continue; /* models_and_engines_are_found fails on this */
        for (size_t k = 0; k < model_count; k++) {
            char name[512];
            snprintf(name, sizeof(name), "%s/%s", engines[e], models[k]);
            if (only != NULL && strstr(name, only) == NULL)
                continue;
            pairs[pair_count][0] = engines[e];
            pairs[pair_count++][1] = models[k];
        }
    }
}

START_TEST(models_and_engines_are_found)
{
    ck_assert_msg(model_count >= 1, "no *.config.json in %s", models_dir());
    for (size_t e = 0; e < ENGINES; e++) {
        char manifest[4096];
        snprintf(manifest, sizeof(manifest), "%s/engine-%s.json",
                 WEX_BUILD_PLUGINS, engines[e]);
        ck_assert_msg(access(manifest, R_OK) == 0,
                      "the %s engine is not built in %s", engines[e],
                      WEX_BUILD_PLUGINS);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("engine_props");
    TCase *checker = tcase_create("checker"), *props = tcase_create("engines");
    int rc;

    find_pairs();
    tcase_add_checked_fixture(checker, qwen_load, qwen_free);
    tcase_add_test(checker, checker_accepts_a_split_and_replicas);
    tcase_add_test(checker, checker_finds_a_gap);
    tcase_add_test(checker, checker_finds_a_tensor_no_rank_holds);
    tcase_add_test(checker, checker_finds_a_part_held_twice);
    tcase_add_test(checker, checker_finds_an_overlap_in_a_local_tensor);
    tcase_add_test(checker, checker_finds_wrong_bytes_and_a_stray_piece);
    tcase_add_test(checker, checker_compares_two_descriptions);
    suite_add_tcase(s, checker);
    /* One forked test per pair; the biggest models take seconds each,
     * longer under ASan, so the default 4 s timeout is far too short. */
    tcase_set_timeout(props, 600);
    tcase_add_test(props, models_and_engines_are_found);
    tcase_add_loop_test(props, engine_properties, 0, (int)pair_count);
    suite_add_tcase(s, props);
    rc = wex_test_run(s);
    for (size_t k = 0; k < model_count; k++)
        free(models[k]);
    return rc;
}
