/* A checkpoint tensor stored in another float dtype than the catalog's:
 * transformers 5 keeps some weights wider than the model's dtype (the
 * DeepSeek-V3 router's weight in float32, where the published checkpoint
 * and the engines hold bfloat16) and saves them so. The engines' loaders
 * cast such a tensor into their parameter (param.copy_), so a job reads
 * it converted the same way: rounded to nearest even when narrower,
 * exactly when wider. */
#include <stdlib.h>
#include <string.h>

#include "checkpoint.h"
#include "error.h"
#include "numbers.h"

int wex__ckpt_convertible(uint32_t stored, uint32_t wanted)
{
    int stored_float = stored == WEX_DTYPE_F32 || stored == WEX_DTYPE_BF16 ||
                       stored == WEX_DTYPE_F16;
    int wanted_float = wanted == WEX_DTYPE_F32 || wanted == WEX_DTYPE_BF16 ||
                       wanted == WEX_DTYPE_F16;

    return stored != wanted && stored_float && wanted_float;
}

static float load(const unsigned char *p, uint32_t dtype, uint64_t i)
{
    uint16_t h;
    float f;

    if (dtype == WEX_DTYPE_F32) {
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    memcpy(&h, p + 2 * i, 2);
    return dtype == WEX_DTYPE_BF16 ? wex__bf16_to_f32(h) : wex__f16_to_f32(h);
}

static void store(unsigned char *p, uint32_t dtype, uint64_t i, float f)
{
    uint16_t h;

    if (dtype == WEX_DTYPE_F32) {
        memcpy(p + 4 * i, &f, 4);
        return;
    }
    h = dtype == WEX_DTYPE_BF16 ? wex__bf16_from_f32(f) : wex__f16_from_f32(f);
    memcpy(p + 2 * i, &h, 2);
}

wex_status wex__ckpt_convert(const unsigned char *src, uint32_t stored,
                             uint32_t wanted, uint64_t elements,
                             unsigned char **out_p)
{
    unsigned char *out = malloc(elements * wex_dtype_size(wanted) + 1);

    *out_p = NULL;
    if (out == NULL)
        return wex__error(WEX_ERR_NOMEM, "checkpoint: out of memory");
    for (uint64_t i = 0; i < elements; i++)
        store(out, wanted, i, load(src, stored, i));
    *out_p = out;
    return WEX_OK;
}
