#include "layout_document.h"

#include <stdlib.h>

#include "catalog.h"
#include "error.h"

static cJSON *u64_array(const uint64_t *v, uint32_t n)
{
    cJSON *a = cJSON_CreateArray();

    for (uint32_t i = 0; a != NULL && i < n; i++)
        cJSON_AddItemToArray(a, cJSON_CreateNumber((double)v[i]));
    return a;
}

cJSON *wex__rank_document(const wex_model *model, const wex__rank_layout *l)
{
    cJSON *r = cJSON_CreateObject();
    cJSON *coords = cJSON_AddObjectToObject(r, "coords");
    cJSON *tensors = cJSON_AddArrayToObject(r, "tensors");
    cJSON **pieces = calloc(l->tensor_count + 1, sizeof(*pieces));

    if (r == NULL || coords == NULL || tensors == NULL || pieces == NULL) {
        cJSON_Delete(r);
        free(pieces);
        return NULL;
    }
    cJSON_AddNumberToObject(r, "rank", (double)l->rank);
    for (size_t i = 0; i < l->coord_count; i++)
        cJSON_AddNumberToObject(coords, l->coords[i].key,
                                (double)l->coords[i].value);
    for (size_t i = 0; i < l->tensor_count; i++) {
        const wex__local_tensor *t = &l->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", wex_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", u64_array(t->shape, t->ndim));
        pieces[i] = cJSON_AddArrayToObject(o, "pieces");
        cJSON_AddItemToArray(tensors, o);
    }
    for (size_t i = 0; i < l->piece_count; i++) {
        const wex__piece *p = &l->pieces[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "tensor", model->tensors[p->canonical].name);
        cJSON_AddItemToObject(o, "offset", u64_array(p->offset, p->ndim));
        cJSON_AddItemToObject(o, "extent", u64_array(p->extent, p->ndim));
        cJSON_AddItemToObject(o, "at",
                              u64_array(p->at, l->tensors[p->tensor].ndim));
        cJSON_AddItemToArray(pieces[p->tensor], o);
    }
    free(pieces);
    return r;
}

cJSON *wex__model_document(const wex_model *model)
{
    cJSON *m = cJSON_CreateObject();
    cJSON *tensors;

    cJSON_AddStringToObject(m, "architecture", model->architecture);
    tensors = cJSON_AddArrayToObject(m, "tensors");
    for (uint64_t i = 0; tensors != NULL && i < model->count; i++) {
        const wex__tensor *t = &model->tensors[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON_AddStringToObject(o, "dtype", wex_dtype_name(t->dtype));
        cJSON_AddItemToObject(o, "shape", u64_array(t->shape, t->ndim));
        cJSON_AddItemToArray(tensors, o);
    }
    cJSON_AddNumberToObject(m, "total_bytes", (double)model->total_bytes);
    return m;
}

cJSON *wex__layout_document(wex__engine *e, uint64_t first, uint64_t last)
{
    cJSON *doc = cJSON_CreateObject(), *ranks;
    wex_status st = WEX_OK;

    if (doc == NULL)
        goto nomem;
    cJSON_AddItemToObject(doc, "model", wex__model_document(e->model));
    cJSON_AddStringToObject(doc, "engine", e->plugin->manifest.name);
    cJSON_AddItemToObject(doc, "parallel",
                          e->parallel.root
                              ? cJSON_Duplicate(e->parallel.root, 1)
                              : cJSON_CreateObject());
    cJSON_AddNumberToObject(doc, "ranks", (double)e->ranks);
    ranks = cJSON_AddArrayToObject(doc, "layout");
    if (ranks == NULL)
        goto nomem;
    for (uint64_t r = first; st == WEX_OK && r <= last; r++) {
        wex__rank_layout l;
        cJSON *one = NULL;

        st = wex__engine_describe(e, r, &l);
        if (st == WEX_OK && (one = wex__rank_document(e->model, &l)) == NULL)
            st = wex__error(WEX_ERR_NOMEM, "layout: out of memory");
        if (one != NULL)
            cJSON_AddItemToArray(ranks, one);
        wex__rank_layout_fini(&l);
    }
    if (st == WEX_OK)
        return doc;
    cJSON_Delete(doc);
    return NULL;
nomem:
    cJSON_Delete(doc);
    wex__error(WEX_ERR_NOMEM, "layout: out of memory");
    return NULL;
}
