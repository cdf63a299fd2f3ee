#include "safetensors.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>
#include <wex/bytes.h>

#include "error.h"

uint32_t wex__st_dtype(const char *name)
{
    for (uint32_t d = 1; d < WEX_DTYPE_COUNT; d++)
        if (strcmp(wex_dtype_name(d), name) == 0)
            return d;
    return WEX_DTYPE_INVALID;
}

void wex__st_free(wex__st_header *h)
{
    for (size_t i = 0; h->tensors != NULL && i < h->count; i++)
        free(h->tensors[i].name);
    free(h->tensors);
    memset(h, 0, sizeof(*h));
}

/* A whole number in [0, 2^53] (what a JSON double holds exactly). */
static int whole(const cJSON *v, uint64_t *out)
{
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 ||
        v->valuedouble > 9007199254740992.0 ||
        v->valuedouble != (double)(uint64_t)v->valuedouble)
        return 0;
    *out = (uint64_t)v->valuedouble;
    return 1;
}

static wex_status bad(const char *path, const char *name, const char *what)
{
    if (name == NULL)
        return wex__error(WEX_ERR_INVALID, "%s: %s", path, what);
    return wex__error(WEX_ERR_INVALID, "%s: tensor %s: %s", path, name, what);
}

static wex_status entry(const char *path, const cJSON *e, uint64_t data_size,
                        wex__st_tensor *t)
{
    const char *name = e->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    uint64_t elements = 1, esize;
    const cJSON *d;

    if (!cJSON_IsObject(e))
        return bad(path, name,
                   "expected an object with dtype, shape and "
                   "data_offsets");
    if (!cJSON_IsString(dtype))
        return bad(path, name, "dtype: expected a string");
    t->dtype = wex__st_dtype(dtype->valuestring);
    if (t->dtype == WEX_DTYPE_INVALID)
        return wex__error(WEX_ERR_INVALID,
                          "%s: tensor %s: dtype \"%s\" is "
                          "not one wex knows (BF16, F16, F32, F64, F8_E4M3, "
                          "F8_E5M2, I8, U8, I32, I64)",
                          path, name, dtype->valuestring);
    if (!cJSON_IsArray(shape) || cJSON_GetArraySize(shape) > (int)WEX_MAX_DIMS)
        return bad(path, name, "shape: expected an array of at most 8 sizes");
    t->ndim = 0;
    cJSON_ArrayForEach(d, shape)
    {
        if (!whole(d, &t->shape[t->ndim]))
            return bad(path, name, "shape: expected whole numbers");
        if (t->shape[t->ndim] != 0 && elements > UINT64_MAX / t->shape[t->ndim])
            return bad(path, name, "shape: too many elements");
        elements *= t->shape[t->ndim++];
    }
    if (!cJSON_IsArray(offs) || cJSON_GetArraySize(offs) != 2 ||
        !whole(cJSON_GetArrayItem(offs, 0), &t->begin) ||
        !whole(cJSON_GetArrayItem(offs, 1), &t->end) || t->begin > t->end)
        return bad(path, name,
                   "data_offsets: expected [begin, end] with "
                   "begin <= end");
    if (t->end > data_size)
        return wex__error(WEX_ERR_INVALID,
                          "%s: tensor %s: data_offsets end "
                          "%" PRIu64 " is past the data's %" PRIu64 " bytes "
                          "(a truncated file?)",
                          path, name, t->end, data_size);
    esize = wex_dtype_size(t->dtype);
    if (elements > UINT64_MAX / esize || elements * esize != t->end - t->begin)
        return wex__error(
            WEX_ERR_INVALID,
            "%s: tensor %s: %s x %" PRIu64
            " elements is not its data_offsets' %" PRIu64 " bytes",
            path, name, dtype->valuestring, elements, t->end - t->begin);
    t->name = strdup(name);
    if (t->name == NULL)
        return wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
    return WEX_OK;
}

static int by_begin(const void *a, const void *b)
{
    const wex__st_tensor *x = a, *y = b;

    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

static int by_name(const void *a, const void *b)
{
    const wex__st_tensor *const *x = a, *const *y = b;

    return strcmp((*x)->name, (*y)->name);
}

wex_status wex__st_parse(const char *path, const unsigned char *bytes,
                         uint64_t avail, uint64_t size, wex__st_header *out)
{
    uint64_t n;
    cJSON *root = NULL, *e;
    wex_status st = WEX_OK;
    size_t count = 0;

    memset(out, 0, sizeof(*out));
    if (size < 8 || avail < 8)
        return bad(path, NULL, "shorter than the 8-byte header length");
    n = wex_get_le(bytes, 8);
    if (n < 2 || n > WEX__ST_MAX_HEADER)
        return wex__error(WEX_ERR_INVALID,
                          "%s: header length %" PRIu64
                          " is not between 2 and %" PRIu64 " bytes",
                          path, n, WEX__ST_MAX_HEADER);
    if (n > size - 8)
        return wex__error(WEX_ERR_INVALID,
                          "%s: header length %" PRIu64
                          " runs past the file's %" PRIu64 " bytes",
                          path, n, size);
    if (n > avail - 8)
        return bad(path, NULL, "truncated before the end of its header");
    out->data_start = 8 + n;
    out->data_size = size - 8 - n;
    root = cJSON_ParseWithLength((const char *)bytes + 8, (size_t)n);
    if (!cJSON_IsObject(root)) {
        st = bad(path, NULL, "header: expected a JSON object");
        goto out;
    }
    cJSON_ArrayForEach(e, root) count++;
    out->tensors = calloc(count ? count : 1, sizeof(*out->tensors));
    if (out->tensors == NULL) {
        st = wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
        goto out;
    }
    cJSON_ArrayForEach(e, root)
    {
        if (strcmp(e->string, "__metadata__") == 0) {
            const cJSON *m;
            if (!cJSON_IsObject(e)) {
                st = bad(path, NULL, "__metadata__: expected an object");
                goto out;
            }
            cJSON_ArrayForEach(m, e) if (!cJSON_IsString(m))
            {
                st = wex__error(WEX_ERR_INVALID,
                                "%s: __metadata__/%s: "
                                "expected a string",
                                path, m->string);
                goto out;
            }
            continue;
        }
        st = entry(path, e, out->data_size, &out->tensors[out->count]);
        if (st != WEX_OK)
            goto out;
        out->count++;
    }
    /* Sorted by start, each non-empty tensor against the furthest end of
     * those before it: comparing neighbours alone misses an overlap that
     * an empty tensor (or a short one) sorts between. */
    qsort(out->tensors, out->count, sizeof(*out->tensors), by_begin);
    {
        const wex__st_tensor *furthest = NULL;
        for (size_t i = 0; i < out->count; i++) {
            const wex__st_tensor *t = &out->tensors[i];
            if (t->begin == t->end)
                continue;
            if (furthest != NULL && t->begin < furthest->end) {
                st = wex__error(
                    WEX_ERR_INVALID,
                    "%s: tensors %s and %s "
                    "overlap (data bytes %" PRIu64 " to %" PRIu64 ")",
                    path, furthest->name, t->name, t->begin,
                    t->end < furthest->end ? t->end : furthest->end);
                goto out;
            }
            if (furthest == NULL || t->end > furthest->end)
                furthest = t;
        }
    }
    /* duplicate names: cJSON keeps both; the format allows one */
    {
        const wex__st_tensor **sorted =
            malloc((out->count + 1) * sizeof(*sorted));
        if (sorted == NULL) {
            st = wex__error(WEX_ERR_NOMEM, "%s: out of memory", path);
            goto out;
        }
        for (size_t i = 0; i < out->count; i++)
            sorted[i] = &out->tensors[i];
        qsort(sorted, out->count, sizeof(*sorted), by_name);
        for (size_t i = 1; i < out->count && st == WEX_OK; i++)
            if (strcmp(sorted[i]->name, sorted[i - 1]->name) == 0)
                st = bad(path, sorted[i]->name, "named twice");
        free(sorted);
    }
out:
    cJSON_Delete(root);
    if (st != WEX_OK)
        wex__st_free(out);
    return st;
}

const wex__st_tensor *wex__st_find(const wex__st_header *h, const char *name)
{
    for (size_t i = 0; i < h->count; i++)
        if (strcmp(h->tensors[i].name, name) == 0)
            return &h->tensors[i];
    return NULL;
}
