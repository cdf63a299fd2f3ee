#include "options.h"

#include <math.h>

#include "json_pointer.h"

static const cJSON *lookup(const wex_options *doc, const char *pointer)
{
    if (doc == NULL)
        return NULL;
    return wex__json_pointer_get(doc->root, pointer);
}

uint32_t wex__opt_type(const wex_options *doc, const char *pointer)
{
    const cJSON *v = lookup(doc, pointer);

    if (v == NULL)
        return WEX_JSON_MISSING;
    if (cJSON_IsNull(v))
        return WEX_JSON_NULL;
    if (cJSON_IsBool(v))
        return WEX_JSON_BOOL;
    if (cJSON_IsNumber(v))
        return WEX_JSON_NUMBER;
    if (cJSON_IsString(v))
        return WEX_JSON_STRING;
    if (cJSON_IsArray(v))
        return WEX_JSON_ARRAY;
    return WEX_JSON_OBJECT;
}

wex_status wex__opt_get_i64(const wex_options *doc, const char *pointer,
                            int64_t *value_p)
{
    const cJSON *v = lookup(doc, pointer);
    double d;

    if (!cJSON_IsNumber(v))
        return WEX_ERR_INVALID;
    d = v->valuedouble;
    /* Only exact integers in the range a double holds exactly. */
    if (d != floor(d) || fabs(d) > 9007199254740992.0)
        return WEX_ERR_INVALID;
    *value_p = (int64_t)d;
    return WEX_OK;
}

wex_status wex__opt_get_f64(const wex_options *doc, const char *pointer,
                            double *value_p)
{
    const cJSON *v = lookup(doc, pointer);

    if (!cJSON_IsNumber(v))
        return WEX_ERR_INVALID;
    *value_p = v->valuedouble;
    return WEX_OK;
}

wex_status wex__opt_get_bool(const wex_options *doc, const char *pointer,
                             int32_t *value_p)
{
    const cJSON *v = lookup(doc, pointer);

    if (!cJSON_IsBool(v))
        return WEX_ERR_INVALID;
    *value_p = cJSON_IsTrue(v) ? 1 : 0;
    return WEX_OK;
}

wex_status wex__opt_get_str(const wex_options *doc, const char *pointer,
                            const char **value_p)
{
    const cJSON *v = lookup(doc, pointer);

    if (!cJSON_IsString(v))
        return WEX_ERR_INVALID;
    *value_p = v->valuestring;
    return WEX_OK;
}

wex_status wex__opt_count(const wex_options *doc, const char *pointer,
                          uint64_t *count_p)
{
    const cJSON *v = lookup(doc, pointer);

    if (!cJSON_IsArray(v) && !cJSON_IsObject(v))
        return WEX_ERR_INVALID;
    *count_p = (uint64_t)cJSON_GetArraySize(v);
    return WEX_OK;
}

wex_status wex__opt_key(const wex_options *doc, const char *pointer,
                        uint64_t index, const char **key_p)
{
    const cJSON *v = lookup(doc, pointer);
    const cJSON *member;

    if (!cJSON_IsObject(v) || index > (uint64_t)cJSON_GetArraySize(v))
        return WEX_ERR_INVALID;
    member = cJSON_GetArrayItem(v, (int)index);
    if (member == NULL)
        return WEX_ERR_INVALID;
    *key_p = member->string;
    return WEX_OK;
}
