#include "holding.h"

#include <string.h>

#include "plugin_options.h"

wex_status ws_read_holding(const wex_host_services *h,
                           const wex_options *options, int trainer,
                           uint32_t *hold_p)
{
    /* The first of each is the default. */
    static const char *const trainer_names[] = {"bf16", "fp16", "fp32", NULL};
    static const uint32_t trainer_dtypes[] = {WEX_DTYPE_BF16, WEX_DTYPE_F16,
                                              WEX_DTYPE_F32};
    static const char *const serving_names[] = {"checkpoint", "bf16", NULL};
    static const uint32_t serving_dtypes[] = {0, WEX_DTYPE_BF16};
    int i = 0;
    wex_status st = wp_option_enum(h, options, "/dtype",
                                   trainer ? trainer_names : serving_names, &i);

    if (st == WEX_OK)
        *hold_p = trainer ? trainer_dtypes[i] : serving_dtypes[i];
    return st;
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
