#include "holding.h"

#include <stdio.h>
#include <string.h>

wex_status ws_read_holding(const wex_host_services *h,
                           const wex_options *options, const char *engine,
                           int trainer, uint32_t *hold_p)
{
    const char *v = trainer ? "bf16" : "checkpoint";

    if (h->opt_type(options, "/dtype") != WEX_JSON_MISSING &&
        h->opt_get_str(options, "/dtype", &v) != WEX_OK)
        v = "";
    if (strcmp(v, "bf16") == 0)
        *hold_p = WEX_DTYPE_BF16;
    else if (trainer && strcmp(v, "fp16") == 0)
        *hold_p = WEX_DTYPE_F16;
    else if (trainer && strcmp(v, "fp32") == 0)
        *hold_p = WEX_DTYPE_F32;
    else if (!trainer && strcmp(v, "checkpoint") == 0)
        *hold_p = 0;
    else {
        h->set_error(h->ctx, WEX_ERR_INVALID,
                     "options/dtype: expected %s for %s, got \"%s\"",
                     trainer ? "\"bf16\", \"fp16\" or \"fp32\""
                             : "\"checkpoint\" or \"bf16\"",
                     engine, v);
        return WEX_ERR_INVALID;
    }
    return WEX_OK;
}

int ws_is_block_scale(const wex_host_services *h, const wex_model *model,
                      uint64_t index)
{
    wex_tensor_info info = {sizeof(info), 0, 0, 0, NULL, NULL};
    static const char suffix[] = "_scale_inv";
    char stem[1024];
    uint64_t weight;
    size_t n;

    if (h->model_tensor(model, index, &info) != WEX_OK)
        return 0;
    n = strlen(info.name);
    if (n <= sizeof(suffix) - 1 || n - (sizeof(suffix) - 1) >= sizeof(stem) ||
        strcmp(info.name + n - (sizeof(suffix) - 1), suffix) != 0)
        return 0;
    memcpy(stem, info.name, n - (sizeof(suffix) - 1));
    stem[n - (sizeof(suffix) - 1)] = '\0';
    if (h->model_find(model, stem, &weight) != WEX_OK ||
        h->model_tensor(model, weight, &info) != WEX_OK)
        return 0;
    return info.dtype == WEX_DTYPE_F8_E4M3;
}
