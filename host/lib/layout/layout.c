#include "layout.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_copy.h"
#include "error.h"
#include "quantize.h"

void wex__rank_layout_init(wex__rank_layout *l, uint64_t rank)
{
    memset(l, 0, sizeof(*l));
    l->rank = rank;
}

void wex__rank_layout_fini(wex__rank_layout *l)
{
    for (size_t i = 0; i < l->coord_count; i++)
        free(l->coords[i].key);
    free(l->coords);
    for (size_t i = 0; i < l->tensor_count; i++)
        free(l->tensors[i].name);
    free(l->tensors);
    free(l->pieces);
    memset(l, 0, sizeof(*l));
}

/* Doubles *cap until it exceeds `need`; returns the grown array. */
static void *grow(void *array, size_t *cap, size_t need, size_t size)
{
    size_t n = *cap ? *cap : 16;
    void *grown;

    if (need < *cap)
        return array;
    while (n <= need)
        n *= 2;
    grown = realloc(array, n * size);
    if (grown != NULL)
        *cap = n;
    return grown;
}

wex_status wex__layout_set_coord(wex_layout_builder *b, const char *key,
                                 int64_t value)
{
    wex__rank_layout *l = b->out;
    wex__coord *grown;

    if (key == NULL || key[0] == '\0')
        return wex__error(WEX_ERR_INVALID, "layout_set_coord: empty key");
    for (size_t i = 0; i < l->coord_count; i++)
        if (strcmp(l->coords[i].key, key) == 0) {
            l->coords[i].value = value;
            return WEX_OK;
        }
    grown = realloc(l->coords, (l->coord_count + 1) * sizeof(*grown));
    if (grown == NULL)
        return wex__error(WEX_ERR_NOMEM, "layout: out of memory");
    l->coords = grown;
    grown[l->coord_count].key = strdup(key);
    if (grown[l->coord_count].key == NULL)
        return wex__error(WEX_ERR_NOMEM, "layout: out of memory");
    grown[l->coord_count++].value = value;
    return WEX_OK;
}

wex_status wex__layout_add_tensor(wex_layout_builder *b,
                                  const wex_local_tensor_desc *given,
                                  uint64_t *tensor_p)
{
    wex__rank_layout *l = b->out;
    wex_local_tensor_desc full, *d = &full;
    wex__local_tensor *t;
    uint64_t elements = 1;
    void *grown;

    if (given != NULL && given->struct_size >= WEX_LOCAL_TENSOR_DESC_SIZE_1_0)
        wex__abi_in(&full, sizeof(full), given);
    if (given == NULL || given->struct_size < WEX_LOCAL_TENSOR_DESC_SIZE_1_0 ||
        d->name == NULL || d->shape == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "rank %llu: layout_add_tensor: incomplete "
                          "descriptor",
                          (unsigned long long)l->rank);
    if (wex_dtype_size(d->dtype) == 0 || d->ndim < 1 || d->ndim > WEX_MAX_DIMS)
        return wex__error(WEX_ERR_INVALID,
                          "rank %llu: local tensor %s: bad dtype %u or "
                          "rank %u",
                          (unsigned long long)l->rank, d->name, d->dtype,
                          d->ndim);
    grown =
        grow(l->tensors, &l->tensor_cap, l->tensor_count, sizeof(*l->tensors));
    if (grown == NULL)
        return wex__error(WEX_ERR_NOMEM, "layout: out of memory");
    l->tensors = grown;
    t = &l->tensors[l->tensor_count];
    memset(t, 0, sizeof(*t));
    t->name = strdup(d->name);
    if (t->name == NULL)
        return wex__error(WEX_ERR_NOMEM, "layout: out of memory");
    t->dtype = d->dtype;
    t->ndim = d->ndim;
    for (uint32_t i = 0; i < d->ndim; i++) {
        t->shape[i] = d->shape[i];
        elements *= d->shape[i];
    }
    t->bytes = elements * wex_dtype_size(d->dtype);
    l->bytes += t->bytes;
    *tensor_p = l->tensor_count++;
    return WEX_OK;
}

int64_t wex__scale_of(const wex_model *model, uint64_t canonical)
{
    return model->scale_of[canonical];
}

int64_t wex__weight_of_scale(const wex_model *model, uint64_t canonical)
{
    return model->weight_of[canonical];
}

int wex__convertible(const wex_model *model, uint64_t canonical,
                     uint32_t local_dtype)
{
    uint32_t from = model->tensors[canonical].dtype;

    return wex__is_float_dtype(local_dtype) && from != local_dtype &&
           (wex__is_float_dtype(from) || wex__scale_of(model, canonical) >= 0);
}

/* The piece must name a real canonical tensor, lie inside it, and land
 * inside the local tensor (its box maps onto the trailing dims). */
static wex_status check_piece(const wex_layout_builder *b,
                              const wex__local_tensor *t,
                              const wex_piece_desc *p)
{
    const wex__tensor *c;
    uint32_t lead;

    if (p->canonical >= b->model->count)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: piece names canonical tensor "
                          "%llu of %llu",
                          t->name, (unsigned long long)p->canonical,
                          (unsigned long long)b->model->count);
    c = &b->model->tensors[p->canonical];
    if (c->ndim > t->ndim)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: piece of %s has %u dims, the "
                          "local tensor only %u",
                          t->name, c->name, c->ndim, t->ndim);
    /* Only the 2-d weights an FP8 checkpoint quantizes by blocks are ever
     * fp8: never norms, embeddings, router gates or lm_head. */
    if (t->dtype == WEX_DTYPE_F8_E4M3 && c->dtype != WEX_DTYPE_F8_E4M3)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s (F8_E4M3): piece of %s (%s): an "
                          "FP8 checkpoint stores no such tensor in fp8 (only "
                          "2-d weights with block scales); hold it as %s",
                          t->name, c->name, wex_dtype_name(c->dtype),
                          wex_dtype_name(c->dtype));
    if (p->transform == WEX_TRANSFORM_NONE && c->dtype != t->dtype)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s (%s): piece of %s (%s) needs a "
                          "dtype conversion",
                          t->name, wex_dtype_name(t->dtype), c->name,
                          wex_dtype_name(c->dtype));
    if (p->transform == WEX_TRANSFORM_CONVERT &&
        !wex__convertible(b->model, p->canonical, t->dtype))
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s (%s): piece of %s (%s): the host "
                          "converts only to bf16, f16 or f32, from another "
                          "float dtype or from an fp8 weight with its block "
                          "scales (%s_scale_inv)",
                          t->name, wex_dtype_name(t->dtype), c->name,
                          wex_dtype_name(c->dtype), c->name);
    if (p->transform > WEX_TRANSFORM_CONVERT)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: piece of %s: unknown transform %u",
                          t->name, c->name, p->transform);
    lead = t->ndim - c->ndim;
    for (uint32_t i = 0; i < t->ndim; i++) {
        uint64_t ext = i < lead ? 1 : p->extent[i - lead];
        if (p->at[i] >= t->shape[i] || ext > t->shape[i] - p->at[i])
            return wex__error(WEX_ERR_INVALID,
                              "local tensor %s: piece of %s overflows "
                              "dim %u (at %llu + %llu > %llu)",
                              t->name, c->name, i, (unsigned long long)p->at[i],
                              (unsigned long long)ext,
                              (unsigned long long)t->shape[i]);
    }
    for (uint32_t i = 0; i < c->ndim; i++)
        if (p->extent[i] == 0 || p->offset[i] >= c->shape[i] ||
            p->extent[i] > c->shape[i] - p->offset[i])
            return wex__error(WEX_ERR_INVALID,
                              "local tensor %s: piece box dim %u "
                              "[%llu, +%llu) is outside %s's %llu",
                              t->name, i, (unsigned long long)p->offset[i],
                              (unsigned long long)p->extent[i], c->name,
                              (unsigned long long)c->shape[i]);
    return WEX_OK;
}

wex_status wex__layout_add_piece(wex_layout_builder *b, uint64_t tensor,
                                 const wex_piece_desc *given)
{
    wex__rank_layout *l = b->out;
    wex_piece_desc full, *p = &full;
    const wex__local_tensor *t;
    wex__piece *piece;
    wex_status status;
    void *grown;

    if (tensor >= l->tensor_count)
        return wex__error(WEX_ERR_INVALID,
                          "rank %llu: piece for local tensor %llu of %zu",
                          (unsigned long long)l->rank,
                          (unsigned long long)tensor, l->tensor_count);
    t = &l->tensors[tensor];
    if (given != NULL && given->struct_size >= WEX_PIECE_DESC_SIZE_1_0)
        wex__abi_in(&full, sizeof(full), given);
    if (given == NULL || given->struct_size < WEX_PIECE_DESC_SIZE_1_0 ||
        p->offset == NULL || p->extent == NULL || p->at == NULL)
        return wex__error(WEX_ERR_INVALID,
                          "local tensor %s: incomplete piece descriptor",
                          t->name);
    status = check_piece(b, t, p);
    if (status != WEX_OK)
        return wex__error_prefix(status, "rank %llu",
                                 (unsigned long long)l->rank);
    grown = grow(l->pieces, &l->piece_cap, l->piece_count, sizeof(*l->pieces));
    if (grown == NULL)
        return wex__error(WEX_ERR_NOMEM, "layout: out of memory");
    l->pieces = grown;
    piece = &l->pieces[l->piece_count++];
    memset(piece, 0, sizeof(*piece));
    piece->canonical = p->canonical;
    piece->tensor = tensor;
    piece->transform = p->transform;
    piece->ndim = b->model->tensors[p->canonical].ndim;
    memcpy(piece->offset, p->offset, piece->ndim * sizeof(uint64_t));
    memcpy(piece->extent, p->extent, piece->ndim * sizeof(uint64_t));
    memcpy(piece->at, p->at, t->ndim * sizeof(uint64_t));
    return WEX_OK;
}

void wex__piece_runs_init(wex__box_runs *w, const wex__rank_layout *layout,
                          const wex_model *model, const wex__piece *p)
{
    const wex__local_tensor *t = &layout->tensors[p->tensor];
    const wex__tensor *c = &model->tensors[p->canonical];
    wex__box_side local = {t->ndim, t->shape, p->at};
    wex__box_side canon = {c->ndim, c->shape, p->offset};

    wex__box_runs_init(w, p->ndim, p->extent, wex_dtype_size(t->dtype), &local,
                       &canon);
}
